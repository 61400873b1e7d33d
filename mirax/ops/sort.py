"""Sorting primitives: sort (stable, multi-operand, lexicographic on the first `num_keys`
operands), plus the two axis-wise index primitives its rules need: gather_along_axis
(NumPy's take_along_axis) and its adjoint scatter_add_along_axis.

Derivatives of sort go through the permutation: the jvp gathers the tangent with it, the
vjp scatters the cotangent back. The permutation comes from sorting an extra iota operand
alongside the keys, so every rule is written with primitives and differentiates again.
"""
from __future__ import annotations

import numpy as np

from mirax.core import dtypes
from mirax.core.avals import ShapedArray
from mirax.core.primitive import Primitive
from mirax.core.trace import aval_of
from mirax.core.errors import ShapeError
from mirax.ops.common import batch_size, normalize_axis, operand, same_shapes, short
from mirax.ops import shape as shape_ops


def _front(x, d, size=None):
    """x with its batch dim at 0 (an unbatched x is broadcast to `size` first)."""
    if d is None:
        return shape_ops.broadcast_to(x, (size,) + tuple(aval_of(x).shape))
    return x if d == 0 else shape_ops.moveaxis(x, d, 0)


def _check_indices(name, x, idx, axis):
    if not dtypes.is_int(idx.dtype):
        raise TypeError(f"{name}: indices must be integers, got {short(idx)}")
    if idx.ndim != x.ndim or any(a != b for i, (a, b) in enumerate(zip(idx.shape, x.shape))
                                 if i != axis):
        raise ValueError(f"{name}: indices {short(idx)} do not fit {short(x)} outside "
                         f"axis {axis}")


# --- gather_along_axis --------------------------------------------------------------------
# out[..., i, ...] = x[..., idx[..., i, ...], ...] along `axis` (np.take_along_axis).
# Linear in x; the adjoint scatters (adds) the cotangent back to the gathered positions.
gather_along_axis_p = Primitive("gather_along_axis", keeps_weak=True)


def gather_along_axis(x, idx, axis):
    x, idx = operand(x, "gather_along_axis"), operand(idx, "gather_along_axis")
    axis = normalize_axis(axis, x.ndim, "gather_along_axis", x)
    _check_indices("gather_along_axis", x, idx, axis)
    return gather_along_axis_p.bind(x, idx, axis=axis)


@gather_along_axis_p.def_abstract_eval
def _gather_along_axis_abstract_eval(x, idx, *, axis):
    _check_indices("gather_along_axis", x, idx, axis)
    return ShapedArray(idx.shape, x.dtype)


gather_along_axis_p.def_impl(
    lambda x, idx, *, axis: np.take_along_axis(x, np.asarray(idx, np.intp), axis))


@gather_along_axis_p.def_jvp  # NOTE: set before def_transpose (idx is not linear)
def _gather_along_axis_jvp(primals, tangents, *, axis):
    (x, idx), (t, _) = primals, tangents
    out = gather_along_axis_p.bind(x, idx, axis=axis)
    return out, None if t is None else gather_along_axis_p.bind(t, idx, axis=axis)


@gather_along_axis_p.def_transpose
def _gather_along_axis_transpose(ct, x, idx, *, axis):
    return [scatter_add_along_axis(ct, idx, axis, aval_of(x).shape[axis]), None]


@gather_along_axis_p.def_vmap
def _gather_along_axis_vmap(args, dims, *, axis):
    n = batch_size(args, dims)
    x, idx = (_front(a, d, n) for a, d in zip(args, dims))
    return gather_along_axis_p.bind(x, idx, axis=axis + 1), 0


# --- scatter_add_along_axis ---------------------------------------------------------------
# out = zeros(u.shape with `size` at axis); out[..., idx[..., i, ...], ...] += u[..., i, ...]
scatter_add_along_axis_p = Primitive("scatter_add_along_axis", keeps_weak=True)


def scatter_add_along_axis(u, idx, axis, size):
    u, idx = operand(u, "scatter_add_along_axis"), operand(idx, "scatter_add_along_axis")
    axis = normalize_axis(axis, u.ndim, "scatter_add_along_axis", u)
    _check_indices("scatter_add_along_axis", u, idx, axis)
    if idx.shape != u.shape:
        raise ShapeError(f"scatter_add_along_axis: indices {short(idx)} and updates "
                         f"{short(u)} differ")
    return scatter_add_along_axis_p.bind(u, idx, axis=axis, size=int(size))


@scatter_add_along_axis_p.def_abstract_eval
def _scatter_add_along_axis_abstract_eval(u, idx, *, axis, size):
    shape = list(u.shape)
    shape[axis] = size
    return ShapedArray(tuple(shape), u.dtype)


@scatter_add_along_axis_p.def_impl
def _scatter_add_along_axis_impl(u, idx, *, axis, size):
    shape = list(u.shape)
    shape[axis] = size
    out = np.zeros(shape, u.dtype)
    index = list(np.indices(u.shape, sparse=True))
    index[axis] = np.asarray(idx, np.intp)
    np.add.at(out, tuple(index), u)
    return out


