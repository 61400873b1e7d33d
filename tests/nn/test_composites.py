"""Fused composites (mirax/ops/nn.py): every fused kernel against its body (forward and
backward, f32 and f64), derivatives to second order against float64 finite differences,
vmap rules against loops, JAX as oracle, and the numerics promised by API.md."""
import numpy as np
import pytest

import mirax as mx
from mirax.compiler.decompose import decompose
from mirax.ops.composite import COMPOSITES
from mirax.testing import check_grads

nn = mx.nn
RNG = np.random.default_rng(0)


def rnd(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def labels_for(n, c):
    return RNG.integers(0, c, size=n).astype(np.int32)


# name -> (function of float args, args builder(dtype)); int arguments are closed over
LAB = labels_for(3, 7)
MASK = RNG.random((1, 1, 3, 4)) > 0.3
MASK[..., 0] = True  # with is_causal, no row is fully masked (JAX differs there)
CASES = {
    "softmax": (lambda x: nn.softmax(x), lambda d: (rnd(3, 5, dtype=d),)),
    "softmax_axis0": (lambda x: nn.softmax(x, axis=0), lambda d: (rnd(3, 5, dtype=d),)),
    "log_softmax": (lambda x: nn.log_softmax(x), lambda d: (rnd(3, 5, dtype=d),)),
    "logsumexp": (lambda x: nn.logsumexp(x, axis=1), lambda d: (rnd(3, 5, dtype=d),)),
    "logsumexp_keep": (lambda x: nn.logsumexp(x, axis=(0, 1), keepdims=True),
                       lambda d: (rnd(3, 5, dtype=d),)),
    "softmax_cross_entropy": (lambda x: nn.softmax_cross_entropy(x, LAB),
                              lambda d: (rnd(3, 7, dtype=d),)),
    "layer_norm": (lambda x, w, b: nn.layer_norm(x, w, b),
                   lambda d: (rnd(3, 6, dtype=d), rnd(6, dtype=d), rnd(6, dtype=d))),
    "layer_norm_plain": (lambda x: nn.layer_norm(x), lambda d: (rnd(2, 3, 6, dtype=d),)),
    "rms_norm": (lambda x, w: nn.rms_norm(x, w), lambda d: (rnd(3, 6, dtype=d),
                                                            rnd(6, dtype=d))),
    "gelu_tanh": (lambda x: nn.gelu(x), lambda d: (rnd(4, 5, dtype=d),)),
    "gelu_erf": (lambda x: nn.gelu(x, approximate=False), lambda d: (rnd(4, 5, dtype=d),)),
    "silu": (lambda x: nn.silu(x), lambda d: (rnd(4, 5, dtype=d),)),
    "softplus": (lambda x: nn.softplus(x), lambda d: (rnd(4, 5, dtype=d),)),
    "attention": (lambda q, k, v: nn.dot_product_attention(q, k, v),
                  lambda d: (rnd(2, 3, 1, 2, dtype=d), rnd(2, 4, 1, 2, dtype=d),
                             rnd(2, 4, 1, 2, dtype=d))),
    "attention_masked": (lambda q, k, v, b: nn.dot_product_attention(
        q, k, v, mask=MASK, bias=b, is_causal=True),
        lambda d: (rnd(1, 3, 2, 2, dtype=d), rnd(1, 4, 2, 2, dtype=d),
                   rnd(1, 4, 2, 2, dtype=d), rnd(1, 1, 3, 4, dtype=d))),
    "attention_window": (lambda q, k, v: nn.dot_product_attention(q, k, v,
                                                                  sliding_window=(1, 0)),
                         lambda d: (rnd(1, 4, 1, 2, dtype=d), rnd(1, 4, 1, 2, dtype=d),
                                    rnd(1, 4, 1, 2, dtype=d))),
}
DTYPES = [np.float32, np.float64]


def tol(dtype):
    return dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-10,
                                                                      atol=1e-10)


def composite_names(graph):
    return {n.prim.name for n in graph.nodes if n.prim.name in COMPOSITES}


def run_decomposed(f, args):
    # NOTE: mx.asarray, so the graph's inputs are strong (aval_of(np.ndarray) is weak)
    args = [mx.asarray(a) for a in args]
    g = mx.make_graph(f)(*args)
    d = decompose(g)
    assert not composite_names(d), f"left in the graph: {composite_names(d)}"
    return g, mx.ir.eval_graph(d, *args)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(CASES))
def test_fused_forward_matches_body(name, dtype):
    f, build = CASES[name]
    args = build(dtype)
    fused = np.asarray(f(*args))
    g, (body,) = run_decomposed(f, args)
    assert composite_names(g), "the wrapper should stage a fused composite node"
    assert fused.dtype == dtype
    np.testing.assert_allclose(fused, np.asarray(body), **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(CASES))
