"""jax.lax's special functions as fixed-length series and continued fractions of mirax
ops: zeta, polygamma, igamma, igammac, betainc, bessel_i0e, bessel_i1e.
"""
from __future__ import annotations

import numpy as np

from mirax.ops import elementwise as ew
from mirax.ops.common import broadcast_shapes, float_operand, promote
from mirax.ops.shape import full

__all__ = ["zeta", "polygamma", "igamma", "igammac", "betainc", "bessel_i0e", "bessel_i1e"]


# --- special functions ---------------------------------------------------------------------
# Fixed-length series and continued fractions written with mirax ops (so every derivative,
# in every argument, is the derivative of the approximation); the same algorithms as the
# NumPy references of mirax/ops/special_impl.py and Cephes.
_B2J = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
        43867 / 798, -174611 / 330)  # Bernoulli numbers B_2 ... B_20


def _floats(op, *xs):
    xs = [float_operand(x, op) for x in xs]
    shape = broadcast_shapes(op, *xs)
    xs = promote(op, *xs)
    return [ew.broadcast_to(x, shape) for x in xs]


def _const(like, v):
    return full(like.shape, v, like.dtype)


def _is_int(x):
    return ew.eq(ew.floor(x), x)


def zeta(x, q):
    """Hurwitz zeta sum_k (q + k)^-x: 16 direct terms and the Euler-Maclaurin tail. NaN for
    x < 1 and for q <= 0 with x not an integer; inf at the poles (x = 1, q a non-positive
    integer)."""
    s, a = _floats("zeta", x, q)
    n = 16
    total = ew.zeros_like(a)
    for k in range(n):
        total = ew.add(total, ew.pow(ew.add(a, float(k)), ew.neg(s)))
    qn = ew.add(a, float(n))
    s_safe = ew.select(ew.eq(s, 1.0), ew.add(s, 1.0), s)  # the pole is set below
    tail = ew.add(ew.div(ew.pow(qn, ew.sub(1.0, s_safe)), ew.sub(s_safe, 1.0)),
                  ew.mul(0.5, ew.pow(qn, ew.neg(s))))
    rising, fact = s, 2.0
    for j in range(1, 9):
        term = ew.mul(rising, ew.pow(qn, ew.sub(float(1 - 2 * j), s)))
        tail = ew.add(tail, ew.mul(_B2J[j - 1] / fact, term))
        rising = ew.mul(rising, ew.mul(ew.add(s, 2.0 * j - 1), ew.add(s, 2.0 * j)))
        fact *= (2 * j + 1) * (2 * j + 2)
    out = ew.add(total, tail)
    nonpos = ew.le(a, 0.0)
    out = ew.select(ew.logical_and(nonpos, _is_int(a)), _const(out, np.inf), out)
    out = ew.select(ew.logical_and(nonpos, ew.logical_not(_is_int(s))),
                    _const(out, np.nan), out)
    out = ew.select(ew.eq(s, 1.0), _const(out, np.inf), out)
    return ew.select(ew.lt(s, 1.0), _const(out, np.nan), out)


def polygamma(m, x):
    """The m-th derivative of digamma: (-1)^(m+1) m! zeta(m + 1, x) for m >= 1; m = 0 is
    digamma. m is a non-negative integer (array or scalar)."""
    m, x = _floats("polygamma", m, x)
    m_pos = ew.select(ew.gt(m, 0.0), m, ew.ones_like(m))  # keeps zeta off its pole at m = 0
    sign = ew.sub(1.0, ew.mul(2.0, ew.rem(ew.add(m_pos, 1.0), 2.0)))  # (-1)^(m+1)
    out = ew.mul(ew.mul(sign, ew.exp(ew.lgamma(ew.add(m_pos, 1.0)))),
                 zeta(ew.add(m_pos, 1.0), x))
    out = ew.select(ew.eq(m, 0.0), ew.digamma(x), out)
    return ew.select(ew.logical_and(ew.ge(m, 0.0), _is_int(m)), out, _const(out, np.nan))


_GAMMA_TERMS = 200  # series / continued-fraction steps: float64-exact for a up to ~500


