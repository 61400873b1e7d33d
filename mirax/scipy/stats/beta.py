"""jax.scipy.stats.beta: the beta distribution on [loc, loc + scale]."""
from __future__ import annotations

import mirax.numpy as mnp
from mirax.scipy import special
from mirax.scipy.stats._common import inf, nan, promote_args_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


def logpdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote_args_inexact("beta.logpdf", x, a, b, loc, scale)
    outside = (x > loc + scale) | (x < loc)
    y = mnp.where(outside, 0.5, (x - loc) / scale)
    log_probs = (-special.betaln(a, b) + special.xlogy(a - 1.0, y)
                 + special.xlog1py(b - 1.0, -y) - mnp.log(scale))
    out = mnp.where(outside, -inf, log_probs)
    return mnp.where((a <= 0) | (b <= 0) | (scale <= 0), nan, out)


def pdf(x, a, b, loc=0, scale=1):
    return mnp.exp(logpdf(x, a, b, loc, scale))


def cdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote_args_inexact("beta.cdf", x, a, b, loc, scale)
    return special.betainc(a, b, mnp.clip((x - loc) / scale, 0.0, 1.0))


def logcdf(x, a, b, loc=0, scale=1):
    return mnp.log(cdf(x, a, b, loc, scale))


def sf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote_args_inexact("beta.sf", x, a, b, loc, scale)
    return special.betainc(b, a, 1.0 - mnp.clip((x - loc) / scale, 0.0, 1.0))


def logsf(x, a, b, loc=0, scale=1):
    return mnp.log(sf(x, a, b, loc, scale))
