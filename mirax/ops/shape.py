"""Shape primitives: broadcast_in_dim, reshape, transpose, concatenate, pad, rev, slice,
dynamic_slice, dynamic_update_slice, iota; wrappers squeeze, expand_dims, broadcast_to,
moveaxis, full. All but iota are linear: each declares its transpose, which gives both
its vjp and its jvp."""
from __future__ import annotations

import builtins

import numpy as np

from mirax.core import dtypes
from mirax.core.array import Array
from mirax.core.avals import ShapedArray
from mirax.core.primitive import Primitive
from mirax.core.trace import aval_of
from mirax.ops import reduction as reduction_ops
from mirax.ops import elementwise as elementwise_ops
from mirax.ops import common as common_ops
from mirax.core.errors import ShapeError
from mirax.ops.common import (normalize_axes, normalize_axis, operand, same_shapes, short,
                              static_shape)


def _move_to_front(x, d):
    return x if d == 0 else moveaxis(x, d, 0)


# --- broadcast_in_dim ---------------------------------------------------------------------
broadcast_in_dim_p = Primitive("broadcast_in_dim", keeps_weak=True)


def broadcast_in_dim(x, shape, broadcast_dimensions):
    x = operand(x, "broadcast_in_dim")
    shape, dims = tuple(shape), tuple(broadcast_dimensions)
    if tuple(x.shape) == shape and dims == tuple(range(len(shape))):
        return x
    if any(a >= b for a, b in zip(dims, dims[1:])):  # the impl assumes they increase
        raise ValueError(f"broadcast_in_dim: broadcast_dimensions must be strictly increasing, "
                         f"got {dims} for {short(x)}; transpose the operand first")
    return broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=dims)


@broadcast_in_dim_p.def_abstract_eval
def _broadcast_in_dim_abstract_eval(x, *, shape, broadcast_dimensions):
    ok = len(broadcast_dimensions) == x.ndim and all(
        0 <= d < len(shape) and x.shape[i] in (1, shape[d])
        for i, d in enumerate(broadcast_dimensions))
    if not ok:
        raise ShapeError(f"broadcast_in_dim: cannot broadcast {short(x)} to {list(shape)} "
                         f"along dimensions {broadcast_dimensions}")
    return ShapedArray(shape, x.dtype)


@broadcast_in_dim_p.def_impl
def _broadcast_in_dim_impl(x, *, shape, broadcast_dimensions):
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return np.broadcast_to(np.reshape(x, expanded), shape)


@broadcast_in_dim_p.def_transpose          # the adjoint of broadcasting is summing
def _broadcast_in_dim_transpose(ct, x, *, shape, broadcast_dimensions):
    xshape = aval_of(x).shape
    new = tuple(d for d in range(len(shape)) if d not in broadcast_dimensions)
    stretched = tuple(d for i, d in enumerate(broadcast_dimensions)
                      if xshape[i] == 1 and shape[d] != 1)
    axes = tuple(sorted(new + stretched))
    out = reduction_ops.reduce_sum(ct, axes) if axes else ct
    return [reshape(out, xshape)]


@broadcast_in_dim_p.def_vmap
def _broadcast_in_dim_vmap(args, dims, *, shape, broadcast_dimensions):
    x = _move_to_front(args[0], dims[0])
    return broadcast_in_dim(x, (x.shape[0],) + tuple(shape),
                            (0,) + tuple(d + 1 for d in broadcast_dimensions)), 0


def broadcast_to(x, shape):
    x = operand(x, "broadcast_to")
    shape = static_shape(shape, "broadcast_to")
    if tuple(x.shape) == shape:
        return x
    lead = len(shape) - x.ndim
    if lead < 0 or any(a not in (1, b) for a, b in zip(x.shape, shape[lead:])):
        raise ShapeError(f"broadcast_to: cannot broadcast {short(x)} to shape {list(shape)}")
    return broadcast_in_dim(x, shape, tuple(range(lead, len(shape))))


