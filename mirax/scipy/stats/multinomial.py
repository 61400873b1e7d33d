"""jax.scipy.stats.multinomial: counts x (integers, last axis the categories) of n trials
with category probabilities p."""
from __future__ import annotations

import mirax.numpy as mnp
from mirax.scipy import special
from mirax.scipy.stats._common import inf, promote_args_inexact

__all__ = ["logpmf", "pmf"]


def logpmf(x, n, p):
    (p,) = promote_args_inexact("multinomial.logpmf", p)
    x, n = mnp.asarray(x), mnp.asarray(n)
    if not (mnp.issubdtype(x.dtype, mnp.integer) and mnp.issubdtype(n.dtype, mnp.integer)):
        raise ValueError(f"multinomial.logpmf: x and n must be of integer type; got "
                         f"x.dtype={x.dtype}, n.dtype={n.dtype}")
    x, n = x.astype(p.dtype), n.astype(p.dtype)
    log_probs = special.gammaln(n + 1.0) + mnp.sum(special.xlogy(x, p)
                                                  - special.gammaln(x + 1.0), axis=-1)
    # NOTE: JAX compares the sum over all of x (so a batch of count vectors is -inf); the
    # counts of each vector are what must add up to n (scipy)
    return mnp.where(mnp.sum(x, axis=-1) == n, log_probs, -inf)


def pmf(x, n, p):
    return mnp.exp(logpmf(x, n, p))
