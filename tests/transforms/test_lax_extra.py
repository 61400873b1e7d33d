"""mirax.lax compositions (mirax/lax/_extra.py) against jax.lax: values, and derivatives
against JAX's or central differences (mx.testing.check_grads)."""
import numpy as np
import pytest

import mirax as mx
from mirax import lax

jax = pytest.importorskip("jax")
jlax = jax.lax


@pytest.fixture(autouse=True, scope="module")
def _jax_x64():
    """float64 JAX references for this file only (the flag is global: restored after)."""
    prev = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", prev)

RNG = np.random.default_rng(0)


def close(a, b, tol=1e-12):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    np.testing.assert_array_equal(a, b)


# --- cumulative ----------------------------------------------------------------------------
CUM_REF = {"cumsum": np.add, "cumprod": np.multiply, "cummax": np.maximum,
           "cummin": np.minimum, "cumlogsumexp": np.logaddexp}


@pytest.mark.parametrize("name", sorted(CUM_REF))
@pytest.mark.parametrize("axis,reverse", [(0, False), (1, True), (-1, False), (0, True)])
def test_cumulative(name, axis, reverse):
    x = RNG.normal(size=(4, 5))
    flip = (lambda a: np.flip(a, axis)) if reverse else (lambda a: a)
    close(getattr(lax, name)(x, axis=axis, reverse=reverse),
          flip(CUM_REF[name].accumulate(flip(x), axis=axis)))


def test_cumlogsumexp_extremes_and_grad():
    x = np.array([-1000.0, 0.0, -np.inf, 800.0, 1.0])
    close(lax.cumlogsumexp(x), jlax.cumlogsumexp(x))
    close(lax.cumlogsumexp(np.full(3, -np.inf)), np.full(3, -np.inf))
    x = RNG.normal(size=(6,))
    g = mx.grad(lambda v: lax.cumlogsumexp(v, reverse=True)[0])(x)
    close(g, np.exp(x - np.logaddexp.reduce(x)))  # softmax
    mx.testing.check_grads(lambda v: lax.cumlogsumexp(v, reverse=True), (x,), order=2)


# --- sorting -------------------------------------------------------------------------------
def test_top_k_values_indices_ties_and_grad():
    x = np.array([[3.0, 1.0, 4.0, 1.0, 5.0, 4.0], [0.0, 2.0, 2.0, -1.0, 7.0, 0.5]])
    v, i = lax.top_k(x, 3)
    jv, ji = jlax.top_k(x, 3)
    close(v, jv)
    same(i, ji)
    g = mx.grad(lambda a: (lax.top_k(a, 2)[0] * np.array([1.0, 2.0])).sum())(x)
    close(g, [[0, 0, 2, 0, 1, 0], [0, 2, 0, 0, 1, 0]])
    with pytest.raises(ValueError, match="top_k"):
        lax.top_k(x, 7)


def test_sort_forms():
    x = RNG.normal(size=(3, 5))
    y = RNG.integers(0, 3, size=(3, 5)).astype(np.int32)
    close(lax.sort(x, dimension=0), jlax.sort(x, dimension=0))
    out = lax.sort((y, x), num_keys=1)
    ref = jlax.sort((y, x), num_keys=1)
    assert isinstance(out, tuple) and len(out) == 2
    same(out[0], ref[0])
    close(out[1], ref[1])
    out = lax.sort_key_val(x, y, dimension=1)
    ref = jlax.sort_key_val(x, y, dimension=1)
    close(out[0], ref[0])
    same(out[1], ref[1])


