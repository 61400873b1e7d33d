"""jax.scipy.stats.gumbel_l: the left-skewed Gumbel distribution (of the minimum)."""
from __future__ import annotations

import mirax.numpy as mnp
from mirax.scipy.stats._common import nan, promote_args_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("gumbel_l.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return mnp.where(scale > 0, -mnp.log(scale) + z - mnp.exp(z), nan)


def pdf(x, loc=0, scale=1):
    return mnp.exp(logpdf(x, loc, scale))


def logcdf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("gumbel_l.logcdf", x, loc, scale)
    z = (x - loc) / scale
    return mnp.where(scale > 0, mnp.log(-mnp.expm1(-mnp.exp(z))), nan)


def cdf(x, loc=0, scale=1):
    return mnp.exp(logcdf(x, loc, scale))


def logsf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("gumbel_l.logsf", x, loc, scale)
    return mnp.where(scale > 0, -mnp.exp((x - loc) / scale), nan)


def sf(x, loc=0, scale=1):
    return mnp.exp(logsf(x, loc, scale))


def ppf(p, loc=0, scale=1):
    p, loc, scale = promote_args_inexact("gumbel_l.ppf", p, loc, scale)
    ok = (p > 0) & (p < 1)
    ps = mnp.where(ok, p, 0.5)
    return mnp.where(ok, loc + scale * mnp.log(-mnp.log1p(-ps)), nan)
