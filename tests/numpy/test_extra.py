"""mirax.numpy._extra (jnp gap-fillers): values and dtypes against jax.numpy (NumPy where JAX
has no opinion), derivatives against JAX and float64 finite differences, jit and vmap."""
from __future__ import annotations

import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax.testing import check_grads

jax = pytest.importorskip("jax")
jnp = jax.numpy

rng = np.random.default_rng(0)
X = rng.standard_normal((3, 4)).astype(np.float32)
U = rng.uniform(-0.9, 0.9, (5,)).astype(np.float32)          # inside (-1, 1)
P = rng.uniform(1.1, 3.0, (5,)).astype(np.float32)           # > 1
V = rng.standard_normal((4,)).astype(np.float32)
B = rng.standard_normal((2, 3, 4)).astype(np.float32)
IA = np.array([12, -18, 0, 7, 0, 100, -45], np.int32)
IB = np.array([18, 12, 5, 0, 0, 75, -30], np.int32)


def _leaves(v):
    if isinstance(v, (tuple, list)):
        return [x for e in v for x in _leaves(e)]
    return [v]


def _x32(d):
    """JAX without x64 turns NumPy's 64-bit inputs into 32-bit; mirax keeps them."""
    return {np.dtype(np.int64): np.dtype(np.int32), np.dtype(np.float64): np.dtype(np.float32),
            np.dtype(np.uint64): np.dtype(np.uint32)}.get(np.dtype(d), np.dtype(d))


def _same(got, want, rtol=2e-6, atol=2e-6, dtypes=True):
    assert type(got) in (tuple, list) if isinstance(want, (tuple, list)) else True
    g, w = _leaves(got), _leaves(want)
    assert len(g) == len(w)
    for a, b in zip(g, w):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, (a.shape, b.shape)
        assert not dtypes or _x32(a.dtype) == b.dtype, (a.dtype, b.dtype)
        np.testing.assert_allclose(a.astype(np.float64) if a.dtype.kind != "b" else a,
                                   b.astype(np.float64) if b.dtype.kind != "b" else b,
                                   rtol=rtol, atol=atol)


