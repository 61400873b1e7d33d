"""The special functions added for mirax.scipy.stats, against scipy.special (float64, into
the tails) and their derivatives against finite differences."""
import numpy as np
import pytest
import scipy.special as ss

import mirax as mx
import mirax.scipy.special as ms

X = np.array([-40.0, -25.0, -12.0, -5.0, -1.0, 0.0, 0.5, 3.0, 6.0, 9.0, 30.0])
P = np.array([0.0, 1e-300, 1e-30, 1e-10, 1e-3, 0.1, 0.135, 0.2, 0.5, 0.8, 0.865, 0.999,
              1 - 1e-12, 1.0])


def _close(got, want, rtol, atol=0.0, what=""):
    got = np.asarray(got)
    assert got.shape == np.shape(want), what
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def test_normal_functions_vs_scipy():
    # rounding x / sqrt(2) moves erfc's tail by ~x^2 eps relative (x = 25: ~7e-14)
    _close(ms.ndtr(X), ss.ndtr(X), 5e-13, 0, "ndtr")
    # the tail series (3 terms) is exact to ~1e-12 at -25; the middle is log(ndtr)
    _close(ms.log_ndtr(X), ss.log_ndtr(X), 1e-11, 0, "log_ndtr")
    _close(ms.ndtri(P), ss.ndtri(P), 1e-13, 0, "ndtri")
    assert np.isnan(np.asarray(ms.ndtri(np.array([-0.1, 1.1, np.nan])))).all()
    x32 = X.astype(np.float32)
    assert np.asarray(ms.log_ndtr(x32)).dtype == np.float32
    # float32: the tail moves by ~x^2 eps32 relative (x = 6: ~2e-6)
    _close(ms.log_ndtr(x32)[:-2], ss.log_ndtr(x32[:-2].astype(np.float64)), 5e-6, 0, "f32")


def test_gamma_family_vs_scipy():
    a = np.array([0.3, 1.0, 2.5, 7.0, 20.0])
    x = np.array([0.1, 1.0, 2.0, 9.0, 25.0])
    _close(ms.gammainc(a, x), ss.gammainc(a, x), 1e-10, 1e-14, "gammainc")
    _close(ms.gammaincc(a, x), ss.gammaincc(a, x), 1e-10, 1e-14, "gammaincc")
    _close(ms.betainc(a, a[::-1], x / 30), ss.betainc(a, a[::-1], x / 30), 1e-10, 1e-14,
           "betainc")
    _close(ms.betaln(a, x), ss.betaln(a, x), 1e-12, 1e-14, "betaln")
    g = np.array([-2.5, -1.5, -0.5, 0.5, 3.0, 10.5])
    _close(ms.gamma(g), ss.gamma(g), 1e-12, 0, "gamma")
    _close(ms.gammasgn(g), ss.gammasgn(g), 0, 0, "gammasgn")
    _close(ms.multigammaln(np.array([2.5, 4.0]), 3), ss.multigammaln(np.array([2.5, 4.0]), 3),
           1e-12, 0, "multigammaln")
    _close(ms.polygamma(2, a), ss.polygamma(2, a), 1e-10, 0, "polygamma")
    _close(ms.zeta(np.array([2.0, 3.5])), ss.zeta(np.array([2.0, 3.5])), 1e-12, 0, "zeta")
    _close(ms.zeta(np.array([2.0, 3.5]), 2.0), ss.zeta(np.array([2.0, 3.5]), 2.0), 1e-12, 0,
           "hurwitz")


def test_bessel_and_misc_vs_scipy():
    x = np.array([-30.0, -3.0, -0.2, 0.0, 0.7, 5.0, 40.0])
    for name in ("i0e", "i1e", "i0", "i1"):
        _close(getattr(ms, name)(x), getattr(ss, name)(x), 1e-13, 0, name)
    e = np.array([-1.0, 0.0, 0.3, 1.0, 2.0])
    _close(ms.entr(e), ss.entr(e), 1e-15, 0, "entr")
    z = np.random.default_rng(0).normal(size=(3, 4))
    for axis in (None, 0, -1):
        _close(ms.softmax(z, axis=axis), ss.softmax(z, axis=axis), 1e-14, 0, "softmax")
        _close(ms.log_softmax(z, axis=axis), ss.log_softmax(z, axis=axis), 1e-14, 1e-15, "lsm")


@pytest.mark.parametrize("name,x", [
    ("ndtr", np.array([-3.0, 0.2, 2.0])), ("log_ndtr", np.array([-30.0, -12.0, -3.0, 0.5, 7.0])),
    ("ndtri", np.array([0.01, 0.3, 0.9])), ("gamma", np.array([-1.5, 0.5, 3.2])),
    ("i0", np.array([-2.0, 0.3, 4.0])), ("entr", np.array([0.2, 1.5]))])
def test_derivatives_vs_finite_differences(name, x):
    mx.testing.check_grads(getattr(ms, name), (x,), order=2, modes=("rev", "fwd"), rtol=1e-4)


def test_combinatorial_and_entropy_functions_vs_scipy():
    a = np.array([-0.5, 0.5, 3.0, 7.5])
    b = np.array([2.0, 0.3, 4.0, 0.7])
    _close(ms.beta(a, b), ss.beta(a, b), 1e-13, 0, "beta")
    _close(ms.poch(a, b), ss.poch(a, b), 1e-13, 0, "poch")
    _close(ms.loggamma(np.array([-2.5, 0.5, 30.0])), ss.loggamma(np.array([-2.5, 0.5, 30.0])),
           1e-14, 0, "loggamma")
    n = np.array([-1.0, 0, 3, 5.5])
    _close(ms.factorial(n), ss.factorial(n), 1e-13, 0, "factorial")
    big, small = np.array([5.0, 4, 10, 3]), np.array([2.0, 5, 3, -1])
    _close(ms.comb(big, small), ss.comb(big, small), 1e-13, 0, "comb")
    _close(ms.comb(big, small.clip(0), repetition=True),
           ss.comb(big, small.clip(0), repetition=True), 1e-13, 0, "comb rep")
    p = np.array([0.0, 0.0, 0.3, 0.5, 1.0, -1])
    q = np.array([0.0, 0.2, 0.4, 0.0, 2.0, 1])
    _close(ms.rel_entr(p, q), ss.rel_entr(p, q), 1e-14, 0, "rel_entr")
    _close(ms.kl_div(p, q), ss.kl_div(p, q), 1e-14, 0, "kl_div")
    x, lm = np.array([0.5, 1.0, 2.0, 7.0]), np.array([0.0, 0.5, -1.0, 2.0])
    _close(ms.boxcox(x, lm), ss.boxcox(x, lm), 1e-14, 0, "boxcox")
    _close(ms.boxcox1p(x, lm), ss.boxcox1p(x, lm), 1e-14, 0, "boxcox1p")
    mx.testing.check_grads(lambda p, q: ms.kl_div(p, q), (p[2:5] + 0.1, q[2:5] + 0.1), order=2)
