"""jax.scipy.stats.gamma: the gamma distribution with shape a."""
from __future__ import annotations

import mirax.numpy as mnp
from mirax.scipy import special
from mirax.scipy.stats._common import inf, promote_args_inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


def logpdf(x, a, loc=0, scale=1):
    x, a, loc, scale = promote_args_inexact("gamma.logpdf", x, a, loc, scale)
    ok = x >= loc
    y = mnp.where(ok, (x - loc) / scale, 1.0)
    log_probs = special.xlogy(a - 1.0, y) - y - special.gammaln(a) - mnp.log(scale)
    return mnp.where(ok, log_probs, -inf)


def pdf(x, a, loc=0, scale=1):
    return mnp.exp(logpdf(x, a, loc, scale))


def cdf(x, a, loc=0, scale=1):
    x, a, loc, scale = promote_args_inexact("gamma.cdf", x, a, loc, scale)
    return special.gammainc(a, mnp.maximum((x - loc) / scale, 0.0))


def logcdf(x, a, loc=0, scale=1):
    return mnp.log(cdf(x, a, loc, scale))


def sf(x, a, loc=0, scale=1):
    x, a, loc, scale = promote_args_inexact("gamma.sf", x, a, loc, scale)
    y = (x - loc) / scale
    return mnp.where(y < 0, 1.0, special.gammaincc(a, mnp.maximum(y, 0.0)))


def logsf(x, a, loc=0, scale=1):
    return mnp.log(sf(x, a, loc, scale))
