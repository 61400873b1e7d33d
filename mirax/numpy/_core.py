"""mirax.numpy creation, reductions, shape and products on mirax ops."""
from __future__ import annotations

import builtins

import numpy as np

from mirax.core import dtypes
from mirax.core.errors import ShapeError
from mirax.ops import elementwise as ew
from mirax.ops import reduction as red
from mirax.ops import shape as sh
from mirax.ops.common import (normalize_axes, normalize_axis, operand, short,
                              static_int, static_shape)
from mirax.ops.common import result_dtype as _result_dtype
from mirax.ops.common import check_size as _check_size
from mirax.ops.creation import asarray as _asarray
from mirax.ops.dot import canonical_precision, dot_general

# --- creation -------------------------------------------------------------------------------


def asarray(a, dtype=None, device=None):
    return _asarray(a, dtype, device)


def array(a, dtype=None, copy=True, device=None):
    return _asarray(a, dtype, device)


def _dtype_or(dtype, default):
    return dtypes.canonicalize(dtype) if dtype is not None else default


def _creation(shape, dtype, op):
    shape, dtype = static_shape(shape, op), _dtype_or(dtype, dtypes.float32)
    _check_size(shape, dtype, op)
    return shape, dtype


def zeros(shape, dtype=None, device=None):
    shape, dtype = _creation(shape, dtype, "zeros")
    return sh.full(shape, 0, dtype)


def ones(shape, dtype=None, device=None):
    shape, dtype = _creation(shape, dtype, "ones")
    return sh.full(shape, 1, dtype)


def full(shape, fill_value, dtype=None, device=None):
    shape = static_shape(shape, "full")
    _check_size(shape, dtypes.float32 if dtype is None else dtypes.canonicalize(dtype), "full")
    if dtype is None and isinstance(fill_value, (bool, int, float)):
        return sh.full(shape, fill_value, dtypes.python_scalar_dtype(fill_value))
    return sh.full(shape, fill_value, None if dtype is None else dtypes.canonicalize(dtype))


def _like(a, dtype, shape):
    a = operand(a, "like")
    return (a.shape if shape is None else shape), (a.dtype if dtype is None else dtype)


def zeros_like(a, dtype=None, shape=None):
    return zeros(*_like(a, dtype, shape))


def ones_like(a, dtype=None, shape=None):
    return ones(*_like(a, dtype, shape))


def full_like(a, fill_value, dtype=None, shape=None):
    s, d = _like(a, dtype, shape)
    return full(s, fill_value, d)


def empty(shape, dtype=None, device=None):
    return zeros(shape, dtype)


def empty_like(a, dtype=None, shape=None):
    return zeros_like(a, dtype, shape)