@scatter_add_along_axis_p.def_jvp
def _scatter_add_along_axis_jvp(primals, tangents, *, axis, size):
    (u, idx), (t, _) = primals, tangents
    out = scatter_add_along_axis_p.bind(u, idx, axis=axis, size=size)
    return out, None if t is None else scatter_add_along_axis_p.bind(t, idx, axis=axis,
                                                                     size=size)


scatter_add_along_axis_p.def_transpose(
    lambda ct, u, idx, *, axis, size: [gather_along_axis_p.bind(ct, idx, axis=axis), None])


@scatter_add_along_axis_p.def_vmap
def _scatter_add_along_axis_vmap(args, dims, *, axis, size):
    n = batch_size(args, dims)
    u, idx = (_front(a, d, n) for a, d in zip(args, dims))
    return scatter_add_along_axis_p.bind(u, idx, axis=axis + 1, size=size), 0


# --- sort ---------------------------------------------------------------------------------
# Sorts all operands along `axis` by the first `num_keys` of them (lexicographically),
# stably; descending keeps equal keys in their original order (as a stable sort should).
sort_p = Primitive("sort", multiple_results=True)


def sort(operands, axis=-1, descending=False, num_keys=1):
    """Sort one array (returns an array) or a sequence of arrays (returns a list)."""
    single = not isinstance(operands, (list, tuple))
    xs = [operand(x, "sort") for x in ([operands] if single else operands)]
    if not xs:
        raise ValueError("sort: need at least one operand")
    same_shapes("sort", xs)
    if xs[0].ndim == 0:
        return xs[0] if single else xs
    axis = normalize_axis(axis, xs[0].ndim, "sort", xs[0])
    if not 1 <= num_keys <= len(xs):
        raise ValueError(f"sort: num_keys={num_keys} must be in [1, {len(xs)}]")
    out = sort_p.bind(*xs, axis=axis, descending=bool(descending), num_keys=int(num_keys))
    return out[0] if single else out


def argsort(x, axis=-1, descending=False, index_dtype=dtypes.int32):
    """Stable argsort along axis (the permutation that sorts x)."""
    x = operand(x, "argsort")
    if x.ndim == 0:
        return shape_ops.iota(index_dtype, ())
    axis = normalize_axis(axis, x.ndim, "argsort", x)
    perm = shape_ops.iota(index_dtype, tuple(x.shape), axis)
    return sort_p.bind(x, perm, axis=axis, descending=bool(descending), num_keys=1)[1]


@sort_p.def_abstract_eval
def _sort_abstract_eval(*xs, axis, descending, num_keys):
    return [ShapedArray(x.shape, x.dtype) for x in xs]


def _sort_perm(keys, axis, descending):
    """The stable sorting permutation of NumPy `keys` along axis (lexicographic)."""
    n = keys[0].shape[axis]
    if descending:  # stable descending = reversed ascending sort of the reversed keys
        return n - 1 - np.flip(_sort_perm([np.flip(k, axis) for k in keys], axis, False), axis)
    if len(keys) == 1:
        return np.argsort(keys[0], axis=axis, kind="stable")
    moved = [np.moveaxis(k, axis, -1) for k in keys]
    return np.moveaxis(np.lexsort(moved[::-1], axis=-1), -1, axis)


@sort_p.def_impl
def _sort_impl(*xs, axis, descending, num_keys):
    perm = _sort_perm(xs[:num_keys], axis, descending)
    return [np.take_along_axis(x, perm, axis) for x in xs]


def _perm_of(xs, axis, descending, num_keys):
    """The sorting permutation as a mirax int32 array (sort an iota along)."""
    keys = list(xs[:num_keys])
    perm = shape_ops.iota(dtypes.int32, tuple(aval_of(keys[0]).shape), axis)
    return sort_p.bind(*keys, perm, axis=axis, descending=descending, num_keys=num_keys)[-1]


@sort_p.def_jvp
def _sort_jvp(primals, tangents, *, axis, descending, num_keys):
    out = sort_p.bind(*primals, axis=axis, descending=descending, num_keys=num_keys)
    perm = _perm_of(primals, axis, descending, num_keys)
    t_out = [None if t is None else gather_along_axis_p.bind(t, perm, axis=axis)
             for t in tangents]
    return out, t_out


@sort_p.def_vjp
def _sort_vjp(cts, out, *xs, axis, descending, num_keys):
    perm = _perm_of(xs, axis, descending, num_keys)
    n = aval_of(xs[0]).shape[axis]
    return [scatter_add_along_axis_p.bind(ct, perm, axis=axis, size=n)
            if dtypes.is_float(aval_of(x).dtype) else None for ct, x in zip(cts, xs)]


@sort_p.def_vmap
def _sort_vmap(args, dims, *, axis, descending, num_keys):
    n = batch_size(args, dims)
    xs = [_front(a, d, n) for a, d in zip(args, dims)]
    out = sort_p.bind(*xs, axis=axis + 1, descending=descending, num_keys=num_keys)
    return out, [0] * len(out)
