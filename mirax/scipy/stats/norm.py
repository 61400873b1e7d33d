"""jax.scipy.stats.norm: the normal distribution N(loc, scale^2)."""
from __future__ import annotations

import math

import mirax.numpy as mnp
from mirax.scipy import special
from mirax.scipy.stats._common import promote_args_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("norm.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return -0.5 * z * z - mnp.log(scale) - 0.5 * math.log(2 * math.pi)


def pdf(x, loc=0, scale=1):
    return mnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("norm.cdf", x, loc, scale)
    return special.ndtr((x - loc) / scale)


def logcdf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("norm.logcdf", x, loc, scale)
    return special.log_ndtr((x - loc) / scale)


def sf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("norm.sf", x, loc, scale)
    return special.ndtr((loc - x) / scale)


def logsf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("norm.logsf", x, loc, scale)
    return special.log_ndtr((loc - x) / scale)


def ppf(q, loc=0, scale=1):
    q, loc, scale = promote_args_inexact("norm.ppf", q, loc, scale)
    return special.ndtri(q) * scale + loc


def isf(q, loc=0, scale=1):
    """ppf(1 - q), computed as loc - scale ndtri(q) (no cancellation for small q)."""
    q, loc, scale = promote_args_inexact("norm.isf", q, loc, scale)
    return loc - special.ndtri(q) * scale