def arange(start, stop=None, step=None, dtype=None):
    for v in (start, stop, step):
        if v is not None and not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"arange: arguments must be static numbers, got {v!r}")
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    if step == 0:
        raise ValueError("arange: step must not be zero")
    is_float = builtins.any(isinstance(v, (float, np.floating)) for v in (start, stop, step))
    d = _dtype_or(dtype, dtypes.float32 if is_float else dtypes.int32)
    n = builtins.max(int(np.ceil((stop - start) / step)), 0)
    idx = sh.iota(dtypes.float64 if dtypes.is_float(d) else d, (n,))
    if start == 0 and step == 1:
        return ew.convert_element_type(idx, d)
    return ew.convert_element_type(ew.add(ew.mul(idx, step), start), d)


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """np.linspace; array start / stop give one sequence per element, along `axis` of the
    result. Computed in float64, then cast."""
    num = static_int(num, "linspace", "num")
    if num < 0:
        raise ValueError(f"linspace: num must be non-negative, got {num}")
    d = _dtype_or(dtype, _inexact_result("linspace", start, stop))
    if builtins.all(isinstance(v, (int, float, np.integer, np.floating))
                    for v in (start, stop)):
        if axis not in (0, -1):
            raise ValueError(f"linspace: axis {axis} is out of range for the 1-d result")
        start, stop, shape = float(start), float(stop), ()
    else:   # arrays: the samples run along a new leading axis, moved to `axis` at the end
        start, stop = (ew.convert_element_type(operand(v, "linspace"), dtypes.float64)
                       for v in (start, stop))
        try:
            shape = tuple(np.broadcast_shapes(start.shape, stop.shape))
        except ValueError:
            raise ShapeError(f"linspace: start {short(start)} and stop {short(stop)} do "
                             f"not broadcast together") from None
        start, stop = sh.broadcast_to(start, shape), sh.broadcast_to(stop, shape)
        axis = normalize_axis(axis, len(shape) + 1, "linspace")
    div = (num - 1) if endpoint else num
    span = stop - start if isinstance(start, float) else ew.sub(stop, start)
    step = span / div if div > 0 else span * 0.0    # Python floats stay float64 exact
    idx = sh.iota(dtypes.float64, (num,) + shape, 0)
    out = ew.add(ew.mul(idx, step), start)
    if endpoint and num > 1:
        last = sh.broadcast_to(ew.convert_element_type(stop, dtypes.float64), (1,) + shape)
        out = sh.concatenate([sh.slice_in_dim(out, 0, num - 1), last], 0)
    if not dtypes.is_float(d):
        out = ew.floor(out)  # integer linspace rounds toward -inf (NumPy 2, JAX)
    out = ew.convert_element_type(out, d)
    if shape:
        out = sh.moveaxis(out, 0, axis)
    return (out, step) if retstep else out


def _inexact_result(op, *xs):
    """The dtype a float-valued creation function gives by default (JAX): the operands'
    promoted dtype when it is a float (a float64 start stays float64), else float32."""
    d = _result_dtype(*(x if dtypes.is_python_scalar(x) else operand(x, op) for x in xs))[0]
    return d if dtypes.is_float(d) else dtypes.float32


def eye(N, M=None, k=0, dtype=None):
    N = static_int(N, "eye", "N")
    M = N if M is None else static_int(M, "eye", "M")
    k = static_int(k, "eye", "k")
    if N < 0 or M < 0:
        raise ValueError(f"eye: N and M must be non-negative, got {N}, {M}")
    d = _dtype_or(dtype, dtypes.float32)
    rows = sh.iota(dtypes.int32, (N, M), 0)
    cols = sh.iota(dtypes.int32, (N, M), 1)
    return ew.convert_element_type(ew.eq(ew.add(rows, k), cols), d)


def identity(n, dtype=None):
    n = static_int(n, "identity", "n")
    if n < 0:
        raise ValueError(f"identity: n must be non-negative, got {n}")
    return eye(n, dtype=dtype)


# --- reductions ---------------------------------------------------------------------------
def _reduce(fn, a, axis, keepdims, op):
    a = operand(a, op)
    axes = normalize_axes(axis, a.ndim, op, a)
    out = fn(a, axes)
    return _keep(out, a.shape, axes) if keepdims else out


def _keep(out, shape, axes):
    return sh.reshape(out, tuple(1 if i in axes else d for i, d in enumerate(shape)))


def _sum_dtype(a, dtype):
    if dtype is not None:
        return dtypes.canonicalize(dtype)
    if a.dtype == dtypes.bool_ or (dtypes.is_int(a.dtype) and a.dtype.itemsize < 4):
        return dtypes.int32 if a.dtype.kind != "u" else dtypes.uint32
    return a.dtype


def sum(a, axis=None, dtype=None, keepdims=False, where=None):
    a = operand(a, "sum")
    a = ew.convert_element_type(a, _sum_dtype(a, dtype), a.weak_type)
    if where is not None:
        a = ew.select(operand(where, "sum"), a, ew.zeros_like(a))
    return _reduce(red.reduce_sum, a, axis, keepdims, "sum")


def prod(a, axis=None, dtype=None, keepdims=False):
    a = operand(a, "prod")
    a = ew.convert_element_type(a, _sum_dtype(a, dtype), a.weak_type)
    return _reduce(red.reduce_prod, a, axis, keepdims, "prod")


