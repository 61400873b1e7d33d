"""jax.scipy.stats.t: Student's t distribution with df degrees of freedom."""
from __future__ import annotations

import math

import mirax.numpy as mnp
from mirax.scipy import special
from mirax.scipy.stats._common import promote_args_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x, df, loc=0, scale=1):
    x, df, loc, scale = promote_args_inexact("t.logpdf", x, df, loc, scale)
    z = (x - loc) / scale
    half_df = df / 2.0
    normalize = (special.gammaln(half_df) + 0.5 * mnp.log(scale * scale * math.pi * df)
                 - special.gammaln(half_df + 0.5))
    return -(normalize + (half_df + 0.5) * mnp.log1p(z * z / df))


def pdf(x, df, loc=0, scale=1):
    return mnp.exp(logpdf(x, df, loc, scale))
