"""mirax.numpy set operations (unique, isin, the *1d functions; jax.numpy's behaviour)
and the helpers of the data-dependent shapes that _stats and _select use too.

Functions whose result shape depends on the data (unique, the *1d set functions, extract,
bincount without length) follow JAX and `nonzero`: eager calls on concrete values just work;
under jit / vmap pass `size=` (and `fill_value=`), or they raise ConcretizationError naming the
fix. Everything else is written on mirax ops, so grad / vmap / jit go through it.
"""
from __future__ import annotations

import builtins
from typing import NamedTuple

import numpy as np

from mirax.core import dtypes
from mirax.core.array import Array
from mirax.core.errors import ConcretizationError
from mirax.numpy import _core as c
from mirax.numpy import _indexing as ixn
from mirax.numpy import _math as m
from mirax.numpy import _sorting as srt
from mirax.ops import elementwise as ew
from mirax.ops import indexing as ix
from mirax.ops import shape as sh
from mirax.ops import sort as so
from mirax.ops.common import normalize_axis, operand, promote, short

__all__ = [
    "unique",
    "unique_values",
    "unique_counts",
    "unique_inverse",
    "unique_all",
    "isin",
    "intersect1d",
    "union1d",
    "setdiff1d",
    "setxor1d",
]

_int = dtypes.int32


# --- helpers ----------------------------------------------------------------------------------
def _need_size(op, x, size, arg="size"):
    """Raise as JAX does when a data-dependent size is asked of a traced value."""
    if size is None and ixn._concrete(x) is None:
        raise ConcretizationError(
            f"{op}: {short(x)} is traced (inside jit or vmap) and the size of the result "
            f"depends on its values; pass {arg}=... (a static int) to fix the output size")


def _flat(x, op):
    x = operand(x, op)
    return sh.reshape(x, (x.size,)) if x.ndim != 1 else x


def _iota(n):
    return sh.iota(_int, (n,))


def _count(mask):
    return c.sum(mask, dtype=_int)


def _positions(mask, size):
    """Indices of the true entries of a 1-d mask (padded with 0 to `size` when given)."""
    return ixn.nonzero(mask, size=size)[0]


def _pad_tail(vals, count, fill):
    """vals with entries at positions >= count replaced by fill."""
    valid = ew.lt(_iota(vals.shape[0]), count)
    if vals.ndim > 1:
        valid = sh.broadcast_in_dim(valid, vals.shape, (0,))
    return m.where(valid, vals, ew.convert_element_type(operand(fill), vals.dtype))


def _first_or_zero(vals, count):
    """JAX's default padding: the first (smallest) result, or 0 when there is none."""
    if vals.shape[0] == 0:
        return ew.zeros_like(sh.reshape(vals, vals.shape[1:])) if vals.ndim > 1 else 0
    first = sh.index_in_dim(vals, 0, 0, keepdims=False)
    return m.where(ew.gt(count, 0), first, ew.zeros_like(first))


