"""jax.scipy.stats.wrapcauchy: the wrapped Cauchy distribution on [0, 2 pi]."""
from __future__ import annotations

import math

import mirax.numpy as mnp
from mirax.scipy.stats._common import inf, nan, promote_args_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x, c):
    x, c = promote_args_inexact("wrapcauchy.logpdf", x, c)
    ok_c = (c > 0) & (c < 1)
    cs = mnp.where(ok_c, c, 0.5)
    val = (mnp.log(1.0 - cs * cs) - math.log(2 * math.pi)
           - mnp.log(1.0 + cs * cs - 2.0 * cs * mnp.cos(x)))
    inside = (x >= 0) & (x <= 2 * math.pi)
    return mnp.where(ok_c, mnp.where(inside, val, -inf), nan)


def pdf(x, c):
    return mnp.exp(logpdf(x, c))
