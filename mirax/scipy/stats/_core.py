"""jax.scipy.stats's plain functions: sem."""
from __future__ import annotations

import math

import mirax.numpy as mnp
from mirax.scipy.stats._common import promote_args_inexact

__all__ = ["sem"]


def sem(a, axis=0, ddof=1, nan_policy="propagate", *, keepdims=False):
    """The standard error of the mean: std(a, ddof) / sqrt(n) along axis."""
    (b,) = promote_args_inexact("sem", a)
    if nan_policy == "propagate":
        size = b.size if axis is None else b.shape[axis]
        return mnp.std(b, axis=axis, ddof=ddof, keepdims=keepdims) / math.sqrt(size)
    if nan_policy == "omit":
        count = mnp.sum(~mnp.isnan(b), axis=axis, keepdims=keepdims)
        return mnp.nanstd(b, axis=axis, ddof=ddof, keepdims=keepdims) / \
            mnp.sqrt(count.astype(b.dtype))
    raise ValueError(f"sem: nan_policy {nan_policy!r} is not supported")
