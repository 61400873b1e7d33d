"""Regressions for answers that used to be silently wrong: each case is now right (checked
against JAX or NumPy) or raises a TypeError / ValueError naming the user's op."""
import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax.core.errors import DeletedArrayError


# --- donation -----------------------------------------------------------------------------
def test_donated_array_is_deleted_and_its_buffer_reused():
    f = mx.jit(lambda t: t * 2, donate_argnums=0)
    for _ in range(2):  # the first call traces, the second takes the cached fast path
        a = mnp.arange(3.) + 1
        addr = a._buf.ctypes.data
        y = f(a)
        np.testing.assert_array_equal(np.asarray(y), [2., 4., 6.])
        assert y._buf.ctypes.data == addr  # the donated buffer holds the result
        assert a.is_deleted() and a.shape == (3,) and a.dtype == np.float32
        for use in (lambda: np.asarray(a), lambda: a + 1, lambda: f(a), lambda: str(a)):
            with pytest.raises(DeletedArrayError, match=r"donated to jit\(<lambda>\) as "
                                                        r"argument 't'"):
                use()
        np.testing.assert_array_equal(np.asarray(y), [2., 4., 6.])  # y untouched


def test_donation_never_overwrites_memory_visible_elsewhere():
    f = mx.jit(lambda t: t * 2, donate_argnums=0)
    b = mnp.ones((2, 3)) + 1
    view = b.T  # a NumPy view of b's buffer
    host = np.asarray(mnp.ones(3) + 1)
    c = mx.asarray(host)
    for x in (b, c):
        f(x)
    np.testing.assert_array_equal(np.asarray(view), np.full((3, 2), 2.))
    np.testing.assert_array_equal(host, np.full(3, 2.))


def test_delete_method():
    a = mnp.ones(2)
    a.delete()
    assert a.is_deleted()
    with pytest.raises(RuntimeError, match="deleted"):
        mnp.sum(a)


# --- values that used to come out wrong, against JAX ---------------------------------------
@pytest.fixture
def jax_cpu():
    jax = pytest.importorskip("jax")
    return jax


def test_zero_d_boolean_index(jax_cpu):
    jnp = jax_cpu.numpy
    x, jx = mnp.arange(3.), jnp.arange(3.)
    for b in (False, True):
        for idx in (mnp.array(b), np.array(b)):
            got, want = x[idx], jx[jnp.array(b)]
            assert got.shape == want.shape
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert x[mnp.array(True), 1].shape == jx[jnp.array(True), 1].shape


def test_broadcast_in_dim_rejects_non_increasing_dims():
    with pytest.raises(ValueError, match="broadcast_in_dim: .*strictly increasing"):
        mx.lax.broadcast_in_dim(mnp.ones((2, 3)), (3, 2), (1, 0))
    with pytest.raises(ValueError, match="broadcast_in_dim"):
        mx.lax.broadcast_in_dim(mnp.ones((2,)), (2, 2), (0, 0))


def test_grad_repeated_argnums_raises():
    for nums in ((0, 0), (0, -1)):
        with pytest.raises(ValueError, match="grad: argnums"):
            mx.grad(lambda a: a * a, argnums=nums)(2.)


@pytest.mark.parametrize("call", [
    lambda: mnp.zeros((2.5, 3)), lambda: mnp.ones(2.5), lambda: mnp.eye(2.5),
    lambda: mnp.identity(1.5), lambda: mnp.linspace(0., 1., num=2.5),
    lambda: mx.nn.one_hot(mnp.array([0, 1]), 2.5),
    lambda: mnp.linalg.matrix_power(mnp.eye(2), 1.5),
    lambda: mx.lax.integer_pow(mnp.arange(3.), 1.5), lambda: mnp.tri(2.5),
    lambda: mx.random.split(mx.random.key(0), 2.5),
    lambda: mx.random.normal(mx.random.key(0), (2.5,)),
    lambda: mnp.diff(mnp.arange(4.), n=1.5),
], ids=["zeros", "ones", "eye", "identity", "linspace", "one_hot", "matrix_power",
        "integer_pow", "tri", "split", "normal", "diff"])