def full(shape, fill_value, dtype=None, weak_type=False):
    shape = static_shape(shape, "full")
    if isinstance(fill_value, (bool, int, float)) or isinstance(fill_value, np.generic):
        if dtype is None:
            dtype, weak_type = dtypes.input_dtype(fill_value)
        value = Array(np.asarray(fill_value, dtypes.canonicalize(dtype)), weak_type)
    else:
        value = operand(fill_value, "full")
        if dtype is not None and value.dtype != dtypes.canonicalize(dtype):
            value = elementwise_ops.convert_element_type(value, dtype)
    if tuple(value.shape) == shape:
        return value
    return broadcast_to(value, shape)


# --- reshape ------------------------------------------------------------------------------
reshape_p = Primitive("reshape", keeps_weak=True)


def reshape(x, new_sizes, dimensions=None):
    """lax.reshape; `dimensions` transposes x first (row-major order of that permutation)."""
    x = operand(x, "reshape")
    if dimensions is not None:
        x = transpose(x, tuple(dimensions))
    if isinstance(new_sizes, (int, np.integer)):
        new_sizes = (new_sizes,)
    new_sizes = tuple(int(d) for d in new_sizes)
    if -1 in new_sizes:
        known = int(np.prod([d for d in new_sizes if d != -1]))
        if new_sizes.count(-1) > 1 or known == 0 or x.size % known:
            raise ShapeError(f"reshape: cannot reshape {short(x)} into {list(new_sizes)}")
        new_sizes = tuple(x.size // known if d == -1 else d for d in new_sizes)
    if new_sizes == tuple(x.shape):
        return x
    return reshape_p.bind(x, new_sizes=new_sizes)


@reshape_p.def_abstract_eval
def _reshape_abstract_eval(x, *, new_sizes):
    if int(np.prod(new_sizes)) != x.size or any(d < 0 for d in new_sizes):
        raise ShapeError(f"reshape: cannot reshape {short(x)} into {list(new_sizes)}")
    return ShapedArray(new_sizes, x.dtype)


reshape_p.def_impl(lambda x, *, new_sizes: np.reshape(x, new_sizes))
reshape_p.def_transpose(lambda ct, x, *, new_sizes: [reshape(ct, aval_of(x).shape)])


@reshape_p.def_vmap
def _reshape_vmap(args, dims, *, new_sizes):
    x = _move_to_front(args[0], dims[0])
    return reshape(x, (x.shape[0],) + new_sizes), 0


def squeeze(x, axis=None):
    x = operand(x, "squeeze")
    if axis is None:
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    else:
        axes = normalize_axes(axis, x.ndim, "squeeze", x)
        bad = [a for a in axes if x.shape[a] != 1]
        if bad:
            raise ValueError(f"squeeze: axis {bad[0]} of {short(x)} has size "
                             f"{x.shape[bad[0]]}, not 1")
    return reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


def expand_dims(x, axis):
    x = operand(x, "expand_dims")
    axis = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    ndim = x.ndim + len(axis)
    axes = normalize_axes(axis, ndim, "expand_dims", x)
    shape, it = [], iter(x.shape)
    for i in range(ndim):
        shape.append(1 if i in axes else next(it))
    return reshape(x, tuple(shape))


# --- transpose ----------------------------------------------------------------------------
transpose_p = Primitive("transpose", keeps_weak=True)


def transpose(x, permutation=None):
    x = operand(x, "transpose")
    if permutation is None:
        permutation = tuple(reversed(range(x.ndim)))
    permutation = tuple(normalize_axis(p, x.ndim, "transpose", x) for p in permutation)
    if sorted(permutation) != list(range(x.ndim)):
        raise ValueError(f"transpose: {permutation} is not a permutation of the axes of "
                         f"{short(x)}")
    if permutation == tuple(range(x.ndim)):
        return x
    return transpose_p.bind(x, permutation=permutation)


transpose_p.def_abstract_eval(
    lambda x, *, permutation: ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype))
transpose_p.def_impl(lambda x, *, permutation: np.transpose(x, permutation))
transpose_p.def_transpose(
    lambda ct, x, *, permutation: [transpose(ct, tuple(np.argsort(permutation)))])


