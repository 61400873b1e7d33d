"""mirax.numpy set operations, binning, nan order statistics, selection helpers, convolution,
polynomials and vectorizers: values against NumPy / jax.numpy (eager, and under jit with
size=), derivatives against JAX and finite differences."""
from __future__ import annotations

import contextlib
import warnings

import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax.core.errors import ConcretizationError



def _jax():
    """JAX as the oracle for derivatives (skipped where it is not installed)."""
    jax = pytest.importorskip("jax")
    return jax, jax.numpy


def _eq(a, b, rtol=1e-6, atol=1e-6):
    if isinstance(b, tuple) or isinstance(b, list) and isinstance(a, (tuple, list)):
        assert isinstance(a, (tuple, list)) and len(a) == len(b)
        for x, y in zip(a, b):
            _eq(x, y, rtol, atol)
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol,
                               atol=atol, equal_nan=True)


@contextlib.contextmanager
def _quiet():
    """NumPy warns on all-NaN slices; the values are what is tested."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


RNG = np.random.default_rng(0)
INTS = RNG.integers(0, 6, (3, 5)).astype(np.int32)
FLT = np.array([3., 1., np.nan, 2., 1., np.nan, 7.], np.float32)


# --- unique ---------------------------------------------------------------------------------
@pytest.mark.parametrize("flags", [(0, 0, 0), (1, 1, 1), (1, 0, 1), (0, 1, 0)])
def test_unique_matches_numpy(flags):
    kw = dict(return_index=bool(flags[0]), return_inverse=bool(flags[1]),
              return_counts=bool(flags[2]))
    _eq(mnp.unique(INTS, **kw), np.unique(INTS, **kw))


def test_unique_size_pads_as_jax():
    # jnp.unique(INTS, True, True, True, size=9): values padded with the smallest, indices
    # with its first position, counts with 0
    inv = [[4, 2, 2, 1, 1], [0, 0, 0, 1, 3], [2, 4, 2, 2, 4]]
    _eq(mnp.unique(INTS, True, True, True, size=9),
        ([0, 1, 3, 4, 5, 0, 0, 0, 0], [5, 3, 1, 9, 0, 5, 5, 5, 5], inv,
         [3, 3, 5, 1, 3, 0, 0, 0, 0]))
    _eq(mnp.unique(INTS, True, True, True, size=4),
        ([0, 1, 3, 4], [5, 3, 1, 9], inv, [3, 3, 5, 1]))
    _eq(mnp.unique(INTS, return_counts=True, size=7, fill_value=-1),
        ([0, 1, 3, 4, 5, -1, -1], [3, 3, 5, 1, 3, 0, 0]))


@pytest.mark.parametrize("equal_nan", [True, False])
def test_unique_nan(equal_nan):
    _eq(mnp.unique(FLT, True, True, True, equal_nan=equal_nan),
        np.unique(FLT, True, True, True, equal_nan=equal_nan))


def test_unique_axis():
    a = np.array([[1, 0, 1], [2, 3, 2], [1, 0, 1], [0, 9, 0]], np.int32)
    for axis in (0, 1, -1):
        _eq(mnp.unique(a, True, True, True, axis=axis), np.unique(a, True, True, True,
                                                                  axis=axis))


def test_unique_array_api_forms():
    got = mnp.unique_all(FLT)
    assert got._fields == ("values", "indices", "inverse_indices", "counts")
    _eq(tuple(got), ([1., 2., 3., 7., np.nan, np.nan], [1, 3, 0, 6, 2, 5],
                     [2, 0, 4, 1, 0, 5, 3], [2, 1, 1, 1, 1, 1]))   # NaNs distinct
    _eq(tuple(mnp.unique_counts(FLT)), (got.values, got.counts))
    _eq(tuple(mnp.unique_inverse(INTS)), np.unique(INTS, return_inverse=True))
    assert mnp.unique_inverse(INTS)._fields == ("values", "inverse_indices")
    _eq(mnp.unique_values(FLT), got.values)
    _eq(mnp.unique_values(INTS, size=6, fill_value=9), [0, 1, 3, 4, 5, 9])


def test_unique_jit_needs_size():
    with pytest.raises(ConcretizationError, match="unique.*size="):
        mx.jit(lambda x: mnp.unique(x))(INTS)
    g = mx.jit(lambda x: mnp.unique(x, return_counts=True, size=7, fill_value=0))
    _eq(g(INTS), ([0, 1, 3, 4, 5, 0, 0], [3, 3, 5, 1, 3, 0, 0]))
    with pytest.raises(ValueError, match="fill_value"):
        mnp.unique(np.zeros(0, np.float32), size=3)
    _eq(mnp.unique(np.zeros(0, np.float32), size=3, fill_value=2.), [2., 2., 2.])


def test_unique_values_differentiate():
    x = np.array([2., 1., 2., 5.], np.float32)
    g = mx.grad(lambda v: mnp.sum(mnp.unique(v, size=3) ** 2))(x)
    _eq(g, [4., 2., 0., 10.])     # jax.grad: the first occurrence gets the cotangent


# --- set operations -------------------------------------------------------------------------
A1 = np.array([5, 1, 3, 3, 9, 1, 4], np.int32)
A2 = np.array([3, 4, 4, 8, 1, 10], np.int32)
SET_OPS = ["union1d", "intersect1d", "setdiff1d", "setxor1d"]


def test_isin():
    for invert in (False, True):
        _eq(mnp.isin(INTS, A2, invert=invert), np.isin(INTS, A2, invert=invert))
    _eq(mnp.isin(A1, np.zeros(0, np.int32)), np.isin(A1, np.zeros(0, np.int32)))
    _eq(mx.jit(mnp.isin)(A1, A2), np.isin(A1, A2))


@pytest.mark.parametrize("name", SET_OPS)
def test_set_ops_eager(name):
    _eq(getattr(mnp, name)(A1, A2), getattr(np, name)(A1, A2))
    _eq(getattr(mnp, name)(A2, A1), getattr(np, name)(A2, A1))
    _eq(getattr(mnp, name)(A1.reshape(1, 7), A1), getattr(np, name)(A1.reshape(1, 7), A1))
    f = np.array([0.5, 2., 1.5, 0.5], np.float32)
    _eq(getattr(mnp, name)(f, A1), getattr(np, name)(f, A1))
    assert getattr(mnp, name)(f, A1).dtype == np.float32


# jnp.<name>(A1, A2, size=n) and jnp.<name>([1, 1], [1, 1], size=n) for n = 1, 3, 12
JAX_SIZED = {
    "union1d": ([1], [1, 3, 4], [1, 3, 4, 5, 8, 9, 10, 1, 1, 1, 1, 1], 1),
    "intersect1d": ([1], [1, 3, 4], [1, 3, 4] + [1] * 9, 1),
    "setdiff1d": ([5], [5, 9, 0], [5, 9] + [0] * 10, 0),
    "setxor1d": ([5], [5, 8, 9], [5, 8, 9, 10] + [5] * 8, 0),
}


@pytest.mark.parametrize("name", SET_OPS)
def test_set_ops_size_jit(name):
    for size, want in zip((1, 3, 12), JAX_SIZED[name][:3]):
        f = mx.jit(lambda a, b: getattr(mnp, name)(a, b, size=size))
        _eq(f(A1, A2), want)
        ones = np.array([1, 1], np.int32)
        _eq(f(ones, ones), [JAX_SIZED[name][3]] * size)
    ref = getattr(np, name)(A1, A2)
    g = mx.jit(lambda a, b: getattr(mnp, name)(a, b, size=9, fill_value=-7))
    _eq(g(A1, A2), np.concatenate([ref, np.full(9 - ref.size, -7)]))
    with pytest.raises(ConcretizationError, match=f"{name}.*size="):
        mx.jit(lambda a, b: getattr(mnp, name)(a, b))(A1, A2)


def test_set_ops_assume_unique():
    u1, u2 = np.array([7, 1, 3], np.int32), np.array([3, 9, 0, 1], np.int32)
    for name in ("intersect1d", "setdiff1d", "setxor1d"):
        _eq(getattr(mnp, name)(u1, u2, assume_unique=True),
            getattr(np, name)(u1, u2, assume_unique=True))
    _eq(mnp.setdiff1d(u1, u2, assume_unique=True, size=3), [7, 0, 0])


def test_intersect1d_indices():
    _eq(mnp.intersect1d(A1, A2, return_indices=True),
        np.intersect1d(A1, A2, return_indices=True))
    # jnp: indices padded with len(ar1) / len(ar2)
    _eq(mnp.intersect1d(A1, A2, return_indices=True, size=5),
        ([1, 3, 4, 1, 1], [1, 2, 6, 7, 7], [4, 0, 1, 6, 6]))
    _eq(mx.jit(lambda a, b: mnp.intersect1d(a, b, return_indices=True, size=1))(A1, A2),
        ([1], [1], [4]))


# --- counting and binning -------------------------------------------------------------------
def test_bincount():
    x = np.array([0, 1, 1, 4, 2, 1], np.int32)
    w = np.linspace(0, 1, 6).astype(np.float32)
    _eq(mnp.bincount(x), np.bincount(x))
    _eq(mnp.bincount(x, w, minlength=8), np.bincount(x, w, minlength=8))
    _eq(mnp.bincount(np.array([-1, 7, 1], np.int32), length=4), [1, 1, 0, 0])  # as jnp
    assert mnp.bincount(x).dtype == np.int32
    _eq(mx.jit(lambda v: mnp.bincount(v, length=6))(x), np.bincount(x, minlength=6))
    with pytest.raises(ConcretizationError, match="length="):
        mx.jit(mnp.bincount)(x)
    with pytest.raises(TypeError, match="bincount"):
        mnp.bincount(w)
    g = mx.grad(lambda ww: mnp.sum(mnp.bincount(x, ww) ** 2))(w)
    _eq(g, 2 * np.bincount(x, w)[x], rtol=1e-6)


def test_digitize():
    x = np.array([-1., 0., 0.5, 1., 2.5, 3., 9.], np.float32)
    for bins in ([0., 1., 2., 3.], [3., 2., 1., 0.]):
        for right in (False, True):
            _eq(mnp.digitize(x, np.array(bins, np.float32), right=right),
                np.digitize(x, bins, right=right))
    _eq(mnp.digitize(x, np.zeros(0, np.float32)), np.zeros(7))


def test_histogram():
    x = RNG.normal(size=50).astype(np.float32)
    w = RNG.uniform(size=50).astype(np.float32)
    for kw in [dict(), dict(bins=5, range=(-1, 1)), dict(bins=np.array([-2, 0, .5, 3.])),
               dict(bins=4, weights=w, density=True), dict(bins=7, density=True)]:
        got, ge = mnp.histogram(x, **kw)
        want, we = np.histogram(x, **kw)
        _eq(ge, we, rtol=1e-5)
        _eq(got, want, rtol=1e-5)
    _eq(mnp.histogram_bin_edges(x, 6), np.histogram_bin_edges(x, 6), rtol=1e-5)
    _eq(mnp.histogram(np.ones(4, np.float32), 2)[1], np.histogram(np.ones(4), 2)[1])
    f = mx.jit(lambda v: mnp.histogram(v, bins=8, range=(-2, 2))[0])
    _eq(f(x), np.histogram(x, bins=8, range=(-2, 2))[0])


def test_histogram2d_dd():
    x, y = RNG.normal(size=(2, 40)).astype(np.float32)
    w = RNG.uniform(size=40).astype(np.float32)
    for kw in [dict(), dict(bins=3), dict(bins=[2, 4], range=[(-1, 1), (-2, 2)], weights=w),
               dict(bins=np.array([-1., 0., 1.]), density=True)]:
        got = mnp.histogram2d(x, y, **kw)
        _eq(got, np.histogram2d(x, y, **kw), rtol=1e-5)
    s = RNG.normal(size=(30, 3)).astype(np.float32)
    h, e = mnp.histogramdd(s, bins=(2, 3, 4), density=True)
    hn, en = np.histogramdd(s, bins=(2, 3, 4), density=True)
    _eq(h, hn, rtol=1e-4)
    _eq(e, en, rtol=1e-5)


def test_interp_values_and_grad():
    xp = np.array([0., 1., 2.5, 4.], np.float32)
    fp = np.array([1., -1., 3., 0.], np.float32)
    x = np.array([-1., 0., 0.3, 1., 2., 3.9, 4., 5.], np.float32)
    _eq(mnp.interp(x, xp, fp), np.interp(x, xp, fp))
    _eq(mnp.interp(x, xp, fp, left=-9., right=9.), np.interp(x, xp, fp, left=-9., right=9.))
    _eq(mnp.interp(x, xp, fp, period=3.), np.interp(x, xp, fp, period=3.), rtol=1e-5)
    jax, jnp = _jax()
    g = mx.grad(lambda *a: mnp.sum(mnp.interp(*a) ** 2), (0, 1, 2))(x, xp, fp)
    gj = jax.jit(jax.grad(lambda *a: jnp.sum(jnp.interp(*a) ** 2), (0, 1, 2)))(x, xp, fp)
    _eq(g, gj, rtol=1e-5)
    _eq(mx.jit(mnp.interp)(x, xp, fp), np.interp(x, xp, fp))


# --- nan statistics -------------------------------------------------------------------------
NANS = np.array([[1., np.nan, 3., -2.], [np.nan, np.nan, np.nan, np.nan],
                 [4., 0.5, np.nan, 2.]], np.float32)


def test_nanargmax_nanargmin():
    for name in ("nanargmax", "nanargmin"):
        for axis in (None, 0):
            _eq(getattr(mnp, name)(NANS, axis=axis), getattr(np, name)(NANS, axis=axis))
        _eq(getattr(mnp, name)(INTS, axis=0), getattr(np, name)(INTS, axis=0))
    # an all-NaN slice gives -1 (jnp; NumPy raises)
    _eq(mnp.nanargmax(NANS, axis=1), [2, -1, 0])
    _eq(mnp.nanargmin(NANS, axis=1, keepdims=True), [[3], [-1], [1]])


@pytest.mark.parametrize("method", ["linear", "lower", "higher", "midpoint"])
def test_nanquantile(method):
    x = RNG.normal(size=(4, 7)).astype(np.float32)
    x[RNG.uniform(size=x.shape) < 0.3] = np.nan
    x[3] = np.nan
    for q in (0.3, [0.1, 0.5, 0.9]):
        for axis in (None, 1, 0, (0, 1)):
            with _quiet():
                want = np.nanquantile(x, q, axis=axis, method=method)
            _eq(mnp.nanquantile(x, q, axis=axis, method=method), want, rtol=1e-5)
    with _quiet():
        _eq(mnp.nanquantile(x, 0.25, axis=1, keepdims=True, method=method),
            np.nanquantile(x, 0.25, axis=1, keepdims=True, method=method), rtol=1e-5)


def test_nanquantile_nearest():
    x = np.array([[1., 2., 3., 4., np.nan], [5., 1., np.nan, np.nan, np.nan]], np.float32)
    _eq(mnp.nanquantile(x, 0.25, axis=1, method="nearest"), [2., 1.])
    _eq(mnp.nanquantile(x, 0.5, axis=1, method="nearest"), [2., 1.])  # ties go down (jnp)


def test_nanmedian_nanpercentile_and_grads():
    with _quiet():
        _eq(mnp.nanmedian(NANS, axis=1), np.nanmedian(NANS, axis=1))
        _eq(mnp.nanmedian(NANS), np.nanmedian(NANS))
        _eq(mnp.nanpercentile(NANS, [10, 75], axis=1), np.nanpercentile(NANS, [10, 75], axis=1),
            rtol=1e-5)
    jax, jnp = _jax()
    x = np.array([[1., np.nan, 3., -2., 0.7], [4., 0.5, np.nan, 2., 8.]], np.float32)
    f = lambda v: mnp.sum(mnp.nanquantile(v, np.array([0.2, 0.5]), axis=1) ** 2)  # noqa: E731
    fj = lambda v: jnp.sum(jnp.nanquantile(v, jnp.array([0.2, 0.5]), axis=1) ** 2)  # noqa: E731
    _eq(mx.grad(f)(x), jax.jit(jax.grad(fj))(x), rtol=1e-5)
    _eq(mx.grad(lambda v: mnp.nanmedian(v))(x), jax.jit(jax.grad(jnp.nanmedian))(x))
    q = mx.jit(lambda v, qq: mnp.nanquantile(v, qq, axis=1))(x, np.float32(0.4))
    _eq(q, np.nanquantile(x, 0.4, axis=1), rtol=1e-5)
    with pytest.raises(ValueError, match="nanquantile"):
        mnp.nanquantile(x, 1.5)


def test_nancumsum_nancumprod():
    for name in ("nancumsum", "nancumprod"):
        _eq(getattr(mnp, name)(NANS, axis=1), getattr(np, name)(NANS, axis=1))
        _eq(getattr(mnp, name)(NANS), getattr(np, name)(NANS))
    jax, jnp = _jax()
    x = np.array([1.5, np.nan, -2., 0.5], np.float32)
    _eq(mx.grad(lambda v: mnp.sum(mnp.nancumprod(v)))(x),
        jax.jit(jax.grad(lambda v: jnp.sum(jnp.nancumprod(v))))(x))


# --- selection ------------------------------------------------------------------------------
def test_select_and_grad():
    jax, jnp = _jax()
    x = np.linspace(-2, 2, 8).astype(np.float32)
    conds = lambda v: [v < -1, v < 1]  # noqa: E731
    _eq(mnp.select(conds(x), [x ** 2, -x], 5.), np.select(conds(x), [x ** 2, -x], 5.))
    f = lambda v: mnp.sum(mnp.select(conds(v), [v ** 2, mnp.sqrt(mnp.abs(v))], 1.))  # noqa
    fj = lambda v: jnp.sum(jnp.select(conds(v), [v ** 2, jnp.sqrt(jnp.abs(v))], 1.))  # noqa
    _eq(mx.grad(f)(x), jax.jit(jax.grad(fj))(x), rtol=1e-5)
    with pytest.raises(ValueError, match="select"):
        mnp.select([x > 0], [x, x])
    with pytest.raises(TypeError, match="select"):
        mnp.select([x], [x])


def test_piecewise_and_grad():
    x = np.linspace(-2, 2, 9).astype(np.float32)
    fl = [lambda v: v ** 2, lambda v: -v, 7.]
    _eq(mnp.piecewise(x, [x < 0, x > 1], fl), np.piecewise(x, [x < 0, x > 1], fl))
    _eq(mnp.piecewise(x, [x < 0, x > -1], fl[:2]), np.piecewise(x, [x < 0, x > -1], fl[:2]))
    _eq(mnp.piecewise(x, x > 0, [lambda v: v * 3, 1.]),
        np.piecewise(x, x > 0, [lambda v: v * 3, 1.]))
    jax, jnp = _jax()
    g = mx.grad(lambda v: mnp.sum(mnp.piecewise(v, [v < 0, v > 1], [mnp.sin, mnp.exp, 1.])))
    gj = jax.jit(jax.grad(lambda v: jnp.sum(jnp.piecewise(v, [v < 0, v > 1],
                                                          [jnp.sin, jnp.exp, 1.]))))
    _eq(g(x), gj(x), rtol=1e-5)
    jf = mx.jit(lambda v: mnp.piecewise(v, [v < 0], [lambda u: u * 2, lambda u: u - 1]))
    _eq(jf(x), np.piecewise(x, [x < 0], [lambda u: u * 2, lambda u: u - 1]))


def test_choose():
    choices = [np.arange(4) * 1., np.arange(4) * 10., np.full(4, -1.)]
    a = np.array([0, 2, 1, 1], np.int32)
    _eq(mnp.choose(a, choices), np.choose(a, choices))
    b = np.array([[3], [-1]], np.int32)
    for mode in ("clip", "wrap"):
        _eq(mnp.choose(b, choices, mode=mode), np.choose(b, choices, mode=mode))
        _eq(mx.jit(lambda i: mnp.choose(i, choices, mode=mode))(b),
            np.choose(b, choices, mode=mode))
    with pytest.raises(ValueError, match="choose"):
        mnp.choose(b, choices)
    with pytest.raises(ConcretizationError, match="clip"):
        mx.jit(lambda i: mnp.choose(i, choices))(a)
    c = [mx.asarray(v) for v in choices]
    g = mx.grad(lambda ch: mnp.sum(mnp.choose(a, ch) ** 2))(c)
    _eq(g, [np.where(a == k, 2 * ch, 0) for k, ch in enumerate(choices)])


def test_extract_place_put():
    x = np.arange(12.).reshape(3, 4).astype(np.float32)
    cond = (x % 3) == 0
    _eq(mnp.extract(cond, x), np.extract(cond, x))
    _eq(mx.jit(lambda cc, v: mnp.extract(cc, v, size=6, fill_value=-1))(cond, x),
        [0., 3., 6., 9., -1., -1.])
    with pytest.raises(ConcretizationError, match="size="):
        mx.jit(lambda cc, v: mnp.extract(cc, v))(cond, x)
    want = x.copy()
    np.place(want, cond, [10, 20])
    _eq(mnp.place(x, cond, [10, 20], inplace=False), want)
    _eq(mx.jit(lambda v, cc: mnp.place(v, cc, np.array([10., 20.]), inplace=False))(x, cond),
        want)
    with pytest.raises(ValueError, match="inplace=False"):
        mnp.place(x, cond, [1.])
    # jnp.put(x, [0, -1, 5, 30], [7., 8.], mode=..., inplace=False)
    for mode, want in [(None, [7, 1, 2, 3, 4, 7, 6, 7, 8, 9, 10, 8]),
                       ("clip", [8, 1, 2, 3, 4, 7, 6, 7, 8, 9, 10, 8]),
                       ("wrap", [7, 1, 2, 3, 4, 7, 8, 7, 8, 9, 10, 8])]:
        got = mnp.put(x, np.array([0, -1, 5, 30], np.int32), np.array([7., 8.]), mode=mode,
                      inplace=False)
        _eq(got, np.reshape(want, (3, 4)))
    with pytest.raises(ValueError, match="inplace=False"):
        mnp.put(x, [0], [1.])
    g = mx.grad(lambda v: mnp.sum(mnp.put(v, np.array([1, 2]), np.array([0., 0.]),
                                          inplace=False) * v))(x)
    _eq(g, np.where(np.isin(np.arange(12), [1, 2]), 0, 2 * x.ravel()).reshape(3, 4))


@pytest.mark.parametrize("case", [
    (1, [9, 8], None), (-1, 5, None), ([1, 3, 1], [7, 8, 9], None), (slice(0, 3), 0, None),
    (1, [9, 8, 7], 1), (1, [[9], [8], [7]], 1), ([0, 2], [[5, 6, 7, 8]], 0), (2, 5, 0),
    (np.array([4, 0]), 0, 1)])
def test_insert(case):
    obj, values, axis = case
    a = np.arange(12).reshape(3, 4).astype(np.float32)
    _eq(mnp.insert(a, obj, values, axis=axis), np.insert(a, obj, values, axis=axis))


def test_insert_delete_errors_and_grad():
    a = np.arange(12).reshape(3, 4).astype(np.float32)
    for obj, axis in [(1, None), ([0, 2], 1), (slice(1, None, 2), 0), (-1, 1),
                      (np.array([True, False, True, False]), 1)]:
        _eq(mnp.delete(a, obj, axis=axis), np.delete(a, obj, axis=axis))
    with pytest.raises(IndexError, match="delete"):
        mnp.delete(a, 5, axis=1)
    with pytest.raises(IndexError, match="insert"):
        mnp.insert(a, 9, 1., axis=1)
    with pytest.raises(ConcretizationError, match="static"):
        mx.jit(lambda i: mnp.delete(a, i))(np.int32(1))
    w = np.array([[1.], [2.], [-3.]], np.float32)
    g = mx.grad(lambda v, u: mnp.sum(mnp.insert(v, [1, 2], u, axis=1) ** 2), (0, 1))(a, w)
    _eq(g, (2 * a, 4 * w))     # u is inserted twice in each row


def test_unravel_ravel_multi_index():
    idx = np.array([[0, 5, 11], [-1, 3, 40]], np.int32)
    # jnp clips out-of-range flat indices to [-size, size - 1]; negatives wrap
    _eq(mnp.unravel_index(idx, (3, 4)), ([[0, 1, 2], [2, 0, 2]], [[0, 1, 3], [3, 3, 3]]))
    _eq(mnp.unravel_index(7, (2, 2, 2)), np.unravel_index(7, (2, 2, 2)))
    coords = (np.array([0, 2, 1], np.int32), np.array([3, 0, 1], np.int32))
    for order in ("C", "F"):
        _eq(mnp.ravel_multi_index(coords, (3, 4), order=order),
            np.ravel_multi_index(coords, (3, 4), order=order))
    bad = (np.array([0, 5], np.int32), np.array([-1, 2], np.int32))
    for mode in ("clip", "wrap"):
        _eq(mnp.ravel_multi_index(bad, (3, 4), mode=mode),
            np.ravel_multi_index(bad, (3, 4), mode=mode))
        _eq(mx.jit(lambda i, j: mnp.ravel_multi_index((i, j), (3, 4), mode=mode))(*bad),
            np.ravel_multi_index(bad, (3, 4), mode=mode))
    with pytest.raises(ValueError, match="ravel_multi_index"):
        mnp.ravel_multi_index(bad, (3, 4))
    with pytest.raises(ConcretizationError, match="clip"):
        mx.jit(lambda i, j: mnp.ravel_multi_index((i, j), (3, 4)))(*coords)


def test_lexsort_partition():
    k1 = np.array([1, 1, 0, 0, 2, 1], np.int32)
    k2 = np.array([3., 1., 2., 2., 0., 1.], np.float32)
    _eq(mnp.lexsort((k2, k1)), np.lexsort((k2, k1)))
    _eq(mnp.lexsort(np.stack([k1, k2.astype(np.int32)])),
        np.lexsort(np.stack([k1, k2.astype(np.int32)])))
    m2 = RNG.integers(0, 3, (2, 3, 5))
    _eq(mnp.lexsort((m2[0], m2[1]), axis=0), np.lexsort((m2[0], m2[1]), axis=0))
    x = RNG.normal(size=(3, 8)).astype(np.float32)
    for kth in (0, 3, -1):
        p = np.asarray(mnp.partition(x, kth, axis=1))
        ref = np.partition(x, kth, axis=1)
        _eq(p[:, kth], ref[:, kth])
        assert (p[:, :kth % 8] <= p[:, kth % 8:kth % 8 + 1]).all()
        assert (p[:, kth % 8 + 1:] >= p[:, kth % 8:kth % 8 + 1]).all()
        i = np.asarray(mnp.argpartition(x, kth, axis=1))
        _eq(np.take_along_axis(x, i, 1), p)
    with pytest.raises(ValueError, match="partition"):
        mnp.partition(x, 8)


# --- convolution, polynomials ---------------------------------------------------------------
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve_correlate(mode):
    a = RNG.normal(size=7).astype(np.float32)
    v = RNG.normal(size=3).astype(np.float32)
    for x, y in ((a, v), (v, a), (a, a[:4])):
        _eq(mnp.convolve(x, y, mode), np.convolve(x, y, mode), rtol=1e-5, atol=1e-5)
        _eq(mnp.correlate(x, y, mode), np.correlate(x, y, mode), rtol=1e-5, atol=1e-5)
    ints = np.array([1, 2, 3], np.int32)
    got = mnp.convolve(ints, ints, mode)
    _eq(got, np.convolve(ints, ints, mode))
    assert got.dtype == np.float32     # jnp promotes to inexact
    for name in ("convolve", "correlate"):
        mx.testing.check_grads(lambda p, q: getattr(mnp, name)(p, q, mode),
                               (a[:5].astype(np.float64), v.astype(np.float64)), order=1)
    with pytest.raises(ValueError, match="convolve"):
        mnp.convolve(a.reshape(7, 1), v)


def test_polynomials():
    p = np.array([2., -1., 0.5, 3.], np.float32)
    q = np.array([1., 4.], np.float32)
    x = np.linspace(-2, 2, 5).astype(np.float32)
    _eq(mnp.polyval(p, x), np.polyval(p, x), rtol=1e-5)
    _eq(mnp.polyadd(p, q), np.polyadd(p, q))
    _eq(mnp.polyadd(q, p), np.polyadd(q, p))
    _eq(mnp.polysub(q, p), np.polysub(q, p))
    _eq(mnp.polymul(p, q), np.polymul(p, q), rtol=1e-5)
    _eq(mnp.polymul(np.array([0., 0., 1., 2.]), q, trim_leading_zeros=True),
        np.polymul([1., 2.], q))
    for mm in (0, 1, 2, 5):
        _eq(mnp.polyder(p, mm), np.polyder(p, mm))
    for mm, k in ((1, None), (2, None), (1, 3.), (3, [1., 2., 3.])):
        _eq(mnp.polyint(p, mm, k), np.polyint(p, mm, k if k is not None else 0), rtol=1e-5)
    mx.testing.check_grads(lambda c, v: mnp.polyval(c, v), (p.astype(np.float64),
                                                             x.astype(np.float64)))


def test_polyfit():
    x = np.linspace(-1, 1, 12)
    y = 0.5 * x ** 3 - x + 0.25 + 0.01 * np.sin(7 * x)
    _eq(mnp.polyfit(x, y, 3), np.polyfit(x, y, 3), rtol=1e-8, atol=1e-10)
    w = np.linspace(0.5, 2, 12)
    _eq(mnp.polyfit(x, y, 2, w=w), np.polyfit(x, y, 2, w=w), rtol=1e-8, atol=1e-10)
    y2 = np.stack([y, 2 * y + 1], 1)
    _eq(mnp.polyfit(x, y2, 2), np.polyfit(x, y2, 2), rtol=1e-8, atol=1e-10)
    c, v = mnp.polyfit(x, y, 2, cov=True)
    cn, vn = np.polyfit(x, y, 2, cov=True)
    _eq(c, cn, rtol=1e-8)
    _eq(v, vn, rtol=1e-6, atol=1e-12)
    _eq(mnp.polyfit(x, y, 3, full=True)[0], np.polyfit(x, y, 3, full=True)[0], rtol=1e-8)
    mx.testing.check_grads(lambda yy: mnp.polyfit(x, yy, 2), (y,), order=1)


# --- vectorizers ----------------------------------------------------------------------------
def test_apply_along_and_over_axes():
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    f = lambda r: r[0] * r.sum() + r[-1]  # noqa: E731
    for axis in (0, 1, 2, -1):
        _eq(mnp.apply_along_axis(f, axis, x), np.apply_along_axis(f, axis, x), rtol=1e-5)
    g = lambda r: mnp.stack([r.max(), r.min()])  # noqa: E731
    _eq(mnp.apply_along_axis(g, 1, x), np.apply_along_axis(lambda r: np.stack(
        [r.max(), r.min()]), 1, x))
    _eq(mnp.apply_over_axes(mnp.sum, x, [0, 2]), np.apply_over_axes(np.sum, x, [0, 2]),
        rtol=1e-5)
    _eq(mnp.apply_over_axes(lambda v, ax: mnp.sum(v, ax, keepdims=True), x, 1),
        np.apply_over_axes(np.sum, x, 1), rtol=1e-5)


def test_vectorize():
    def f(a, b, scale=1.0):
        return mnp.where(a > b, (a - b) * scale, b - a)

    x = np.array([[1., 5.], [3., 0.]], np.float32)
    y = np.array([2., 2.], np.float32)
    v = mnp.vectorize(f, excluded={"scale"})
    _eq(v(x, y, scale=3.), np.vectorize(f, excluded={"scale"})(x, y, scale=3.))
    vd = mnp.vectorize(lambda a, n: a * n, excluded={1})
    _eq(vd(x, 4), x * 4)
    inner = mnp.vectorize(lambda a, b: mnp.sum(a * b), signature="(n),(n)->()")
    m1, m2 = RNG.normal(size=(3, 4)).astype(np.float32), RNG.normal(size=(4,)).astype(
        np.float32)
    _eq(inner(m1, m2), m1 @ m2, rtol=1e-5)
    outer = mnp.vectorize(lambda a: (mnp.sum(a), a * 2), signature="(n)->(),(n)")
    s, d = outer(m1)
    _eq(s, m1.sum(1), rtol=1e-5)
    _eq(d, m1 * 2)
    with pytest.raises(ValueError, match="vectorize"):
        inner(m1, np.ones(3, np.float32))
    with pytest.raises(ValueError, match="signature"):
        mnp.vectorize(lambda a: a, signature="(n->()")(m1)
    jv = mx.jit(mnp.vectorize(lambda a, b: mnp.where(a > b, a, b * 2)))
    _eq(jv(x, y), np.where(x > y, x, y * 2))


def test_piecewise_condition_forms():
    x = np.array([-1., 2.], np.float32)
    for cl, fl in [([True, False], [5., 1.]), (np.stack([x > 0, x < 0]), [1., 2., 3.]),
                   (x > 0, [lambda v: v * 3, 1.])]:
        _eq(mnp.piecewise(x, cl, fl), np.piecewise(x, cl, fl))
    x0 = np.float32(2.)
    _eq(mnp.piecewise(x0, [x0 > 1, x0 > 3], [1., 2., 3.]),
        np.piecewise(x0, [x0 > 1, x0 > 3], [1., 2., 3.]))


def test_transforms_compose():
    x = np.array([[3, 1, 3, 2], [5, 5, 0, 1]], np.int32)
    _eq(mx.vmap(lambda r: mnp.unique(r, size=4, fill_value=-1))(x),
        [[1, 2, 3, -1], [0, 1, 5, -1]])
    _eq(mx.vmap(lambda r: mnp.setdiff1d(r, np.array([1, 5]), size=3))(x), [[2, 3, 0], [0] * 3])
    f = RNG.normal(size=(3, 20)).astype(np.float32)
    _eq(mx.vmap(lambda v: mnp.histogram(v, 4)[0])(f), [np.histogram(r, 4)[0] for r in f])
    _eq(mx.jit(lambda v: mnp.histogram(v, 4)[0])(f[0]), np.histogram(f[0], 4)[0])
    _eq(mx.vmap(mnp.nanmedian)(f), np.median(f, 1))
    h = mx.hessian(lambda v: mnp.sum(mnp.interp(v, np.array([0., 1., 2.]),
                                                np.array([1., 3., 2.])) ** 2))
    _eq(h(np.array([0.5, 1.5], np.float32)), [[8., 0.], [0., 2.]])
    _eq(mx.vmap(lambda v: mnp.lexsort((v, -v)))(f[:, :5]),
        [np.lexsort((r, -r)) for r in f[:, :5]])


def test_bad_input_messages():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"bincount.*i32\[2,3\]"):
        mnp.bincount(np.zeros((2, 3), np.int32))
    with pytest.raises(ValueError, match=r"digitize.*f32\[2,3\]"):
        mnp.digitize(np.ones(3), x)
    with pytest.raises(ValueError, match=r"interp.*f32\[2\].*f32\[3\]"):
        mnp.interp(1., np.ones(2, np.float32), np.ones(3, np.float32))
    with pytest.raises(ValueError, match=r"histogramdd.*f32\[3\]"):
        mnp.histogramdd(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="unique"):
        mnp.unique(x, axis=2)
    with pytest.raises(ValueError, match=r"polyval.*f32\[2,3\]"):
        mnp.polyval(x, 1.)
    with pytest.raises(ValueError, match="piecewise"):
        mnp.piecewise(x, [x > 0], [1., 2., 3.])
    with pytest.raises(ValueError, match=r"place.*f32\[2,3\]"):
        mnp.place(x, np.ones(4, bool), [1.], inplace=False)
