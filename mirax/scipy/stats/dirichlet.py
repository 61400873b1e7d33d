"""jax.scipy.stats.dirichlet: the Dirichlet distribution; x is (K, ...) or (K - 1, ...) (the
last coordinate is then 1 - sum) and alpha is (K,)."""
from __future__ import annotations

import mirax.numpy as mnp
from mirax.scipy import special
from mirax.scipy.stats._common import inf, promote_args_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x, alpha):
    x, alpha = promote_args_inexact("dirichlet.logpdf", x, alpha)
    if alpha.ndim != 1:
        raise ValueError(f"dirichlet.logpdf: alpha must be one-dimensional; got shape "
                         f"{alpha.shape}")
    k = alpha.shape[0]
    if x.ndim < 1 or x.shape[0] not in (k, k - 1):
        raise ValueError(f"dirichlet.logpdf: x must have {k} or {k - 1} entries along axis 0; "
                         f"got shape {x.shape} for alpha shape {alpha.shape}")
    if x.shape[0] != k:
        x = mnp.concatenate([x, 1.0 - mnp.sum(x, axis=0, keepdims=True)], axis=0)
    normalize = mnp.sum(special.gammaln(alpha)) - special.gammaln(mnp.sum(alpha))
    a = mnp.reshape(alpha, (k,) + (1,) * (x.ndim - 1))
    simplex = mnp.all(x > 0, axis=0) & (mnp.abs(mnp.sum(x, axis=0) - 1.0) < 1e-6)
    xs = mnp.where(x > 0, x, 1.0)
    log_probs = mnp.sum(special.xlogy(a - 1.0, xs), axis=0) - normalize
    return mnp.where(simplex, log_probs, -inf)


def pdf(x, alpha):
    return mnp.exp(logpdf(x, alpha))