# (id, f(namespace)): the same code runs on mirax.numpy and jax.numpy
CASES = [
    ("acos", lambda m: m.acos(U)), ("acosh", lambda m: m.acosh(P)),
    ("asin", lambda m: m.asin(U)), ("asinh", lambda m: m.asinh(X)),
    ("atan", lambda m: m.atan(X)), ("atanh", lambda m: m.atanh(U)),
    ("atan2", lambda m: m.atan2(X, X.T[:3, :1] + 0.5)),
    ("pow", lambda m: m.pow(P, U)), ("pow-int", lambda m: m.pow(np.arange(5), 3)),
    ("concat", lambda m: m.concat([X, X[:1]])),
    ("concat-axis1", lambda m: m.concat([X, X[:, :2]], axis=1)),
    ("concat-none", lambda m: m.concat([X, V], axis=None)),
    ("bitwise_invert", lambda m: m.bitwise_invert(IA)),
    ("bitwise_invert-bool", lambda m: m.bitwise_invert(IA > 0)),
    ("bitwise_left_shift", lambda m: m.bitwise_left_shift(np.abs(IA), 2)),
    ("bitwise_right_shift", lambda m: m.bitwise_right_shift(IA, 1)),
    ("matrix_transpose", lambda m: m.matrix_transpose(B)),
    ("unstack", lambda m: m.unstack(B)), ("unstack-ax2", lambda m: m.unstack(B, axis=-1)),
    ("vecdot", lambda m: m.vecdot(B, V)), ("vecdot-ax0", lambda m: m.vecdot(X, X, axis=0)),
    ("matvec", lambda m: m.matvec(B, V)), ("matvec-bcast", lambda m: m.matvec(X, B[:, :, 0:4])),
    ("vecmat", lambda m: m.vecmat(X[0, :3], B)), ("vecmat-bcast", lambda m: m.vecmat(B[..., 0], B)),
    ("astype", lambda m: m.astype(X, m.int32)), ("astype-bool", lambda m: m.astype(IA, bool)),
    ("copy", lambda m: m.copy(X)),
    # creation / index helpers
    ("logspace", lambda m: m.logspace(0, 3, 7)),
    ("logspace-base2", lambda m: m.logspace(-1, 4, 6, base=2.0, endpoint=False)),
    ("logspace-int", lambda m: m.logspace(0, 4, 5, dtype=m.int32)),
    ("logspace-arr", lambda m: m.logspace(np.zeros(3, np.float32),
                                          np.arange(1, 4, dtype=np.float32), 4, axis=1)),
    ("geomspace", lambda m: m.geomspace(1, 1000, 4)),
    ("geomspace-neg", lambda m: m.geomspace(-2.0, -32.0, 5)),
    ("geomspace-int", lambda m: m.geomspace(1, 8, 4, dtype=m.int32)),
    ("geomspace-1", lambda m: m.geomspace(2.0, 5.0, 1)),
    ("geomspace-noend", lambda m: m.geomspace(3.0, 48.0, 4, endpoint=False)),
    ("geomspace-arr", lambda m: m.geomspace(np.array([1.0, 2.0], np.float32),
                                            np.array([8.0, 32.0], np.float32), 3, axis=-1)),
    ("tri", lambda m: m.tri(3)), ("tri-rect", lambda m: m.tri(3, 5, k=1, dtype=m.int32)),
    ("tri-neg", lambda m: m.tri(4, 2, k=-1)),
    ("tril_indices", lambda m: m.tril_indices(4)),
    ("tril_indices-k", lambda m: m.tril_indices(3, 1, 5)),
    ("triu_indices", lambda m: m.triu_indices(4, -1)),
    ("tril_indices_from", lambda m: m.tril_indices_from(X, 1)),
    ("triu_indices_from", lambda m: m.triu_indices_from(X)),
    ("diag_indices", lambda m: m.diag_indices(3)),
    ("diag_indices-3", lambda m: m.diag_indices(2, 3)),
    ("diag_indices_from", lambda m: m.diag_indices_from(np.zeros((3, 3, 3)))),
    ("indices", lambda m: m.indices((2, 3))),
    ("indices-sparse", lambda m: m.indices((2, 3, 2), sparse=True)),
    ("indices-f32", lambda m: m.indices((3,), dtype=m.float32)),
    ("ix_", lambda m: m.ix_(np.array([0, 2]), np.array([1, 3, 0]))),
    ("ix_-bool", lambda m: m.ix_(np.array([True, False, True]), np.array([2, 0]))),
    ("fromfunction", lambda m: m.fromfunction(lambda i, j: i * 10 + j, (3, 4))),
    ("fromfunction-int", lambda m: m.fromfunction(lambda i, j: i - j, (2, 3), dtype=m.int32)),
    ("fromfunction-const", lambda m: m.fromfunction(lambda i, j: 1.5 + 0 * i, (2, 3))),
    ("diagflat", lambda m: m.diagflat(X[:2, :2])), ("diagflat-k", lambda m: m.diagflat(V, -1)),
    ("vander", lambda m: m.vander(V)), ("vander-inc", lambda m: m.vander(V, 3, increasing=True)),
    ("vander-int", lambda m: m.vander(np.array([1, 2, 3], np.int32), 4)),
    ("mgrid", lambda m: m.mgrid[0:3, 1:5:2]), ("mgrid-1d", lambda m: m.mgrid[-1:1:0.5]),
    ("mgrid-complex", lambda m: m.mgrid[0:1:5j, 0:2]),
    ("ogrid", lambda m: m.ogrid[0:3, 0:4:2]), ("ogrid-complex", lambda m: m.ogrid[0:1:3j]),
    ("r_", lambda m: m.r_[1:4, 7, np.array([9, 10])]),
    ("r_-float", lambda m: m.r_[0:1:3j, V]),
    ("r_-axis", lambda m: m.r_["-1", X, X]), ("r_-directive", lambda m: m.r_["0,2", V, V]),
    ("r_-c", lambda m: m.r_["c", V, [1.0, 2.0]]),
    ("r_-2d", lambda m: m.r_[X, X[:1]]),
    ("c_", lambda m: m.c_[V, V]), ("c_-mixed", lambda m: m.c_[X, V[:3], X[:, :1]]),
    ("c_-slice", lambda m: m.c_[0:3, np.array([4, 5, 6])]),
    ("fill_diagonal", lambda m: m.fill_diagonal(X, 9.0, inplace=False)),
    ("fill_diagonal-vec", lambda m: m.fill_diagonal(np.zeros((4, 4)), np.array([1.0, 2.0]),
                                                    inplace=False)),
    ("fill_diagonal-3d", lambda m: m.fill_diagonal(np.zeros((3, 3, 3), np.float32), 5.0,
                                                   inplace=False)),
    ("fill_diagonal-tall", lambda m: m.fill_diagonal(np.zeros((5, 3), np.int32), 7,
                                                     inplace=False)),
    # math
    ("float_power", lambda m: m.float_power(P, U)),
    ("float_power-int", lambda m: m.float_power(np.arange(1, 5), 2)),
    ("logaddexp2", lambda m: m.logaddexp2(X, X.T[:3, :1])),
    ("logaddexp2-inf", lambda m: m.logaddexp2(
        np.array([-np.inf, np.inf, 0.0, 1.0, -np.inf], np.float32),
        np.array([-np.inf, np.inf, -np.inf, 3.0, 2.0], np.float32))),
    ("ldexp", lambda m: m.ldexp(X, np.array([0, 3, -2, 10], np.int32))),
    ("ldexp-far", lambda m: m.ldexp(np.array([1.5, 3e-38, 2e38, -1.0], np.float32),
                                    np.array([-140, 100, -200, 127], np.int32))),
    ("ldexp-int", lambda m: m.ldexp(np.array([1, 2, 3]), 4)),
    ("frexp", lambda m: m.frexp(X * 100)),
    ("frexp-special", lambda m: m.frexp(np.array([0.0, -0.0, 1.0, 0.5, 2.0, -4.0, 3.0e38, 1e-40,
                                                  1.17549435e-38, np.inf, -np.inf], np.float32))),
    ("frexp-int", lambda m: m.frexp(np.array([1, 6, -8, 0], np.int32))),
    ("modf", lambda m: m.modf(X * 3)), ("modf-int", lambda m: m.modf(np.array([3, -2]))),
    ("divmod", lambda m: m.divmod(X * 5, 1.5)), ("divmod-int", lambda m: m.divmod(IA, 7)),
    ("gcd", lambda m: m.gcd(IA, IB)), ("gcd-bcast", lambda m: m.gcd(IA, 6)),
    ("gcd-scalar", lambda m: m.gcd(12, 18)),
    ("lcm", lambda m: m.lcm(IA, IB)), ("lcm-bcast", lambda m: m.lcm(np.array([[4], [6]]), IB)),
    ("spacing", lambda m: m.spacing(np.array([1.0, -1.0, 1e10, -3.5, 1e-3, 0.0], np.float32))),
    ("i0", lambda m: m.i0(np.array([0.0, 0.5, -1.0, 3.0, 7.9, 8.0, 8.5, -20.0, 50.0],
                                   np.float32))),
    ("i0-int", lambda m: m.i0(np.array([0, 1, 2]))),
    ("i0-f16", lambda m: m.i0(np.array([0.0, 1.5, -4.0, 9.0], np.float16))),
    ("unwrap", lambda m: m.unwrap(np.cumsum(X.ravel() * 3))),
    ("unwrap-axis0", lambda m: m.unwrap(X * 4, axis=0)),
    ("unwrap-period", lambda m: m.unwrap(np.array([5, 350, 10, 340, 20], np.float32), period=360)),
    ("unwrap-discont", lambda m: m.unwrap(np.array([0.0, 2.0, 4.5, 1.0], np.float32), discont=4.0)),
    ("unwrap-int", lambda m: m.unwrap(np.array([0, 5, 11, 2, 8]), period=10)),
    ("trapezoid", lambda m: m.trapezoid(X)),
    ("trapezoid-dx", lambda m: m.trapezoid(X, dx=0.5, axis=0)),
    ("trapezoid-x", lambda m: m.trapezoid(X, x=np.array([0.0, 1.0, 3.0, 3.5], np.float32))),
    ("trapezoid-x2d", lambda m: m.trapezoid(X, x=np.abs(X).cumsum(0), axis=0)),
    ("gradient", lambda m: m.gradient(X)), ("gradient-1d", lambda m: m.gradient(V, 0.5)),
    ("gradient-axis", lambda m: m.gradient(B, 2.0, axis=1)),
    ("gradient-axes", lambda m: m.gradient(B, 1.0, 0.5, axis=(0, 2))),
    ("gradient-coords", lambda m: m.gradient(V, np.array([0.0, 0.5, 2.0, 2.2], np.float32))),
    ("gradient-int", lambda m: m.gradient(np.array([1, 4, 9, 16, 25]))),
    ("rollaxis", lambda m: m.rollaxis(B, 2)), ("rollaxis-start", lambda m: m.rollaxis(B, 0, 3)),
    ("rollaxis-neg", lambda m: m.rollaxis(B, -1, 1)),
    ("rollaxis-same", lambda m: m.rollaxis(B, 1, 2)),
    ("resize", lambda m: m.resize(V, (3, 3))), ("resize-shrink", lambda m: m.resize(X, 5)),
    ("resize-empty", lambda m: m.resize(np.zeros((0,), np.float32), (2, 2))),
    ("trim_zeros", lambda m: m.trim_zeros(np.array([0, 0, 1, 2, 0, 3, 0], np.int32))),
    ("trim_zeros-f", lambda m: m.trim_zeros(np.array([0, 0, 1, 0], np.float32), "f")),
    ("trim_zeros-b", lambda m: m.trim_zeros(np.array([0, 0, 1, 0], np.float32), "b")),
    ("trim_zeros-all0", lambda m: m.trim_zeros(np.zeros(3, np.float32))),
]