# --- elementwise ---------------------------------------------------------------------------
def test_clamp_integer_pow_square_exp2():
    x = RNG.normal(size=(7,))
    close(lax.clamp(-0.5, x, 0.5), jlax.clamp(-0.5, x, 0.5))
    close(mx.grad(lambda v: lax.clamp(-0.5, v, 0.5).sum())(x),
          jax.grad(lambda v: jlax.clamp(-0.5, v, 0.5).sum())(x))
    for y in (0, 1, 2, 3, 5, -2):
        close(lax.integer_pow(x, y), x ** float(y), 1e-10)
        close(mx.grad(lambda v: lax.integer_pow(v, y).sum())(x), y * x ** (y - 1.0), 1e-10)
    same(lax.integer_pow(np.arange(5, dtype=np.int32), 3), np.arange(5, dtype=np.int32) ** 3)
    assert float(mx.grad(lambda v: lax.integer_pow(v, 2))(0.0)) == 0.0
    close(lax.square(x), jlax.square(x))
    close(lax.exp2(x), jlax.exp2(x))
    mx.testing.check_grads(lambda v: lax.integer_pow(v, 3) + lax.square(v), (x,), order=2)


@pytest.mark.parametrize("dtype,eb,mb", [(np.float32, 5, 10), (np.float32, 8, 7),
                                         (np.float64, 8, 23), (np.float64, 5, 2),
                                         (np.float32, 4, 3), (np.float32, 8, 23)])
def test_reduce_precision(dtype, eb, mb):
    x = np.concatenate([RNG.normal(size=50) * 10.0 ** RNG.integers(-9, 9, size=50),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0, 1e-7, 6e-8,
                         3e-8, 1.5, 2.5, -2.5, 1 + 2 ** -11, 1 + 3 * 2 ** -11]]).astype(dtype)
    same(lax.reduce_precision(x, eb, mb), jlax.reduce_precision(x, eb, mb))
    t = RNG.normal(size=x.shape).astype(dtype)
    _, tout = mx.jvp(lambda v: lax.reduce_precision(v, eb, mb), (x,), (t,))
    same(tout, jlax.reduce_precision(t, eb, mb))


def _bit_results(lib, x, y, big):
    out = {name: getattr(lib, name)(x) for name in ("population_count", "clz", "bitwise_not")}
    for name in ("shift_left", "shift_right_logical", "shift_right_arithmetic", "bitwise_and",
                 "bitwise_or", "bitwise_xor"):
        out[name] = getattr(lib, name)(x, y)
    for name in ("shift_left", "shift_right_logical", "shift_right_arithmetic"):
        out[name + "_big"] = getattr(lib, name)(x, big)  # shifts past the width fill as JAX
    return out


