"""jax.scipy.stats.binom: k successes in n trials of probability p."""
from __future__ import annotations

import mirax.numpy as mnp
from mirax.scipy import special
from mirax.scipy.stats._common import inf, promote_args_inexact

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, p, loc=0):
    k, n, p, loc = promote_args_inexact("binom.logpmf", k, n, p, loc)
    inside = (k >= loc) & (k < loc + n + 1)
    y = mnp.where(inside, k - loc, 0.0)
    comb = special.gammaln(n + 1.0) - (special.gammaln(y + 1.0) + special.gammaln(n - y + 1.0))
    linear = special.xlogy(y, p) + special.xlog1py(n - y, -p)
    log_probs = mnp.where(((y == 0) & (n == 0)) | (linear == 0), 0.0, comb + linear)
    return mnp.where(inside, log_probs, -inf)


def pmf(k, n, p, loc=0):
    return mnp.exp(logpmf(k, n, p, loc))