@transpose_p.def_vmap
def _transpose_vmap(args, dims, *, permutation):
    x = _move_to_front(args[0], dims[0])
    return transpose(x, (0,) + tuple(p + 1 for p in permutation)), 0


def moveaxis(x, source, destination):
    """Move axes `source` (an int or a sequence) to positions `destination` (NumPy)."""
    x = operand(x, "moveaxis")
    seq = (lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v,))
    src = [normalize_axis(a, x.ndim, "moveaxis", x) for a in seq(source)]
    dst = [normalize_axis(a, x.ndim, "moveaxis", x) for a in seq(destination)]
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: source {source} and destination {destination} must have "
                         "the same number of elements")
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"moveaxis: repeated axis in source {source} or destination "
                         f"{destination}")
    perm = [i for i in range(x.ndim) if i not in src]
    for d, s_ in sorted(zip(dst, src)):
        perm.insert(d, s_)
    return transpose(x, perm)


# --- concatenate --------------------------------------------------------------------------
concatenate_p = Primitive("concatenate", keeps_weak=True)


def concatenate(xs, dimension=0):
    xs = [operand(x, "concatenate") for x in xs]
    if not xs:
        raise ValueError("concatenate: need at least one array")
    if any(x.ndim == 0 for x in xs):
        raise ValueError(f"concatenate: zero-dimensional arrays cannot be concatenated, got "
                         f"{', '.join(short(x) for x in xs[:4])}")
    if len(xs) == 1:
        return xs[0]
    xs = common_ops.promote("concatenate", *xs)
    dimension = normalize_axis(dimension, xs[0].ndim, "concatenate", xs[0])
    return concatenate_p.bind(*xs, dimension=dimension)


@concatenate_p.def_abstract_eval
def _concatenate_abstract_eval(*xs, dimension):
    x0 = xs[0]
    for x in xs[1:]:
        if x.ndim != x0.ndim or any(a != b for i, (a, b) in enumerate(zip(x.shape, x0.shape))
                                    if i != dimension):
            raise ShapeError(f"concatenate: shapes {', '.join(short(x) for x in xs)} differ "
                             f"outside axis {dimension}")
    shape = list(x0.shape)
    shape[dimension] = builtins.sum(x.shape[dimension] for x in xs)
    return ShapedArray(shape, x0.dtype)


concatenate_p.def_impl(lambda *xs, dimension: np.concatenate(xs, axis=dimension))


@concatenate_p.def_transpose
def _concatenate_transpose(ct, *xs, dimension):
    outs, start = [], 0
    for x in xs:
        n = aval_of(x).shape[dimension]
        outs.append(slice_in_dim(ct, start, start + n, axis=dimension))
        start += n
    return outs


@concatenate_p.def_vmap
def _concatenate_vmap(args, dims, *, dimension):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    xs = [_move_to_front(a, d) if d is not None else
          broadcast_to(a, (size,) + tuple(aval_of(a).shape)) for a, d in zip(args, dims)]
    return concatenate(xs, dimension + 1), 0


# --- pad ----------------------------------------------------------------------------------
pad_p = Primitive("pad", keeps_weak=True)


def pad(x, padding_value, padding_config):
    """lax.pad: padding_config is ((lo, hi, interior), ...) per axis; lo/hi may be < 0."""
    x, padding_value = common_ops.promote("pad", operand(x, "pad"), padding_value)
    config = tuple((int(lo), int(hi), int(i)) for lo, hi, i in padding_config)
    if len(config) != x.ndim or any(i < 0 for _, _, i in config):
        raise ValueError(f"pad: padding_config {config} does not fit {short(x)} (one "
                         "(lo, hi, interior >= 0) per axis)")
    return pad_p.bind(x, padding_value, padding_config=config)


def _padded_size(n, lo, hi, interior):
    return lo + hi + n + builtins.max(n - 1, 0) * interior


