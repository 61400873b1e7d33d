"""jax.scipy.stats's plain functions: sem, mode, rankdata."""
from __future__ import annotations

import math
from typing import NamedTuple

import mirax.numpy as mnp
from mirax.core.array import Array
from mirax.scipy.stats._common import promote_args_inexact

__all__ = ["sem", "mode", "rankdata", "ModeResult"]


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


class ModeResult(NamedTuple):
    mode: Array
    count: Array


def _check_nan_policy(nan_policy, op):
    if nan_policy not in ("propagate", "omit", "raise"):
        raise ValueError(f"{op}: illegal nan_policy {nan_policy!r}; expected 'propagate', "
                         "'omit' or 'raise'")
    if nan_policy != "propagate":
        raise NotImplementedError(f"{op}: nan_policy={nan_policy!r} is not implemented "
                                  "(as JAX)")


def mode(a, axis=0, nan_policy="propagate", keepdims=False):
    """The most common value along axis (the smallest of ties) and its count; NaNs are never
    counted equal (as JAX)."""
    _check_nan_policy(nan_policy, "mode")
    x = mnp.atleast_1d(mnp.asarray(a))
    ndim_in = x.ndim
    if axis is None:
        out = mode(mnp.ravel(x), 0, nan_policy)
        if keepdims:
            out = ModeResult(*(mnp.reshape(v, (1,) * ndim_in) for v in out))
        return out
    axis = axis % x.ndim
    s = mnp.sort(mnp.moveaxis(x, axis, -1), axis=-1)          # ties: the first is smallest
    if s.shape[-1] == 0:
        out_shape = tuple(s.shape[:-1])
        return ModeResult(mnp.full(out_shape, mnp.nan, dtype=mnp.float32),
                          mnp.zeros(out_shape, dtype=mnp.int32))
    counts = mnp.sum(s[..., :, None] == s[..., None, :], axis=-1).astype(mnp.int32)
    best = mnp.argmax(counts, axis=-1)[..., None]
    value = mnp.take_along_axis(s, best, axis=-1)[..., 0]
    count = mnp.take_along_axis(counts, best, axis=-1)[..., 0]
    if keepdims:
        value, count = mnp.expand_dims(value, axis), mnp.expand_dims(count, axis)
    return ModeResult(value, count)


def _rank_1d(a, method):
    n = a.shape[0]
    order = mnp.argsort(a)
    arr = a[order]
    inv = mnp.zeros((n,), dtype=mnp.int32).at[order].set(mnp.arange(n, dtype=mnp.int32))
    if method == "ordinal":
        return (inv + 1).astype(mnp.float32)
    obs = mnp.concatenate([mnp.ones((1,), dtype=bool), arr[1:] != arr[:-1]])
    dense = mnp.cumsum(obs.astype(mnp.int32))[inv]
    if method == "dense":
        return dense.astype(mnp.float32)
    count = mnp.nonzero(obs, size=n + 1, fill_value=n)[0].astype(mnp.float32)
    if method == "max":
        return count[dense]
    if method == "min":
        return count[dense - 1] + 1
    return 0.5 * (count[dense] + count[dense - 1] + 1)


def rankdata(a, method="average", *, axis=None, nan_policy="propagate"):
    """Ranks from 1, ties resolved by `method` ('average', 'min', 'max', 'dense',
    'ordinal'); all NaN when the data has a NaN (as JAX)."""
    _check_nan_policy(nan_policy, "rankdata")
    if method not in ("average", "min", "max", "dense", "ordinal"):
        raise ValueError(f"rankdata: unknown method {method!r}")
    x = mnp.asarray(a)
    if axis is not None:
        moved = mnp.moveaxis(x, axis, -1)
        flat = mnp.reshape(moved, (-1, moved.shape[-1]))
        ranks = mnp.stack([rankdata(flat[i], method) for i in range(flat.shape[0])])
        return mnp.moveaxis(mnp.reshape(ranks, moved.shape), -1, axis)
    x = mnp.ravel(x)
    ranks = _rank_1d(x, method)
    if mnp.issubdtype(x.dtype, mnp.inexact):
        ranks = mnp.where(mnp.any(mnp.isnan(x)), mnp.nan, ranks)
    return ranks