def _igamma_parts(a, x):
    """(P, Q, use_cf): the series for P where x <= max(1, a), else the Lentz continued
    fraction for Q (Numerical Recipes gser / gcf), each fed harmless inputs elsewhere."""
    use_cf = ew.logical_and(ew.gt(x, 1.0), ew.gt(x, a))
    ok = ew.logical_and(ew.logical_and(ew.gt(a, 0.0), ew.gt(x, 0.0)),
                        ew.logical_and(ew.is_finite(a), ew.is_finite(x)))
    xs = ew.select(ew.logical_and(ok, ew.logical_not(use_cf)), x, _const(x, 0.5))
    as_ = ew.select(ok, a, ew.ones_like(a))
    term = ew.reciprocal(as_)
    total = term
    for n in range(1, _GAMMA_TERMS):
        term = ew.mul(term, ew.div(xs, ew.add(as_, float(n))))
        total = ew.add(total, term)
    pref_s = ew.exp(ew.sub(ew.sub(ew.mul(as_, ew.log(xs)), xs), ew.lgamma(as_)))
    p = ew.mul(pref_s, total)
    xc = ew.select(ew.logical_and(ok, use_cf), x, ew.add(as_, 2.0))
    tiny = 1e-30
    b = ew.sub(ew.add(xc, 1.0), as_)
    c = _const(b, 1.0 / tiny)
    d = ew.reciprocal(b)
    h = d
    for i in range(1, _GAMMA_TERMS):
        an = ew.mul(-float(i), ew.sub(float(i), as_))
        b = ew.add(b, 2.0)
        d = _guard_tiny(ew.add(ew.mul(an, d), b), tiny)
        c = _guard_tiny(ew.add(b, ew.div(an, c)), tiny)
        d = ew.reciprocal(d)
        h = ew.mul(h, ew.mul(d, c))
    pref_c = ew.exp(ew.sub(ew.sub(ew.mul(as_, ew.log(xc)), xc), ew.lgamma(as_)))
    q = ew.mul(pref_c, h)
    return p, q, use_cf


def _guard_tiny(v, tiny):
    return ew.select(ew.lt(ew.abs(v), tiny), _const(v, tiny), v)


def _igamma_edges(out, a, x, at_zero):
    """x = 0 or a = inf give at_zero; x = inf its complement; a <= 0, x < 0, NaN: NaN."""
    out = ew.select(ew.eq(x, 0.0), _const(out, at_zero), out)
    out = ew.select(ew.eq(x, np.inf), _const(out, 1.0 - at_zero), out)
    out = ew.select(ew.eq(a, np.inf), _const(out, at_zero), out)
    bad = ew.logical_or(ew.logical_or(ew.le(a, 0.0), ew.lt(x, 0.0)),
                        ew.logical_not(ew.logical_and(ew.eq(a, a), ew.eq(x, x))))
    return ew.select(bad, _const(out, np.nan), out)


def igamma(a, x):
    """The regularized lower incomplete gamma function P(a, x)."""
    a, x = _floats("igamma", a, x)
    p, q, use_cf = _igamma_parts(a, x)
    return _igamma_edges(ew.select(use_cf, ew.sub(1.0, q), p), a, x, 0.0)