def test_non_integral_sizes_raise(call):
    with pytest.raises(TypeError, match="must be an integer"):
        call()


def test_integral_floats_still_accepted():
    assert mnp.zeros((2.0, 3)).shape == (2, 3)
    assert mnp.eye(np.int64(2)).shape == (2, 2)


def test_arguments_no_longer_ignored():
    x = mnp.ones((2, 3))
    with pytest.raises(ValueError, match="vmap: out_axes 3"):
        mx.vmap(lambda a: a, out_axes=3)(x)
    with pytest.raises(ValueError, match="vmap: axis_size=5"):
        mx.vmap(lambda a: a, axis_size=5)(mnp.ones(3))
    with pytest.raises(ValueError, match="vmap: chunk_size"):
        mx.vmap(lambda a: a, chunk_size=0)
    q = mnp.ones((1, 4, 2, 8))
    with pytest.raises(ValueError, match="dot_product_attention: sliding_window"):
        mx.nn.dot_product_attention(q, q, q, sliding_window=-1)
    with pytest.raises(ValueError, match="permutation: axis 3"):
        mx.random.permutation(mx.random.key(0), x, axis=3)
    with pytest.raises(ValueError, match=r"jit\(<lambda>\): static_argnums 3"):
        mx.jit(lambda a: a, static_argnums=3)
    with pytest.raises(ValueError, match=r"jit\(<lambda>\): static_argnames 'b'"):
        mx.jit(lambda a: a, static_argnames="b")
    with pytest.raises(ValueError, match=r"at\[...\].set: mode"):
        x.at[0].set(1., mode="bogus")
    with pytest.raises(ValueError, match="random.key: seed"):
        mx.random.key(2 ** 70)
    np.testing.assert_array_equal(np.asarray(mx.random.key(2 ** 64 - 1)), [2**32 - 1] * 2)


def test_custom_jvp_tangent_shape_checked():
    @mx.custom_jvp
    def g(a):
        return a * 2

    @g.defjvp
    def g_jvp(p, t):
        return g(p[0]), mnp.ones(5)

    x = mnp.arange(3.)
    with pytest.raises(ValueError, match=r"custom_jvp\(g\): the jvp rule returned a tangent "
                                         r"f32\[5\] for a primal output f32\[3\]"):
        mx.jvp(g, (x,), (x,))


def test_cross_entropy_bad_label_is_nan_like_jax(jax_cpu):
    jnp = jax_cpu.numpy
    logits = np.array([[1., 2., 3.], [0., -1., 2.]], np.float32)
    labels = np.array([0, 5], np.int32)
    got = mx.nn.softmax_cross_entropy(logits, labels)

    def ref(lg):  # optax's softmax_cross_entropy_with_integer_labels
        picked = jnp.take_along_axis(lg, labels[:, None], axis=-1)[:, 0]
        return jax_cpu.nn.logsumexp(lg, axis=-1) - picked

    want = ref(jnp.asarray(logits))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    assert np.isnan(np.asarray(got)[1])
    for f in (lambda lg: mx.nn.softmax_cross_entropy(lg, labels)[0],
              mx.jit(lambda lg: mx.nn.softmax_cross_entropy(lg, labels)[0])):
        g = mx.grad(f)(mx.asarray(logits))
        gj = jax_cpu.grad(lambda lg: ref(lg)[0])(jnp.asarray(logits))
        np.testing.assert_allclose(np.asarray(g), np.asarray(gj), rtol=1e-6, atol=1e-7)
    # the decomposed body agrees with the fused kernel
    body = mx.ir.decompose(mx.make_graph(lambda lg: mx.nn.softmax_cross_entropy(lg, labels))(
        mx.asarray(logits)))
    np.testing.assert_allclose(np.asarray(mx.ir.compile(body)(mx.asarray(logits))),
                               np.asarray(want), rtol=1e-6)


