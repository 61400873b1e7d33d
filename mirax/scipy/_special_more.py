"""More of jax.scipy.special, on mirax.numpy and mirax.lax (so every derivative is the
derivative of the formula, and differentiates again): the normal distribution's ndtr,
log_ndtr, ndtri; the incomplete gamma / beta functions; betaln, gamma, multigammaln;
exponentially scaled Bessel functions; entr, softmax, log_softmax.

NOTE: branches of a piecewise formula are each fed inputs clamped into their own range, so
the branch a select drops never computes an inf or NaN whose derivative could leak.
"""
from __future__ import annotations

import math

import numpy as np

import mirax.numpy as mnp
from mirax import lax
from mirax.ops import nn as _nn

__all__ = ["ndtr", "log_ndtr", "ndtri", "gammainc", "gammaincc", "betainc", "betaln", "gamma",
           "gammasgn", "multigammaln", "i0e", "i1e", "i0", "i1", "polygamma", "zeta", "entr",
           "softmax", "log_softmax", "beta", "factorial", "poch", "comb", "rel_entr", "kl_div",
           "boxcox", "boxcox1p", "loggamma"]

_SQRT1_2 = 1.0 / math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _float(x):
    x = mnp.asarray(x)
    return x if mnp.issubdtype(x.dtype, mnp.inexact) else x.astype(mnp.float32)


def _floats(*xs):
    xs = [_float(x) for x in xs]
    dt = mnp.result_type(*xs)
    return [x.astype(dt) for x in xs]


# --- the normal distribution ----------------------------------------------------------------
def ndtr(x):
    """Phi(x): the standard normal CDF, 0.5 erfc(-x / sqrt 2)."""
    x = _float(x)
    return 0.5 * lax.erfc(-x * _SQRT1_2)


def _log_ndtr_tail(x, order=3):
    """log Phi(x) for x << 0 by the asymptotic series of Abramowitz & Stegun 26.2.12:
    log(phi(x) / -x) + log(1 + sum_n (-1)^n (2n-1)!! / x^2n)."""
    x2 = x * x
    series, x2n = mnp.ones_like(x), x2
    for n in range(1, order + 1):
        term = float(np.prod(np.arange(2 * n - 1, 0, -2))) / x2n
        series = series - term if n % 2 else series + term
        x2n = x2n * x2
    return -0.5 * x2 - mnp.log(-x) - _LOG_SQRT_2PI + mnp.log(series)


def log_ndtr(x, series_order=3):
    """log Phi(x), accurate far in both tails: log1p(-Phi(-x)) for x > 0, log(Phi(x)) down to
    -20 (f64) / -10 (f32), the asymptotic series below (JAX's scheme, with log1p on the
    upper side where JAX's log(Phi(x)) loses the digits of 1 - Phi)."""
    x = _float(x)
    lower = -20.0 if x.dtype == mnp.float64 else -10.0
    pos = mnp.maximum(x, 0.0)
    mid = mnp.clip(x, lower, 0.0)
    lo = mnp.minimum(x, lower)
    return mnp.where(x > 0, mnp.log1p(-ndtr(-pos)),
                     mnp.where(x > lower, mnp.log(ndtr(mid)), _log_ndtr_tail(lo, series_order)))


# Cephes ndtri: a rational function of p - 1/2 in the middle, of 1/sqrt(-2 log p) in the tails.
_P0 = (-5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1,
       1.39312609387279679503E1, -1.23916583867381258016E0)
_Q0 = (1.0, 1.95448858338141759834E0, 4.67627912898881538453E0, 8.63602421390890590575E1,
       -2.25462687854119370527E2, 2.00260212380060660359E2, -8.20372256168333339912E1,
       1.59056225126211695515E1, -1.18331621121330003142E0)
_P1 = (4.05544892305962419923E0, 3.15251094599893866154E1, 5.71628192246421288162E1,
       4.40805073893200834700E1, 1.46849561928858024014E1, 2.18663306850790267539E0,
       -1.40256079171354495875E-1, -3.50424626827848203418E-2, -8.57456785154685413611E-4)
_Q1 = (1.0, 1.57799883256466749731E1, 4.53907635128879210584E1, 4.13172038254672030440E1,
       1.50425385692907503408E1, 2.50464946208309415979E0, -1.42182922854787788574E-1,
       -3.80806407691578277194E-2, -9.33259480895457427372E-4)