@pad_p.def_abstract_eval
def _pad_abstract_eval(x, v, *, padding_config):
    shape = tuple(_padded_size(n, *c) for n, c in zip(x.shape, padding_config))
    if any(d < 0 for d in shape):
        raise ValueError(f"pad: padding {padding_config} leaves a negative size for {short(x)}")
    return ShapedArray(shape, x.dtype)


@pad_p.def_impl
def _pad_impl(x, v, *, padding_config):
    x = np.asarray(x)
    # interior first, into a zero-filled (value-filled) strided grid
    if any(i for _, _, i in padding_config):
        shape = tuple(n + builtins.max(n - 1, 0) * i for n, (_, _, i) in zip(x.shape,
                                                                              padding_config))
        grid = np.full(shape, v, dtype=x.dtype)
        grid[tuple(builtins.slice(None, None, i + 1) for _, _, i in padding_config)] = x
        x = grid
    crop = tuple(builtins.slice(builtins.max(-lo, 0), x.shape[d] - builtins.max(-hi, 0))
                 for d, (lo, hi, _) in enumerate(padding_config))
    x = x[crop]
    widths = [(builtins.max(lo, 0), builtins.max(hi, 0)) for lo, hi, _ in padding_config]
    if not any(a or b for a, b in widths):
        return x
    # one fill and one copy (np.pad fills each edge of each axis on its own: 2.7x slower
    # on a [16,64,128] -> [16,64,384] pad, a split's transpose)
    out = np.full(tuple(n + a + b for n, (a, b) in zip(x.shape, widths)), v, x.dtype)
    out[tuple(builtins.slice(a, a + n) for n, (a, _) in zip(x.shape, widths))] = x
    return out


@pad_p.def_transpose
def _pad_transpose(ct, x, v, *, padding_config):
    unpadded = pad(ct, 0, tuple((-lo, -hi, 0) for lo, hi, _ in padding_config))
    t_x = slice(unpadded, (0,) * len(padding_config), unpadded.shape,
                tuple(i + 1 for _, _, i in padding_config))
    t_v = None
    if dtypes.is_inexact(aval_of(v).dtype):
        t_v = elementwise_ops.sub(reduction_ops.reduce_sum(ct, None),
                                  reduction_ops.reduce_sum(t_x, None))
    return [t_x, t_v]


@pad_p.def_vmap
def _pad_vmap(args, dims, *, padding_config):
    (x, v), (dx, dv) = args, dims
    config = ((0, 0, 0),) + padding_config
    if dv is None:
        return pad(_move_to_front(x, dx), v, config), 0
    # a padding value per batch member: pad with zeros, then fill the padded positions
    size = aval_of(v).shape[dv]
    xb = _move_to_front(x, dx) if dx is not None else broadcast_to(
        x, (size,) + tuple(aval_of(x).shape))
    kept = pad(full(xb.shape, True), False, config)  # True where x lands
    out = pad(xb, 0, config)
    vb = broadcast_in_dim(_move_to_front(v, dv), out.shape, (0,))
    return elementwise_ops.select(kept, out, vb), 0


# --- rev ----------------------------------------------------------------------------------
rev_p = Primitive("rev", keeps_weak=True)


def rev(x, dimensions):
    x = operand(x, "rev")
    dims = normalize_axes(dimensions, x.ndim, "rev", x)
    return rev_p.bind(x, dimensions=dims) if dims else x


rev_p.def_abstract_eval(lambda x, *, dimensions: ShapedArray(x.shape, x.dtype))
rev_p.def_impl(lambda x, *, dimensions: np.flip(x, dimensions))
rev_p.def_transpose(lambda ct, x, *, dimensions: [rev(ct, dimensions)])
rev_p.def_vmap(lambda args, dims, *, dimensions: (
    rev(_move_to_front(args[0], dims[0]), tuple(d + 1 for d in dimensions)), 0))


# --- slice --------------------------------------------------------------------------------
slice_p = Primitive("slice", keeps_weak=True)


