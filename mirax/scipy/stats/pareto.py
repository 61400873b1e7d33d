"""jax.scipy.stats.pareto: the Pareto distribution with shape b, support x >= loc + scale."""
from __future__ import annotations

import mirax.numpy as mnp
from mirax.scipy.stats._common import inf, nan, promote_args_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf"]


def _scaled(x, loc, scale):
    below = x < loc + scale
    return below, mnp.where(below, 1.0, (x - loc) / scale)


def logpdf(x, b, loc=0, scale=1):
    x, b, loc, scale = promote_args_inexact("pareto.logpdf", x, b, loc, scale)
    below, z = _scaled(x, loc, scale)
    return mnp.where(below, -inf, -(mnp.log(scale / b) + (b + 1.0) * mnp.log(z)))


def pdf(x, b, loc=0, scale=1):
    return mnp.exp(logpdf(x, b, loc, scale))


def cdf(x, b, loc=0, scale=1):
    x, b, loc, scale = promote_args_inexact("pareto.cdf", x, b, loc, scale)
    below, z = _scaled(x, loc, scale)
    return mnp.where(below, 0.0, 1.0 - z ** -b)


def logcdf(x, b, loc=0, scale=1):
    x, b, loc, scale = promote_args_inexact("pareto.logcdf", x, b, loc, scale)
    below, z = _scaled(x, loc, scale)
    return mnp.where(below, -inf, mnp.log1p(-(z ** -b)))


def logsf(x, b, loc=0, scale=1):
    x, b, loc, scale = promote_args_inexact("pareto.logsf", x, b, loc, scale)
    below, z = _scaled(x, loc, scale)
    return mnp.where(below, 0.0, -b * mnp.log(z))


def sf(x, b, loc=0, scale=1):
    return mnp.exp(logsf(x, b, loc, scale))


def ppf(q, b, loc=0, scale=1):
    q, b, loc, scale = promote_args_inexact("pareto.ppf", q, b, loc, scale)
    bad = mnp.isnan(q) | (q < 0) | (q > 1)
    return mnp.where(bad, nan, loc + scale * (1.0 - mnp.where(bad, 0.0, q)) ** (-1.0 / b))
