"""jax.scipy.stats.logistic: the logistic distribution (CDF expit((x - loc) / scale))."""
from __future__ import annotations

import mirax.numpy as mnp
from mirax.scipy import special
from mirax.scipy.stats._common import promote_args_inexact

__all__ = ["logpdf", "pdf", "cdf", "sf", "ppf", "isf"]


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("logistic.logpdf", x, loc, scale)
    half = (x - loc) / scale / 2.0
    return -2.0 * mnp.logaddexp(half, -half) - mnp.log(scale)


def pdf(x, loc=0, scale=1):
    return mnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("logistic.cdf", x, loc, scale)
    return special.expit((x - loc) / scale)


def sf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("logistic.sf", x, loc, scale)
    return special.expit((loc - x) / scale)


def ppf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("logistic.ppf", x, loc, scale)
    return special.logit(x) * scale + loc


def isf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("logistic.isf", x, loc, scale)
    return loc - special.logit(x) * scale