def test_fused_backward_matches_body(name, dtype):
    f, build = CASES[name]
    args = build(dtype)
    ct = RNG.standard_normal(np.shape(f(*args))).astype(dtype)

    def back(*xs):
        return mx.vjp(f, *xs)[1](ct)

    fused = back(*args)
    g, body = run_decomposed(back, args)
    assert any(n.endswith("_bwd") for n in composite_names(g)), \
        "the vjp should emit the fused backward composite"
    for a, b in zip(fused, body):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), **tol(dtype))


@pytest.mark.parametrize("name", list(CASES))
def test_second_order_vs_finite_differences(name):
    f, build = CASES[name]
    args = build(np.float64)
    if name.startswith(("attention", "layer_norm")):  # many inputs: fwd at first order only
        check_grads(f, args, order=1, modes=("fwd",), atol=1e-6, rtol=1e-5)
        check_grads(f, args, order=2, modes=("rev",), atol=1e-6, rtol=1e-5)
    else:
        check_grads(f, args, order=2, modes=("fwd", "rev"), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", list(CASES))
def test_jit_matches_eager(name):
    f, build = CASES[name]
    args = build(np.float64)
    np.testing.assert_allclose(np.asarray(mx.jit(f)(*args)), np.asarray(f(*args)),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["softmax_cross_entropy", "layer_norm", "attention_masked"])
def test_jit_of_grad_and_hessian_match_eager(name):
    f, build = CASES[name]
    args = build(np.float64)
    nums = tuple(range(len(args)))

    def loss(*a):
        return (f(*a) ** 2).sum()

    for a, b in zip(mx.jit(mx.grad(loss, argnums=nums))(*args), mx.grad(loss, argnums=nums)(*args)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-14)
    h = lambda x: mx.hessian(lambda x: loss(x, *args[1:]))(x)  # noqa: E731
    np.testing.assert_allclose(np.asarray(mx.jit(h)(args[0])), np.asarray(h(args[0])),
                               rtol=1e-12, atol=1e-14)
    assert mx.ir.decompose is decompose


# --- vmap ---------------------------------------------------------------------------------
def stack_loop(f, batched):
    outs = [f(*xs) for xs in zip(*batched)]
    return np.stack([np.asarray(o) for o in outs])


@pytest.mark.parametrize("name", list(CASES))
def test_vmap_matches_loop(name):
    f, build = CASES[name]
    batched = [np.stack([a, a * 0.5 + 0.1, -a]) for a in build(np.float64)]
    np.testing.assert_allclose(np.asarray(mx.vmap(f)(*batched)), stack_loop(f, batched),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", list(CASES))
def test_vmap_of_grad_matches_loop(name):
    f, build = CASES[name]
    args = build(np.float64)
    w = RNG.standard_normal(np.shape(f(*args)))

    def loss(x, *rest):
        return (f(x, *rest) * w).sum()

    batched = [np.stack([args[0], args[0] * 0.7 - 0.2])]
    rest = args[1:]
    got = mx.vmap(lambda x: mx.grad(loss)(x, *rest))(*batched)
    want = stack_loop(lambda x: mx.grad(loss)(x, *rest), batched)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10, atol=1e-12)


def test_vmap_batched_weight_uses_body():
    x, w = rnd(3, 6), rnd(4, 6)
    got = mx.vmap(lambda w: nn.layer_norm(x, w))(w)
    want = np.stack([np.asarray(nn.layer_norm(x, wi)) for wi in w])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)


def test_vmap_unbatched_labels_cross_entropy():
    logits = rnd(4, 3, 5)
    lab = labels_for(3, 5)
    got = mx.vmap(lambda z: nn.softmax_cross_entropy(z, lab))(logits)
    want = stack_loop(lambda z: nn.softmax_cross_entropy(z, lab), [logits])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)


# --- cross-entropy layout and numerics ------------------------------------------------------
def test_cross_entropy_backward_layout():
    n, c = 3, 7
    logits, lab = rnd(n, c), labels_for(n, c)
    g = mx.grad(lambda z: nn.softmax_cross_entropy(z, lab).sum())(logits)
    e = np.exp(logits - logits.max(1, keepdims=True))
    want = e / e.sum(1, keepdims=True) - np.eye(c)[lab]
    assert g.shape == (n, c)
    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-12, atol=1e-14)
    losses = nn.softmax_cross_entropy(logits, lab)
    assert losses.shape == (n,)
    want_loss = -np.log(e / e.sum(1, keepdims=True))[np.arange(n), lab]
    np.testing.assert_allclose(np.asarray(losses), want_loss, rtol=1e-12)