def igammac(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    a, x = _floats("igammac", a, x)
    p, q, use_cf = _igamma_parts(a, x)
    return _igamma_edges(ew.select(use_cf, q, ew.sub(1.0, p)), a, x, 1.0)


_BETA_TERMS = 100  # float64-exact for a, b up to ~1e3


def _betacf(a, b, x):
    """The continued fraction of I_x(a, b) (Numerical Recipes betacf, modified Lentz)."""
    tiny = 1e-30
    qab, qap, qam = ew.add(a, b), ew.add(a, 1.0), ew.sub(a, 1.0)
    c = ew.ones_like(x)
    d = ew.reciprocal(_guard_tiny(ew.sub(1.0, ew.div(ew.mul(qab, x), qap)), tiny))
    h = d
    for m in range(1, _BETA_TERMS):
        m2 = 2.0 * m
        for aa in (ew.div(ew.mul(ew.mul(float(m), ew.sub(b, float(m))), x),
                          ew.mul(ew.add(qam, m2), ew.add(a, m2))),
                   ew.div(ew.neg(ew.mul(ew.mul(ew.add(a, float(m)), ew.add(qab, float(m))), x)),
                          ew.mul(ew.add(a, m2), ew.add(qap, m2)))):
            d = ew.reciprocal(_guard_tiny(ew.add(1.0, ew.mul(aa, d)), tiny))
            c = _guard_tiny(ew.add(1.0, ew.div(aa, c)), tiny)
            h = ew.mul(h, ew.mul(d, c))
    return h


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b), by the continued fraction on
    the side of x where it converges (x < (a + 1) / (a + b + 2), else 1 - I_{1-x}(b, a))."""
    a, b, x = _floats("betainc", a, b, x)
    inside = ew.logical_and(ew.gt(x, 0.0), ew.lt(x, 1.0))
    ok = ew.logical_and(ew.logical_and(ew.gt(a, 0.0), ew.gt(b, 0.0)), inside)
    a_, b_ = ew.select(ok, a, ew.ones_like(a)), ew.select(ok, b, ew.ones_like(b))
    xs = ew.select(ok, x, _const(x, 0.5))
    log_bt = ew.add(ew.sub(ew.sub(ew.lgamma(ew.add(a_, b_)), ew.lgamma(a_)), ew.lgamma(b_)),
                    ew.add(ew.mul(a_, ew.log(xs)), ew.mul(b_, ew.log1p(ew.neg(xs)))))
    bt = ew.exp(log_bt)
    direct = ew.lt(xs, ew.div(ew.add(a_, 1.0), ew.add(ew.add(a_, b_), 2.0)))
    x1 = ew.select(direct, xs, _const(xs, 0.25))  # each branch gets its convergent side
    x2 = ew.select(direct, _const(xs, 0.75), xs)
    lo = ew.div(ew.mul(bt, _betacf(a_, b_, x1)), a_)
    hi = ew.sub(1.0, ew.div(ew.mul(bt, _betacf(b_, a_, ew.sub(1.0, x2))), b_))
    out = ew.select(direct, lo, hi)
    out = ew.select(ew.eq(x, 0.0), ew.zeros_like(out), out)
    out = ew.select(ew.eq(x, 1.0), ew.ones_like(out), out)
    bad = ew.logical_or(ew.logical_or(ew.le(a, 0.0), ew.le(b, 0.0)),
                        ew.logical_or(ew.lt(x, 0.0), ew.gt(x, 1.0)))
    return ew.select(ew.logical_or(bad, ew.ne(x, x)), _const(out, np.nan), out)


_BESSEL_SERIES_MAX = 20.0


def _bessel_scaled(x, order):
    """exp(-|x|) I_order(x): power series for |x| <= 20 (45 terms), Hankel's asymptotic
    series above (32 terms); as special_impl's reference. I_1 is written x * (even part)
    so its derivative at 0 is right."""
    op = f"bessel_i{order}e"
    x = float_operand(x, op)
    a = ew.abs(x)
    small = ew.le(a, _BESSEL_SERIES_MAX)
    xs = ew.select(small, x, ew.zeros_like(x))
    q = ew.mul(0.25, ew.mul(xs, xs))
    term, total = ew.ones_like(q), ew.ones_like(q)
    for k in range(1, 46):
        term = ew.mul(term, ew.mul(q, 1.0 / (k * (k + order))))
        total = ew.add(total, term)
    series = ew.mul(ew.exp(ew.neg(ew.abs(xs))), total)
    if order == 1:
        series = ew.mul(series, ew.mul(0.5, xs))
    al = ew.select(small, _const(a, 2 * _BESSEL_SERIES_MAX), a)
    mu = 4.0 * order * order
    term, total = ew.ones_like(al), ew.ones_like(al)
    for k in range(1, 33):
        term = ew.mul(term, ew.div(-(mu - (2 * k - 1) ** 2) / (8.0 * k), al))
        total = ew.add(total, term)
    asym = ew.mul(total, ew.rsqrt(ew.mul(2.0 * np.pi, al)))
    if order == 1:
        asym = ew.mul(ew.sign(x), asym)
    out = ew.select(small, series, asym)
    return ew.select(ew.is_finite(x), out, ew.select(ew.ne(x, x), x, ew.zeros_like(x)))


def bessel_i0e(x):
    """exp(-|x|) I_0(x)."""
    return _bessel_scaled(x, 0)


def bessel_i1e(x):
    """exp(-|x|) I_1(x)."""
    return _bessel_scaled(x, 1)