_P2 = (3.23774891776946035970E0, 6.91522889068984211695E0, 3.93881025292474443415E0,
       1.33303460815807542389E0, 2.01485389549179081538E-1, 1.23716634817820021358E-2,
       3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9)
_Q2 = (1.0, 6.02427039364742014255E0, 3.67983563856160859403E0, 1.37702099489081330271E0,
       2.16236993594496635890E-1, 1.34204006088543189037E-2, 3.28014464682127739104E-4,
       2.89247864745380683936E-6, 6.79019408009981274425E-9)


def _horner(coeffs, x):
    out = mnp.full_like(x, coeffs[0])
    for c in coeffs[1:]:
        out = out * x + c
    return out


def ndtri(p):
    """Phi^-1(p), the standard normal quantile (Cephes' rational approximations); -inf at 0,
    inf at 1, NaN outside [0, 1]."""
    p = _float(p)
    exp_m2 = math.exp(-2.0)
    q = mnp.where(p > 1.0 - exp_m2, 1.0 - p, p)          # the tail nearer p
    q = mnp.where((q <= 0.0) | (q >= 1.0) | mnp.isnan(q), 0.5, q)
    w = mnp.where(q > exp_m2, q, 0.5) - 0.5             # middle segment
    ww = w * w
    x_mid = -(w + w * ww * (_horner(_P0, ww) / _horner(_Q0, ww))) * math.sqrt(2 * math.pi)
    qt = mnp.where(q > exp_m2, exp_m2, q)               # tail segments
    z = mnp.sqrt(-2.0 * mnp.log(qt))
    first = z - mnp.log(z) / z
    rz = 1.0 / z
    x_far = first - _horner(_P2, rz) / _horner(_Q2, rz) / z
    x_near = first - _horner(_P1, rz) / _horner(_Q1, rz) / z
    x = mnp.where(q > exp_m2, x_mid, mnp.where(z >= 8.0, x_far, x_near))
    x = mnp.where(p > 1.0 - exp_m2, x, -x)
    x = mnp.where(p == 0.0, -mnp.inf, mnp.where(p == 1.0, mnp.inf, x))
    return mnp.where((p < 0.0) | (p > 1.0) | mnp.isnan(p), mnp.nan, x)


# --- incomplete gamma / beta, gamma-family -----------------------------------------------------
def gammainc(a, x):
    """The regularized lower incomplete gamma function P(a, x)."""
    return lax.igamma(a, x)


