"""jax.scipy.stats.expon: the exponential distribution (rate 1 / scale) from loc."""
from __future__ import annotations

import mirax.numpy as mnp
from mirax.scipy.stats._common import inf, nan, promote_args_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("expon.logpdf", x, loc, scale)
    return mnp.where(x < loc, -inf, -((x - loc) / scale + mnp.log(scale)))


def pdf(x, loc=0, scale=1):
    return mnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("expon.cdf", x, loc, scale)
    return mnp.where(x < loc, 0.0, -mnp.expm1(mnp.minimum((loc - x) / scale, 0.0)))


def logsf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("expon.logsf", x, loc, scale)
    return mnp.where(x < loc, 0.0, (loc - x) / scale)


def sf(x, loc=0, scale=1):
    return mnp.exp(logsf(x, loc, scale))


def logcdf(x, loc=0, scale=1):
    return mnp.log1p(-sf(x, loc, scale))


def ppf(q, loc=0, scale=1):
    q, loc, scale = promote_args_inexact("expon.ppf", q, loc, scale)
    bad = mnp.isnan(q) | (q < 0) | (q > 1)
    return mnp.where(bad, nan, loc - scale * mnp.log1p(-mnp.where(bad, 0.0, q)))