def slice(x, start_indices, limit_indices, strides=None):  # noqa: A001 (lax.slice)
    x = operand(x, "slice")
    start, limit = tuple(map(int, start_indices)), tuple(map(int, limit_indices))
    strides = (1,) * x.ndim if strides is None else tuple(map(int, strides))
    if not (len(start) == len(limit) == len(strides) == x.ndim) or any(
        not 0 <= s <= e <= n or st < 1 for s, e, n, st in zip(start, limit, x.shape, strides)
    ):
        raise ValueError(f"slice: start {list(start)}, limit {list(limit)}, strides "
                         f"{list(strides)} do not fit {short(x)}")
    if start == (0,) * x.ndim and limit == tuple(x.shape) and strides == (1,) * x.ndim:
        return x
    return slice_p.bind(x, start_indices=start, limit_indices=limit, strides=strides)


def slice_in_dim(x, start, limit, stride=1, axis=0):
    x = operand(x, "slice_in_dim")
    axis = normalize_axis(axis, x.ndim, "slice_in_dim", x, strict=True)
    s, e, st = [0] * x.ndim, list(x.shape), [1] * x.ndim
    s[axis], e[axis], st[axis] = start, limit, stride
    return slice(x, s, e, st)


def _slice_shape(start, limit, strides):
    return tuple(-(-(e - s) // st) for s, e, st in zip(start, limit, strides))


slice_p.def_abstract_eval(lambda x, *, start_indices, limit_indices, strides: ShapedArray(
    _slice_shape(start_indices, limit_indices, strides), x.dtype))
slice_p.def_impl(lambda x, *, start_indices, limit_indices, strides: x[tuple(
    builtins.slice(s, e, st) for s, e, st in zip(start_indices, limit_indices, strides))])


@slice_p.def_transpose
def _slice_transpose(ct, x, *, start_indices, limit_indices, strides):
    shape = aval_of(x).shape
    out = _slice_shape(start_indices, limit_indices, strides)
    config = tuple((s, n - (s + (o - 1) * st + 1) if o else n - s, st - 1) for s, n, o,
                   st in zip(start_indices, shape, out, strides))
    return [pad(ct, 0, config)]


@slice_p.def_vmap
def _slice_vmap(args, dims, *, start_indices, limit_indices, strides):
    x = _move_to_front(args[0], dims[0])
    return slice(x, (0,) + start_indices, (x.shape[0],) + limit_indices, (1,) + strides), 0


# --- iota ---------------------------------------------------------------------------------
iota_p = Primitive("iota")


def iota(dtype, size_or_shape, dimension=0):
    shape = static_shape(size_or_shape, "iota")
    dimension = normalize_axis(dimension, len(shape), "iota", strict=True)
    return iota_p.bind(dtype=dtypes.canonicalize(dtype), shape=shape, dimension=dimension)


iota_p.def_abstract_eval(lambda *, dtype, shape, dimension: ShapedArray(shape, dtype))


@iota_p.def_impl
def _iota_impl(*, dtype, shape, dimension):
    r = np.arange(shape[dimension], dtype=dtype)
    return np.broadcast_to(r.reshape([-1 if i == dimension else 1 for i in range(len(shape))]),
                           shape)


iota_p.def_jvp(lambda primals, tangents, **p: (iota_p.bind(**p), None))
iota_p.def_vjp(lambda ct, out, **p: [])
iota_p.def_vmap(lambda args, dims, **p: (iota_p.bind(**p), None))


# --- small compositions used by rules ----------------------------------------------------
def index_in_dim(x, index: int, axis: int = 0, keepdims: bool = False):
    """x[..., index, ...] along `axis` with a static index."""
    x = operand(x, "index_in_dim")
    axis = normalize_axis(axis, x.ndim, "index_in_dim", x, strict=True)
    out = slice_in_dim(x, index, index + 1, axis=axis)
    return out if keepdims else squeeze(out, axis)


def stack(xs, axis: int = 0):
    xs = [operand(x, "stack") for x in xs]
    if not xs:
        raise ValueError("stack: need at least one array")
    same_shapes("stack", xs, "arrays")
    axis = normalize_axis(axis, xs[0].ndim + 1, "stack", xs[0])
    return concatenate([expand_dims(x, axis) for x in xs], axis)
