"""jax.scipy.stats.truncnorm: the normal distribution truncated to [a, b] (in standard
units: the support is [loc + a scale, loc + b scale]). The normalizing mass is computed in
log space on the tail that keeps it accurate (as JAX and scipy)."""
from __future__ import annotations

import mirax.numpy as mnp
from mirax.scipy import special
from mirax.scipy.stats import norm
from mirax.scipy.stats._common import inf, nan, promote_args_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


def _log_diff(x, y):
    """log(exp(x) - exp(y)) for x >= y."""
    return x + mnp.log(-mnp.expm1(mnp.minimum(y - x, 0.0)))


def _log_gauss_mass(a, b):
    """log(Phi(b) - Phi(a)) for a <= b."""
    a, b = mnp.broadcast_arrays(a, b)
    left, right = b <= 0, a > 0
    central = ~(left | right)
    a_tail = mnp.where(right, -b, a)
    b_tail = mnp.where(right, -a, b)
    mass_tail = _log_diff(special.log_ndtr(b_tail), special.log_ndtr(a_tail))
    mass_central = mnp.log1p(-special.ndtr(mnp.where(central, a, -1.0))
                             - special.ndtr(-mnp.where(central, b, 1.0)))
    return mnp.where(central, mass_central, mass_tail)


def logpdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote_args_inexact("truncnorm.logpdf", x, a, b, loc, scale)
    val = norm.logpdf(x, loc, scale) - _log_gauss_mass(a, b)
    z = (x - loc) / scale
    val = mnp.where((z < a) | (z > b), -inf, val)
    return mnp.where(a >= b, nan, val)


def pdf(x, a, b, loc=0, scale=1):
    return mnp.exp(logpdf(x, a, b, loc, scale))


def logcdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote_args_inexact("truncnorm.logcdf", x, a, b, loc, scale)
    x, a, b = mnp.broadcast_arrays(x, a, b)
    z = (x - loc) / scale
    zc = mnp.clip(z, a, b)
    mass = _log_gauss_mass(a, b)
    log_cdf = _log_gauss_mass(a, zc) - mass
    log_sf = _log_gauss_mass(zc, b) - mass
    out = mnp.where(z >= b, 0.0, mnp.where(z <= a, -inf, mnp.where(
        log_cdf > -0.1, mnp.log1p(-mnp.exp(mnp.minimum(log_sf, 0.0))), log_cdf)))
    return mnp.where(a >= b, nan, out)


def cdf(x, a, b, loc=0, scale=1):
    return mnp.exp(logcdf(x, a, b, loc, scale))


def logsf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote_args_inexact("truncnorm.logsf", x, a, b, loc, scale)
    return logcdf(-x, -b, -a, -loc, scale)


def sf(x, a, b, loc=0, scale=1):
    return mnp.exp(logsf(x, a, b, loc, scale))