@pytest.mark.parametrize("dtype", [np.int8, np.uint32, np.int64])
def test_bit_ops(dtype):
    info = np.iinfo(dtype)
    x = np.array([0, 1, 5, info.max, info.min, info.max // 3, 255 % (info.max + 1)], dtype)
    y = np.array([0, 1, 3, 7, 2, 31 % info.bits, info.bits - 1], dtype)
    big = np.full(x.shape, info.bits, dtype)
    ref = jax.jit(lambda *a: _bit_results(jlax, *a))(x, y, big)
    for name, out in _bit_results(lax, x, y, big).items():
        same(out, ref[name])


def test_bitcast_and_errors():
    x = np.array([-1, 5, -2 ** 31], np.int32)
    same(lax.bitcast_convert_type(x, np.uint32), jlax.bitcast_convert_type(x, np.uint32))
    with pytest.raises(NotImplementedError, match="bitcast_convert_type"):
        lax.bitcast_convert_type(np.ones(3, np.float32), np.int32)
    with pytest.raises(TypeError, match=r"population_count: .*f32\[3\]"):
        lax.population_count(np.ones(3, np.float32))


# --- shapes, products, selection -----------------------------------------------------------
def test_shape_helpers():
    x = RNG.normal(size=(2, 3, 4))
    close(lax.tile(x, (2, 1, 3)), np.tile(x, (2, 1, 3)))
    close(lax.broadcast(x, (5, 1)), jlax.broadcast(x, (5, 1)))
    same(lax.broadcasted_iota(np.int32, (3, 4), 1), jlax.broadcasted_iota(np.int32, (3, 4), 1))
    assert lax.broadcast_to_rank(x, 5).shape == (1, 1, 2, 3, 4)
    close(lax.collapse(x, 1), jlax.collapse(x, 1))
    close(lax.collapse(x, 0, 2), jlax.collapse(x, 0, 2))
    close(lax.index_in_dim(x, -1, 1), jlax.index_in_dim(x, -1, 1))
    close(lax.index_in_dim(x, 2, 2, keepdims=False), jlax.index_in_dim(x, 2, 2, False))
    close(lax.dynamic_index_in_dim(x, 1, 1), jlax.dynamic_index_in_dim(x, 1, 1))
    u = RNG.normal(size=(2, 1, 4))
    close(lax.dynamic_update_index_in_dim(x, u, 2, 1),
          jlax.dynamic_update_index_in_dim(x, u, 2, 1))
    out = lax.full_like(x, 2, dtype=np.int32, shape=(4,))
    same(out, jlax.full_like(x, 2, dtype=np.int32, shape=(4,)))
    g = mx.grad(lambda v: (lax.tile(v, (2, 1, 1)) ** 2).sum() + lax.broadcast(v, (3,)).sum())(x)
    close(g, 4 * x + 3)


def test_products_and_select_n():
    a, b = RNG.normal(size=(3, 4)), RNG.normal(size=(4, 2))
    close(lax.dot(a, b, precision=lax.Precision.HIGHEST),
          jlax.dot(a, b, precision=jlax.Precision.HIGHEST))
    close(lax.dot(a, b[:, 0]), jlax.dot(a, b[:, 0]))
    assert lax.Precision("highest") is lax.Precision.HIGHEST
    p, q = RNG.normal(size=(5, 3, 4)), RNG.normal(size=(5, 4, 2))
    close(lax.batch_matmul(p, q), jlax.batch_matmul(p, q))
    mx.testing.check_grads(lambda u, v: lax.batch_matmul(u, v), (p, q), order=1)
    which = np.array([0, 2, 1, 1, 0], np.int32)
    cases = [RNG.normal(size=5) for _ in range(3)]
    close(lax.select_n(which, *cases), jlax.select_n(which, *cases))
    pred = np.array([True, False, True, False, False])
    close(lax.select_n(pred, cases[0], cases[1]), jlax.select_n(pred, cases[0], cases[1]))
    tree = {"a": np.ones(2), "b": (np.zeros(1),)}
    assert lax.optimization_barrier(tree) is tree


# --- reduce_window ---------------------------------------------------------------------------
WINDOW_CASES = [
    ((6, 7), (2, 3), (1, 2), "VALID", None, None),
    ((6, 7), (3, 3), (2, 2), "SAME", None, None),
    ((1, 2, 9), (1, 1, 4), (1, 1, 3), ((0, 0), (1, 0), (2, 1)), None, None),
    ((5, 6), (2, 2), (1, 1), "VALID", (2, 1), (1, 2)),
]


@pytest.mark.parametrize("case,monoid", [(0, "add"), (1, "add"), (2, "add"), (3, "add"),
                                          (0, "max"), (1, "max"), (3, "max"), (2, "min"),
                                          (1, "add_init"),
                                          pytest.param(3, "add_init", marks=pytest.mark.slow),
                                          pytest.param(2, "mul", marks=pytest.mark.slow)])
def test_reduce_window(case, monoid):
    shape, wd, ws, padding, bd, wdil = WINDOW_CASES[case]
    x = RNG.normal(size=shape)
    fn, jfn, init = {"add": (lax.add, jlax.add, 0.0), "max": (lax.max, jlax.max, -np.inf),
                     "min": (lax.min, jlax.min, np.inf), "add_init": (lax.add, jlax.add, 1.5),
                     "mul": (lax.mul, jlax.mul, 1.0)}[monoid]

    def f(v):
        return lax.reduce_window(v, init, fn, wd, ws, padding, bd, wdil)

    @jax.jit
    def jf(v):
        return jlax.reduce_window(v, init, jfn, wd, ws, padding, bd, wdil)
    close(f(x), jf(x))
    if monoid in ("add_init", "mul") or (wdil and monoid != "add"):  # JAX: no VJP here
        mx.testing.check_grads(f, (x,), order=1, modes=("rev",))
        return
    w = RNG.normal(size=np.shape(jf(x)))
    close(mx.grad(lambda v: (f(v) * w).sum())(x),
          jax.jit(jax.grad(lambda v: (jf(v) * w).sum()))(x))


def test_reduce_window_jit_vmap():
    x = RNG.normal(size=(3, 8))

    def f(v):
        return lax.reduce_window(v, -np.inf, lax.max, (3,), (2,), "SAME")
    ref = np.stack([np.asarray(f(r)) for r in x])
    close(mx.vmap(f)(x), ref)
    close(mx.jit(mx.vmap(f))(x), ref)


# --- associative_scan ----------------------------------------------------------------------
def _affine(a, b):  # composition of x -> a0 x + a1 maps, on a pytree
    return (a[0] * b[0], b[0] * a[1] + b[1])


def _sequential_scan(fn, elems, reverse):
    n = len(elems[0])
    order = range(n - 1, -1, -1) if reverse else range(n)
    out, acc = [None] * n, None
    for i in order:
        cur = tuple(e[i] for e in elems)
        acc = cur if acc is None else fn(acc, cur)
        out[i] = acc
    return tuple(np.stack([o[j] for o in out]) for j in range(len(elems)))


@pytest.mark.parametrize("n", [1, 2, 5, 12])
@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan(n, reverse):
    x = RNG.normal(size=(3, n))
    close(lax.associative_scan(lax.add, x, reverse=reverse, axis=1),
          np.flip(np.cumsum(np.flip(x, 1), 1), 1) if reverse else np.cumsum(x, 1))
    a = (RNG.normal(size=(n, 2)), RNG.normal(size=(n, 2)))
    out = lax.associative_scan(_affine, a, reverse=reverse)
    ref = _sequential_scan(_affine, a, reverse)
    close(out[0], ref[0], 1e-10)
    close(out[1], ref[1], 1e-10)
    mx.testing.check_grads(lambda u, v: lax.associative_scan(_affine, (u, v), reverse)[1],
                           a, order=1, modes=("rev",))


def test_associative_scan_jit_bool():
    x = RNG.normal(size=(9,))
    close(mx.jit(lambda v: lax.associative_scan(lax.max, v))(x), np.maximum.accumulate(x))
    b = np.array([False, False, True, False, True])
    same(lax.associative_scan(lax.bitwise_or, b), np.logical_or.accumulate(b))


# --- convolutions --------------------------------------------------------------------------
def test_conv_and_general_padding():
    x, w = RNG.normal(size=(2, 3, 7, 6)), RNG.normal(size=(4, 3, 3, 2))
    close(lax.conv(x, w, (1, 2), "SAME"), jlax.conv(x, w, (1, 2), "SAME"), 1e-10)
    args = ((2, 1), ((1, 0), (0, 2)), (2, 1), (1, 2))
    close(lax.conv_with_general_padding(x, w, *args),
          jlax.conv_with_general_padding(x, w, *args), 1e-10)


def test_conv_dimension_numbers():
    dn = lax.conv_dimension_numbers((1, 5, 5, 3), (3, 3, 3, 8), ("NHWC", "HWIO", "NHWC"))
    ref = jlax.conv_dimension_numbers((1, 5, 5, 3), (3, 3, 3, 8), ("NHWC", "HWIO", "NHWC"))
    assert dn == tuple(ref) and dn.rhs_spec == ref.rhs_spec
    assert lax.conv_dimension_numbers((1, 2, 3), (4, 2, 1), None) == ((0, 1, 2),) * 3


@pytest.mark.parametrize("padding,transpose_kernel", [("SAME", False), ("VALID", True),
                                                      pytest.param(((1, 2), (0, 1)), False,
                                                                   marks=pytest.mark.slow)])
def test_conv_transpose(padding, transpose_kernel):
    x, w = RNG.normal(size=(2, 5, 4, 3)), RNG.normal(size=(3, 2, 3, 4))  # NHWC, HWIO
    if transpose_kernel:
        w = RNG.normal(size=(3, 2, 4, 3))
    kw = dict(strides=(2, 1), padding=padding, rhs_dilation=(1, 2),
              transpose_kernel=transpose_kernel)
    close(lax.conv_transpose(x, w, **kw), jlax.conv_transpose(x, w, **kw), 1e-10)
    ct = RNG.normal(size=np.shape(jlax.conv_transpose(x, w, **kw)))
    g = mx.grad(lambda a, b: (lax.conv_transpose(a, b, **kw) * ct).sum(), argnums=(0, 1))(x, w)
    jg = jax.jit(jax.grad(lambda a, b: (jlax.conv_transpose(a, b, **kw) * ct).sum(),
                          argnums=(0, 1)))(x, w)
    close(g[0], jg[0], 1e-10)
    close(g[1], jg[1], 1e-10)


def test_conv_transpose_nchw():
    x, w = RNG.normal(size=(1, 2, 5)), RNG.normal(size=(3, 2, 3))  # NCH, OIH
    dn = ("NCH", "OIH", "NCH")
    close(lax.conv_transpose(x, w, (3,), "SAME", dimension_numbers=dn),
          jlax.conv_transpose(x, w, (3,), "SAME", dimension_numbers=dn), 1e-10)


# --- special functions ---------------------------------------------------------------------
A = np.array([0.5, 1.0, 3.0, 10.0, 60.0, 2.5, 0.1, 7.0])
X = np.array([0.2, 2.0, 3.0, 5.0, 70.0, 0.01, 30.0, 6.5])
B = np.array([2.0, 0.5, 5.0, 1.0, 30.0, 0.7, 3.0, 1.5])
T = np.array([0.3, 0.9, 0.5, 0.99, 0.2, 0.01, 0.6, 0.45])


SCIPY = {"igamma": "gammainc", "igammac": "gammaincc", "betainc": "betainc", "zeta": "zeta",
         "polygamma": "polygamma", "bessel_i0e": "i0e", "bessel_i1e": "i1e"}


@pytest.mark.parametrize("name,args", [
    ("igamma", (A, X)), ("igammac", (A, X)), ("betainc", (A, B, T)),
    ("zeta", (np.array([1.5, 2.0, 3.0, 7.5, 2.0, 4.0]),
              np.array([0.3, 1.0, 10.0, 2.0, 0.01, 5.0]))),
    ("polygamma", (np.array([0.0, 1.0, 2.0, 3.0, 1.0, 4.0]),
                   np.array([0.5, 2.0, 3.3, 1.0, 0.1, 9.0]))),
    ("bessel_i0e", (np.array([0.0, 0.5, -3.0, 19.9, 20.1, -50.0, 300.0]),)),
    ("bessel_i1e", (np.array([0.0, 0.5, -3.0, 19.9, 20.1, -50.0, 300.0]),)),
])
def test_special_values(name, args):
    sp = pytest.importorskip("scipy.special")
    ref = getattr(sp, SCIPY[name])(*args)
    close(getattr(lax, name)(*args), ref, 1e-12)
    args32 = [a.astype(np.float32) for a in args]
    out = getattr(lax, name)(*args32)
    assert out.dtype == np.float32
    close(out, ref, 2e-5)


def test_special_large_parameters():
    sp = pytest.importorskip("scipy.special")
    a, x = np.array([400.0, 900.0, 50.0]), np.array([380.0, 960.0, 49.0])
    close(lax.igamma(a, x), sp.gammainc(a, x), 1e-10)
    close(lax.betainc(a, a[::-1], np.array([0.3, 0.6, 0.95])),
          sp.betainc(a, a[::-1], np.array([0.3, 0.6, 0.95])), 1e-10)


def test_special_edges():
    close(lax.igamma(np.array([1.0, 1.0, 0.0, -1.0, 2.0]), np.array([0.0, np.inf, 1.0, 1.0, -1.0])),
          [0.0, 1.0, np.nan, np.nan, np.nan])
    close(lax.igammac(2.0, np.array([0.0, np.inf])), [1.0, 0.0])
    close(lax.betainc(2.0, 3.0, np.array([0.0, 1.0, 1.5, np.nan])), [0.0, 1.0, np.nan, np.nan])
    close(lax.zeta(np.array([1.0, 0.5, 2.0]), np.array([2.0, 2.0, -2.0])), [np.inf, np.nan, np.inf])
    close(lax.bessel_i0e(np.array([np.inf, -np.inf])), [0.0, 0.0])


def _dx(name, args):
    """The x-derivative of each special function, by its closed form."""
    sp = pytest.importorskip("scipy.special")
    if name in ("igamma", "igammac"):
        a, x = args
        d = np.exp(-x + (a - 1) * np.log(x) - sp.gammaln(a))
        return d if name == "igamma" else -d
    if name == "betainc":
        a, b, x = args
        return np.exp((a - 1) * np.log(x) + (b - 1) * np.log1p(-x) - sp.betaln(a, b))
    if name == "zeta":
        return -args[0] * sp.zeta(args[0] + 1, args[1])
    if name == "polygamma":
        return sp.polygamma(args[0].astype(int) + 1, args[1])
    x = args[0]
    i0, i1 = sp.i0e(x), sp.i1e(x)
    if name == "bessel_i0e":
        return i1 - np.sign(x) * i0
    return np.where(x == 0, 0.5, i0 - i1 * (np.sign(x) + 1 / np.where(x == 0, 1, x)))


@pytest.mark.parametrize("name,args", [
    ("igamma", (A, X)), ("igammac", (A, X)), ("betainc", (A, B, T)),
    ("zeta", (np.array([2.0, 3.5]), np.array([0.4, 3.0]))),
    ("polygamma", (np.array([0.0, 1.0, 2.0]), np.array([0.7, 4.0, 1.5]))),
    ("bessel_i0e", (np.array([0.0, 1.5, -25.0]),)),
    ("bessel_i1e", (np.array([0.0, 1.5, -25.0]),)),
])
def test_special_grad_x(name, args):
    g = mx.grad(lambda v: getattr(lax, name)(*args[:-1], v).sum())(args[-1])
    close(g, _dx(name, args), 1e-9)


@pytest.mark.slow
def test_special_grads_parameters():
    # d/da of igamma and d/da, d/db of betainc (JAX has the latter as unimplemented): central
    # differences
    mx.testing.check_grads(lambda a: lax.igamma(a, X[2:4]), (A[2:4],), order=1,
                           modes=("rev",), rtol=1e-5)
    mx.testing.check_grads(lambda a, b: lax.betainc(a, b, T[2:3]), (A[2:3], B[2:3]),
                           order=1, modes=("rev",), rtol=1e-5)


# --- jit and vmap through the compositions -------------------------------------------------
@pytest.mark.parametrize("name", ["cumlogsumexp", "top_k", "reduce_precision", "zeta",
                                  "bessel_i1e", "select_n", "population_count", "sort"])
def test_jit_vmap(name):
    x = RNG.normal(size=(3, 6)).astype(np.float32)
    f = {"cumlogsumexp": lambda v: lax.cumlogsumexp(v, reverse=True),
         "top_k": lambda v: lax.top_k(v, 2),
         "reduce_precision": lambda v: lax.reduce_precision(v * 1e3, 5, 4),
         "zeta": lambda v: lax.zeta(v * v + 1.5, 2.0),
         "bessel_i1e": lambda v: lax.bessel_i1e(v * 10),
         "select_n": lambda v: lax.select_n((v > 0).astype(np.int32) + (v > 1), v, -v, 2 * v),
         "population_count": lambda v: lax.population_count((v * 100).astype(np.int32)),
         "sort": lambda v: lax.sort((v, -v), num_keys=1)}[name]
    loop = [f(r) for r in x]
    ref = mx.tree.map(lambda *rs: np.stack([np.asarray(r) for r in rs]), *loop)
    def check(out, expected):
        mx.tree.map(lambda a, b: np.testing.assert_allclose(np.asarray(a), b, rtol=1e-6),
                    out, expected)
    check(mx.jit(f)(x[1]), loop[1])
    check(mx.vmap(f)(x), ref)
    check(mx.jit(mx.vmap(f))(x), ref)


# --- reduce, split, approx_*_k ---------------------------------------------------------------
def test_reduce_monoids_generic_and_pytrees():
    x = RNG.normal(size=(2, 3, 5))
    for fn, init, ref in ((lax.add, 0.0, x.sum((0, 2))), (lax.mul, 1.0, x.prod((0, 2))),
                          (lax.max, -np.inf, x.max((0, 2))),
                          (lax.min, 0.5, np.minimum(x.min((0, 2)), 0.5)),
                          (lax.add, 2.0, x.sum((0, 2)) + 2.0)):
        close(lax.reduce(x, init, fn, (0, 2)), ref)
    close(lax.reduce(x, -np.inf, mx.numpy.logaddexp, (1,)),  # a generic computation
          np.logaddexp.reduce(x, axis=1))

    def argmax_pair(a, b):  # a pytree reduction: (value, index) of the larger value
        take = a[0] >= b[0]
        return (lax.select(take, a[0], b[0]), lax.select(take, a[1], b[1]))
    idx = np.broadcast_to(np.arange(5, dtype=np.int32), x.shape)
    vals, ids = lax.reduce((x, idx), (-np.inf, np.int32(0)), argmax_pair, (2,))
    close(vals, x.max(2))
    same(ids, x.argmax(2).astype(np.int32))
    g = mx.grad(lambda v: lax.reduce(v, 1.0, lax.mul, (1,)).sum())(x)
    close(g, x.prod(1, keepdims=True) / x, 1e-10)


def test_bit_reductions_split_zeros_approx_k():
    i = RNG.integers(-50, 50, size=(3, 5)).astype(np.int32)
    b = i > 0
    for name, ref in (("reduce_and", np.bitwise_and), ("reduce_or", np.bitwise_or),
                      ("reduce_xor", np.bitwise_xor)):
        for v in (i, b):
            same(getattr(lax, name)(v, (1,)), ref.reduce(v, axis=1))
            same(getattr(lax, name)(v, (0, 1)), ref.reduce(v, axis=(0, 1)))
    same(lax.reduce_and(np.zeros((0, 2), np.int32), (0,)), np.full(2, -1, np.int32))
    x = RNG.normal(size=(4, 7))
    for a, r in zip(lax.split(x, (2, 0, 5), axis=1), jlax.split(x, (2, 0, 5), axis=1)):
        close(a, r)
    with pytest.raises(ValueError, match=r"split: .*f64\[4,7\]"):
        lax.split(x, (2, 2), axis=1)
    close(lax.zeros_like_array(x), np.zeros_like(x))
    for name in ("approx_max_k", "approx_min_k"):
        v, k = getattr(lax, name)(x, 3, reduction_dimension=0)
        jv, jk = getattr(jlax, name)(x, 3, reduction_dimension=0)
        close(v, jv)
        same(k, jk)


def test_errors_name_the_function_and_shapes():
    x = np.ones((3, 4), np.float32)
    cases = [(lambda: lax.batch_matmul(x, x), ValueError, r"batch_matmul: .*f32\[3,4\]"),
             (lambda: lax.dot(x, np.ones(3, np.float32)), TypeError, r"dot: .*f32\[3\]"),
             (lambda: lax.collapse(x, 2, 1), ValueError, r"collapse: .*f32\[3,4\]"),
             (lambda: lax.reduce_window(x, 0.0, lax.add, (2,), (1,), "VALID"), ValueError,
              r"reduce_window: .*f32\[3,4\]"),
             (lambda: lax.igamma(x, np.ones(5)), ValueError, r"igamma: .*f32\[3,4\]"),
             (lambda: lax.shift_left(x, x), TypeError, r"shift_left: .*f32\[3,4\]"),
             (lambda: lax.cumlogsumexp(x, axis=2), ValueError, r"cumlogsumexp: .*f32\[3,4\]"),
             (lambda: lax.index_in_dim(x, 5, 1), IndexError, r"index_in_dim: .*f32\[3,4\]"),
             (lambda: lax.associative_scan(lax.add, (x, np.ones(2))), ValueError,
              r"associative_scan: .*f32\[3,4\]")]
    for fn, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            fn()


def test_dot_general_precision_and_conv_dimension_numbers_object():
    a, b = RNG.normal(size=(2, 3, 4)), RNG.normal(size=(2, 4, 5))
    dims = (((2,), (1,)), ((0,), (0,)))
    close(lax.dot_general(a, b, dims, precision=lax.Precision.HIGHEST),
          np.einsum("bij,bjk->bik", a, b), 1e-12)
    x, w = RNG.normal(size=(2, 6, 5, 3)), RNG.normal(size=(3, 2, 3, 4))  # NHWC, HWIO
    dn = lax.conv_dimension_numbers(x.shape, w.shape, ("NHWC", "HWIO", "NHWC"))
    jdn = jlax.conv_dimension_numbers(x.shape, w.shape, ("NHWC", "HWIO", "NHWC"))
    out = lax.conv_general_dilated(x, w, (2, 1), "SAME", rhs_dilation=(1, 2),
                                   dimension_numbers=dn)
    ref = jlax.conv_general_dilated(x, w, (2, 1), "SAME", rhs_dilation=(1, 2),
                                    dimension_numbers=jdn)
    close(out, ref, 1e-10)
    close(lax.conv_general_dilated(x, w, (1, 1), "VALID",
                                   dimension_numbers=("NHWC", "HWIO", "NHWC")),
          jlax.conv_general_dilated(x, w, (1, 1), "VALID",
                                    dimension_numbers=("NHWC", "HWIO", "NHWC")), 1e-10)


def test_odds_and_ends():
    x = RNG.normal(size=(2, 3, 4))
    i0, i1 = np.array([0, 1, -1]), np.array([2, 5, 3])
    close(lax.index_take(x, (i0, i1), (0, 2)), jlax.index_take(x, (i0, i1), (0, 2)))
    a = np.array([-7, 2 ** 31 - 1, -2 ** 31, 5], np.int32)
    b = np.array([3, 2 ** 31 - 1, 7, -9], np.int32)
    for dt in (np.int32, np.uint32, np.int8):
        same(lax.mulhi(a.astype(dt), b.astype(dt)), jlax.mulhi(a.astype(dt), b.astype(dt)))
    a, z = np.array([0.5, 3.0, 12.0]), np.array([1.0, 2.0, 15.0])
    close(lax.igamma_grad_a(a, z), jax.jit(jlax.igamma_grad_a)(a, z), 1e-9)
    dn = ("NHWC", "HWIO", "NHWC")
    assert lax.conv_general_permutations(dn) == jlax.conv_general_permutations(dn)
    assert lax.broadcast_shapes((3, 1), (4,)) == jlax.broadcast_shapes((3, 1), (4,))
    assert lax.with_sharding_constraint(x, None) is x


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_conv_general_dilated_patches(layout):
    x = RNG.normal(size=(2, 3, 6, 5) if layout == "NCHW" else (2, 6, 5, 3))
    dn = None if layout == "NCHW" else ("NHWC", "OIHW", "NHWC")
    kw = dict(rhs_dilation=(2, 1), dimension_numbers=dn)
    close(lax.conv_general_dilated_patches(x, (2, 3), (1, 2), "SAME", **kw),
          jlax.conv_general_dilated_patches(x, (2, 3), (1, 2), "SAME", **kw))
    ct = RNG.normal(size=np.shape(jlax.conv_general_dilated_patches(x, (2, 3), (1, 2), "SAME",
                                                                      **kw)))
    g = mx.grad(lambda v: (lax.conv_general_dilated_patches(v, (2, 3), (1, 2), "SAME", **kw)
                           * ct).sum())(x)
    close(g, jax.jit(jax.grad(lambda v: (jlax.conv_general_dilated_patches(
        v, (2, 3), (1, 2), "SAME", **kw) * ct).sum()))(x))
