"""jax.scipy.stats.chi2: the chi-squared distribution with df degrees of freedom."""
from __future__ import annotations

import math

import mirax.numpy as mnp
from mirax.scipy import special
from mirax.scipy.stats._common import inf, promote_args_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


def logpdf(x, df, loc=0, scale=1):
    x, df, loc, scale = promote_args_inexact("chi2.logpdf", x, df, loc, scale)
    below = x < loc
    y = mnp.where(below, 1.0, (x - loc) / scale)
    half = df / 2.0
    kernel = special.xlogy(half - 1.0, y) - y / 2.0
    norm = -(special.gammaln(half) + math.log(2.0) * half)
    return mnp.where(below, -inf, norm - mnp.log(scale) + kernel)


def pdf(x, df, loc=0, scale=1):
    return mnp.exp(logpdf(x, df, loc, scale))


def cdf(x, df, loc=0, scale=1):
    x, df, loc, scale = promote_args_inexact("chi2.cdf", x, df, loc, scale)
    return special.gammainc(df / 2.0, mnp.maximum((x - loc) / (2.0 * scale), 0.0))


def logcdf(x, df, loc=0, scale=1):
    return mnp.log(cdf(x, df, loc, scale))


def sf(x, df, loc=0, scale=1):
    x, df, loc, scale = promote_args_inexact("chi2.sf", x, df, loc, scale)
    return special.gammaincc(df / 2.0, mnp.maximum((x - loc) / (2.0 * scale), 0.0))


def logsf(x, df, loc=0, scale=1):
    return mnp.log(sf(x, df, loc, scale))
