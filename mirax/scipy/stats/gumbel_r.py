"""jax.scipy.stats.gumbel_r: the right-skewed Gumbel distribution (of the maximum)."""
from __future__ import annotations

import mirax.numpy as mnp
from mirax.scipy.stats._common import nan, promote_args_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("gumbel_r.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return mnp.where(scale > 0, -mnp.log(scale) - (z + mnp.exp(-z)), nan)


def pdf(x, loc=0, scale=1):
    return mnp.exp(logpdf(x, loc, scale))


def logcdf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("gumbel_r.logcdf", x, loc, scale)
    return mnp.where(scale > 0, -mnp.exp(-(x - loc) / scale), nan)


def cdf(x, loc=0, scale=1):
    return mnp.exp(logcdf(x, loc, scale))


def sf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("gumbel_r.sf", x, loc, scale)
    return mnp.where(scale > 0, -mnp.expm1(-mnp.exp((loc - x) / scale)), nan)


def logsf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("gumbel_r.logsf", x, loc, scale)
    e = mnp.exp((loc - x) / scale)
    # log(1 - exp(-e)): log(-expm1(-e)) for small e, log1p(-exp(-e)) for large
    small = e < 0.6931471805599453
    val = mnp.where(small, mnp.log(-mnp.expm1(-mnp.where(small, e, 1.0))),
                    mnp.log1p(-mnp.exp(-mnp.where(small, 1.0, e))))
    return mnp.where(scale > 0, val, nan)


def ppf(p, loc=0, scale=1):
    p, loc, scale = promote_args_inexact("gumbel_r.ppf", p, loc, scale)
    ok = (p > 0) & (p < 1)
    ps = mnp.where(ok, p, 0.5)
    return mnp.where(ok, loc - scale * mnp.log(-mnp.log(ps)), nan)