def test_cross_entropy_errors():
    with pytest.raises(TypeError, match="softmax_cross_entropy"):
        nn.softmax_cross_entropy(rnd(3, 4), np.zeros(3))
    with pytest.raises(ValueError, match=r"f64\[3,4\]"):
        nn.softmax_cross_entropy(rnd(3, 4), np.zeros(4, np.int32))


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_stable_for_large_inputs(dtype):
    x = np.array([[1e4, -1e4, 0.0], [1e4, 1e4, 1e4]], dtype)
    for f in (nn.softmax, nn.log_softmax, lambda x: nn.logsumexp(x, axis=1), nn.softplus,
              lambda x: nn.softmax_cross_entropy(x, np.array([1, 2]))):
        out = np.asarray(f(x))
        assert np.all(np.isfinite(out)), f
        g = mx.grad(lambda x: (f(x) * 0.5).sum())(x)
        assert np.all(np.isfinite(np.asarray(g)))
    np.testing.assert_allclose(np.asarray(nn.logsumexp(x, axis=1)),
                               [1e4, 1e4 + np.log(3)], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(nn.softplus(np.array([-1e4, 1e4], dtype))),
                               [0, 1e4])


_ROWS_16 = {
    "softmax": lambda x, y: mx.nn.softmax(x),
    "log_softmax": lambda x, y: mx.nn.log_softmax(x),
    "logsumexp": lambda x, y: mx.nn.logsumexp(x, axis=-1),
    "softmax_cross_entropy": lambda x, y: mx.nn.softmax_cross_entropy(x, y),
    "layer_norm": lambda x, y: mx.nn.layer_norm(x),
    "rms_norm": lambda x, y: mx.nn.rms_norm(x),
    "segment_softmax": lambda x, y: mx.nn.segment_softmax(x.T, np.arange(1000) % 3, 3),
}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", sorted(_ROWS_16))
def test_16_bit_rows_are_computed_in_float32(name, dtype):
    """The CPU kernels of the row composites on 16-bit floats compute in float32 and round
    once (NumPy alone sums in the 16-bit type: a bfloat16 softmax over rows of 1000 was 8%
    off): forward and gradient against float32 math on the same rounded inputs, rounded to
    the 16-bit type, within two of its roundings."""
    rng = np.random.default_rng(5)
    x = mx.asarray((rng.standard_normal((6, 1000)) * 3).astype(np.float32)).astype(dtype)
    y = rng.integers(0, 1000, 6).astype(np.int32)
    x32 = x.astype("float32")
    f = _ROWS_16[name]
    wts = rng.standard_normal(f(x32, y).shape).astype(np.float32)

    def g(x):
        return mx.grad(lambda x: (f(x, y).astype("float32") * wts).sum())(x)
    eps = 2.0 ** -10 if dtype == "float16" else 2.0 ** -7   # machine epsilon
    for got, want in ((f(x, y), f(x32, y)), (g(x), g(x32))):
        assert str(got.dtype) == dtype
        want = np.asarray(want.astype(dtype).astype("float32"), np.float64)
        got = np.asarray(got.astype("float32"), np.float64)
        assert np.max(np.abs(got - want)) <= 2 * eps * np.max(np.abs(want)), name


def test_logsumexp_of_minus_inf_row():
    x = np.array([[-np.inf, -np.inf], [0.0, -np.inf]])
    np.testing.assert_array_equal(np.asarray(nn.logsumexp(x, axis=1)), [-np.inf, 0.0])


def test_fully_masked_attention_row_is_zero_with_finite_grads():
    q, k, v = rnd(1, 3, 2, 4), rnd(1, 5, 2, 4), rnd(1, 5, 2, 4)
    mask = np.ones((1, 2, 3, 5), bool)
    mask[0, 1, 2] = False  # query 2 of head 1 sees nothing
    out = np.asarray(nn.dot_product_attention(q, k, v, mask=mask))
    np.testing.assert_array_equal(out[0, 2, 1], 0.0)
    for f in (lambda q, k, v: nn.dot_product_attention(q, k, v, mask=mask).sum(),):
        for g in mx.grad(f, argnums=(0, 1, 2))(q, k, v):
            assert np.all(np.isfinite(np.asarray(g)))
    gq = mx.grad(lambda q: (nn.dot_product_attention(q, k, v, mask=mask) ** 2).sum())(q)
    np.testing.assert_array_equal(np.asarray(gq)[0, 2, 1], 0.0)
    h = mx.grad(lambda q: mx.grad(lambda q: nn.dot_product_attention(
        q, k, v, mask=mask).sum())(q).sum())(q)
    assert np.all(np.isfinite(np.asarray(h)))


