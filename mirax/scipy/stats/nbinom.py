"""jax.scipy.stats.nbinom: k failures before the n-th success of probability p."""
from __future__ import annotations

import mirax.numpy as mnp
from mirax.scipy import special
from mirax.scipy.stats._common import inf, promote_args_inexact

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, p, loc=0):
    k, n, p, loc = promote_args_inexact("nbinom.logpmf", k, n, p, loc)
    below = k < loc
    y = mnp.where(below, 0.0, k - loc)
    comb = special.gammaln(y + n) - special.gammaln(n) - special.gammaln(y + 1.0)
    linear = special.xlogy(n, p) + special.xlogy(y, 1.0 - p)
    return mnp.where(below, -inf, comb + linear)


def pmf(k, n, p, loc=0):
    return mnp.exp(logpmf(k, n, p, loc))
