"""mirax.numpy counting and binning (bincount, digitize, histograms, interp) and the
nan-aware order statistics and cumulative functions (jax.numpy's behaviour)."""
from __future__ import annotations

import builtins
import math

import numpy as np

from mirax.core import dtypes
from mirax.core.array import Array
from mirax.core.errors import ConcretizationError
from mirax.core.trace import Tracer
from mirax.numpy import _core as c
from mirax.numpy import _indexing as ixn
from mirax.numpy._select import ravel_multi_index
from mirax.numpy._sets import _flat, _need_size
from mirax.numpy import _math as m
from mirax.numpy import _shape_extra as se
from mirax.numpy import _sorting as srt
from mirax.ops import elementwise as ew
from mirax.ops import indexing as ix
from mirax.ops import shape as sh
from mirax.ops import sort as so
from mirax.ops.common import normalize_axes, operand, promote, short

__all__ = [
    "bincount",
    "digitize",
    "histogram_bin_edges",
    "histogram",
    "histogram2d",
    "histogramdd",
    "interp",
    "nanargmax",
    "nanargmin",
    "nanquantile",
    "nanpercentile",
    "nanmedian",
    "nancumsum",
    "nancumprod",
]

_int = dtypes.int32


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