def test_attention_logsumexp_output():
    """The primitive's second output, the rows' logsumexp over attended scores (what the
    fused backward kernels read), against NumPy in float64, from the fused impl, under jit
    and from the body (vmap inlines it); +inf for a row that attends nothing. Derivatives
    of both outputs together against central differences, through the fused backward and
    through the body's."""
    from mirax.ops.nn import dot_product_attention_p as attn

    q, k, v = rnd(1, 3, 2, 4), rnd(1, 5, 2, 4), rnd(1, 5, 2, 4)
    mask = np.ones((1, 2, 3, 5), bool)
    mask[0, 1, 2] = False  # query 2 of head 1 sees nothing
    mask[0, 0, 1, 3] = False
    params = dict(scale=0.7, is_causal=False, window=None, has_mask=True, has_bias=False,
                  precision="highest")
    s = np.einsum("bthd,bshd->bhts", q, k) * 0.7
    with np.errstate(divide="ignore"):
        want = np.log(np.where(mask, np.exp(s), 0).sum(-1))
    want[0, 1, 2] = np.inf
    lse = lambda q, k, v: attn.bind(q, k, v, mask, **params)[1]  # noqa: E731
    batched = mx.vmap(lse, in_axes=(None, None, 0))(q, k, v[None])[0]
    for got in (lse(q, k, v), mx.jit(lse)(q, k, v), batched):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-13)

    w_o, w_l = rnd(1, 3, 2, 4), rnd(1, 2, 3)
    w_l[0, 1, 2] = 0.0  # the +inf entry stays out of the loss

    def loss(q, k, v):
        o, l = attn.bind(q, k, v, mask, **params)
        l = mx.numpy.where(mx.numpy.isfinite(l), l, 0.0)
        return (o * w_o).sum() + (l * w_l).sum()

    check_grads(loss, (q, k, v), order=1, modes="rev")
    # the body's backward (vmap of grad inlines the composites) agrees with the kernel's
    g_fused = mx.grad(loss, argnums=(0, 1, 2))(q, k, v)
    g_body = mx.vmap(mx.grad(loss, argnums=(0, 1, 2)), in_axes=(None, None, 0))(
        q, k, v[None])
    for a, b in zip(g_fused, g_body):
        np.testing.assert_allclose(np.asarray(b)[0], np.asarray(a), rtol=1e-10, atol=1e-12)


def test_relu_and_friends_at_zero():
    x = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_array_equal(np.asarray(mx.grad(lambda x: nn.relu(x).sum())(x)),
                                  [0, 0, 1])
    np.testing.assert_allclose(np.asarray(mx.grad(lambda x: nn.softplus(x).sum())(x)),
                               1 / (1 + np.exp(-x)))
    assert np.all(np.isfinite(np.asarray(mx.grad(lambda x: nn.elu(x).sum())(
        np.array([1e4, -3.0])))))


def test_gelu_forms_differ_and_have_their_own_derivative():
    x = np.linspace(-3, 3, 7)
    a, b = np.asarray(nn.gelu(x)), np.asarray(nn.gelu(x, approximate=False))
    assert 0 < np.abs(a - b).max() < 1e-2
    for approx in (True, False):
        check_grads(lambda x: nn.gelu(x, approximate=approx), (x,), order=2)


def test_one_hot():
    got = np.asarray(nn.one_hot(np.array([0, 2, 5]), 3))
    np.testing.assert_array_equal(got, [[1, 0, 0], [0, 0, 1], [0, 0, 0]])
    assert got.dtype == np.float32


def test_validation_messages():
    with pytest.raises(ValueError, match="layer_norm"):
        nn.layer_norm(rnd(3, 4), np.ones(5))
    with pytest.raises(ValueError, match="dot_product_attention"):
        nn.dot_product_attention(rnd(2, 3, 4), rnd(2, 3, 4), rnd(2, 3, 4))
    with pytest.raises(TypeError, match="mask must be bool"):
        nn.dot_product_attention(rnd(1, 2, 1, 2), rnd(1, 2, 1, 2), rnd(1, 2, 1, 2),
                                 mask=np.ones((2, 2)))
    with pytest.raises(ValueError, match="softmax: axis 2"):
        nn.softmax(rnd(3, 4), axis=2)


