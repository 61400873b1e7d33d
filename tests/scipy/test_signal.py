"""mirax.scipy.signal against scipy.signal (every mode, both input orders, 1-3 dims) and,
in the slow run, jax.scipy.signal; derivatives against finite differences."""
import itertools

import numpy as np
import pytest
import scipy.signal as ss

import mirax as mx
import mirax.scipy.signal as ms

RNG = np.random.default_rng(0)
SHAPES = [((7,), (3,)), ((3,), (7,)), ((6,), (6,)), ((1,), (4,)), ((5, 6), (2, 3)),
          ((2, 3), (5, 6)), ((4, 4), (4, 4)), ((3, 5, 4), (2, 2, 3))]
MODES = ("full", "same", "valid")


def _close(got, want, what):
    got = np.asarray(got)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    # sums of at most ~60 products of O(1) terms
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=what)


@pytest.mark.parametrize("s1,s2", SHAPES, ids=[f"{a}-{b}" for a, b in SHAPES])
def test_convolve_correlate_vs_scipy(s1, s2):
    a, b = RNG.normal(size=s1), RNG.normal(size=s2)
    for mode in MODES:
        for name in ("convolve", "correlate", "fftconvolve"):
            _close(getattr(ms, name)(a, b, mode), getattr(ss, name)(a, b, mode), name + mode)
        if len(s1) == 2:
            for name in ("convolve2d", "correlate2d"):
                _close(getattr(ms, name)(a, b, mode), getattr(ss, name)(a, b, mode),
                       name + mode)


def test_method_dtype_and_errors():
    a, b = RNG.normal(size=6).astype(np.float32), RNG.normal(size=3).astype(np.float32)
    for method in ("auto", "direct", "fft"):
        got = ms.convolve(a, b, method=method)
        assert np.asarray(got).dtype == np.float32
        np.testing.assert_allclose(np.asarray(got), ss.convolve(a, b), rtol=1e-5, atol=1e-6)
    assert np.asarray(ms.convolve(np.arange(4), np.arange(3))).dtype == np.float32  # as JAX
    with pytest.raises(ValueError):
        ms.convolve(a, b, mode="circular")
    with pytest.raises(ValueError):
        ms.convolve(np.ones((3, 2)), np.ones((2, 3)))   # neither is smaller in every dim
    with pytest.raises(ValueError):
        ms.convolve2d(a, b)
    with pytest.raises(NotImplementedError):
        ms.convolve2d(np.ones((3, 3)), np.ones((2, 2)), boundary="wrap")


def test_fftconvolve_axes_and_detrend_vs_scipy():
    a, b = RNG.normal(size=(3, 8)), RNG.normal(size=(3, 4))
    for mode in MODES:
        _close(ms.fftconvolve(a, b, mode, axes=1), ss.fftconvolve(a, b, mode, axes=1),
               f"axes {mode}")
    x = RNG.normal(size=(3, 20))
    _close(ms.detrend(x), ss.detrend(x), "linear")
    _close(ms.detrend(x, bp=[5, 12]), ss.detrend(x, bp=[5, 12]), "breakpoints")
    _close(ms.detrend(x, axis=0, type="constant"), ss.detrend(x, axis=0, type="constant"),
           "constant")


def test_convolution_derivatives():
    a, b = RNG.normal(size=(5, 4)), RNG.normal(size=(2, 3))
    for mode, name in itertools.product(MODES, ("convolve2d", "correlate2d")):
        mx.testing.check_grads(lambda a, b: getattr(ms, name)(a, b, mode), (a, b), order=1,
                               modes=("rev",))
    mx.testing.check_grads(lambda x, y: ms.correlate(x, y, "same"), (a[0], b[0]), order=2)


@pytest.mark.slow
def test_vs_jax():
    import jax.scipy.signal as jss
    for s1, s2 in SHAPES[:6]:
        a = RNG.normal(size=s1).astype(np.float32)
        b = RNG.normal(size=s2).astype(np.float32)
        for mode in MODES:
            for name in ("convolve", "correlate"):
                np.testing.assert_allclose(np.asarray(getattr(ms, name)(a, b, mode)),
                                           np.asarray(getattr(jss, name)(a, b, mode)),
                                           rtol=1e-5, atol=1e-5)
            if len(s1) == 2:
                for name in ("convolve2d", "correlate2d"):
                    np.testing.assert_allclose(np.asarray(getattr(ms, name)(a, b, mode)),
                                               np.asarray(getattr(jss, name)(a, b, mode)),
                                               rtol=1e-5, atol=1e-5)
