"""mirax.numpy set operations, counting and binning, nan-aware order statistics, selection /
insertion helpers, 1-d convolution, polynomials and function vectorizers (jax.numpy's
behaviour).

Functions whose result shape depends on the data (unique, the *1d set functions, extract,
bincount without length) follow JAX and `nonzero`: eager calls on concrete values just work;
under jit / vmap pass `size=` (and `fill_value=`), or they raise ConcretizationError naming the
fix. Everything else is written on mirax ops, so grad / vmap / jit go through it. Host-side
NumPy is used only on static indices (insert / delete positions, shapes).
"""
from __future__ import annotations

import builtins
import math
import re
from typing import NamedTuple

import numpy as np

from mirax.core import dtypes
from mirax.core.array import Array
from mirax.core.errors import ConcretizationError
from mirax.core.trace import Tracer
from mirax.numpy import _core as c
from mirax.numpy import _indexing as ixn
from mirax.numpy import _math as m
from mirax.numpy import _shape_extra as se
from mirax.numpy import _sorting as srt
from mirax.ops import elementwise as ew
from mirax.ops import indexing as ix
from mirax.ops import shape as sh
from mirax.ops import sort as so
from mirax.ops.common import normalize_axes, normalize_axis, operand, promote, short

__all__ = [
    "unique", "unique_values", "unique_counts", "unique_inverse", "unique_all", "isin",
    "intersect1d", "union1d", "setdiff1d", "setxor1d",
    "bincount", "digitize", "histogram_bin_edges", "histogram", "histogram2d", "histogramdd",
    "interp",
    "nanargmax", "nanargmin", "nanquantile", "nanpercentile", "nanmedian", "nancumsum",
    "nancumprod",
    "select", "piecewise", "choose", "extract", "place", "put", "insert", "delete",
    "unravel_index", "ravel_multi_index", "argpartition", "partition", "lexsort",
    "convolve", "correlate", "polyval", "polyadd", "polysub", "polymul", "polyder", "polyint",
    "polyfit", "apply_along_axis", "apply_over_axes", "vectorize",
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


# --- counting and binning ---------------------------------------------------------------------
def bincount(x, weights=None, minlength=0, *, length=None):
    """Counts (or summed weights) of each non-negative int; negatives count as 0 and values
    >= length are dropped, as in JAX. Under jit pass `length`."""
    x = operand(x, "bincount")
    if not dtypes.is_int(x.dtype):
        raise TypeError(f"bincount: x must be integers, got {short(x)}")
    if x.ndim != 1:
        raise ValueError(f"bincount: only 1-d input is supported, got {short(x)}")
    if length is None:
        _need_size("bincount", x, None, "length")
        v = np.asarray(ixn._concrete(x))
        length = builtins.max(int(minlength), int(v.max()) + 1 if v.size else 0)
    length = int(length)
    w = sh.full(x.shape, 1, _int) if weights is None else operand(weights, "bincount")
    if tuple(w.shape) != tuple(x.shape):
        raise ValueError(f"bincount: weights {short(w)} must have the shape of {short(x)}")
    idx = sh.reshape(ew.max(ew.convert_element_type(x, _int), 0), (x.shape[0], 1))
    return ix.scatter_add(sh.full((length,), 0, w.dtype), idx, w, (0,), mode="drop")


def digitize(x, bins, right=False, *, method=None):
    """Bin index of each x (bins increasing or decreasing)."""
    x = operand(x, "digitize")
    b = operand(bins, "digitize")
    if b.ndim != 1:
        raise ValueError(f"digitize: bins must be 1-d, got {short(b)}")
    n = b.shape[0]
    if n == 0:
        return sh.full(x.shape, 0, _int)
    side = "left" if right else "right"
    up = srt.searchsorted(b, x, side=side)
    down = ew.sub(n, srt.searchsorted(sh.rev(b, (0,)), x, side=side))
    first, last = sh.index_in_dim(b, 0, 0, False), sh.index_in_dim(b, n - 1, 0, False)
    return m.where(ew.ge(last, first), up, down)


def _inexact(x):
    return x if dtypes.is_float(x.dtype) else ew.convert_element_type(x, dtypes.float32)


def _promote_inexact(op, *xs):
    """Operands of one common dtype, then float (int -> float32), as JAX's inexact promotion."""
    return [_inexact(x) for x in promote(op, *[operand(x, op) for x in xs])]


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """Edges: an array of bins as given, or bins+1 even steps over range (default the data's
    min..max; an empty range widens by 0.5 each way)."""
    if isinstance(bins, str):
        raise NotImplementedError("histogram_bin_edges: string bins are not supported")
    x = _inexact(_flat(a, "histogram_bin_edges"))
    if bins.ndim == 1 if isinstance(bins, (Array, Tracer)) else np.ndim(bins) == 1:
        return ew.convert_element_type(operand(bins, "histogram_bin_edges"), x.dtype)
    if isinstance(bins, Tracer):
        raise ConcretizationError("histogram_bin_edges: an int number of bins must be "
                                  "static under jit")
    nb = int(bins)
    if nb < 1:
        raise ValueError(f"histogram_bin_edges: bins must be positive, got {nb}")
    if range is None:
        lo, hi = c.min(x), c.max(x)
    else:
        if len(range) != 2:
            raise ValueError(f"histogram_bin_edges: range must be (min, max), got {range}")
        lo = ew.convert_element_type(operand(range[0]), x.dtype)
        hi = ew.convert_element_type(operand(range[1]), x.dtype)
    same = ew.eq(lo, hi)
    lo, hi = m.where(same, ew.sub(lo, 0.5), lo), m.where(same, ew.add(hi, 0.5), hi)
    return c.linspace(lo, hi, nb + 1, dtype=x.dtype)


def histogram(a, bins=10, range=None, weights=None, density=None):
    """(counts, edges); the last bin is closed; values outside the edges are dropped."""
    x = _inexact(_flat(a, "histogram"))
    edges = histogram_bin_edges(x, bins, range)
    w = ew.ones_like(x) if weights is None else _flat(weights, "histogram")
    if w.shape != x.shape:
        raise ValueError(f"histogram: weights {short(w)} must have the shape of {short(x)}")
    ne = edges.shape[0]
    idx = srt.searchsorted(edges, x, side="right")
    idx = m.where(ew.eq(x, sh.index_in_dim(edges, ne - 1, 0, False)), ne - 1, idx)
    counts = ix.scatter_add(sh.full((ne,), 0, w.dtype), sh.reshape(idx, (-1, 1)), w, (0,),
                            mode="drop")
    counts = sh.slice_in_dim(counts, 1, ne)
    if density:
        widths = se.diff(edges)
        counts = ew.div(ew.div(counts, widths), c.sum(counts))
    return counts, edges


def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    """(hist, [edges per dimension]) of an [N, D] sample."""
    s = operand(sample, "histogramdd")
    if s.ndim != 2:
        raise ValueError(f"histogramdd: sample must be [N, D], got {short(s)}")
    n, d = s.shape
    s = _inexact(s)
    w = sh.full((n,), 1.0, s.dtype) if weights is None else _flat(weights, "histogramdd")
    if isinstance(bins, (Array, Tracer)):
        raise TypeError(f"histogramdd: bins must be an int or a sequence (one entry per "
                        f"dimension), got {short(bins)}")
    per_dim = [bins] * d if np.ndim(bins) == 0 else list(bins)
    if len(per_dim) != d:
        raise ValueError(f"histogramdd: {len(per_dim)} bins given for {d} dimensions")
    edges, idxs, nbins = [], [], []
    for i in builtins.range(d):
        col = sh.index_in_dim(s, i, 1, False)
        e = histogram_bin_edges(col, per_dim[i], None if range is None else range[i])
        k = srt.searchsorted(e, col, side="right")
        k = m.where(ew.eq(col, sh.index_in_dim(e, e.shape[0] - 1, 0, False)), ew.sub(k, 1), k)
        edges.append(e)
        idxs.append(k)
        nbins.append(e.shape[0] + 1)
    flat = ravel_multi_index(idxs, nbins, mode="clip")
    hist = bincount(flat, w, length=int(np.prod(nbins)))
    hist = sh.slice(sh.reshape(hist, tuple(nbins)), [1] * d, [k - 1 for k in nbins])
    if density:
        hist = ew.div(hist, c.sum(hist))
        for i in builtins.range(d):
            shape = [1] * d
            shape[i] = nbins[i] - 2
            hist = ew.div(hist, sh.reshape(se.diff(edges[i]), tuple(shape)))
    return hist, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    """(hist, xedges, yedges)."""
    try:
        nb = len(bins)
    except TypeError:
        nb = 1
    if nb not in (1, 2):
        bins = [bins, bins]
    sample = sh.stack(list(promote("histogram2d", _flat(x, "histogram2d"),
                                   _flat(y, "histogram2d"))), 1)
    hist, edges = histogramdd(sample, bins, range, weights, density)
    return hist, edges[0], edges[1]


def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation (as jnp.interp: differentiable in x, xp and fp)."""
    x, xp, fp = _promote_inexact("interp", x, xp, fp)
    if xp.ndim != 1 or fp.shape != xp.shape or xp.shape[0] == 0:
        raise ValueError(f"interp: xp and fp must be 1-d of one nonzero length, got "
                         f"{short(xp)} and {short(fp)}")
    if period is not None:
        p = m.abs(operand(period))
        x, xp = m.remainder(x, p), m.remainder(xp, p)
        xp, fp = so.sort([xp, fp], axis=0)
        n = xp.shape[0]
        xp = sh.concatenate([ew.sub(sh.slice_in_dim(xp, n - 1, n), p), xp,
                             ew.add(sh.slice_in_dim(xp, 0, 1), p)], 0)
        fp = sh.concatenate([sh.slice_in_dim(fp, n - 1, n), fp, sh.slice_in_dim(fp, 0, 1)], 0)
    n = xp.shape[0]
    i = m.clip(srt.searchsorted(xp, x, side="right"), 1, builtins.max(n - 1, 1))
    im1 = ew.max(ew.sub(i, 1), 0)
    x0, x1 = ixn.take(xp, im1, mode="clip"), ixn.take(xp, i, mode="clip")
    f0, f1 = ixn.take(fp, im1, mode="clip"), ixn.take(fp, i, mode="clip")
    dx = ew.sub(x1, x0)
    tiny = m.abs(dx) <= float(np.spacing(np.finfo(np.dtype(x.dtype)).eps))
    f = m.where(tiny, f0, ew.add(f0, ew.mul(ew.div(ew.sub(x, x0), m.where(tiny, 1, dx)),
                                            ew.sub(f1, f0))))
    if period is None:
        first, last = sh.index_in_dim(xp, 0, 0, False), sh.index_in_dim(xp, n - 1, 0, False)
        lo = sh.index_in_dim(fp, 0, 0, False) if left is None else left
        hi = sh.index_in_dim(fp, n - 1, 0, False) if right is None else right
        f = m.where(ew.lt(x, first), lo, f)
        f = m.where(ew.gt(x, last), hi, f)
    return f


# --- nan-aware order statistics and cumulative functions --------------------------------------
def _nan_arg(a, axis, keepdims, fill, fn, op):
    x = operand(a, op)
    if not dtypes.is_float(x.dtype):
        return fn(x, axis=axis, keepdims=bool(keepdims))
    nan = m.isnan(x)
    res = fn(m.where(nan, fill, x), axis=axis, keepdims=bool(keepdims))
    return m.where(c.all(nan, axis=axis, keepdims=bool(keepdims)), -1, res)


def nanargmax(a, axis=None, out=None, keepdims=None):
    """argmax ignoring NaNs; -1 where a slice is all NaN (JAX's convention)."""
    return _nan_arg(a, axis, keepdims, -math.inf, c.argmax, "nanargmax")


def nanargmin(a, axis=None, out=None, keepdims=None):
    return _nan_arg(a, axis, keepdims, math.inf, c.argmin, "nanargmin")


def _check_q(q, op):
    v = ixn._concrete(q)
    if v is not None and (np.any(np.asarray(v) < 0) or np.any(np.asarray(v) > 1)):
        raise ValueError(f"{op}: quantiles must be in [0, 1], got {np.asarray(v).tolist()}")


def nanquantile(a, q, axis=None, method="linear", keepdims=False, *, interpolation=None):
    """Quantiles of the non-NaN entries (NaN where a slice has none). The positions come from
    the per-slice counts, so q may be traced; differentiable as sort + gather."""
    method = interpolation or method
    if method not in ("linear", "lower", "higher", "nearest", "midpoint"):
        raise ValueError(f"nanquantile: unknown method {method!r}")
    x = _inexact(operand(a, "nanquantile"))
    axes = tuple(builtins.range(x.ndim)) if axis is None else \
        normalize_axes(axis, x.ndim, "nanquantile", x)
    kept = [i for i in builtins.range(x.ndim) if i not in axes]
    kshape = tuple(x.shape[i] for i in kept)
    src = sh.reshape(sh.transpose(x, kept + list(axes)), kshape + (-1,))
    n = src.shape[-1]
    qa = ew.convert_element_type(operand(q, "nanquantile"), x.dtype)
    _check_q(q, "nanquantile")
    nq = qa.size
    s = sh.expand_dims(srt.sort(src, -1), 0)                           # NaN sorts last
    cnt = se.count_nonzero(m.logical_not(m.isnan(src)), axis=-1, keepdims=True)
    pos = ew.mul(sh.reshape(qa, (nq,) + (1,) * (len(kept) + 1)),
                 sh.expand_dims(ew.convert_element_type(ew.sub(cnt, 1), x.dtype), 0))
    lo_f = m.floor(pos)
    frac = ew.sub(pos, lo_f)
    lo = m.clip(ew.convert_element_type(lo_f, _int), 0, builtins.max(n - 1, 0))
    hi = m.clip(ew.convert_element_type(m.ceil(pos), _int), 0, builtins.max(n - 1, 0))
    full = (nq,) + kshape + (1,)
    vlo = ixn.take_along_axis(s, sh.broadcast_to(lo, full), -1, mode="clip")
    vhi = ixn.take_along_axis(s, sh.broadcast_to(hi, full), -1, mode="clip")
    if method == "linear":
        v = ew.add(vlo, ew.mul(ew.sub(vhi, vlo), frac))
    elif method == "lower":
        v = vlo
    elif method == "higher":
        v = vhi
    elif method == "nearest":
        v = m.where(ew.le(frac, 0.5), vlo, vhi)
    else:
        v = ew.mul(ew.add(vlo, vhi), 0.5)
    v = m.where(sh.expand_dims(ew.eq(cnt, 0), 0), math.nan, v)
    qshape = tuple(qa.shape)
    if keepdims:
        return sh.reshape(v, qshape + tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
    return sh.reshape(v, qshape + kshape)


def nanpercentile(a, q, axis=None, method="linear", keepdims=False, *, interpolation=None):
    qa = ew.div(_inexact(operand(q, "nanpercentile")), 100.0)
    v = ixn._concrete(q)
    if v is not None and (np.any(np.asarray(v) < 0) or np.any(np.asarray(v) > 100)):
        raise ValueError(f"nanpercentile: percentiles must be in [0, 100], got "
                         f"{np.asarray(v).tolist()}")
    return nanquantile(a, qa, axis, method, keepdims, interpolation=interpolation)


def nanmedian(a, axis=None, keepdims=False):
    return nanquantile(a, 0.5, axis, keepdims=keepdims)


def nancumsum(a, axis=None, dtype=None):
    return srt.cumsum(se._nan_to(a, 0.0), axis, dtype)


def nancumprod(a, axis=None, dtype=None):
    return srt.cumprod(se._nan_to(a, 1.0), axis, dtype)


# --- selection --------------------------------------------------------------------------------
def select(condlist, choicelist, default=0):
    """The choice of the first true condition, elementwise (default where none holds)."""
    if len(condlist) != len(choicelist):
        raise ValueError(f"select: condlist has {len(condlist)} entries but choicelist has "
                         f"{len(choicelist)}")
    if len(condlist) == 0:
        raise ValueError("select: condlist must be non-empty")
    out = default
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        cond = operand(cond, "select")
        if cond.dtype != dtypes.bool_:
            raise TypeError(f"select: conditions must be bool, got {short(cond)}")
        out = m.where(cond, choice, out)
    return operand(out)


def _condition_list(condlist, x):
    """NumPy's reading of condlist: one condition (an array of x's rank, or a list of
    scalars for an array x) or a sequence of them."""
    if isinstance(condlist, (Array, Tracer, np.ndarray)):
        if condlist.ndim == x.ndim + 1:
            return [condlist[i] for i in builtins.range(condlist.shape[0])]
        return [condlist]
    if x.ndim > 0 and condlist and np.ndim(condlist[0]) == 0 and \
            not isinstance(condlist[0], (Array, Tracer)):
        return [condlist]
    return list(condlist)


def piecewise(x, condlist, funclist, *args, **kw):
    """np.piecewise: funclist[i] (a function of x or a constant) where condlist[i] holds (the
    last true one wins); an extra last entry is the default, else 0. Every branch is
    evaluated on all of x and the results selected (so it works under jit)."""
    x = operand(x, "piecewise")
    conds = [operand(cnd, "piecewise") for cnd in _condition_list(condlist, x)]
    nc, nf = len(conds), len(funclist)
    if nf == nc + 1:
        default, funcs = funclist[-1], list(funclist[:-1])
    elif nf == nc:
        default, funcs = 0, list(funclist)
    else:
        raise ValueError(f"piecewise: {nf} functions for {nc} conditions (need {nc} or "
                         f"{nc + 1})")

    def value(f):
        v = f(x, *args, **kw) if callable(f) else f
        return sh.broadcast_to(ew.convert_element_type(operand(v), x.dtype), x.shape)

    out = value(default)
    for cnd, f in zip(conds, funcs):
        out = m.where(cnd, value(f), out)
    return out


def choose(a, choices, out=None, mode="raise"):
    """choices[a] elementwise. mode 'raise' needs concrete indices (eager); use 'clip' or
    'wrap' under jit."""
    if out is not None:
        raise NotImplementedError("choose: out= is not supported (arrays are immutable)")
    a = operand(a, "choose")
    if not dtypes.is_int(a.dtype):
        raise TypeError(f"choose: indices must be integers, got {short(a)}")
    n = len(choices)
    if mode == "raise":
        v = ixn._concrete(a)
        if v is None:
            raise ConcretizationError(f"choose: mode='raise' needs concrete indices, but "
                                      f"{short(a)} is traced; use mode='clip' or 'wrap'")
        if np.any((np.asarray(v) < 0) | (np.asarray(v) >= n)):
            raise ValueError(f"choose: invalid entry in the index array (need 0 <= a < {n})")
    elif mode == "wrap":
        a = m.remainder(a, n)
    elif mode == "clip":
        a = m.clip(a, 0, n - 1)
    else:
        raise ValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    arrs = se.broadcast_arrays(a, *promote("choose", *[operand(ch) for ch in choices]))
    stacked = sh.stack(arrs[1:], 0)
    return sh.squeeze(ixn.take_along_axis(stacked, sh.expand_dims(arrs[0], 0), 0, mode="clip"),
                      0)


def extract(condition, arr, *, size=None, fill_value=0):
    """The entries of arr where condition holds (flattened); size= pads for jit."""
    cond = operand(condition, "extract")
    _need_size("extract", cond, size)
    cond = _flat(_truthy(cond), "extract")
    x = _flat(arr, "extract")
    if cond.shape != x.shape:
        raise ValueError(f"extract: condition {short(cond)} and arr {short(x)} must have one "
                         "size")
    return ixn.compress(cond, x, size=size, fill_value=fill_value)


def _no_inplace(op, inplace):
    if inplace:
        raise ValueError(f"{op}: mirax arrays are immutable; pass inplace=False to get the "
                         "updated array")


def _truthy(x):
    return x if x.dtype == dtypes.bool_ else ew.ne(x, ew.zeros_like(x))


def place(arr, mask, vals, *, inplace=True):
    """np.place, functional: the k-th masked entry takes vals[k % len(vals)]. As in JAX
    pass inplace=False (mirax arrays are immutable)."""
    _no_inplace("place", inplace)
    data = operand(arr, "place")
    msk = _flat(mask, "place")
    v = _flat(vals, "place")
    if msk.size != data.size:
        raise ValueError(f"place: mask {short(msk)} must have the size of arr {short(data)}")
    if v.size == 0:
        return data
    msk = _truthy(msk)
    k = m.remainder(ew.sub(srt.cumsum(msk, dtype=_int), 1), v.size)
    new = ew.convert_element_type(ixn.take(v, k, mode="clip"), data.dtype)
    return sh.reshape(m.where(msk, new, _flat(data, "place")), data.shape)


def put(a, ind, v, mode=None, *, inplace=True):
    """np.put, functional (inplace=False, as in JAX): flat positions ind take v (repeated
    cyclically). mode None drops out-of-bounds positions (negatives wrap once), 'clip'
    clamps, 'wrap' wraps."""
    _no_inplace("put", inplace)
    x = operand(a, "put")
    i = _flat(ind, "put")
    vv = _flat(v, "put")
    if not dtypes.is_int(i.dtype):
        raise TypeError(f"put: indices must be integers, got {short(i)}")
    if x.size == 0 or i.size == 0 or vv.size == 0:
        return x
    if vv.size != i.size:
        vv = ixn.take(vv, Array((np.arange(i.size) % vv.size).astype(np.int32)))
    n = x.size
    i = ew.convert_element_type(i, _int)
    if mode is None:
        i = m.where(ew.lt(i, 0), ew.add(i, n), i)
    elif mode == "clip":
        i = m.clip(i, 0, n - 1)
    elif mode == "wrap":
        i = m.remainder(i, n)
    else:
        raise ValueError(f"put: mode must be None, 'clip' or 'wrap', got {mode!r}")
    out = ix.scatter(_flat(x, "put"), sh.reshape(i, (-1, 1)),
                     ew.convert_element_type(vv, x.dtype), (0,), mode="drop")
    return sh.reshape(out, x.shape)


def _static_obj(obj, op):
    v = ixn._concrete(obj)
    if v is None:
        raise ConcretizationError(f"{op}: the indices {short(obj)} must be static (they fix "
                                  "the result shape); pass a concrete array or ints")
    return np.asarray(v)


def insert(arr, obj, values, axis=None):
    """np.insert: values placed before the given (static) indices along axis."""
    a = operand(arr, "insert")
    if axis is None:
        a, axis = sh.reshape(a, (a.size,)), 0
    ax = normalize_axis(axis, a.ndim, "insert", a)
    n = a.shape[ax]
    o = np.arange(*obj.indices(n)) if isinstance(obj, slice) else _static_obj(obj, "insert")
    vals = ew.convert_element_type(operand(values, "insert"), a.dtype)
    vals = sh.reshape(vals, (1,) * builtins.max(a.ndim - vals.ndim, 0) + tuple(vals.shape))
    if o.ndim == 0:
        idx = int(o)
        if not -n <= idx <= n:
            raise IndexError(f"insert: index {idx} is out of bounds for axis {ax} with size {n}")
        idx += n if idx < 0 else 0
        vals = sh.moveaxis(vals, 0, ax)
        new_pos = idx + np.arange(vals.shape[ax])
    else:
        idx = o.astype(np.int64).reshape(-1)
        if np.any((idx < -n) | (idx > n)):
            raise IndexError(f"insert: indices {o.tolist()} are out of bounds for axis {ax} "
                             f"with size {n}")
        idx = np.where(idx < 0, idx + n, idx)
        new_pos = idx.copy()
        new_pos[np.argsort(idx, kind="stable")] += np.arange(idx.size)
    k = new_pos.size
    shape = tuple(k if d == ax else s for d, s in enumerate(a.shape))
    vals = ixn._broadcast_values(vals, shape, "insert")
    is_new = np.zeros(n + k, bool)
    is_new[new_pos] = True
    perm = np.empty(n + k, np.int32)
    perm[new_pos] = n + np.arange(k)
    perm[~is_new] = np.arange(n)
    return ixn.take(sh.concatenate([a, vals], ax), Array(perm), axis=ax, mode="clip")


def delete(arr, obj, axis=None, *, assume_unique_indices=False):
    """np.delete with static indices (an int, a slice, ints or a boolean mask)."""
    a = operand(arr, "delete")
    if axis is None:
        a, axis = sh.reshape(a, (a.size,)), 0
    ax = normalize_axis(axis, a.ndim, "delete", a)
    n = a.shape[ax]
    keep = np.ones(n, bool)
    if isinstance(obj, slice):
        keep[obj] = False
    else:
        o = _static_obj(obj, "delete")
        if o.dtype == np.bool_:
            if o.shape != (n,):
                raise ValueError(f"delete: boolean mask of shape {o.shape} for axis {ax} of "
                                 f"{short(a)}")
            keep = ~o
        else:
            o = o.astype(np.int64).reshape(-1)
            if np.any((o < -n) | (o >= n)):
                raise IndexError(f"delete: indices {o.tolist()} are out of bounds for axis "
                                 f"{ax} with size {n}")
            keep[o] = False
    return ixn.take(a, Array(np.nonzero(keep)[0].astype(np.int32)), axis=ax, mode="clip")


# --- index arithmetic -------------------------------------------------------------------------
def unravel_index(indices, shape):
    """Flat indices -> coordinate arrays (C order); out-of-range indices are clipped to
    [-size, size - 1] and negatives wrap, as in JAX."""
    i = operand(indices, "unravel_index")
    if not dtypes.is_int(i.dtype):
        raise TypeError(f"unravel_index: indices must be integers, got {short(i)}")
    shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    total = int(np.prod(shape))
    i = ew.convert_element_type(i, _int)
    if total == 0:
        return tuple(ew.zeros_like(i) for _ in shape)
    i = m.remainder(m.clip(i, -total, total - 1), total)
    out, stride = [], total
    for d in shape:
        stride //= d
        out.append(m.remainder(m.floor_divide(i, stride), d) if stride > 1 else
                   m.remainder(i, d))
    return tuple(out)


def ravel_multi_index(multi_index, dims, mode="raise", order="C"):
    """Coordinate arrays -> flat indices. mode 'raise' needs concrete indices; 'wrap' and
    'clip' work under jit."""
    dims = tuple(int(d) for d in dims)
    idx = [operand(i, "ravel_multi_index") for i in multi_index]
    if len(idx) != len(dims):
        raise ValueError(f"ravel_multi_index: {len(idx)} index arrays for {len(dims)} dims")
    if order not in ("C", "F"):
        raise ValueError(f"ravel_multi_index: order must be 'C' or 'F', got {order!r}")
    out = []
    for i, d in zip(idx, dims):
        if not dtypes.is_int(i.dtype):
            raise TypeError(f"ravel_multi_index: indices must be integers, got {short(i)}")
        i = ew.convert_element_type(i, _int)
        if mode == "raise":
            v = ixn._concrete(i)
            if v is None:
                raise ConcretizationError(
                    f"ravel_multi_index: mode='raise' needs concrete indices, but {short(i)} "
                    "is traced; use mode='clip' or 'wrap'")
            if np.any((np.asarray(v) < 0) | (np.asarray(v) >= d)):
                raise ValueError("ravel_multi_index: invalid entry in coordinates array")
        elif mode == "wrap":
            i = m.remainder(i, d)
        elif mode == "clip":
            i = m.clip(i, 0, d - 1)
        else:
            raise ValueError(f"ravel_multi_index: mode must be 'raise', 'wrap' or 'clip', "
                             f"got {mode!r}")
        out.append(i)
    strides = np.cumprod((1,) + dims[::-1][:-1])[::-1] if order == "C" else \
        np.cumprod((1,) + dims[:-1])
    total = ew.mul(out[0], int(strides[0])) if out else operand(0)
    for i, st in zip(out[1:], strides[1:]):
        total = ew.add(total, ew.mul(i, int(st)))
    return total


# --- sorting helpers --------------------------------------------------------------------------
def lexsort(keys, axis=-1):
    """Indices sorting by the last key first, then the one before, ... (stable)."""
    if isinstance(keys, (Array, Tracer, np.ndarray)):
        k = operand(keys, "lexsort")
        keys = [sh.index_in_dim(k, j, 0, False) for j in builtins.range(k.shape[0])]
    ks = [operand(k, "lexsort") for k in keys]
    if not ks:
        raise TypeError("lexsort: need a sequence of keys with length > 0")
    if ks[0].ndim == 0:
        return Array(np.zeros((), np.int32))
    ax = normalize_axis(axis, ks[0].ndim, "lexsort", ks[0])
    perm = sh.iota(_int, tuple(ks[0].shape), ax)
    return so.sort(ks[::-1] + [perm], axis=ax, num_keys=len(ks))[-1]


def _check_kth(kth, n, op):
    for k in np.atleast_1d(np.asarray(kth)).tolist():
        if not -n <= int(k) < n:
            raise ValueError(f"{op}: kth {k} is out of bounds for an axis of size {n}")


def partition(a, kth, axis=-1):
    """A valid np.partition: every entry before kth is <= a[kth] <= every entry after (mirax
    returns the fully sorted array, which satisfies this)."""
    x = operand(a, "partition")
    ax = normalize_axis(axis, x.ndim, "partition", x)
    _check_kth(kth, x.shape[ax], "partition")
    return srt.sort(x, ax)


def argpartition(a, kth, axis=-1):
    """Indices of a valid partition (the stable sorting permutation)."""
    x = operand(a, "argpartition")
    ax = normalize_axis(axis, x.ndim, "argpartition", x)
    _check_kth(kth, x.shape[ax], "argpartition")
    return srt.argsort(x, ax)


# --- convolution and polynomials --------------------------------------------------------------
def _conv1d(a, v, mode, op):
    x, y = _promote_inexact(op, a, v)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError(f"{op}: only 1-d inputs are supported, got {short(x)} and {short(y)}")
    if x.shape[0] == 0 or y.shape[0] == 0:
        raise ValueError(f"{op}: inputs cannot be empty, got {short(x)} and {short(y)}")
    flip_out = False
    if x.shape[0] < y.shape[0]:
        x, y = y, x
        flip_out = op == "correlate"
    if op == "convolve":
        y = sh.rev(y, (0,))
    k = y.shape[0]
    pads = {"valid": (0, 0), "same": (k // 2, k - k // 2 - 1), "full": (k - 1, k - 1)}
    if mode not in pads:
        raise ValueError(f"{op}: mode must be 'full', 'same' or 'valid', got {mode!r}")
    from mirax.ops.conv import conv_general_dilated
    out = conv_general_dilated(sh.reshape(x, (1, 1, -1)), sh.reshape(y, (1, 1, -1)), (1,),
                               [pads[mode]])
    out = sh.reshape(out, (out.shape[-1],))
    return sh.rev(out, (0,)) if flip_out else out


def convolve(a, v, mode="full", *, precision=None, preferred_element_type=None):
    """1-d discrete convolution (differentiable in both inputs)."""
    return _conv1d(a, v, mode, "convolve")


def correlate(a, v, mode="valid", *, precision=None, preferred_element_type=None):
    """1-d cross-correlation: out[k] = sum_n a[n + k] v[n] (real inputs)."""
    return _conv1d(a, v, mode, "correlate")


def _poly(p, op):
    p = operand(p, op)
    if p.ndim != 1:
        raise ValueError(f"{op}: coefficients must be 1-d, got {short(p)}")
    return p


def polyval(p, x, *, unroll=16):
    """p[0] * x**(n-1) + ... + p[n-1], by Horner's rule."""
    p, x = _promote_inexact("polyval", p, x)
    if p.ndim != 1:
        raise ValueError(f"polyval: coefficients must be 1-d, got {short(p)}")
    y = ew.zeros_like(x)
    for i in builtins.range(p.shape[0]):
        y = ew.add(ew.mul(y, x), sh.index_in_dim(p, i, 0, False))
    return y


def polyadd(a1, a2):
    a, b = promote("polyadd", _poly(a1, "polyadd"), _poly(a2, "polyadd"))
    if a.shape[0] < b.shape[0]:
        a, b = b, a
    return ew.add(a, sh.pad(b, 0, ((a.shape[0] - b.shape[0], 0, 0),)))


def polysub(a1, a2):
    a, b = promote("polysub", _poly(a1, "polysub"), _poly(a2, "polysub"))
    return polyadd(a, ew.neg(b))


def polymul(a1, a2, *, trim_leading_zeros=False):
    a, b = _promote_inexact("polymul", _poly(a1, "polymul"), _poly(a2, "polymul"))
    if trim_leading_zeros:
        a, b = _trim_front(a), _trim_front(b)
    if a.shape[0] == 0:
        a = sh.full((1,), 0, a.dtype)
    if b.shape[0] == 0:
        b = sh.full((1,), 0, b.dtype)
    return convolve(a, b)


def _trim_front(p):
    v = ixn._concrete(p)
    if v is None:
        raise ConcretizationError("polymul: trim_leading_zeros=True needs concrete "
                                  f"coefficients, got a traced {short(p)}")
    nz = np.nonzero(np.asarray(v))[0]
    return sh.slice_in_dim(p, int(nz[0]) if nz.size else p.shape[0], p.shape[0])


def polyder(p, m=1):
    """The m-th derivative's coefficients."""
    p = _inexact(_poly(p, "polyder"))
    if int(m) < 0:
        raise ValueError(f"polyder: order m must be non-negative, got {m}")
    for _ in builtins.range(int(m)):
        n = p.shape[0]
        if n <= 1:
            return sh.full((0,), 0, p.dtype)
        p = ew.mul(sh.slice_in_dim(p, 0, n - 1), Array(np.arange(n - 1, 0, -1)
                                                     .astype(np.dtype(p.dtype))))
    return p


def polyint(p, m=1, k=None):
    """The m-th antiderivative's coefficients; k gives the integration constants (one, or m:
    the first for the first integration)."""
    p = _inexact(_poly(p, "polyint"))
    m_ = int(m)
    if m_ < 0:
        raise ValueError(f"polyint: order m must be non-negative, got {m}")
    if m_ == 0:
        return p
    ks = sh.full((m_,), 0, p.dtype) if k is None else \
        ew.convert_element_type(sh.broadcast_to(_flat(k, "polyint"), (m_,)), p.dtype)
    for j in builtins.range(m_):
        n = p.shape[0]
        div = Array(np.arange(n, 0, -1).astype(np.dtype(p.dtype)))
        p = sh.concatenate([ew.div(p, div), sh.slice_in_dim(ks, j, j + 1)], 0)
    return p


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """Least-squares polynomial fit (coefficients highest power first) via lstsq on the
    scaled Vandermonde matrix, as jnp.polyfit."""
    from mirax.numpy import linalg
    x, y = _promote_inexact("polyfit", x, y)
    if isinstance(deg, Tracer):
        raise ConcretizationError("polyfit: deg must be a static int")
    deg = int(deg)
    order = deg + 1
    if deg < 0:
        raise ValueError(f"polyfit: deg must be non-negative, got {deg}")
    if x.ndim != 1 or x.shape[0] == 0 or y.ndim not in (1, 2) or y.shape[0] != x.shape[0]:
        raise ValueError(f"polyfit: x must be 1-d and y 1-d or 2-d of the same length, got "
                         f"{short(x)} and {short(y)}")
    if rcond is None:
        rcond = x.shape[0] * float(np.finfo(np.dtype(x.dtype)).eps)
    cols = [ew.ones_like(x)]
    for _ in builtins.range(deg):
        cols.append(ew.mul(cols[-1], x))
    lhs = sh.stack(cols[::-1], 1)
    rhs = y
    if w is not None:
        ww = _flat(w, "polyfit")
        lhs = ew.mul(lhs, sh.expand_dims(ww, 1))
        rhs = ew.mul(rhs, ww if rhs.ndim == 1 else sh.expand_dims(ww, 1))
    scale = m.sqrt(c.sum(ew.mul(lhs, lhs), axis=0))
    lhs = ew.div(lhs, sh.expand_dims(scale, 0))
    coef, resids, rank, s = linalg.lstsq(lhs, rhs, rcond)
    coef = ew.div(coef, scale if coef.ndim == 1 else sh.expand_dims(scale, 1))
    if full:
        return coef, resids, rank, s, operand(rcond)
    if cov:
        vbase = ew.div(linalg.inv(c.matmul(sh.transpose(lhs, (1, 0)), lhs)),
                       c.outer(scale, scale))
        if cov == "unscaled":
            fac = 1.0
        else:
            if x.shape[0] <= order:
                raise ValueError("polyfit: the number of data points must exceed order to "
                                 "scale the covariance matrix")
            fac = ew.div(resids, float(x.shape[0] - order))
        if y.ndim == 1:
            return coef, ew.mul(vbase, fac if isinstance(fac, float) else
                                sh.reshape(fac, ()))
        return coef, ew.mul(sh.expand_dims(vbase, 2), fac)
    return coef


# --- function vectorizers ---------------------------------------------------------------------
def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """func1d applied to the 1-d slices along axis (by nested vmaps, as JAX)."""
    from mirax.transforms.vmap import vmap
    a = operand(arr, "apply_along_axis")
    ax = normalize_axis(axis, a.ndim, "apply_along_axis", a)

    def func(x):
        return func1d(x, *args, **kwargs)

    for i in builtins.range(1, a.ndim - ax):
        func = vmap(func, in_axes=i, out_axes=-1)
    for _ in builtins.range(ax):
        func = vmap(func, in_axes=0, out_axes=0)
    return func(a)


def apply_over_axes(func, a, axes):
    """func(a, axis) applied over each axis in turn, keeping the dimensions."""
    x = operand(a, "apply_over_axes")
    for axis in ([axes] if isinstance(axes, int) else axes):
        b = operand(func(x, axis))
        if b.ndim == x.ndim - 1:
            b = sh.expand_dims(b, normalize_axis(axis, x.ndim, "apply_over_axes", x))
        elif b.ndim != x.ndim:
            raise ValueError(f"apply_over_axes: function is not returning an array of the "
                             f"correct shape (got {short(b)} for {short(x)})")
        x = b
    return x


_CORE = r"\((?:\w+(?:,\w+)*)?\)"
_SIG = rf"^{_CORE}(?:,{_CORE})*->{_CORE}(?:,{_CORE})*$"


def _parse_signature(signature):
    sig = re.sub(r"\s+", "", signature)
    if not re.match(_SIG, sig):
        raise ValueError(f"vectorize: not a valid gufunc signature: {signature!r}")
    ins, outs = sig.split("->")

    def parse(part):
        return [tuple(d for d in g.split(",") if d) for g in re.findall(r"\(([^)]*)\)", part)]

    return parse(ins), parse(outs)


def vectorize(pyfunc, *, excluded=frozenset(), signature=None):
    """A function mapping pyfunc over the broadcast leading (loop) dimensions of its
    arguments by nested vmaps. `excluded` names positions / keywords passed through as is;
    `signature` ('(n),(n)->()') names the core dimensions each argument keeps."""
    import functools

    from mirax.transforms.vmap import vmap
    excluded = frozenset(excluded)
    parsed = None if signature is None else _parse_signature(signature)

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        dyn_pos = [i for i in builtins.range(len(args)) if i not in excluded]
        dyn_kw = [k for k in kwargs if k not in excluded]
        static_kw = {k: v for k, v in kwargs.items() if k in excluded}
        dyn = [operand(args[i], "vectorize") for i in dyn_pos] + \
            [operand(kwargs[k], "vectorize") for k in dyn_kw]
        cores = parsed[0] if parsed else [()] * len(dyn)
        if len(cores) != len(dyn):
            raise TypeError(f"vectorize: signature {signature!r} has {len(cores)} inputs but "
                            f"{len(dyn)} arguments were given")
        sizes, loops = {}, []
        for x, core in zip(dyn, cores):
            if x.ndim < len(core):
                raise ValueError(f"vectorize: input {short(x)} has fewer dimensions than its "
                                 f"core signature {core}")
            lead = x.ndim - len(core)
            for name, n in zip(core, x.shape[lead:]):
                if sizes.setdefault(name, n) != n:
                    raise ValueError(f"vectorize: inconsistent size for core dimension "
                                     f"{name!r}: {sizes[name]} vs {n}")
            loops.append(tuple(x.shape[:lead]))
        loop = tuple(np.broadcast_shapes(*loops)) if loops else ()
        dyn = [sh.broadcast_to(x, loop + tuple(x.shape[x.ndim - len(core):]))
               for x, core in zip(dyn, cores)]

        def call(*vals):
            full = list(args)
            for j, i in enumerate(dyn_pos):
                full[i] = vals[j]
            kw = dict(static_kw, **dict(zip(dyn_kw, vals[len(dyn_pos):])))
            return pyfunc(*full, **kw)

        f = call
        for _ in loop:
            f = vmap(f)
        return f(*dyn)

    return wrapped