def test_relu_keeps_nan(jax_cpu):
    x = np.array([np.nan, -1., 0., 3., 7.], np.float32)
    for name in ("relu", "relu6", "hard_tanh", "leaky_relu", "elu"):
        got = getattr(mx.nn, name)(x)
        want = getattr(jax_cpu.nn, name)(x)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    g = mx.grad(lambda a: mx.nn.relu6(a).sum())(mnp.array([0., 6., 3.]))
    np.testing.assert_array_equal(np.asarray(g), [0., 0., 1.])  # kinks have derivative 0


def test_arctan2_of_ints_is_float32(jax_cpu):
    a = mnp.array([1, -2], dtype=mnp.int32)
    got = mnp.arctan2(a, a[::-1])
    want = jax_cpu.numpy.arctan2(np.array([1, -2], np.int32), np.array([-2, 1], np.int32))
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    with pytest.raises(TypeError, match="atan2: requires floating-point"):
        mx.lax.atan2(a, a)


@pytest.mark.parametrize("scale", [1e4, 1e6])
def test_logsumexp_grad_precise_for_large_inputs(scale):
    rng = np.random.default_rng(0)
    x = (scale + rng.normal(size=(4, 7))).astype(np.float32)
    # reference: softmax of the float32 inputs, in float64
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    for f in (mx.grad(lambda a: mx.nn.logsumexp(a, axis=1).sum()),
              mx.jit(mx.grad(lambda a: mx.nn.logsumexp(a, axis=1).sum()))):
        got = np.asarray(f(x))
        # softmax is well conditioned in x - max (entries O(1)): float32 rounding only
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_eager_cond_switch_check_branches():
    with pytest.raises(TypeError, match="cond: .*f32\\[2\\].*f32\\[3\\]"):
        mx.lax.cond(True, lambda: mnp.ones(2), lambda: mnp.ones(3))
    with pytest.raises(TypeError, match="switch: branch 1 returns i32\\[2\\]"):
        mx.lax.switch(0, [lambda: mnp.ones(2), lambda: mnp.ones(2, dtype=mnp.int32)])
    with pytest.raises(TypeError, match="cond: .*structure"):
        mx.lax.cond(False, lambda: (mnp.ones(2),), lambda: mnp.ones(2))
    # branches that need concrete values still run eagerly (only the taken one)
    out = mx.lax.cond(True, lambda v: v * 2 if float(v) > 0 else v, lambda v: v, 3.)
    assert float(out) == 6.


# --- checkpoints ----------------------------------------------------------------------------
def _rewrite_header(src, dst, edit):
    import json
    data = open(src, "rb").read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    edit(header)
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    open(dst, "wb").write(len(hb).to_bytes(8, "little") + hb + data[8 + n:])


