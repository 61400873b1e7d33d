"""jax.scipy.stats.poisson: the Poisson distribution with mean mu."""
from __future__ import annotations

import mirax.numpy as mnp
from mirax.scipy import special
from mirax.scipy.stats._common import inf, promote_args_inexact

__all__ = ["logpmf", "pmf", "cdf"]


def logpmf(k, mu, loc=0):
    k, mu, loc = promote_args_inexact("poisson.logpmf", k, mu, loc)
    x = k - loc
    bad = (x < 0) | (mnp.round(k) != k)
    xs = mnp.where(bad, 0.0, x)
    log_probs = special.xlogy(xs, mu) - special.gammaln(xs + 1.0) - mu
    return mnp.where(bad, -inf, log_probs)


def pmf(k, mu, loc=0):
    return mnp.exp(logpmf(k, mu, loc))


def cdf(k, mu, loc=0):
    k, mu, loc = promote_args_inexact("poisson.cdf", k, mu, loc)
    x = k - loc
    p = special.gammaincc(mnp.floor(1.0 + mnp.maximum(x, 0.0)), mu)
    return mnp.where(x < 0, 0.0, p)