def _extreme(fn, pick, a, axis, keepdims, initial, where, op):
    a = operand(a, op)
    if initial is None:
        if where is not None:
            raise ValueError(f"{op}: reduction with where= needs initial=")
        return _reduce(fn, a, axis, keepdims, op)
    init = ew.convert_element_type(sh.full(a.shape, initial, None), a.dtype, a.weak_type)
    if where is not None:
        a = ew.select(_bool(where, op), a, init)
    axes = normalize_axes(axis, a.ndim, op, a)
    if builtins.any(a.shape[i] == 0 for i in axes):  # an empty reduction gives `initial`
        shape = tuple(1 if i in axes else d for i, d in enumerate(a.shape)) if keepdims else \
            tuple(d for i, d in enumerate(a.shape) if i not in axes)
        return ew.convert_element_type(sh.full(shape, initial, None), a.dtype, a.weak_type)
    return pick(_reduce(fn, a, axes, keepdims, op), initial)


def _bool(x, op):
    x = operand(x, op)
    return x if x.dtype == dtypes.bool_ else ew.ne(x, 0)


def max(a, axis=None, keepdims=False, initial=None, where=None):
    return _extreme(red.reduce_max, ew.max, a, axis, keepdims, initial, where, "max")


def min(a, axis=None, keepdims=False, initial=None, where=None):
    return _extreme(red.reduce_min, ew.min, a, axis, keepdims, initial, where, "min")


amax, amin = max, min


def mean(a, axis=None, dtype=None, keepdims=False, *, where=None):
    """np.mean; with where=, the mean of the selected entries (NaN where none is)."""
    a = operand(a, "mean")
    axes = normalize_axes(axis, a.ndim, "mean", a)
    d = dtypes.canonicalize(dtype) if dtype is not None else (
        a.dtype if dtypes.is_inexact(a.dtype) else dtypes.float32)
    s = sum(ew.convert_element_type(a, d, a.weak_type), axis=axes, keepdims=keepdims,
            where=where)
    if where is not None:
        mask = sh.broadcast_to(_bool(where, "mean"), a.shape)
        n = sum(ew.convert_element_type(mask, d), axis=axes, keepdims=keepdims)
        return ew.div(s, n)
    n = int(np.prod([a.shape[i] for i in axes]))
    return ew.div(s, float(n)) if n else ew.mul(s, float("nan"))


def _ddof(ddof, correction, op):
    """NumPy's ddof or the Array API's correction (the same number; one of them)."""
    if correction is None:
        return ddof
    if ddof != 0:
        raise ValueError(f"{op}: give ddof or correction, not both")
    return correction


def var(a, axis=None, dtype=None, ddof=0, keepdims=False, *, correction=None):
    ddof = _ddof(ddof, correction, "var")
    a = operand(a, "var")
    axes = normalize_axes(axis, a.ndim, "var", a)
    n = int(np.prod([a.shape[i] for i in axes]))
    m = mean(a, axis=axes, dtype=dtype, keepdims=True)
    c = ew.sub(ew.convert_element_type(a, m.dtype, a.weak_type), m)
    # |c|^2 (a real result for complex input, as NumPy)
    s = sum(ew.real(ew.mul(c, ew.conj(c))) if dtypes.is_complex(c.dtype) else ew.mul(c, c),
            axis=axes, keepdims=keepdims)
    return ew.div(s, float(builtins.max(n - ddof, 0)))


def std(a, axis=None, dtype=None, ddof=0, keepdims=False, *, correction=None):
    # where the variance is 0 the derivative is taken as 0 (as for norm at 0), not the
    # NaN of sqrt'(0) * 0: the select gives the untaken branch a strong-zero cotangent
    v = var(a, axis, dtype, _ddof(ddof, correction, "std"), keepdims)
    pos = ew.gt(v, 0)
    return ew.select(pos, ew.sqrt(ew.select(pos, v, ew.ones_like(v))), v)


def argmax(a, axis=None, keepdims=False):
    return _arg(red.argmax, a, axis, keepdims, "argmax")