# --- unique -----------------------------------------------------------------------------------
def _sorted_mask(x, equal_nan):
    """Sort the rows of 2-d x lexicographically; mask marks the first row of each run."""
    n, k = x.shape
    cols = [sh.index_in_dim(x, j, 1, keepdims=False) for j in range(k)]
    out = so.sort(cols + [_iota(n)], axis=0, num_keys=builtins.max(k, 1)) if k else \
        [_iota(n)]
    perm, s = out[-1], sh.stack(out[:-1], 1) if k else x
    if n == 0:
        return s, Array(np.zeros(0, bool)), perm
    a, b = sh.slice_in_dim(s, 1, n, axis=0), sh.slice_in_dim(s, 0, n - 1, axis=0)
    diff = ew.ne(a, b)
    if equal_nan and dtypes.is_float(x.dtype):
        diff = m.logical_and(diff, m.logical_not(m.logical_and(m.isnan(a), m.isnan(b))))
    diff = c.any(diff, axis=1) if k else Array(np.zeros(n - 1, bool))
    return s, sh.concatenate([Array(np.ones(1, bool)), diff], 0), perm


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, size=None, fill_value=None, sorted=True):
    """np.unique (sorted). With `size` the outputs have that length (padded with fill_value,
    default the smallest unique value; counts with 0), so it works under jit."""
    x = operand(ar, "unique")
    _need_size("unique", x, size)
    if axis is None:
        shape0, x2, ax = x.shape, sh.reshape(x, (x.size, 1)), None
    else:
        ax = normalize_axis(axis, x.ndim, "unique", x)
        xm = sh.moveaxis(x, ax, 0)
        shape0, x2 = xm.shape, sh.reshape(xm, (xm.shape[0], -1))
    n = x2.shape[0]
    if n == 0 and size and fill_value is None:
        raise ValueError("unique: a zero-sized input with size > 0 needs fill_value")
    s, mask, perm = _sorted_mask(x2, equal_nan)
    count = _count(mask)
    ind = _positions(mask, size) if n else Array(np.zeros(0, np.int32))
    vals = ixn.take(s, ind, axis=0, mode="clip") if n else s
    if size is not None and fill_value is not None:
        vals = _pad_tail(vals, count, fill_value) if n else \
            sh.full((size,) + s.shape[1:], fill_value, s.dtype)
    vals = sh.reshape(vals, (vals.shape[0],)) if ax is None else \
        sh.moveaxis(sh.reshape(vals, (vals.shape[0],) + shape0[1:]), 0, ax)
    ret = [vals]
    if return_index:
        ret.append(ixn.take(perm, ind, mode="clip") if n else perm)
    if return_inverse:
        inv = ix.scatter(sh.full((n,), 0, _int), sh.reshape(perm, (n, 1)),
                         ew.sub(srt.cumsum(mask, dtype=_int), 1), (0,))
        ret.append(sh.reshape(inv, shape0) if ax is None else inv)
    if return_counts:
        ret.append(_counts(mask, n, size))
    return ret[0] if len(ret) == 1 else tuple(ret)


def _counts(mask, n, size):
    if n == 0:
        return sh.full((size or 0,), 0, _int)
    if size is None:
        starts = sh.concatenate([_positions(mask, None), Array(np.array([n], np.int32))], 0)
    else:
        starts = _positions(mask, size + 1)
        tail = sh.slice_in_dim(starts, 1, size + 1)
        tail = m.where(ew.ne(tail, 0), tail, n)
        starts = sh.concatenate([sh.slice_in_dim(starts, 0, 1), tail], 0)
    return ew.sub(sh.slice_in_dim(starts, 1, starts.shape[0]),
                  sh.slice_in_dim(starts, 0, starts.shape[0] - 1))


class UniqueAllResult(NamedTuple):
    values: Array
    indices: Array
    inverse_indices: Array
    counts: Array


class UniqueCountsResult(NamedTuple):
    values: Array
    counts: Array


class UniqueInverseResult(NamedTuple):
    values: Array
    inverse_indices: Array


def unique_all(x, /, *, size=None, fill_value=None):
    """Array API unique_all: NaNs are distinct (equal_nan=False), as in JAX."""
    return UniqueAllResult(*unique(x, True, True, True, equal_nan=False, size=size,
                                   fill_value=fill_value))


def unique_counts(x, /, *, size=None, fill_value=None):
    return UniqueCountsResult(*unique(x, return_counts=True, equal_nan=False, size=size,
                                      fill_value=fill_value))


def unique_inverse(x, /, *, size=None, fill_value=None):
    return UniqueInverseResult(*unique(x, return_inverse=True, equal_nan=False, size=size,
                                       fill_value=fill_value))


def unique_values(x, /, *, size=None, fill_value=None):
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)


