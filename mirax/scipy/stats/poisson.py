"""jax.scipy.stats.poisson: the Poisson distribution with mean mu."""
from __future__ import annotations

import math

import mirax.numpy as mnp
from mirax.scipy import special
from mirax.scipy.stats._common import inf, promote_args_inexact

__all__ = ["logpmf", "pmf", "cdf", "entropy"]


def logpmf(k, mu, loc=0):
    k, mu, loc = promote_args_inexact("poisson.logpmf", k, mu, loc)
    x = k - loc
    bad = (x < 0) | (mnp.round(k) != k)
    xs = mnp.where(bad, 0.0, x)
    log_probs = special.xlogy(xs, mu) - special.gammaln(xs + 1.0) - mu
    return mnp.where(bad, -inf, log_probs)


def pmf(k, mu, loc=0):
    return mnp.exp(logpmf(k, mu, loc))


def cdf(k, mu, loc=0):
    k, mu, loc = promote_args_inexact("poisson.cdf", k, mu, loc)
    x = k - loc
    p = special.gammaincc(mnp.floor(1.0 + mnp.maximum(x, 0.0)), mu)
    return mnp.where(x < 0, 0.0, p)


def _entropy_sum(mu, max_k, bound):
    """-sum_k p log p over k < min(max_k, bound) (the rest of the mass is negligible)."""
    k = mnp.arange(max_k, dtype=mu.dtype).reshape((max_k,) + (1,) * mu.ndim)
    probs = mnp.where(k < bound, pmf(k, mu), 0.0)
    return mnp.sum(special.entr(probs), axis=0)


def entropy(mu, loc=0):
    """The entropy of Poisson(mu) (JAX's regimes: a sum over k <= mu + 20 for mu < 10, over
    k <= mu + 10 sqrt(mu) + 20 for mu < 100, Stirling's expansion beyond); loc does not
    change it."""
    mu, loc = promote_args_inexact("poisson.entropy", mu, loc)
    shape = mnp.broadcast_shapes(mu.shape, loc.shape)
    safe = mnp.where(mu > 0, mu, 1.0)
    small = _entropy_sum(mnp.minimum(safe, 10.0), 35, mnp.ceil(safe + 20.0))
    medium = _entropy_sum(mnp.minimum(safe, 100.0), 250,
                          mnp.ceil(safe + 10.0 * mnp.sqrt(safe) + 20.0))
    large = 0.5 * mnp.log(2 * math.pi * math.e * safe) - 1.0 / (12.0 * safe)
    out = mnp.where(mu < 10, small, mnp.where(mu < 100, medium, large))
    out = mnp.where(mu == 0, 0.0, mnp.where(mu < 0, mnp.nan, out))
    return mnp.broadcast_to(out, shape)