def argmin(a, axis=None, keepdims=False):
    return _arg(red.argmin, a, axis, keepdims, "argmin")


def _arg(fn, a, axis, keepdims, op):
    a = operand(a, op)
    if axis is None:
        out = fn(sh.reshape(a, (-1,)), 0)
        return sh.reshape(out, (1,) * a.ndim) if keepdims else out
    ax = normalize_axis(axis, a.ndim, op, a)
    out = fn(a, ax)
    return sh.expand_dims(out, ax) if keepdims else out


def all(a, axis=None, keepdims=False):
    # via a count of False entries: empty reductions give True, as in NumPy
    b = _bool(a, "all")
    bad = _reduce(red.reduce_sum, ew.convert_element_type(ew.logical_not(b), dtypes.int32),
                  axis, keepdims, "all")
    return ew.eq(bad, 0)


def any(a, axis=None, keepdims=False):
    b = _bool(a, "any")
    hits = _reduce(red.reduce_sum, ew.convert_element_type(b, dtypes.int32), axis, keepdims,
                   "any")
    return ew.gt(hits, 0)


# --- shape ----------------------------------------------------------------------------------
def reshape(a, shape=None, order="C", newshape=None):
    """np.reshape; order='F' reads and writes the elements first index fastest (the
    reversed-axes transpose of a C-order reshape to the reversed shape)."""
    shape = newshape if shape is None else shape
    a = operand(a, "reshape")
    if order == "F":
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return sh.transpose(sh.reshape(sh.transpose(a), shape[::-1]))
    if order != "C":
        raise ValueError(f"reshape: order must be 'C' or 'F', got {order!r}")
    return sh.reshape(a, shape)


def ravel(a):
    return sh.reshape(operand(a, "ravel"), (-1,))


def transpose(a, axes=None):
    return sh.transpose(operand(a, "transpose"), axes)


def permute_dims(a, axes=None):
    return transpose(a, axes)


moveaxis = sh.moveaxis
squeeze = sh.squeeze
expand_dims = sh.expand_dims
broadcast_to = sh.broadcast_to


def swapaxes(a, axis1, axis2):
    a = operand(a, "swapaxes")
    perm = list(range(a.ndim))
    i, j = normalize_axis(axis1, a.ndim, "swapaxes", a), normalize_axis(axis2, a.ndim,
                                                                         "swapaxes", a)
    perm[i], perm[j] = perm[j], perm[i]
    return sh.transpose(a, perm)


def _cast_all(arrays, dtype, op):
    """The arrays, each cast to dtype when one is given (concatenate / stack's dtype=)."""
    if dtype is None:
        return list(arrays)
    d = dtypes.canonicalize(dtype)
    return [ew.convert_element_type(operand(a, op), d) for a in arrays]


def concatenate(arrays, axis=0, dtype=None):
    arrays = _cast_all(arrays, dtype, "concatenate")
    if axis is None:
        return sh.concatenate([ravel(a) for a in arrays], 0)
    return sh.concatenate(arrays, axis)


def stack(arrays, axis=0, dtype=None):
    return sh.stack(_cast_all(arrays, dtype, "stack"), axis)


def atleast_1d(a):
    a = operand(a, "atleast_1d")
    return sh.reshape(a, (1,)) if a.ndim == 0 else a


def atleast_2d(a):
    a = operand(a, "atleast_2d")
    return sh.reshape(a, (1,) * (2 - a.ndim) + tuple(a.shape)) if a.ndim < 2 else a


def shape(a):
    return tuple(operand(a, "shape").shape)


def ndim(a):
    return operand(a, "ndim").ndim


def size(a):
    return operand(a, "size").size


