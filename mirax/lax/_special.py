"""jax.lax's special functions as fixed-length series and continued fractions of mirax
ops: zeta, polygamma, igamma, igammac, betainc, bessel_i0e, bessel_i1e.
"""
from __future__ import annotations

import numpy as np

from mirax.core import dtypes
from mirax.ops import elementwise as ew
from mirax.ops.common import broadcast_shapes, float_operand, promote
from mirax.ops.shape import broadcast_to, full

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
    return [broadcast_to(x, shape) for x in xs]


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


# Cephes' Chebyshev coefficients for exp(-x) I0(x) on [0, 8] (A) and exp(-x) sqrt(x) I0(x)
# on (8, inf) in 32/x - 2 (B); likewise for I1 (x * series A, series B / sqrt(x)).
_I0_A = (
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
    1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
    -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
    9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
    -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7,
    1.11738753912010371815e-6, -4.41673835845875056359e-6, 1.64484480707288970893e-5,
    -5.75419501008210370398e-5, 1.88502885095841655729e-4, -5.76375574538582365885e-4,
    1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
    -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2,
    1.71620901522208775349e-1, -3.04682672343198398683e-1, 6.76795274409476084995e-1)
_I0_B = (
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
    3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
    1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
    -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
    7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
    -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
    3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7,
    2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
    8.04490411014108831608e-1)
_I1_A = (
    2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16,
    -1.10559694773538630805e-15, 7.60068429473540693410e-15, -5.04218550472791168711e-14,
    3.22379336594557470981e-13, -1.98397439776494371520e-12, 1.17361862988909016308e-11,
    -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-9,
    9.38153738649577178388e-9, -4.44505912879632808065e-8, 2.00329475355213526229e-7,
    -8.56872026469545474066e-7, 3.47025130813767847674e-6, -1.32731636560394358279e-5,
    4.78156510755005422638e-5, -1.61760815825896745588e-4, 5.12285956168575772895e-4,
    -1.51357245063125314899e-3, 4.15642294431288815669e-3, -1.05640848946261981558e-2,
    2.47264490306265168283e-2, -5.29459812080949914269e-2, 1.02643658689847095384e-1,
    -1.76416518357834055153e-1, 2.52587186443633654823e-1)
_I1_B = (
    7.51729631084210481353e-18, 4.41434832307170791151e-18, -4.65030536848935832153e-17,
    -3.20952592199342395980e-17, 2.96262899764595013876e-16, 3.30820231092092828324e-16,
    -1.88035477551078244854e-15, -3.81440307243700780478e-15, 1.04202769841288027642e-14,
    4.27244001671195135429e-14, -2.10154184277266431302e-14, -4.08355111109219731823e-13,
    -7.19855177624590851209e-13, 2.03562854414708950722e-12, 1.41258074366137813316e-11,
    3.25260358301548823856e-11, -1.89749581235054123450e-11, -5.58974346219658380687e-10,
    -3.83538038596423702205e-9, -2.63146884688951950684e-8, -2.51223623787020892529e-7,
    -3.88256480887769039346e-6, -1.10588938762623716291e-4, -9.76109749136146840777e-3,
    7.78576235018280120474e-1)


def _chbevl(y, coeffs):
    """Clenshaw's recurrence for a Chebyshev series (Cephes' chbevl)."""
    b0, b1, b2 = ew.add(ew.zeros_like(y), coeffs[0]), ew.zeros_like(y), None
    for c in coeffs[1:]:
        b2, b1 = b1, b0
        b0 = ew.add(ew.sub(ew.mul(y, b1), b2), c)
    return ew.mul(ew.sub(b0, b2), 0.5)


def _bessel_scaled(x, order):
    """exp(-|x|) I_order(x) by Cephes' Chebyshev series (Clenshaw's recurrence): series A in
    x/2 - 2 on |x| <= 8, series B in 32/|x| - 2 over sqrt(|x|) beyond; I_1 is x * series A
    near 0 (so its derivative at 0 comes out right) and odd. Float16 and bfloat16 are
    computed in float32 (the series needs its range)."""
    op = f"bessel_i{order}e"
    x = float_operand(x, op)
    if x.dtype in dtypes.LOW_FLOATS:
        return ew.convert_element_type(_bessel_scaled(ew.convert_element_type(
            x, dtypes.float32), order), x.dtype)
    a, b = (_I0_A, _I0_B) if order == 0 else (_I1_A, _I1_B)
    ax = ew.abs(x)
    small = ew.le(ax, 8.0)
    xs = ew.select(small, ax, _const(ax, 8.0))
    xl = ew.select(small, _const(ax, 8.0), ax)
    lo = _chbevl(ew.sub(ew.mul(xs, 0.5), 2.0), a)
    hi = ew.div(_chbevl(ew.sub(ew.div(32.0, xl), 2.0), b), ew.sqrt(xl))
    if order == 1:
        lo, hi = ew.mul(lo, x), ew.select(ew.lt(x, 0), ew.neg(hi), hi)
    return ew.select(small, lo, hi)


def bessel_i0e(x):
    """exp(-|x|) I_0(x)."""
    return _bessel_scaled(x, 0)


def bessel_i1e(x):
    """exp(-|x|) I_1(x)."""
    return _bessel_scaled(x, 1)