# --- set operations ---------------------------------------------------------------------------
def isin(element, test_elements, assume_unique=False, invert=False, *, method="auto"):
    """Whether each element is in test_elements (compare-all: O(size * test size), static
    shapes, so it works under jit)."""
    e = operand(element, "isin")
    t = _flat(test_elements, "isin")
    e, t = promote("isin", e, t)
    if e.size == 0 or t.size == 0:
        return sh.full(e.shape, bool(invert), dtypes.bool_)
    eq = ew.eq(sh.expand_dims(e, e.ndim), sh.reshape(t, (1,) * e.ndim + (t.size,)))
    hit = c.any(eq, axis=-1)
    return m.logical_not(hit) if invert else hit


def _compact(s, keep, size, fill_value, default_fill):
    """The entries of sorted 1-d s where keep holds, in order; length `size` when given."""
    if size is None:
        return ixn.take(s, _positions(keep, None), mode="clip")
    count = _count(keep)
    if s.shape[0] == 0:
        return sh.full((size,), 0 if fill_value is None else fill_value, s.dtype)
    vals = ixn.take(s, _positions(keep, size), mode="clip")
    fill = (_first_or_zero(vals, count) if default_fill == "first" else 0) \
        if fill_value is None else fill_value
    return _pad_tail(vals, count, fill)


def _firsts(s):
    """Mask of the first entry of each run of equal values in sorted 1-d s."""
    n = s.shape[0]
    if n == 0:
        return Array(np.zeros(0, bool))
    ne = ew.ne(sh.slice_in_dim(s, 1, n), sh.slice_in_dim(s, 0, n - 1))
    return sh.concatenate([Array(np.ones(1, bool)), ne], 0)


def _pair(ar1, ar2, op, size):
    a, b = promote(op, _flat(ar1, op), _flat(ar2, op))
    _need_size(op, a, size)
    _need_size(op, b, size)
    return a, b


def union1d(ar1, ar2, *, size=None, fill_value=None):
    a, b = _pair(ar1, ar2, "union1d", size)
    return unique(sh.concatenate([a, b], 0), size=size, fill_value=fill_value)


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None,
                fill_value=None):
    """Sorted values in both arrays; return_indices gives the first positions in each
    (padded with len(ar1) / len(ar2) under size=). fill_value defaults to the smallest."""
    a, b = _pair(ar1, ar2, "intersect1d", size)
    s, perm = so.sort([a, _iota(a.shape[0])], axis=0) if a.shape[0] else (a, _iota(0))
    keep = m.logical_and(_firsts(s), isin(s, b))
    vals = _compact(s, keep, size, fill_value, "first")
    if not return_indices:
        return vals
    count = _count(keep)
    pos = _positions(keep, size)
    i1 = ixn.take(perm, pos, mode="clip") if a.shape[0] else pos
    if b.shape[0] and pos.shape[0]:
        hit = ew.eq(sh.expand_dims(vals, 1), sh.expand_dims(b, 0))
        i2 = c.argmax(hit, axis=1)
    else:
        i2 = ew.zeros_like(pos)
    if size is not None:
        i1, i2 = _pad_tail(i1, count, a.shape[0]), _pad_tail(i2, count, b.shape[0])
    return vals, i1, i2


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """Values of ar1 not in ar2 (sorted and unique unless assume_unique, which keeps ar1's
    order); padding defaults to 0 as in JAX."""
    a, b = _pair(ar1, ar2, "setdiff1d", size)
    if assume_unique:
        return _compact(a, isin(a, b, invert=True), size, fill_value, "zero")
    s = srt.sort(a)
    keep = m.logical_and(_firsts(s), isin(s, b, invert=True))
    return _compact(s, keep, size, fill_value, "zero")


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """Sorted values in exactly one of the arrays; padding defaults to the smallest."""
    a, b = _pair(ar1, ar2, "setxor1d", size)
    s = srt.sort(sh.concatenate([a, b], 0))
    keep = m.logical_and(_firsts(s), m.logical_xor(isin(s, a), isin(s, b)))
    return _compact(s, keep, size, fill_value, "first")
