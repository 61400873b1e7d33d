"""jax.scipy.stats.uniform: the uniform distribution on [loc, loc + scale]."""
from __future__ import annotations

import mirax.numpy as mnp
from mirax.scipy.stats._common import inf, nan, promote_args_inexact

__all__ = ["logpdf", "pdf", "cdf", "ppf"]


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("uniform.logpdf", x, loc, scale)
    return mnp.where((x > loc + scale) | (x < loc), -inf, -mnp.log(scale))


def pdf(x, loc=0, scale=1):
    return mnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("uniform.cdf", x, loc, scale)
    inside = (x - loc) / scale
    return mnp.where(x < loc, 0.0, mnp.where(x > loc + scale, 1.0,
                                             mnp.where(mnp.isnan(x), nan, inside)))


def ppf(q, loc=0, scale=1):
    q, loc, scale = promote_args_inexact("uniform.ppf", q, loc, scale)
    return mnp.where(mnp.isnan(q) | (q < 0) | (q > 1), nan, loc + scale * q)
