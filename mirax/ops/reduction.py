"""Reductions: reduce_sum, reduce_max, reduce_min, reduce_prod, argmax, argmin.

Reductions over float16/bfloat16 accumulate in float32. Integer sums keep their dtype
(NumPy would widen to int64)."""
from __future__ import annotations

import numpy as np

from mirax.core import dtypes
from mirax.core.avals import ShapedArray
from mirax.core.primitive import Primitive
from mirax.core.trace import aval_of
from mirax.ops import cumulative as cumulative_ops
from mirax.ops.common import normalize_axes, normalize_axis, operand, short
from mirax.ops import shape as shape_ops
from mirax.ops import elementwise as elementwise_ops


def _drop_axes(shape, axes):
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _kept(ndim, axes):
    return tuple(i for i in range(ndim) if i not in axes)


def _shift_axes(axes, bdim):
    """Axes of the unbatched operand as axes of the batched one (batch dim at bdim)."""
    return tuple(a + (a >= bdim) for a in axes)


def _out_bdim(axes, bdim):
    return bdim - sum(a < bdim for a in axes)


def _expand_back(y, shape, axes):
    """Broadcast a reduced value back to the operand's shape."""
    return shape_ops.broadcast_in_dim(y, shape, _kept(len(shape), axes))


def _low_precision(dtype) -> bool:
    return dtype in dtypes.LOW_FLOATS


def _reduction_vmap(prim):
    def vmap(args, dims, *, axes):
        (x,), (d,) = args, dims
        return prim.bind(x, axes=_shift_axes(axes, d)), _out_bdim(axes, d)
    return vmap


def _reduce(prim, x, axes):
    """The wrappers' shared body: validate, normalize axes; reducing over none is x."""
    x = operand(x, prim.name)
    axes = normalize_axes(axes, x.ndim, prim.name, x)
    return prim.bind(x, axes=axes) if axes else x


def _reduced_aval(x, *, axes):
    return ShapedArray(_drop_axes(x.shape, axes), x.dtype)


# --- reduce_sum ---------------------------------------------------------------------------
reduce_sum_p = Primitive("reduce_sum", keeps_weak=True)


def reduce_sum(x, axes=None):
    return _reduce(reduce_sum_p, x, axes)


reduce_sum_p.def_abstract_eval(_reduced_aval)


@reduce_sum_p.def_impl
def _reduce_sum_impl(x, *, axes):
    if _low_precision(x.dtype):
        return np.asarray(np.sum(x, axis=axes, dtype=np.float32)).astype(x.dtype)
    return np.asarray(np.sum(x, axis=axes, dtype=x.dtype))


reduce_sum_p.def_transpose(  # the adjoint of sum is broadcast
    lambda ct, x, *, axes: [_expand_back(ct, aval_of(x).shape, axes)])
reduce_sum_p.def_vmap(_reduction_vmap(reduce_sum_p))


# --- reduce_max / reduce_min --------------------------------------------------------------
def _minmax(name, np_fn):
    p = Primitive(name, keeps_weak=True)
    p.def_abstract_eval(lambda x, *, axes: _minmax_abstract_eval(name, x, axes))
    p.def_impl(lambda x, *, axes: np.asarray(np_fn(x, axis=axes)))

    # d max: the cotangent is shared evenly among the entries that attain the max
    @p.def_vjp
    def vjp(ct, out, x, *, axes):
        shape = aval_of(x).shape
        hit = elementwise_ops.convert_element_type(
            elementwise_ops.eq(x, _expand_back(out, shape, axes)), aval_of(x).dtype)
        count = reduce_sum(hit, axes)
        return [elementwise_ops.mul(hit, _expand_back(elementwise_ops.div(ct, count), shape, axes))]

    @p.def_jvp
    def jvp(primals, tangents, *, axes):
        (x,), (t,) = primals, tangents
        out = p.bind(x, axes=axes)
        if t is None:
            return out, None
        hit = elementwise_ops.convert_element_type(
            elementwise_ops.eq(x, _expand_back(out, aval_of(x).shape, axes)), aval_of(x).dtype)
        return out, elementwise_ops.div(reduce_sum(elementwise_ops.mul(t, hit), axes),
                                        reduce_sum(hit, axes))

    p.def_vmap(_reduction_vmap(p))
    return p


def _minmax_abstract_eval(name, x, axes):
    if any(x.shape[a] == 0 for a in axes):
        raise ValueError(f"{name}: reduction over an empty axis of {short(x)} has no identity")
    return _reduced_aval(x, axes=axes)