def gammaincc(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    return lax.igammac(a, x)


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b)."""
    return lax.betainc(a, b, x)


def betaln(a, b):
    """log |B(a, b)| = lgamma(a) + lgamma(b) - lgamma(a + b)."""
    a, b = _floats(a, b)
    return lax.lgamma(a) + lax.lgamma(b) - lax.lgamma(a + b)


def gammasgn(x):
    """The sign of Gamma(x): -1 on (-2k-1, -2k), +1 elsewhere (NaN at the poles as scipy)."""
    x = _float(x)
    fl = mnp.floor(x)
    neg_odd = (x < 0) & (mnp.mod(fl, 2.0) == 1.0)   # Gamma < 0 on (-1, 0), (-3, -2), ...
    sign = mnp.where(neg_odd, -1.0, 1.0).astype(x.dtype)
    return mnp.where((x <= 0) & (fl == x), mnp.nan, sign)


def gamma(x):
    """Gamma(x) = sign * exp(lgamma(x))."""
    x = _float(x)
    return gammasgn(x) * mnp.exp(lax.lgamma(x))


def multigammaln(a, d):
    """The log of the multivariate gamma function of dimension d (a static int)."""
    a = _float(a)
    d = int(d)
    const = d * (d - 1) / 4.0 * math.log(math.pi)
    terms = [lax.lgamma(a - j / 2.0) for j in range(d)]
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return total + const


def polygamma(n, x):
    return lax.polygamma(n, x)


def zeta(x, q=None):
    """The Hurwitz zeta function (Riemann's with q = 1)."""
    x = _float(x)
    return lax.zeta(x, mnp.ones_like(x) if q is None else q)


# --- Bessel functions ------------------------------------------------------------------
def i0e(x):
    return lax.bessel_i0e(x)


def i1e(x):
    return lax.bessel_i1e(x)


def i0(x):
    x = _float(x)
    return mnp.exp(mnp.abs(x)) * lax.bessel_i0e(x)


def i1(x):
    x = _float(x)
    return mnp.exp(mnp.abs(x)) * lax.bessel_i1e(x)


# --- misc ------------------------------------------------------------------------------
def entr(x):
    """-x log x for x > 0, 0 at 0, -inf for x < 0."""
    x = _float(x)
    pos = mnp.where(x > 0, x, 1.0)
    return mnp.where(x > 0, -pos * mnp.log(pos), mnp.where(x == 0, 0.0, -mnp.inf))


def softmax(x, axis=None):
    x = _float(x)
    return _nn.softmax(x, axis=tuple(range(x.ndim)) if axis is None else axis)


def log_softmax(x, axis=None):
    x = _float(x)
    return _nn.log_softmax(x, axis=tuple(range(x.ndim)) if axis is None else axis)


# --- gamma / beta combinations and entropies (JAX's formulas) ------------------------------
def beta(a, b):
    """B(a, b) = sign * exp(betaln(a, b))."""
    a, b = _floats(a, b)
    return gammasgn(a) * gammasgn(b) * gammasgn(a + b) * mnp.exp(betaln(a, b))


def loggamma(x):
    """log Gamma(x) for real x > 0 (NaN elsewhere, as scipy's real loggamma)."""
    x = _float(x)
    return mnp.where(x > 0, lax.lgamma(mnp.where(x > 0, x, 1.0)), mnp.nan)


def factorial(n, exact=False):
    """Gamma(n + 1) (0 for n < 0); exact=True is not supported (as JAX)."""
    if exact:
        raise NotImplementedError("factorial: exact=True is not supported (as JAX)")
    n = _float(n)
    return mnp.where(n < 0, 0.0, mnp.exp(lax.lgamma(mnp.maximum(n, 0.0) + 1.0)))


def poch(z, m):
    """The Pochhammer symbol Gamma(z + m) / Gamma(z)."""
    z, m = _floats(z, m)
    return mnp.where(m == 0.0, mnp.ones_like(z + m), gamma(z + m) / gamma(z))


def comb(N, k, *, exact=False, repetition=False):  # noqa: N803 (scipy's name)
    """The binomial coefficient N choose k as floats (0 outside 0 <= k <= N)."""
    if exact:
        raise NotImplementedError("comb: exact=True is not supported (as JAX)")
    n, k = _floats(N, k)
    if repetition:
        return mnp.where((k == 0) & (n >= 0), 1.0, comb(n + k - 1.0, k))
    ok = (k <= n) & (n >= 0) & (k >= 0)
    sn, sk = mnp.where(ok, n, 0.0), mnp.where(ok, k, 0.0)
    val = mnp.exp(lax.lgamma(sn + 1.0) - lax.lgamma(sk + 1.0) - lax.lgamma(sn + 1.0 - sk))
    return mnp.where(ok, val, 0.0)


def rel_entr(p, q):
    """p log(p / q) for p, q > 0; 0 where p = 0 <= q; inf elsewhere."""
    p, q = _floats(p, q)
    both = (p > 0) & (q > 0)
    sp, sq = mnp.where(both, p, 1.0), mnp.where(both, q, 1.0)
    return mnp.where(both, sp * (mnp.log(sp) - mnp.log(sq)),
                     mnp.where((p == 0) & (q >= 0), 0.0, mnp.inf))


def kl_div(p, q):
    """rel_entr(p, q) - p + q."""
    p, q = _floats(p, q)
    return rel_entr(p, q) - p + q


def _boxcox_of_log(logx, lmbda):
    """(e^(lmbda logx) - 1) / lmbda, or logx at lmbda = 0 (no 0 / 0 in either branch)."""
    zero = lmbda == 0
    safe = mnp.where(zero, 1.0, lmbda)
    return mnp.where(zero, logx, mnp.expm1(safe * logx) / safe)


def boxcox(x, lmbda):
    """(x^lmbda - 1) / lmbda, or log x at lmbda = 0."""
    x, lmbda = _floats(x, lmbda)
    return _boxcox_of_log(mnp.log(x), lmbda)


def boxcox1p(x, lmbda):
    """boxcox(1 + x, lmbda), accurate for small x."""
    x, lmbda = _floats(x, lmbda)
    return _boxcox_of_log(mnp.log1p(x), lmbda)
