"""mirax.numpy selection and insertion helpers (select, piecewise, choose, extract,
place, put, insert, delete), index arithmetic and lexsort / partition (jax.numpy's
behaviour). Host-side NumPy is used only on static indices (insert / delete positions)."""
from __future__ import annotations

import builtins

import numpy as np

from mirax.core import dtypes
from mirax.core.array import Array
from mirax.core.errors import ConcretizationError
from mirax.core.trace import Tracer
from mirax.numpy import _indexing as ixn
from mirax.numpy._sets import _flat, _need_size
from mirax.numpy import _math as m
from mirax.numpy import _shape_extra as se
from mirax.numpy import _sorting as srt
from mirax.ops import elementwise as ew
from mirax.ops import indexing as ix
from mirax.ops import shape as sh
from mirax.ops import sort as so
from mirax.ops.common import normalize_axis, operand, promote, short

__all__ = [
    "select",
    "piecewise",
    "choose",
    "extract",
    "place",
    "put",
    "insert",
    "delete",
    "unravel_index",
    "ravel_multi_index",
    "argpartition",
    "partition",
    "lexsort",
]

_int = dtypes.int32


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
    if not isinstance(obj, (int, np.integer, list, tuple, np.ndarray, Array, Tracer)):
        raise TypeError(f"{op}: indices must be ints, a slice or an integer or boolean array, "
                        f"got {type(obj).__name__}")
    v = ixn._concrete(obj)
    if v is None:
        raise ConcretizationError(f"{op}: the indices {short(obj)} must be static (they fix "
                                  "the result shape); pass a concrete array or ints")
    try:
        v = np.asarray(v)
    except ValueError:
        raise TypeError(f"{op}: ragged indices {obj!r}") from None
    if v.dtype.kind not in "iub" and v.size:  # NOTE: astype(int) would truncate 2.5
        raise TypeError(f"{op}: indices must be integers or booleans, got {v.dtype} values")
    return v


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
