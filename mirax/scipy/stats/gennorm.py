"""jax.scipy.stats.gennorm: the generalized normal distribution with shape beta."""
from __future__ import annotations

import mirax.numpy as mnp
from mirax.scipy import special
from mirax.scipy.stats._common import promote_args_inexact

__all__ = ["logpdf", "pdf", "cdf"]


def logpdf(x, beta):
    x, beta = promote_args_inexact("gennorm.logpdf", x, beta)
    return mnp.log(0.5 * beta) - special.gammaln(1.0 / beta) - mnp.abs(x) ** beta


def pdf(x, beta):
    return mnp.exp(logpdf(x, beta))


def cdf(x, beta):
    x, beta = promote_args_inexact("gennorm.cdf", x, beta)
    return 0.5 * (1.0 + mnp.sign(x) * special.gammainc(1.0 / beta, mnp.abs(x) ** beta))
