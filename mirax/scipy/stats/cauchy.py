"""jax.scipy.stats.cauchy: the Cauchy distribution."""
from __future__ import annotations

import math

import mirax.numpy as mnp
from mirax.scipy.stats._common import promote_args_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("cauchy.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return -(mnp.log(math.pi * scale) + mnp.log1p(z * z))


def pdf(x, loc=0, scale=1):
    return mnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("cauchy.cdf", x, loc, scale)
    return 0.5 + mnp.arctan((x - loc) / scale) / math.pi


def logcdf(x, loc=0, scale=1):
    return mnp.log(cdf(x, loc, scale))


def sf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("cauchy.sf", x, loc, scale)
    return cdf(-x, -loc, scale)


def logsf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("cauchy.logsf", x, loc, scale)
    return logcdf(-x, -loc, scale)


def ppf(q, loc=0, scale=1):
    q, loc, scale = promote_args_inexact("cauchy.ppf", q, loc, scale)
    return mnp.tan(math.pi * q - math.pi / 2) * scale + loc


def isf(q, loc=0, scale=1):
    q, loc, scale = promote_args_inexact("cauchy.isf", q, loc, scale)
    return mnp.tan(math.pi / 2 - math.pi * q) * scale + loc
