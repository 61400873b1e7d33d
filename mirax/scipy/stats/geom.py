"""jax.scipy.stats.geom: the number of trials up to the first success (k >= 1)."""
from __future__ import annotations

import mirax.numpy as mnp
from mirax.scipy import special
from mirax.scipy.stats._common import inf, promote_args_inexact

__all__ = ["logpmf", "pmf"]


def logpmf(k, p, loc=0):
    k, p, loc = promote_args_inexact("geom.logpmf", k, p, loc)
    x = k - loc
    xs = mnp.where(x <= 0, 1.0, x)
    return mnp.where(x <= 0, -inf, special.xlog1py(xs - 1.0, -p) + mnp.log(p))


def pmf(k, p, loc=0):
    return mnp.exp(logpmf(k, p, loc))
