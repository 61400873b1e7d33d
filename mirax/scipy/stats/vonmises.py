"""jax.scipy.stats.vonmises: the von Mises distribution on the circle (concentration
kappa), normalized with the scaled Bessel function i0e for large kappa."""
from __future__ import annotations

import math

import mirax.numpy as mnp
from mirax.scipy import special
from mirax.scipy.stats._common import nan, promote_args_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x, kappa):
    x, kappa = promote_args_inexact("vonmises.logpdf", x, kappa)
    ok = kappa > 0
    k = mnp.where(ok, kappa, 1.0)
    val = k * (mnp.cos(x) - 1.0) - mnp.log(2 * math.pi * special.i0e(k))
    return mnp.where(ok, val, nan)


def pdf(x, kappa):
    return mnp.exp(logpdf(x, kappa))
