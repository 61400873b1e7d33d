"""jax.scipy.stats.laplace: the Laplace (double exponential) distribution."""
from __future__ import annotations

import mirax.numpy as mnp
from mirax.scipy.stats._common import promote_args_inexact

__all__ = ["logpdf", "pdf", "cdf"]


def logpdf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("laplace.logpdf", x, loc, scale)
    return -(mnp.abs(x - loc) / scale + mnp.log(2.0 * scale))


def pdf(x, loc=0, scale=1):
    return mnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    x, loc, scale = promote_args_inexact("laplace.cdf", x, loc, scale)
    z = (x - loc) / scale
    return mnp.where(z <= 0, 0.5 * mnp.exp(mnp.minimum(z, 0.0)),
                     1.0 - 0.5 * mnp.exp(-mnp.maximum(z, 0.0)))
