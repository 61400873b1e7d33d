"""jax.scipy.stats.betabinom: the beta-binomial distribution."""
from __future__ import annotations

import mirax.numpy as mnp
from mirax.scipy import special
from mirax.scipy.stats._common import inf, nan, promote_args_inexact

__all__ = ["logpmf", "pmf"]


def logpmf(k, n, a, b, loc=0):
    k, n, a, b, loc = promote_args_inexact("betabinom.logpmf", k, n, a, b, loc)
    y = mnp.floor(k) - loc
    bad_y = (y < -loc) | (y > n) | (y + a <= 0)
    ys = mnp.where(bad_y, 0.0, y)
    combiln = -(mnp.log1p(n) + special.betaln(n - ys + 1.0, ys + 1.0))
    beta_lns = special.betaln(ys + a, n - ys + b) - special.betaln(a, b)
    log_probs = mnp.where((ys == 0) & (n == 0), 0.0, combiln + beta_lns)
    log_probs = mnp.where(bad_y, -inf, log_probs)
    return mnp.where((n < 0) | (a <= 0) | (b <= 0), nan, log_probs)


def pmf(k, n, a, b, loc=0):
    return mnp.exp(logpmf(k, n, a, b, loc))