class _NumPy:
    """NumPy as the value oracle (fast, float64 where it promotes), with jnp's functional
    fill_diagonal; result dtypes and shapes come from JAX (traced, not compiled)."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def fill_diagonal(a, val, wrap=False, inplace=False):
        a = np.array(a)
        np.fill_diagonal(a, val, wrap)
        return a


# jnp.ix_ refuses boolean arguments (mirax takes them, as NumPy does); jnp.trim_zeros needs
# concrete values (no eval_shape), and keeps its input's dtype
_NO_JAX = {"ix_-bool", "trim_zeros", "trim_zeros-f", "trim_zeros-b", "trim_zeros-all0"}


def _jax_avals(name, f):
    if name in _NO_JAX:
        return None
    with jax.enable_x64(False):  # (other test files turn x64 on globally)
        return jax.eval_shape(lambda: f(jnp))


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # NumPy's r_['c'] matrix
@pytest.mark.parametrize("name,f", CASES, ids=[c[0] for c in CASES])
def test_value_vs_numpy_dtype_vs_jax(name, f):
    got = f(mnp)
    loose = ("i0", "logspace", "geomspace", "gradient", "unwrap", "trapezoid", "float_power",
             "logaddexp2")
    rtol = 1e-3 if name.endswith("f16") else 2e-5 if name.split("-")[0] in loose else 2e-6
    _same(got, f(_NumPy()), rtol=rtol, dtypes=False)
    want = _jax_avals(name, f)
    if want is not None:
        g, w = _leaves(got), _leaves(want)
        assert len(g) == len(w)
        assert [(a.shape, _x32(a.dtype)) for a in g] == [(b.shape, b.dtype) for b in w]


def test_fill_diagonal_wrap_vs_numpy():
    a = np.zeros((7, 3), np.float32)
    got = mnp.fill_diagonal(a, np.array([1.0, 2.0], np.float32), wrap=True)
    np.fill_diagonal(a, np.array([1.0, 2.0]), wrap=True)
    np.testing.assert_array_equal(np.asarray(got), a)


def test_geomspace_integer_sequences_exact():
    # NumPy gives 47 for the third entry and JAX 12287 for the last (float rounding noise)
    got = mnp.geomspace(3, 3 * 4 ** 6, 7, dtype=mnp.int32)
    np.testing.assert_array_equal(np.asarray(got), 3 * 4 ** np.arange(7))
    np.testing.assert_array_equal(np.asarray(mnp.geomspace(-1, -2 ** 20, 21, dtype=mnp.int64)),
                                  -(2 ** np.arange(21)))


def test_i0_float64_vs_numpy():
    x = np.linspace(-30, 30, 241)
    np.testing.assert_allclose(np.asarray(mnp.i0(x)), np.i0(x), rtol=1e-13)


def test_frexp_roundtrip_and_spacing_vs_numpy():
    x = np.concatenate([rng.standard_normal(50) * 10.0 ** rng.integers(-300, 300, 50),
                        [5e-324, 1e-310, 2.0 ** 1023, 1.0]])
    m, e = mnp.frexp(x)
    wm, we = np.frexp(x)
    np.testing.assert_array_equal(np.asarray(m), wm)
    np.testing.assert_array_equal(np.asarray(e), we)
    np.testing.assert_array_equal(np.asarray(mnp.ldexp(m, e)), x)
    np.testing.assert_array_equal(np.asarray(mnp.spacing(x)), np.spacing(x))


# --- dtype helpers and scalar types ----------------------------------------------------------
def test_scalar_type_names_as_jnp():
    for n in ("bool", "double", "single", "int_", "float_", "uint"):
        assert np.dtype(getattr(mnp, n)) == np.dtype(getattr(jnp, n) if hasattr(jnp, n)
                                                     else getattr(np, n)), n
    for n in ("number", "floating", "integer", "signedinteger", "unsignedinteger", "inexact",
              "generic"):
        assert getattr(mnp, n) is getattr(jnp, n), n
    assert mnp.dtype is np.dtype and mnp.dtype("float32") == mnp.float32
    assert mnp.zeros(2, dtype=mnp.double).dtype == np.float64


@pytest.mark.parametrize("d", ["bool", "int8", "int32", "uint8", "float16", "bfloat16",
                               "float32", "float64"])
def test_isdtype_issubdtype_vs_jax(d):
    dm, dj = getattr(mnp, d if d != "bool" else "bool_"), getattr(jnp, d if d != "bool" else
                                                                  "bool_")
    for kind in ("bool", "signed integer", "unsigned integer", "integral", "real floating",
                 "complex floating", "numeric", ("bool", "real floating"), "float32"):
        kj = jnp.float32 if kind == "float32" else kind
        km = mnp.float32 if kind == "float32" else kind
        assert mnp.isdtype(dm, km) == jnp.isdtype(dj, kj), (d, kind)
    for t in ("number", "floating", "integer", "signedinteger", "unsignedinteger", "inexact",
              "generic"):
        assert mnp.issubdtype(dm, getattr(mnp, t)) == jnp.issubdtype(dj, getattr(jnp, t)), (d, t)
    assert mnp.issubdtype(dm, dm) and mnp.issubdtype(dm, mnp.float32) == (d == "float32")
    with pytest.raises(ValueError, match="isdtype"):
        mnp.isdtype(dm, "floaty")


def test_isscalar_iscomplexobj():
    for v in (1, 2.5, True, np.float32(1), np.array(2.0), mnp.asarray(3.0), mnp.ones(2), [1],
              np.ones(3), "s", None):
        want = jnp.isscalar(v if not isinstance(v, mx.Array) else jnp.asarray(np.asarray(v)))
        assert mnp.isscalar(v) == want, v
    for v in (1.0, 1j, np.ones(2), np.ones(2, complex), mnp.ones(2)):
        assert mnp.iscomplexobj(v) == np.iscomplexobj(np.asarray(v)), v
        assert mnp.isrealobj(v) != mnp.iscomplexobj(v)
    assert mnp.s_[1:3, ::2] == np.s_[1:3, ::2] and mnp.index_exp[1] == (1,)


# --- derivatives ------------------------------------------------------------------------------
X64 = rng.standard_normal((3, 4))
GRAD_CASES = [
    ("vecdot", lambda m, x: m.vecdot(x, x[::-1] * 2.0).sum()),
    ("matvec", lambda m, x: (m.matvec(x, x[0]) ** 2).sum()),
    ("vecmat", lambda m, x: (m.vecmat(x[:, 0], x) ** 2).sum()),
    ("matrix_transpose", lambda m, x: (m.matrix_transpose(x) * x.T ** 2).sum()),
    ("unstack", lambda m, x: sum(u * (i + 1.0) for i, u in enumerate(m.unstack(x, axis=1))).sum()),
    ("concat", lambda m, x: (m.concat([x, x * x], axis=1) ** 2).sum()),
    ("geomspace", lambda m, x: m.geomspace(m.exp(x[0]), m.exp(x[1]) + 3.0, 5, axis=0).sum()),
    ("logspace", lambda m, x: m.logspace(x[0] * 0.3, x[1] * 0.3, 4, base=3.0).sum()),
    ("vander", lambda m, x: (m.vander(x[0]) ** 2).sum()),
    ("diagflat", lambda m, x: (m.diagflat(x[:2, :2], 1) * 2.0).sum() + m.diagflat(x[0]).sum()),
    ("fill_diagonal", lambda m, x: (m.fill_diagonal(x, x[0, 1] * 3.0, inplace=False) ** 2).sum()),
    ("fill_diagonal-vec", lambda m, x: (m.fill_diagonal(x, x[1, :2], inplace=False) ** 3).sum()),
    ("float_power", lambda m, x: m.float_power(m.abs(x) + 0.5, x[::-1]).sum()),
    ("logaddexp2", lambda m, x: m.logaddexp2(x, x[::-1] * 2.0).sum()),
    ("ldexp", lambda m, x: (m.ldexp(x, m.arange(4, dtype=m.int32) - 2) ** 2).sum()),
    ("frexp", lambda m, x: (m.frexp(x * 10.0)[0] ** 2).sum()),
    ("modf", lambda m, x: (m.modf(x * 3.0)[0] ** 2).sum() + m.modf(x * 3.0)[1].sum()),
    ("divmod", lambda m, x: (m.divmod(x * 3.0, 0.7)[1] ** 2).sum()),
    ("i0", lambda m, x: m.i0(x * 4.0).sum()),
    ("i0-large", lambda m, x: m.i0(x + 9.0).sum()),
    ("unwrap", lambda m, x: (m.unwrap(x * 4.0, axis=1) ** 2).sum()),
    ("trapezoid", lambda m, x: m.trapezoid(x ** 2, x=m.cumsum(m.abs(x[0])), axis=1).sum()),
    ("gradient", lambda m, x: (m.gradient(x ** 3, 0.3, axis=1) ** 2).sum()),
    ("gradient-coords", lambda m, x: (m.gradient(x[0] ** 2, m.cumsum(m.abs(x[1]) + 0.5))
                                      ** 2).sum()),
    ("rollaxis", lambda m, x: (m.rollaxis(x, 1) * m.arange(12.0).reshape(4, 3)).sum()),
    ("resize", lambda m, x: (m.resize(x, (5, 5)) ** 2 * m.arange(25.0).reshape(5, 5)).sum()),
]


# JAX's compile time dominates: these run by default, the rest with -m slow (all of them
# are also checked against float64 central differences below)
_FAST_JAX_GRADS = ("vecdot", "matrix_transpose", "unstack", "vander", "i0", "frexp", "modf",
                   "divmod", "ldexp", "rollaxis", "resize", "float_power")


@pytest.fixture(scope="module")
def jax_grads():
    """The JAX gradients of GRAD_CASES; the fast set from one jax.jit (one XLA compile)."""
    x = X64.astype(np.float32)
    cache = {}

    def get(name):
        if name not in cache:
            names = _FAST_JAX_GRADS if name in _FAST_JAX_GRADS else (name,)
            fns = [jax.grad(lambda v, f=dict(GRAD_CASES)[n]: f(jnp, v)) for n in names]
            cache.update(zip(names, jax.jit(lambda v: [g(v) for g in fns])(x)))
        return cache[name]
    return get


@pytest.mark.parametrize("name,f", [
    pytest.param(n, f, id=n, marks=() if n in _FAST_JAX_GRADS else pytest.mark.slow)
    for n, f in GRAD_CASES])
def test_grad_vs_jax(name, f, jax_grads):
    got = mx.grad(lambda v: f(mnp, v))(X64.astype(np.float32))
    _same(got, jax_grads(name), rtol=3e-4, atol=3e-5)


_SECOND_ORDER = ("i0", "logaddexp2", "geomspace", "vander", "unwrap", "gradient",
                 "fill_diagonal-vec", "float_power")


@pytest.mark.parametrize("name", [n for n, _ in GRAD_CASES])
def test_check_grads_f64(name):
    f = dict(GRAD_CASES)[name]
    order = 2 if name in _SECOND_ORDER else 1
    check_grads(lambda v: f(mnp, v), (X64,), order=order, modes=("fwd", "rev"))


def test_i0_derivatives_vs_scipy():
    special = pytest.importorskip("scipy.special")
    x = np.array([-12.0, -3.0, -0.5, 0.0, 0.7, 7.5, 8.0, 9.0, 30.0])
    d1 = mx.vmap(mx.grad(mnp.i0))(x)
    d2 = mx.vmap(mx.grad(mx.grad(mnp.i0)))(x)
    np.testing.assert_allclose(np.asarray(d1), special.i1(x), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(d2), (special.i0(x) + special.iv(2, x)) / 2, rtol=1e-9)


# --- jit and vmap -----------------------------------------------------------------------------
JIT_CASES = ["vecdot", "i0", "logaddexp2", "unwrap", "gradient", "fill_diagonal", "frexp",
             "ldexp", "gcd", "vander", "trapezoid-x", "r_", "mgrid"]


@pytest.mark.parametrize("name", JIT_CASES)
def test_jit_matches_eager(name):
    f = dict(CASES)[name]
    got, want = mx.jit(lambda: f(mnp))(), f(mnp)
    assert [a.dtype for a in _leaves(got)] == [b.dtype for b in _leaves(want)]
    _same(got, want, rtol=1e-6, dtypes=False)


def test_jit_with_traced_args_vs_numpy():
    g = mx.jit(lambda a, b, x: (mnp.gcd(a, b), mnp.lcm(a, b), mnp.i0(x), mnp.frexp(x),
                                mnp.spacing(x), mnp.logaddexp2(x, 1.0)))
    got = g(IA, IB, X)
    want = (np.gcd(IA, IB), np.lcm(IA, IB), np.i0(X).astype(np.float32), np.frexp(X),
            np.spacing(X), np.logaddexp2(X, np.float32(1.0)))
    _same(got, want, rtol=2e-6)


def _loop(f, *xs):
    """f applied row by row, stacked (the vmap oracle)."""
    outs = [f(*(x[i] for x in xs)) for i in range(xs[0].shape[0])]
    return np.stack([np.asarray(o) for o in outs])


@pytest.mark.parametrize("f,args", [
    (mnp.vecdot, (B, B[::-1])),
    (lambda a: mnp.unwrap(a * 5), (X,)),
    (mnp.gcd, (IA.reshape(7, 1), IB.reshape(7, 1))),
    (lambda a: mnp.gradient(a, 0.5), (X,)),
    (mnp.i0, (X * 5,)),
    (lambda a: mnp.fill_diagonal(a, 0.0, inplace=False), (B[:, :3, :3],)),
    (lambda a, b: mnp.matvec(a, b), (B, B[:, 0])),
    (lambda a: mnp.frexp(a * 10)[0], (X,)),
], ids=["vecdot", "unwrap", "gcd", "gradient", "i0", "fill_diagonal", "matvec", "frexp"])
def test_vmap_vs_loop(f, args):
    np.testing.assert_allclose(np.asarray(mx.vmap(f)(*args)), _loop(f, *args), rtol=1e-6)


# --- errors -----------------------------------------------------------------------------------
def test_errors():
    with pytest.raises(ValueError, match=r"matrix_transpose.*f32\[4\]"):
        mnp.matrix_transpose(V)
    with pytest.raises(ValueError, match=r"vecdot.*f32\[3,4\].*f32\[3\]"):
        mnp.vecdot(X, V[:3])
    with pytest.raises(ValueError, match=r"fill_diagonal"):
        mnp.fill_diagonal(X, 1.0, inplace=True)
    with pytest.raises(ValueError, match=r"fill_diagonal.*f32\[4\]"):
        mnp.fill_diagonal(V, 1.0)
    with pytest.raises(ValueError, match=r"gcd.*f32"):
        mnp.gcd(X, X)
    with pytest.raises(ValueError, match=r"ldexp.*f32"):
        mnp.ldexp(X, X)
    with pytest.raises(ValueError, match=r"gradient.*f32\[1,4\]"):
        mnp.gradient(X[:1])
    with pytest.raises(ValueError, match=r"gradient.*length 4"):
        mnp.gradient(V, np.ones(3))
    with pytest.raises(NotImplementedError, match="edge_order"):
        mnp.gradient(V, edge_order=2)
    with pytest.raises(ValueError, match=r"tril_indices_from.*f32\[4\]"):
        mnp.tril_indices_from(V)
    with pytest.raises(ValueError, match=r"diag_indices_from.*f32\[3,4\]"):
        mnp.diag_indices_from(X)
    with pytest.raises(ValueError, match=r"vander.*f32\[3,4\]"):
        mnp.vander(X)
    with pytest.raises(ValueError, match=r"unstack"):
        mnp.unstack(mnp.asarray(1.0))
    with pytest.raises(ValueError, match="r_.*first"):
        mnp.r_[V, "0"]
    with pytest.raises(mx.errors.ConcretizationError, match="trim_zeros"):
        mx.jit(mnp.trim_zeros)(V)