def test_corrupt_checkpoints_raise_naming_load_and_file(tmp_path):
    import json
    path = tmp_path / "ok.safetensors"
    mx.io.save(path, {"w": mnp.ones((3, 4)), "b": mnp.arange(3)})
    data = open(path, "rb").read()
    bad = tmp_path / "bad.safetensors"
    cases = {f"truncated at {k}": data[:k] for k in (0, 5, 8, 20, len(data) // 2, len(data) - 1)}
    cases["garbage"] = b"\xff" * 64
    cases["huge header length"] = (10 ** 9).to_bytes(8, "little") + data[8:]
    for what, blob in cases.items():
        open(bad, "wb").write(blob)
        with pytest.raises(ValueError, match=r"io\.load: .*bad\.safetensors"):
            mx.io.load(bad)

    def set_(key, field, value):
        return lambda h: h[key].__setitem__(field, value)

    edits = {"dtype, same size": set_("w", "dtype", "I32"),
             "dtype, other size": set_("w", "dtype", "F64"),
             "shape, same size": set_("w", "shape", [4, 3]),
             "shape, other size": set_("w", "shape", [2, 4]),
             "offsets": set_("b", "data_offsets", [48, 100]),
             "tree metadata": lambda h: h["__metadata__"].__setitem__(
                 "mirax.tree", json.dumps({"dict": [["w", {"leaf": "zz"}]]})),
             "metadata not JSON": lambda h: h["__metadata__"].__setitem__("mirax.tree", "{x")}
    for what, edit in edits.items():
        _rewrite_header(path, bad, edit)
        with pytest.raises(ValueError, match=r"io\.load: .*bad\.safetensors"):
            mx.io.load(bad)
    with pytest.raises(FileNotFoundError, match=r"io\.load: .*missing"):
        mx.io.load(tmp_path / "missing.safetensors")
    back = mx.io.load(path)  # the untouched file still loads
    np.testing.assert_array_equal(np.asarray(back["w"]), np.ones((3, 4)))


def test_save_is_atomic_and_cleans_stale_temporaries(tmp_path):
    import os
    import subprocess
    import sys
    path = tmp_path / "ck.safetensors"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    stale = tmp_path / f"ck.safetensors.mirax-tmp-{dead}-0000"
    live = tmp_path / f"ck.safetensors.mirax-tmp-{os.getpid()}-1111"  # a save in progress
    other = tmp_path / "other.safetensors.mirax-tmp-1-2222"
    for f in (stale, live, other):
        f.write_bytes(b"x" * 1000)
    mx.io.save(path, {"w": mnp.ones(3)})
    assert not stale.exists() and live.exists() and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [path.name, live.name, other.name])
    np.testing.assert_array_equal(np.asarray(mx.io.load(path)["w"]), np.ones(3))


# --- linear algebra: inf / NaN as JAX, never NumPy's LinAlgError --------------------------
_SING = np.array([[1., 2.], [2., 4.]], np.float32)
_NAN = np.array([[np.nan, 1.], [1., 1.]], np.float32)
_B = np.ones(2, np.float32)


@pytest.mark.parametrize("name,a", [
    ("inv", _SING), ("solve", _SING), ("svd", _NAN), ("pinv", _NAN), ("cond", _NAN),
    ("matrix_rank", _NAN), ("det", _NAN), ("slogdet", _NAN), ("svdvals", _NAN),
    ("solve", _NAN), ("det", _SING), ("slogdet", _SING)])
def test_linalg_failures_follow_jax(jax_cpu, name, a):
    import warnings

    def call(m):
        f = getattr(m.linalg, name)
        return f(a, _B) if name == "solve" else f(a)

    want = jax_cpu.tree_util.tree_leaves(call(jax_cpu.numpy))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for got in (call(mnp), mx.jit(lambda: call(mnp))()):
            got = mx.tree.leaves(got)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(np.asarray(g), np.asarray(w))  # inf, NaN, 0


def test_batched_solve_keeps_good_matrices():
    a = np.stack([np.eye(2, dtype=np.float32) * 2, _SING, _NAN])
    x = np.asarray(mnp.linalg.solve(a, np.ones((3, 2), np.float32)))
    np.testing.assert_array_equal(x[0], [0.5, 0.5])
    assert not np.isfinite(x[1]).all() and np.isnan(x[2]).all()
    s = np.asarray(mnp.linalg.svd(a, compute_uv=False))
    np.testing.assert_allclose(s[:2], [[2, 2], [5, 0]], atol=1e-6)
    assert np.isnan(s[2]).all()


# --- found by comparing the bad-input sweep's accepted calls with JAX ----------------------
def test_collapse_negative_dimensions(jax_cpu):
    for shape, lo, hi in [((4, 4), -1, None), ((2, 3, 4), -2, None), ((2, 3, 4), 0, -1),
                          ((2, 3, 4), 1, 3), ((2, 3, 4), -3, -1)]:
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        got, want = mx.lax.collapse(x, lo, hi), jax_cpu.lax.collapse(x, lo, hi)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_geomspace_without_a_geometric_sequence_is_nan(jax_cpu):
    for a, b in [(-1., 2.), (0., 2.), (-1., -8.), (np.array([1., -1.]), 8.)]:
        got, want = mnp.geomspace(a, b, 4), jax_cpu.numpy.geomspace(a, b, 4)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    # NOTE: a zero stop gives JAX [nan, 0, 0, 0] (log 0 = -inf) and NumPy an error: all NaN
    assert np.isnan(np.asarray(mnp.geomspace(2., 0., 4))).all()
