"""mirax.numpy sorting and cumulative functions: sort, argsort, cumsum, cumprod, searchsorted
(plus the cumulative_sum / cumulative_prod names of the array API).

NumPy semantics: axis=None flattens; sorting is stable. Where JAX and NumPy differ we follow
JAX: cumsum/cumprod keep the input's integer dtype (int8 stays int8; NumPy widens to int64)
and accumulate bool in int32.
"""
from __future__ import annotations

from mirax.core import dtypes
from mirax.ops import cumulative as cum
from mirax.ops import elementwise as ew
from mirax.ops import reduction as red
from mirax.ops import shape as sh
from mirax.ops import sort as so
from mirax.ops.common import normalize_axis, operand, promote
from mirax.ops.sort import gather_along_axis

__all__ = ["sort", "argsort", "cumsum", "cumprod", "cumulative_sum", "cumulative_prod",
           "searchsorted"]


def _flat_or(a, axis, op):
    a = operand(a, op)
    if axis is None:
        return sh.reshape(a, (a.size,)), 0
    if a.ndim == 0:
        raise ValueError(f"{op}: axis {axis} is out of range for a 0-d array")
    return a, normalize_axis(axis, a.ndim, op, a)


def sort(a, axis=-1, kind=None, order=None, stable=True, descending=False):
    if order is not None:
        raise NotImplementedError("sort: order= (structured arrays) is not supported")
    a, axis = _flat_or(a, axis, "sort")
    return so.sort(a, axis, descending=descending)


def argsort(a, axis=-1, kind=None, order=None, stable=True, descending=False):
    if order is not None:
        raise NotImplementedError("argsort: order= (structured arrays) is not supported")
    a, axis = _flat_or(a, axis, "argsort")
    return so.argsort(a, axis, descending=descending)


def _acc_dtype(a, dtype):
    if dtype is not None:
        return dtypes.canonicalize(dtype)
    return dtypes.int32 if a.dtype == dtypes.bool_ else a.dtype


def cumsum(a, axis=None, dtype=None):
    a, axis = _flat_or(a, axis, "cumsum")
    a = ew.convert_element_type(a, _acc_dtype(a, dtype), a.weak_type)
    return cum.cumsum(a, axis)


def cumprod(a, axis=None, dtype=None):
    a, axis = _flat_or(a, axis, "cumprod")
    a = ew.convert_element_type(a, _acc_dtype(a, dtype), a.weak_type)
    return cum.cumprod(a, axis)


def _cumulative(fn, x, axis, dtype, include_initial, initial):
    x = operand(x, fn.__name__)
    if axis is None:
        if x.ndim > 1:
            raise ValueError(f"{fn.__name__}: axis is required for {x.ndim}-d input")
        axis = 0
    out = fn(x, axis, dtype)
    if include_initial:
        ax = normalize_axis(axis, out.ndim, fn.__name__, out)
        shape = tuple(1 if i == ax else d for i, d in enumerate(out.shape))
        out = sh.concatenate([sh.full(shape, initial, out.dtype), out], ax)
    return out


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    return _cumulative(cumsum, x, axis, dtype, include_initial, 0)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    return _cumulative(cumprod, x, axis, dtype, include_initial, 1)


def searchsorted(a, v, side="left", sorter=None):
    """Insertion indices of v into the sorted 1-d a (int32), by counting (O(len(a) * v.size))."""
    a = operand(a, "searchsorted")
    if a.ndim != 1:
        raise ValueError(f"searchsorted: a must be 1-d, got shape {tuple(a.shape)}")
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if sorter is not None:
        a = gather_along_axis(a, operand(sorter, "searchsorted"), 0)
    a, v = promote("searchsorted", a, operand(v, "searchsorted"))
    below = (ew.lt if side == "left" else ew.le)(a, sh.expand_dims(v, v.ndim))
    return red.reduce_sum(ew.convert_element_type(below, dtypes.int32), (v.ndim,))
