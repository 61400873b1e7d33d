"""Graph ops (index_select, index_add, segment_*), embedding and straight-through
estimators: values, adjointness, determinism, errors, derivatives, vmap, and a 2-layer
GAT that learns."""
import numpy as np
import pytest

import mirax as mx
from mirax.compiler.decompose import decompose
from mirax.testing import check_grads

nn = mx.nn
RNG = np.random.default_rng(2)


def rnd(*shape):
    return RNG.standard_normal(shape)


def test_index_select_and_add_values():
    x, idx = rnd(5, 3), np.array([4, 0, 0, 2])
    np.testing.assert_array_equal(np.asarray(nn.index_select(x, idx)), x[idx])
    y = rnd(4, 3)
    want = np.zeros((6, 3))
    np.add.at(want, idx, y)
    np.testing.assert_array_equal(np.asarray(nn.index_add(y, idx, 6)), want)
    np.testing.assert_array_equal(np.asarray(nn.segment_sum(y, idx, 6)), want)


def test_adjointness():
    x, y, idx = rnd(6, 2), rnd(9, 2), RNG.integers(0, 6, 9)
    lhs = (np.asarray(nn.index_select(x, idx)) * y).sum()
    rhs = (x * np.asarray(nn.index_add(y, idx, 6))).sum()
    np.testing.assert_allclose(lhs, rhs, rtol=1e-12)
    # and the transpose rules say the same: vjp of one is the other
    ct = mx.vjp(lambda x: nn.index_select(x, idx), x)[1](y)[0]
    np.testing.assert_allclose(np.asarray(ct), np.asarray(nn.index_add(y, idx, 6)))
    ct = mx.vjp(lambda y: nn.index_add(y, idx, 6), y)[1](x)[0]
    np.testing.assert_allclose(np.asarray(ct), np.asarray(nn.index_select(x, idx)))


def test_accumulation_is_deterministic():
    x = RNG.standard_normal((20000, 4)).astype(np.float32)
    idx = RNG.integers(0, 7, 20000)
    first = np.asarray(nn.index_add(x, idx, 7))
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(nn.index_add(x, idx, 7)), first)
        np.testing.assert_array_equal(np.asarray(mx.jit(nn.segment_sum, static_argnums=2)(
            x, idx, 7)), first)


