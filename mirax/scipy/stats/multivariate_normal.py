"""jax.scipy.stats.multivariate_normal: logpdf / pdf of N(mean, cov), by a Cholesky factor
(cov may also be a scalar: an isotropic covariance)."""
from __future__ import annotations

import math

import numpy as np

import mirax.numpy as mnp
from mirax.ops import linalg as la
from mirax.scipy.stats._common import promote_args_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x, mean, cov, allow_singular=None):
    if allow_singular is not None:
        raise NotImplementedError("multivariate_normal.logpdf: allow_singular is not supported "
                                  "(as in JAX)")
    x, mean, cov = promote_args_inexact("multivariate_normal.logpdf", x, mean, cov)
    log2pi = math.log(2 * math.pi)
    if mean.ndim == 0:
        return -0.5 * mnp.square(x - mean) / cov - 0.5 * (log2pi + mnp.log(cov))
    n = mean.shape[-1]
    y = x - mean
    if cov.ndim == 0:
        return -0.5 * mnp.sum(y * y, axis=-1) / cov - n / 2 * (log2pi + mnp.log(cov))
    if cov.ndim < 2 or tuple(cov.shape[-2:]) != (n, n):
        raise ValueError(f"multivariate_normal.logpdf: cov {cov.shape} must be ({n}, {n}) "
                         f"(or a stack of them) for mean {mean.shape}")
    lo = la.cholesky(cov)
    batch = np.broadcast_shapes(tuple(lo.shape[:-2]), tuple(y.shape[:-1]))
    lo_b = mnp.broadcast_to(lo, tuple(batch) + (n, n))
    y_b = mnp.broadcast_to(y, tuple(batch) + (n,))[..., None]
    z = la.triangular_solve(lo_b, y_b, left_side=True, lower=True)[..., 0]   # L z = x - mean
    log_det_half = mnp.sum(mnp.log(mnp.diagonal(lo, axis1=-2, axis2=-1)), axis=-1)
    return -0.5 * mnp.sum(z * z, axis=-1) - n / 2 * log2pi - log_det_half


def pdf(x, mean, cov):
    return mnp.exp(logpdf(x, mean, cov))