# --- products -------------------------------------------------------------------------------
def matmul(a, b, *, precision=None, preferred_element_type=None):
    """precision (JAX's): None (the default_matmul_precision knob), mirax.lax.Precision,
    "default"/"high"/"highest" or a pair; the CPU is exact at every setting."""
    prec = canonical_precision(precision, "matmul")
    a, b = operand(a, "matmul"), operand(b, "matmul")
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul: operands must be at least 1-d, got {short(a)} and {short(b)}")
    a2 = sh.reshape(a, (1,) + tuple(a.shape)) if a.ndim == 1 else a
    b2 = sh.reshape(b, tuple(b.shape) + (1,)) if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise ShapeError(f"matmul: contracting dimensions differ: {short(a)} @ {short(b)}")
    try:
        batch = tuple(np.broadcast_shapes(tuple(a2.shape[:-2]), tuple(b2.shape[:-2]))) \
            if a2.ndim > 2 or b2.ndim > 2 else ()
    except ValueError:
        raise ShapeError(f"matmul: batch dimensions do not broadcast: {short(a)} @ "
                         f"{short(b)}") from None
    if b2.ndim == 2:  # [..., M, K] @ [K, N]: one big matmul, no broadcast copies of b
        out = dot_general(a2, b2, (((a2.ndim - 1,), (0,)), ((), ())), preferred_element_type,
                          prec, "matmul")
    else:
        a3 = sh.broadcast_to(a2, batch + tuple(a2.shape[-2:]))
        b3 = sh.broadcast_to(b2, batch + tuple(b2.shape[-2:]))
        nb = len(batch)
        out = dot_general(a3, b3, (((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb)))),
                          preferred_element_type, prec, "matmul")
    if a.ndim == 1:
        out = sh.squeeze(out, out.ndim - 2)
    if b.ndim == 1:
        out = sh.squeeze(out, out.ndim - 1)
    return out


def _scalar_product(a, b, pet):
    out = ew.mul(a, b)
    return out if pet is None else ew.convert_element_type(out, dtypes.canonicalize(pet))


def dot(a, b, *, precision=None, preferred_element_type=None):
    prec = canonical_precision(precision, "dot")
    a, b = operand(a, "dot"), operand(b, "dot")
    if a.ndim == 0 or b.ndim == 0:
        return _scalar_product(a, b, preferred_element_type)
    if b.ndim <= 2:
        return matmul(a, b, precision=prec, preferred_element_type=preferred_element_type)
    return tensordot(a, b, ((a.ndim - 1,), (b.ndim - 2,)), precision=prec,
                     preferred_element_type=preferred_element_type)


def vdot(a, b, *, precision=None, preferred_element_type=None):
    """sum(conj(a) * b) over the flattened inputs (the first argument is conjugated)."""
    return dot(ew.conj(ravel(a)), ravel(b), precision=precision,
               preferred_element_type=preferred_element_type)


def inner(a, b, *, precision=None, preferred_element_type=None):
    prec = canonical_precision(precision, "inner")
    a, b = operand(a, "inner"), operand(b, "inner")
    if a.ndim == 0 or b.ndim == 0:
        return _scalar_product(a, b, preferred_element_type)
    return tensordot(a, b, ((a.ndim - 1,), (b.ndim - 1,)), precision=prec,
                     preferred_element_type=preferred_element_type)


def outer(a, b):
    a, b = ravel(a), ravel(b)
    return ew.mul(sh.reshape(a, (-1, 1)), sh.reshape(b, (1, -1)))


def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None):
    prec = canonical_precision(precision, "tensordot")
    a, b = operand(a, "tensordot"), operand(b, "tensordot")
    if isinstance(axes, int):
        ax_a = tuple(range(a.ndim - axes, a.ndim))
        ax_b = tuple(range(axes))
    else:
        ax_a, ax_b = axes
        ax_a = (ax_a,) if isinstance(ax_a, int) else tuple(ax_a)
        ax_b = (ax_b,) if isinstance(ax_b, int) else tuple(ax_b)
        ax_a = tuple(normalize_axis(x, a.ndim, "tensordot", a) for x in ax_a)
        ax_b = tuple(normalize_axis(x, b.ndim, "tensordot", b) for x in ax_b)
    return dot_general(a, b, ((ax_a, ax_b), ((), ())), preferred_element_type, prec,
                       "tensordot")