def test_out_of_range_ids_follow_jax():
    """Out-of-range ids never raise: segment reductions and index_add drop their rows (as
    jax.ops.segment_*), index_select reads zeros (index_add's adjoint), embedding is
    table[ids] (JAX: negative ids wrap, others clamp); eager, jit and vmap agree."""
    jax = pytest.importorskip("jax")
    x = rnd(6, 2).astype(np.float32)  # JAX runs in float32 here: sums of <= 2 rows
    ids = np.array([0, 3, -1, 2, 7, 2])
    for f in (lambda f: f, mx.jit):
        np.testing.assert_allclose(
            np.asarray(f(lambda a: nn.segment_sum(a, ids, 3))(x)),
            np.asarray(jax.ops.segment_sum(x, ids, 3)), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(
            np.asarray(f(lambda a: nn.segment_max(a, ids, 3))(x)),
            np.asarray(jax.ops.segment_max(x, ids, 3)), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(
            np.asarray(f(lambda a: nn.index_add(a, ids, 3))(x)),
            np.asarray(jax.ops.segment_sum(x, ids, 3)), rtol=1e-6, atol=1e-7)
        sel = np.asarray(f(lambda a: nn.index_select(a, np.array([1, 6, -1, 5])))(x))
        np.testing.assert_array_equal(sel, np.stack([x[1], 0 * x[0], 0 * x[0], x[5]]))
        emb = np.asarray(f(lambda a: nn.embedding(a, np.array([[1, 6], [-1, -9]])))(x))
        np.testing.assert_array_equal(
            emb, np.asarray(jax.numpy.asarray(x)[jax.numpy.array([[1, 6], [-1, -9]])]))
        sm = np.asarray(f(lambda a: nn.segment_softmax(a, ids, 3))(x))
        inside = (ids >= 0) & (ids < 3)
        assert np.all(sm[~inside] == 0) and np.all(np.isfinite(sm))
    # index_select and index_add stay each other's adjoint with out-of-range ids
    ct = rnd(6, 2)
    _, pull = mx.vjp(lambda a: nn.index_select(a, ids), rnd(3, 2))
    np.testing.assert_allclose(np.asarray(pull(ct)[0]),
                               np.asarray(nn.index_add(ct, ids, 3)), rtol=1e-6, atol=1e-7)
    # vmap offsets each member's ids: an out-of-range id must not reach another member
    xb = np.stack([x, 2 * x])
    idsb = np.stack([ids, np.array([3, 0, 0, 1, 1, 2])])
    got = mx.vmap(lambda a, i: nn.segment_sum(a, i, 3))(xb, idsb)
    want = [jax.ops.segment_sum(a, i, 3) for a, i in zip(xb, idsb)]
    np.testing.assert_allclose(np.asarray(got), np.stack(want), rtol=1e-6, atol=1e-7)
    got = mx.vmap(lambda a, i: nn.index_select(a, i))(xb, idsb)
    want = [np.asarray(nn.index_select(a, i)) for a, i in zip(xb, idsb)]
    np.testing.assert_allclose(np.asarray(got), np.stack(want), rtol=1e-6, atol=1e-7)
    with pytest.raises(TypeError, match="index_select"):
        nn.index_select(rnd(3, 2), np.array([0.0]))


def test_segment_ops_values():
    x = rnd(7, 2)
    ids = np.array([0, 0, 2, 2, 2, 3, 0])
    want_max = np.full((5, 2), -np.inf)
    np.maximum.at(want_max, ids, x)
    np.testing.assert_array_equal(np.asarray(nn.segment_max(x, ids, 5)), want_max)
    sums = np.zeros((5, 2))
    np.add.at(sums, ids, x)
    counts = np.bincount(ids, minlength=5)[:, None]
    np.testing.assert_allclose(np.asarray(nn.segment_mean(x, ids, 5)),
                               sums / np.maximum(counts, 1), rtol=1e-12)
    sm = np.asarray(nn.segment_softmax(x, ids, 5))
    for s in range(5):
        rows = ids == s
        if rows.any():
            e = np.exp(x[rows] - x[rows].max(0))
            np.testing.assert_allclose(sm[rows], e / e.sum(0), rtol=1e-12)


def test_segment_softmax_is_stable():
    x = np.array([1e4, 1e4 - 1, -1e4, 3.0])
    out = np.asarray(nn.segment_softmax(x, np.array([0, 0, 1, 1]), 2))
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out[:2], [1 / (1 + np.exp(-1)), 1 / (1 + np.e)], rtol=1e-12)


def test_segment_ops_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    x, ids = rnd(8, 3), np.array([1, 1, 0, 3, 3, 3, 1, 0])
    for ours, theirs in ((nn.segment_sum, jax.ops.segment_sum),
                         (nn.segment_max, jax.ops.segment_max)):
        np.testing.assert_allclose(np.asarray(ours(x, ids, 5)),
                                   np.asarray(theirs(x, ids, 5)), rtol=1e-12)


GRAD_CASES = {
    "index_select": lambda x: nn.index_select(x, np.array([2, 0, 2, 1])),
    "index_add": lambda x: nn.index_add(x, np.array([1, 0, 1]), 3),
    "segment_max": lambda x: nn.segment_max(x, np.array([0, 1, 1]), 2),
    "segment_mean": lambda x: nn.segment_mean(x, np.array([0, 1, 1]), 3),
    "segment_softmax": lambda x: nn.segment_softmax(x, np.array([0, 1, 1]), 2),
    "embedding": lambda x: nn.embedding(x, np.array([[0, 2], [1, 1]])),
}


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_second_order_vs_finite_differences(name):
    check_grads(GRAD_CASES[name], (rnd(3, 2),), order=2, atol=1e-6, rtol=1e-6)


def test_segment_max_ties_share_gradient():
    x = np.array([[1.0], [1.0], [0.0]])
    g = mx.grad(lambda x: nn.segment_max(x, np.array([0, 0, 0]), 1).sum())(x)
    np.testing.assert_array_equal(np.asarray(g), [[0.5], [0.5], [0.0]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_segment_softmax_fused_matches_body(dtype):
    x = mx.asarray(rnd(6, 2).astype(dtype))
    ids = mx.asarray(np.array([0, 2, 2, 0, 1, 2]))
    ct = mx.asarray(rnd(6, 2).astype(dtype))
    f = lambda x: nn.segment_softmax(x, ids, 3)  # noqa: E731
    back = lambda x: mx.vjp(f, x)[1](ct)[0]  # noqa: E731
    for fn in (f, back):
        body = mx.ir.eval_graph(decompose(mx.make_graph(fn)(x)), x)[0]
        np.testing.assert_allclose(np.asarray(fn(x)), np.asarray(body), rtol=1e-6, atol=1e-7)


VMAP_CASES = {
    "index_select": nn.index_select,
    "index_add": lambda x, i: nn.index_add(x, i, 4),
    "segment_max": lambda x, i: nn.segment_max(x, i, 4),
    "segment_softmax": lambda x, i: nn.segment_softmax(x, i, 4),
    "segment_mean": lambda x, i: nn.segment_mean(x, i, 4),
}


@pytest.mark.parametrize("axes", [(0, None), (None, 0), (1, 0)], ids=["x", "ids", "both"])
@pytest.mark.parametrize("name", list(VMAP_CASES))
def test_vmap_matches_loop(name, axes):
    f = VMAP_CASES[name]
    xs = rnd(3, 5, 2)
    ids = RNG.integers(0, 4, (3, 5))
    x0, i0 = xs[0], ids[0]
    if axes == (0, None):
        got, want = mx.vmap(f, in_axes=axes)(xs, i0), [f(x, i0) for x in xs]
    elif axes == (None, 0):
        got, want = mx.vmap(f, in_axes=axes)(x0, ids), [f(x0, i) for i in ids]
    else:
        got = mx.vmap(f, in_axes=axes)(np.moveaxis(xs, 0, 1), ids)
        want = [f(x, i) for x, i in zip(xs, ids)]
    np.testing.assert_allclose(np.asarray(got), np.stack([np.asarray(w) for w in want]),
                               rtol=1e-12)
    g = lambda x, i: mx.grad(lambda x: (f(x, i) * np.arange(1, 3)).sum())(x)  # noqa: E731
    got = mx.vmap(g, in_axes=(0, 0))(xs, ids)
    want = [g(x, i) for x, i in zip(xs, ids)]
    np.testing.assert_allclose(np.asarray(got), np.stack([np.asarray(w) for w in want]),
                               rtol=1e-12)


def test_embedding():
    table, ids = rnd(5, 3), np.array([[4, 0], [1, 1], [2, 3]])
    np.testing.assert_array_equal(np.asarray(nn.embedding(table, ids)), table[ids])
    g = mx.grad(lambda t: nn.embedding(t, ids).sum())(table)
    np.testing.assert_array_equal(np.asarray(g)[:, 0], np.bincount(ids.ravel(), minlength=5))


# --- straight-through estimators ------------------------------------------------------------
def test_ste():
    x = np.array([-1.6, -0.4, 0.5, 1.5, 2.2])
    np.testing.assert_array_equal(np.asarray(nn.ste_round(x)), np.round(x))
    np.testing.assert_array_equal(np.asarray(nn.ste_sign(x)), np.sign(x))
    for f in (nn.ste_round, nn.ste_sign):
        np.testing.assert_array_equal(np.asarray(mx.grad(lambda x: (f(x) * 3).sum())(x)), 3)
        _, t = mx.jvp(f, (x,), (np.ones_like(x),))
        np.testing.assert_array_equal(np.asarray(t), 1)
    np.testing.assert_array_equal(np.asarray(mx.vmap(nn.ste_round)(x[:, None])),
                                  np.round(x)[:, None])


def test_fake_quantize():
    x = np.linspace(-1, 3, 9)
    scale, zp, bits = 0.1, 3.0, 4
    q = np.clip(np.round(x / scale) + zp, 0, 15)
    np.testing.assert_allclose(np.asarray(nn.fake_quantize(x, scale, zp, bits)),
                               (q - zp) * scale, rtol=1e-12)
    g = mx.grad(lambda x: nn.fake_quantize(x, scale, zp, bits).sum())(x)
    r = np.round(x / scale) + zp
    np.testing.assert_array_equal(np.asarray(g), ((r >= 0) & (r <= 15)).astype(float))
    per_channel = nn.fake_quantize(rnd(4, 3), np.array([0.1, 0.2, 0.3]), 0.0, 8)
    assert per_channel.shape == (4, 3)
    xs = rnd(2, 4, 3)
    got = mx.vmap(lambda x: nn.fake_quantize(x, np.array([0.1, 0.2, 0.3]), 8.0, 4))(xs)
    want = [nn.fake_quantize(a, np.array([0.1, 0.2, 0.3]), 8.0, 4) for a in xs]
    np.testing.assert_allclose(np.asarray(got), np.stack([np.asarray(w) for w in want]))


# --- a 2-layer graph attention network ------------------------------------------------------
def gat_layer(params, h, src, dst, num_nodes, heads):
    w, a_src, a_dst = params
    z = h @ w                                                     # [N, heads * F]
    n, hf = z.shape
    z = z.reshape(n, heads, hf // heads)
    zs, zd = nn.index_select(z, src), nn.index_select(z, dst)     # [E, heads, F]
    score = nn.leaky_relu((zs * a_src).sum(-1) + (zd * a_dst).sum(-1), 0.2)  # [E, heads]
    alpha = nn.segment_softmax(score, dst, num_nodes)             # over in-edges of dst
    msg = zs * alpha[:, :, None]
    return nn.segment_sum(msg, dst, num_nodes).reshape(n, hf)


def test_gat_learns():
    rng = np.random.default_rng(0)
    n, e, f_in, hidden, heads, classes = 30, 120, 8, 4, 2, 3
    src = rng.integers(0, n, e)
    dst = rng.integers(0, n, e)
    src, dst = np.concatenate([src, np.arange(n)]), np.concatenate([dst, np.arange(n)])
    x = rng.standard_normal((n, f_in))
    labels = np.argmax(x @ rng.standard_normal((f_in, classes)), 1).astype(np.int32)

    def init(fi, fo, h):
        return (rng.standard_normal((fi, h * fo)) / np.sqrt(fi),
                rng.standard_normal((h, fo)) * 0.1, rng.standard_normal((h, fo)) * 0.1)

    params = (init(f_in, hidden, heads), init(hidden * heads, classes, 1))

    def loss(params):
        h = nn.elu(gat_layer(params[0], x, src, dst, n, heads))
        logits = gat_layer(params[1], h, src, dst, n, 1)
        return nn.softmax_cross_entropy(logits, labels).mean()

    step = mx.jit(mx.value_and_grad(loss))
    losses = []
    for _ in range(60):
        value, grads = step(params)
        losses.append(float(value))
        params = mx.tree.map(lambda p, g: p - 0.5 * g, params, grads)
    assert np.isfinite(losses).all()
    assert losses[-1] < 0.8 * losses[0], losses
    assert all(b < a for a, b in zip(losses[:5], losses[1:6])), losses