def test_scipy_special():
    sp = mx.scipy.special
    x = np.array([0.2, 0.5, 0.9])
    np.testing.assert_allclose(np.asarray(sp.logit(sp.expit(x))), x, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(sp.logsumexp(x, b=np.array([1.0, 2.0, 0.0]))),
                               np.log(np.exp(0.2) + 2 * np.exp(0.5)), rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(sp.xlogy(np.array([0.0, 2.0]),
                                                      np.array([0.0, 1.0]))), [0, 0])
    g = mx.grad(lambda x: sp.xlogy(x, x).sum())(np.array([0.5, 2.0]))
    np.testing.assert_allclose(np.asarray(g), np.log([0.5, 2.0]) + 1, rtol=1e-12)
    scipy_special = pytest.importorskip("scipy.special")
    np.testing.assert_allclose(np.asarray(sp.gammaln(x + 1)), scipy_special.gammaln(x + 1),
                               rtol=1e-12)
    np.testing.assert_allclose(np.asarray(sp.erfinv(x - 0.5)),
                               scipy_special.erfinv(x - 0.5), rtol=1e-12)


def test_dropout_mask():
    x = np.ones((2, 3))
    mask = np.array([[True, False, True], [False, True, True]])
    out = np.asarray(nn.dropout(x, 0.5, mask=mask))
    np.testing.assert_array_equal(out, mask * 2.0)
    np.testing.assert_array_equal(np.asarray(nn.dropout(x, 0.5, deterministic=True)), x)
    with pytest.raises(ValueError, match="key"):
        nn.dropout(x, 0.5)


# --- JAX oracle ---------------------------------------------------------------------------
def jax_cases(jnn, jnp, jss):
    def jln(x, w, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(v + 1e-5) * w + b

    def jrms(x, w):
        return x / jnp.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w

    def jsce(x):
        return -jnp.take_along_axis(jnn.log_softmax(x), jnp.asarray(LAB)[:, None], 1)[:, 0]

    return {
        "softmax": lambda x: jnn.softmax(x),
        "softmax_axis0": lambda x: jnn.softmax(x, axis=0),
        "log_softmax": lambda x: jnn.log_softmax(x),
        "logsumexp": lambda x: jss.logsumexp(x, axis=1),
        "logsumexp_keep": lambda x: jss.logsumexp(x, axis=(0, 1), keepdims=True),
        "softmax_cross_entropy": jsce,
        "layer_norm": jln,
        "layer_norm_plain": lambda x: jln(x, 1.0, 0.0),
        "rms_norm": jrms,
        "gelu_tanh": lambda x: jnn.gelu(x),
        "gelu_erf": lambda x: jnn.gelu(x, approximate=False),
        "silu": jnn.silu,
        "softplus": jnn.softplus,
        "attention": lambda q, k, v: jnn.dot_product_attention(q, k, v),
        "attention_masked": lambda q, k, v, b: jnn.dot_product_attention(
            q, k, v, bias=b, mask=jnp.asarray(MASK), is_causal=True),
        "attention_window": lambda q, k, v: jnn.dot_product_attention(
            q, k, v, local_window_size=(1, 0)),
    }


JAX_FAST = ("softmax_cross_entropy", "gelu_erf")  # JAX compiles slowly


@pytest.mark.parametrize("name", [n if n in JAX_FAST else pytest.param(n, marks=pytest.mark.slow)
                                  for n in CASES])
def test_against_jax(name):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jax.scipy.special as jss
    jf = jax_cases(jax.nn, jnp, jss)[name]
    f, build = CASES[name]
    args = build(np.float64)
    want = np.asarray(jf(*args))
    got = np.asarray(f(*args))
    # NOTE: JAX's attention computes its logits in float32 even for float64 inputs
    rtol, atol = (2e-5, 1e-6) if name.startswith("attention") else (1e-9, 1e-12)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    ct = RNG.standard_normal(want.shape)
    gj = jax.vjp(jf, *args)[1](ct)
    gm = mx.vjp(f, *args)[1](ct)
    for a, b in zip(gm, gj):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=100 * rtol, atol=atol)


@pytest.mark.slow
@pytest.mark.parametrize("fn", ["relu", "sigmoid", "tanh", "leaky_relu", "elu"])
def test_simple_activations_against_jax(fn):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    x = rnd(13)
    np.testing.assert_allclose(np.asarray(getattr(nn, fn)(x)),
                               np.asarray(getattr(jax.nn, fn)(x)), rtol=1e-12)
    gm = mx.grad(lambda x: getattr(nn, fn)(x).sum())(x)
    gj = jax.grad(lambda x: getattr(jax.nn, fn)(x).sum())(x)
    np.testing.assert_allclose(np.asarray(gm), np.asarray(gj), rtol=1e-12)