reduce_max_p = _minmax("reduce_max", np.max)
reduce_min_p = _minmax("reduce_min", np.min)


def reduce_max(x, axes=None):
    return _reduce(reduce_max_p, x, axes)


def reduce_min(x, axes=None):
    return _reduce(reduce_min_p, x, axes)


# --- reduce_prod --------------------------------------------------------------------------
reduce_prod_p = Primitive("reduce_prod", keeps_weak=True)


def reduce_prod(x, axes=None):
    return _reduce(reduce_prod_p, x, axes)


reduce_prod_p.def_abstract_eval(_reduced_aval)


@reduce_prod_p.def_impl
def _reduce_prod_impl(x, *, axes):
    acc = np.float32 if _low_precision(x.dtype) else x.dtype
    return np.asarray(np.prod(x, axis=axes, dtype=acc)).astype(x.dtype)


@reduce_prod_p.def_jvp
def _reduce_prod_jvp(primals, tangents, *, axes):
    # d prod = sum_i t_i * prod_{j != i} x_j; the exclusive products come from cumprods so
    # zeros in x are exact (no division by x).
    (x,), (t,) = primals, tangents
    out = reduce_prod_p.bind(x, axes=axes)
    if t is None:
        return out, None
    return out, reduce_sum(elementwise_ops.mul(t, _prod_others(x, axes)), axes)


@reduce_prod_p.def_vjp
def _reduce_prod_vjp(ct, out, x, *, axes):
    return [elementwise_ops.mul(_expand_back(ct, aval_of(x).shape, axes), _prod_others(x, axes))]


def _prod_others(x, axes):
    """For each entry, the product of the other entries of its reduction group."""
    shape = aval_of(x).shape
    kept = _kept(len(shape), axes)
    perm = kept + tuple(axes)
    xt = shape_ops.transpose(x, perm)
    lead = tuple(shape[i] for i in kept)
    n = int(np.prod([shape[a] for a in axes]))
    flat = shape_ops.reshape(xt, lead + (n,))
    ax = len(lead)
    one = shape_ops.full(lead + (1,), 1, aval_of(x).dtype)
    before = shape_ops.concatenate(
        [one, shape_ops.slice_in_dim(cumulative_ops.cumprod(flat, ax), 0, n - 1, axis=ax)], ax)
    after = shape_ops.concatenate(
        [shape_ops.slice_in_dim(cumulative_ops.cumprod(flat, ax, reverse=True), 1, n, axis=ax),
         one], ax)
    others = shape_ops.reshape(elementwise_ops.mul(before, after), tuple(xt.shape))
    return shape_ops.transpose(others, tuple(np.argsort(perm)))


reduce_prod_p.def_vmap(_reduction_vmap(reduce_prod_p))


# --- argmax / argmin ----------------------------------------------------------------------
def _arg(name, np_fn):
    p = Primitive(name)

    @p.def_abstract_eval
    def abstract_eval(x, *, axis, index_dtype):
        if x.shape[axis] == 0:
            raise ValueError(f"{name}: empty axis {axis} of {short(x)}")
        return ShapedArray(_drop_axes(x.shape, (axis,)), index_dtype)

    p.def_impl(lambda x, *, axis, index_dtype: np.asarray(np_fn(x, axis=axis)).astype(index_dtype))
    p.def_jvp(lambda primals, tangents, **params: (p.bind(*primals, **params), None))
    p.def_vjp(lambda ct, out, x, **params: [None])

    @p.def_vmap
    def vmap(args, dims, *, axis, index_dtype):
        (x,), (d,) = args, dims
        return p.bind(x, axis=axis + (axis >= d), index_dtype=index_dtype), d - (d > axis)

    return p


argmax_p = _arg("argmax", np.argmax)
argmin_p = _arg("argmin", np.argmin)


def argmax(x, axis, index_dtype=dtypes.int32):
    x = operand(x, "argmax")
    return argmax_p.bind(x, axis=normalize_axis(axis, x.ndim, "argmax", x),
                         index_dtype=dtypes.canonicalize(index_dtype))


def argmin(x, axis, index_dtype=dtypes.int32):
    x = operand(x, "argmin")
    return argmin_p.bind(x, axis=normalize_axis(axis, x.ndim, "argmin", x),
                         index_dtype=dtypes.canonicalize(index_dtype))
