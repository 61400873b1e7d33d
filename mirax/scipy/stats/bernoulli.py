"""jax.scipy.stats.bernoulli: P(k = 1) = p."""
from __future__ import annotations

import mirax.numpy as mnp
from mirax.scipy import special
from mirax.scipy.stats._common import inf, nan, promote_args_inexact

__all__ = ["logpmf", "pmf", "cdf", "ppf"]


def logpmf(k, p, loc=0):
    k, p, loc = promote_args_inexact("bernoulli.logpmf", k, p, loc)
    x = k - loc
    log_probs = special.xlogy(x, p) + special.xlog1py(1.0 - x, -p)
    return mnp.where((x < 0) | (x > 1), -inf, log_probs)


def pmf(k, p, loc=0):
    return mnp.exp(logpmf(k, p, loc))


def cdf(k, p):
    k, p = promote_args_inexact("bernoulli.cdf", k, p)
    bad = mnp.isnan(k) | mnp.isnan(p) | (p < 0) | (p > 1)
    return mnp.where(bad, nan, mnp.where(k < 0, 0.0, mnp.where(k < 1, 1.0 - p, 1.0)))


def ppf(q, p):
    q, p = promote_args_inexact("bernoulli.ppf", q, p)
    bad = mnp.isnan(q) | mnp.isnan(p) | (p < 0) | (p > 1) | (q < 0) | (q > 1)
    return mnp.where(bad, nan, mnp.where(q <= 1.0 - p, mnp.zeros_like(q), mnp.ones_like(q)))
