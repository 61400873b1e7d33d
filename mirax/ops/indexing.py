"""Indexing primitives: dynamic_slice, dynamic_update_slice, gather and the scatter family.

Where this sits: mirax.numpy's `x[idx]` and `x.at[idx]` (numpy/_indexing.py) lower basic
indexing to slice/rev/reshape and only advanced indexing to these primitives.

`gather` / `scatter*` use one simple layout instead of XLA's dimension numbers:
`indices` has shape `batch + (k,)` and `indices[..., j]` is a position along `axes[j]`;
the other axes of `x` ("rest" axes, in order) are taken whole. So
    gather(x, idx, axes)[b..., r...] = x[axes[j] = idx[b..., j], rest = r...]
and the output (or a scatter's `updates`) has shape `batch + rest`. Out-of-bounds
positions: gather mode "clip" clamps them, "fill" yields `fill_value` (NaN for floats);
scatter mode "clip" clamps them, "drop" ignores those updates. Each gather mode pairs with
a scatter mode (clip<->clip, fill<->drop) so gather and scatter_add are each other's
transpose. Repeated indices accumulate deterministically (ufunc.at) in scatter_add/mul/
min/max; scatter (set) lets the last update win.

dynamic_slice / dynamic_update_slice clamp their start indices so the window fits (JAX).
"""
from __future__ import annotations

import builtins

import numpy as np

from mirax.core import dtypes
from mirax.core.avals import ShapedArray
from mirax.core.primitive import Primitive
from mirax.core.trace import aval_of
from mirax.core.errors import ShapeError
from mirax.ops import elementwise as ew
from mirax.ops.common import batch_size, normalize_axis, operand, short
from mirax.ops.shape import broadcast_in_dim, broadcast_to, full, iota, moveaxis, reshape
from mirax.interpreters.vmap import move_bdim
from mirax.ops import shape as shape_ops
from mirax.ops import common as common_ops

__all__ = ["dynamic_slice", "dynamic_update_slice", "dynamic_slice_in_dim",
           "dynamic_index_in_dim", "dynamic_update_slice_in_dim", "dynamic_update_index_in_dim",
           "gather", "scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max"]

_SCATTER_FOR = {"clip": "clip", "fill": "drop"}   # gather mode -> scatter mode (transpose)
_GATHER_FOR = {"clip": "clip", "drop": "fill"}


def _zeros(aval, dtype=None):
    return full(aval.shape, 0, dtype or aval.dtype)


def _to_front(x, d, size):
    """x with its batch axis at 0 (broadcast to `size` when unbatched)."""
    return move_bdim(x, d, 0, size)


def _start_operands(starts, op, shape=None):
    """int32 scalar operands of the start indices; given the operand's shape, a negative
    start counts from the end (JAX's allow_negative_indices), before the clamping."""
    out = []
    for d, s in enumerate(starts):
        if shape is not None and isinstance(s, (int, np.integer)) and s < 0:
            s = int(s) + shape[d]
        s = operand(s, op)
        if s.shape != () or not dtypes.is_int(s.dtype):
            raise TypeError(f"{op}: start indices must be integer scalars, got {short(s)}")
        s = s if s.dtype == dtypes.int32 and not s.weak_type \
            else ew.convert_element_type(s, dtypes.int32)
        if shape is not None and not isinstance(starts[d], (int, np.integer)):
            s = ew.select(ew.lt(s, 0), ew.add(s, shape[d]), s)
        out.append(s)
    return out


def _clamped_starts(starts, shape, sizes):
    return [builtins.min(builtins.max(int(s), 0), n - k) for s, n, k in zip(starts, shape, sizes)]


def _window_indices(starts, shape, sizes, size):
    """Batched starts (each [B]) -> a full index grid [B, *sizes, ndim] of the clamped window."""
    grids = []
    for a, (s, n, k) in enumerate(zip(starts, shape, sizes)):
        s = ew.min(ew.max(s, 0), n - k)
        pos = ew.add(broadcast_in_dim(s, (size,) + tuple(sizes), (0,)),
                     iota(dtypes.int32, (size,) + tuple(sizes), a + 1))
        grids.append(reshape(pos, pos.shape + (1,)))
    return shape_ops.concatenate(grids, len(sizes) + 1)


def _with_batch_index(idx, size):
    """idx [B, ..., k] -> [B, ..., k + 1] with the batch position prepended (for axis 0)."""
    a = aval_of(idx)
    b = iota(a.dtype, a.shape[:-1] + (1,), 0)
    return shape_ops.concatenate([b, idx], a.ndim - 1)


# --- dynamic_slice ------------------------------------------------------------------------
dynamic_slice_p = Primitive("dynamic_slice")


def dynamic_slice(x, start_indices, slice_sizes, *, allow_negative_indices=True):
    """lax.dynamic_slice: x[s0:s0+k0, ...] with traced starts, clamped so the window fits;
    a negative start counts from the end first (allow_negative_indices, as JAX)."""
    x = operand(x, "dynamic_slice")
    sizes = tuple(int(k) for k in slice_sizes)
    if len(start_indices) != x.ndim or len(sizes) != x.ndim or any(
            not 0 <= k <= n for k, n in zip(sizes, x.shape)):
        raise ValueError(f"dynamic_slice: {len(start_indices)} start indices and slice sizes "
                         f"{list(sizes)} do not fit {short(x)}")
    starts = _start_operands(start_indices, "dynamic_slice",
                             x.shape if allow_negative_indices else None)
    return dynamic_slice_p.bind(x, *starts, slice_sizes=sizes)


@dynamic_slice_p.def_abstract_eval
def _dynamic_slice_abstract_eval(x, *starts, slice_sizes):
    return ShapedArray(slice_sizes, x.dtype)


@dynamic_slice_p.def_impl
def _dynamic_slice_impl(x, *starts, slice_sizes):
    s = _clamped_starts(starts, x.shape, slice_sizes)
    return x[tuple(builtins.slice(a, a + k) for a, k in zip(s, slice_sizes))]


@dynamic_slice_p.def_jvp                  # linear in x; the starts carry no tangent
def _dynamic_slice_jvp(primals, tangents, *, slice_sizes):
    x, *starts = primals
    t = tangents[0]
    out = dynamic_slice_p.bind(x, *starts, slice_sizes=slice_sizes)
    return out, None if t is None else dynamic_slice_p.bind(t, *starts, slice_sizes=slice_sizes)


@dynamic_slice_p.def_transpose           # the adjoint of cutting a window is pasting it on 0
def _dynamic_slice_transpose(ct, x, *starts, slice_sizes):
    zeros = _zeros(aval_of(x), aval_of(ct).dtype)
    return [dynamic_update_slice_p.bind(zeros, ct, *starts)] + [None] * len(starts)


@dynamic_slice_p.def_vmap
def _dynamic_slice_vmap(args, dims, *, slice_sizes):
    (x, *starts), (dx, *dstarts) = args, dims
    if all(d is None for d in dstarts):
        x = moveaxis(x, dx, 0) if dx else x
        zero = full((), 0, dtypes.int32)
        return dynamic_slice_p.bind(x, zero, *starts,
                                    slice_sizes=(x.shape[0],) + slice_sizes), 0
    size = next(aval_of(s).shape[d] for s, d in zip(starts, dstarts) if d is not None)
    shape = aval_of(x).shape if dx is None else \
        aval_of(x).shape[:dx] + aval_of(x).shape[dx + 1:]
    starts = [_to_front(s, d, size) for s, d in zip(starts, dstarts)]
    idx = _window_indices(starts, shape, slice_sizes, size)   # [B, *sizes, ndim]
    if dx is None:
        return gather(x, idx, tuple(range(len(shape)))), 0
    x = moveaxis(x, dx, 0) if dx else x
    return gather(x, _with_batch_index(idx, size), tuple(range(len(shape) + 1))), 0


def dynamic_slice_in_dim(x, start_index, slice_size, axis=0, *, allow_negative_indices=True):
    x = operand(x, "dynamic_slice_in_dim")
    axis = normalize_axis(axis, x.ndim, "dynamic_slice_in_dim", x, strict=True)
    starts = [0] * x.ndim
    starts[axis] = start_index
    sizes = list(x.shape)
    sizes[axis] = slice_size
    return dynamic_slice(x, starts, sizes, allow_negative_indices=allow_negative_indices)


def dynamic_index_in_dim(x, index, axis=0, keepdims=True, *, allow_negative_indices=True):
    x = operand(x, "dynamic_index_in_dim")
    axis = normalize_axis(axis, x.ndim, "dynamic_index_in_dim", x, strict=True)
    out = dynamic_slice_in_dim(x, index, 1, axis, allow_negative_indices=allow_negative_indices)
    return out if keepdims else reshape(out, out.shape[:axis] + out.shape[axis + 1:])


# --- dynamic_update_slice -----------------------------------------------------------------
dynamic_update_slice_p = Primitive("dynamic_update_slice")


def dynamic_update_slice(x, update, start_indices, *, allow_negative_indices=True):
    """lax.dynamic_update_slice: x with the window at (clamped) start_indices = update; a
    negative start counts from the end first (allow_negative_indices, as JAX)."""
    x = operand(x, "dynamic_update_slice")
    x, update = common_ops.promote("dynamic_update_slice", x, update)
    if len(start_indices) != x.ndim:
        raise ValueError(f"dynamic_update_slice: {len(start_indices)} start indices for {short(x)}")
    starts = _start_operands(start_indices, "dynamic_update_slice",
                             x.shape if allow_negative_indices else None)
    return dynamic_update_slice_p.bind(x, update, *starts)


@dynamic_update_slice_p.def_abstract_eval
def _dynamic_update_slice_abstract_eval(x, update, *starts):
    if update.ndim != x.ndim or any(u > n for u, n in zip(update.shape, x.shape)) or \
            update.dtype != x.dtype:
        raise ShapeError(f"dynamic_update_slice: update {short(update)} does not fit in "
                         f"{short(x)}")
    return ShapedArray(x.shape, x.dtype)


@dynamic_update_slice_p.def_impl
def _dynamic_update_slice_impl(x, update, *starts):
    s = _clamped_starts(starts, x.shape, update.shape)
    out = np.array(x, copy=True)
    out[tuple(builtins.slice(a, a + k) for a, k in zip(s, update.shape))] = update
    return out


@dynamic_update_slice_p.def_jvp  # linear in (x, update) jointly
def _dynamic_update_slice_jvp(primals, tangents, *_unused):
    x, u, *starts = primals
    tx, tu = tangents[:2]
    out = dynamic_update_slice_p.bind(x, u, *starts)
    if tx is None and tu is None:
        return out, None
    tx = _zeros(aval_of(x)) if tx is None else tx
    tu = _zeros(aval_of(u)) if tu is None else tu
    return out, dynamic_update_slice_p.bind(tx, tu, *starts)


@dynamic_update_slice_p.def_transpose
def _dynamic_update_slice_transpose(ct, x, u, *starts):
    ua = aval_of(u)
    ct_x = dynamic_update_slice_p.bind(ct, _zeros(ua, aval_of(ct).dtype), *starts)
    ct_u = dynamic_slice_p.bind(ct, *starts, slice_sizes=ua.shape)
    return [ct_x, ct_u] + [None] * len(starts)


@dynamic_update_slice_p.def_vmap
def _dynamic_update_slice_vmap(args, dims):
    (x, u, *starts), (dx, du, *dstarts) = args, dims
    size = batch_size(args, dims)
    x, u = _to_front(x, dx, size), _to_front(u, du, size)
    if all(d is None for d in dstarts):
        return dynamic_update_slice_p.bind(x, u, full((), 0, dtypes.int32), *starts), 0
    shape, sizes = aval_of(x).shape[1:], aval_of(u).shape[1:]
    starts = [_to_front(s, d, size) for s, d in zip(starts, dstarts)]
    idx = _with_batch_index(_window_indices(starts, shape, sizes, size), size)
    return scatter(x, idx, u, tuple(range(len(shape) + 1))), 0


def dynamic_update_slice_in_dim(x, update, start_index, axis=0, *, allow_negative_indices=True):
    x = operand(x, "dynamic_update_slice_in_dim")
    axis = normalize_axis(axis, x.ndim, "dynamic_update_slice_in_dim", x, strict=True)
    starts = [0] * x.ndim
    starts[axis] = start_index
    return dynamic_update_slice(x, update, starts, allow_negative_indices=allow_negative_indices)


def dynamic_update_index_in_dim(x, update, index, axis=0):
    op = "dynamic_update_index_in_dim"
    x, update = operand(x, op), operand(update, op)
    axis = normalize_axis(axis, x.ndim, op, x, strict=True)
    if update.ndim == x.ndim - 1:
        update = reshape(update, update.shape[:axis] + (1,) + update.shape[axis:])
    return dynamic_update_slice_in_dim(x, update, index, axis)


# --- shared gather / scatter checks -------------------------------------------------------
def _rest(ndim, axes):
    return tuple(a for a in range(ndim) if a not in axes)


def _check_indices(op, x, idx, axes):
    if not dtypes.is_int(idx.dtype) or idx.ndim < 1 or idx.shape[-1] != len(axes):
        raise TypeError(f"{op}: indices must be an integer array of shape batch + "
                        f"({len(axes)},) for axes {axes}, got {short(idx)}")
    if len(set(axes)) != len(axes) or any(not 0 <= a < x.ndim for a in axes):
        raise ValueError(f"{op}: axes {axes} are not distinct axes of {short(x)}")
    return idx.shape[:-1] + tuple(x.shape[a] for a in _rest(x.ndim, axes))


def _normalize_axes_param(axes, ndim, op):
    return tuple(common_ops.normalize_axis(a, ndim, op) for a in axes)


def _default_fill(dtype):
    if dtypes.is_inexact(dtype):
        return float("nan")
    if dtypes.is_bool(dtype):
        return True
    info = np.iinfo(dtype)
    return int(info.min) if info.min < 0 else int(info.max)


def _in_bounds(idx, shape):
    ok = np.ones(idx.shape[:-1], bool)
    for j, n in enumerate(shape):
        ok &= (idx[..., j] >= 0) & (idx[..., j] < n)
    return ok


# --- gather -------------------------------------------------------------------------------
gather_p = Primitive("gather")


def gather(x, indices, axes, mode="clip", fill_value=None):
    """out[b..., r...] = x[axes[j] = indices[b..., j], other axes = r...].

    mode "clip" clamps out-of-bounds positions, "fill" gives fill_value there (default NaN
    for floats, the most negative int for signed ints, max for unsigned, True for bool)."""
    x, idx = operand(x, "gather"), operand(indices, "gather")
    axes = _normalize_axes_param(axes, x.ndim, "gather")
    if mode not in ("clip", "fill"):
        raise ValueError(f"gather: mode must be 'clip' or 'fill', got {mode!r}")
    _check_indices("gather", x, idx, axes)
    fill = None if mode == "clip" else (_default_fill(x.dtype) if fill_value is None
                                        else fill_value)
    return gather_p.bind(x, idx, axes=axes, mode=mode, fill_value=fill)


@gather_p.def_abstract_eval
def _gather_abstract_eval(x, idx, *, axes, mode, fill_value):
    return ShapedArray(_check_indices("gather", x, idx, axes), x.dtype)


@gather_p.def_impl
def _gather_impl(x, idx, *, axes, mode, fill_value):
    k, shape = len(axes), tuple(x.shape[a] for a in axes)
    out_shape = idx.shape[:-1] + tuple(x.shape[a] for a in _rest(x.ndim, axes))
    if any(n == 0 for n in shape):
        return np.full(out_shape, 0 if fill_value is None else fill_value, x.dtype)
    xt = np.moveaxis(x, axes, tuple(range(k)))
    if k == 0:
        return np.array(np.broadcast_to(x, out_shape))
    if mode == "clip":
        return xt[tuple(np.clip(idx[..., j], 0, n - 1) for j, n in enumerate(shape))]
    ok = _in_bounds(idx, shape)
    out = xt[tuple(np.where(ok, idx[..., j], 0) for j in range(k))]
    ok = ok.reshape(ok.shape + (1,) * (out.ndim - ok.ndim))
    return np.where(ok, out, np.asarray(fill_value).astype(x.dtype))


@gather_p.def_jvp  # linear in x; indices carry no tangent
def _gather_jvp(primals, tangents, **params):
    (x, idx), t = primals, tangents[0]
    return gather_p.bind(x, idx, **params), None if t is None else gather_p.bind(t, idx, **params)


@gather_p.def_transpose  # the adjoint of gather is scatter-add
def _gather_transpose(ct, x, idx, *, axes, mode, fill_value):
    zeros = _zeros(aval_of(x), aval_of(ct).dtype)
    return [scatter_add_p.bind(zeros, idx, ct, axes=axes, mode=_SCATTER_FOR[mode]), None]


@gather_p.def_vmap
def _gather_vmap(args, dims, *, axes, mode, fill_value):
    (x, idx), (dx, di) = args, dims
    params = dict(mode=mode, fill_value=fill_value)
    if di is None:  # batch axis of x becomes the first rest axis
        x = moveaxis(x, dx, 0) if dx else x
        out = gather_p.bind(x, idx, axes=tuple(a + 1 for a in axes), **params)
        return out, aval_of(idx).ndim - 1
    idx = moveaxis(idx, di, 0) if di else idx
    if dx is None:  # the batch axis of idx is a batch axis of the output
        return gather_p.bind(x, idx, axes=axes, **params), 0
    x = moveaxis(x, dx, 0) if dx else x
    idx = _with_batch_index(idx, aval_of(idx).shape[0])
    return gather_p.bind(x, idx, axes=(0,) + tuple(a + 1 for a in axes), **params), 0


# --- scatter family: shared abstract eval, impl and vmap ---------------------------------
_UFUNCS = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


def _scatter_primitive(name, op):
    p = Primitive(name)

    @p.def_abstract_eval
    def _abstract_eval(x, idx, upd, *, axes, mode):
        want = _check_indices(name, x, idx, axes)
        if tuple(upd.shape) != want or upd.dtype != x.dtype:
            raise ValueError(f"{name}: updates {short(upd)} should be "
                             f"{short(ShapedArray(want, x.dtype))} for indices {short(idx)} "
                             f"into {short(x)} along axes {axes}")
        return ShapedArray(x.shape, x.dtype)

    @p.def_impl
    def _impl(x, idx, upd, *, axes, mode):
        out = np.array(x, copy=True)
        k, shape = len(axes), tuple(x.shape[a] for a in axes)
        if k == 0:  # every update hits the whole array
            view = out[None]
            idx = np.zeros(idx.shape[:-1] + (1,), idx.dtype)
            axes, k, shape = (0,), 1, (1,)
        else:
            view = out
        if any(n == 0 for n in shape) or upd.size == 0:
            return out
        ot = np.moveaxis(view, axes, tuple(range(k)))  # a view: writes land in out
        ii = tuple(idx[..., j] for j in range(k))
        if mode == "clip":
            ii = tuple(np.clip(i, 0, n - 1) for i, n in zip(ii, shape))
        else:
            ok = _in_bounds(idx, shape)
            ii, upd = tuple(i[ok] for i in ii), upd[ok]
        if op == "set":
            ot[ii] = upd
        else:
            _UFUNCS[op].at(ot, ii, upd)
        return out

    @p.def_vmap
    def _vmap(args, dims, *, axes, mode):
        (x, idx, upd), (dx, di, du) = args, dims
        size = batch_size(args, dims)
        x = _to_front(x, dx, size)
        if di is None:  # the batch axis is the first rest axis
            upd = move_bdim(upd, du, aval_of(idx).ndim - 1, size)
            return p.bind(x, idx, upd, axes=tuple(a + 1 for a in axes), mode=mode), 0
        idx = _with_batch_index(moveaxis(idx, di, 0) if di else idx, size)
        upd = _to_front(upd, du, size)
        return p.bind(x, idx, upd, axes=(0,) + tuple(a + 1 for a in axes), mode=mode), 0

    return p


def _scatter_wrapper(p, op_name):
    def wrapper(x, indices, updates, axes, mode="drop"):
        x, idx = operand(x, op_name), operand(indices, op_name)
        axes = _normalize_axes_param(axes, x.ndim, op_name)
        if mode not in ("clip", "drop"):
            raise ValueError(f"{op_name}: mode must be 'clip' or 'drop', got {mode!r}")
        want = _check_indices(op_name, x, idx, axes)
        updates = common_ops.cast(updates, x.dtype, op=op_name)
        try:
            updates = broadcast_to(updates, want)
        except ValueError:
            raise ShapeError(f"{op_name}: updates {short(updates)} do not broadcast to "
                             f"{list(want)} (indices {short(idx)} into {short(x)} along "
                             f"axes {axes})") from None
        return p.bind(x, idx, updates, axes=axes, mode=mode)

    wrapper.__name__ = op_name
    wrapper.__doc__ = (f"x with `updates` combined ({op_name}) at gather positions `indices` "
                       "along `axes`; updates have shape indices.shape[:-1] + rest of x. "
                       "mode 'drop' ignores out-of-bounds updates, 'clip' clamps them.")
    return wrapper


def _inst(t, like):
    return _zeros(aval_of(like)) if t is None else t


# --- scatter_add --------------------------------------------------------------------------
scatter_add_p = _scatter_primitive("scatter_add", "add")
scatter_add = _scatter_wrapper(scatter_add_p, "scatter_add")


@scatter_add_p.def_jvp  # linear in (x, updates) jointly
def _scatter_add_jvp(primals, tangents, **params):
    x, idx, u = primals
    tx, _, tu = tangents
    out = scatter_add_p.bind(x, idx, u, **params)
    if tu is None:
        return out, tx
    return out, scatter_add_p.bind(_inst(tx, x), idx, tu, **params)


@scatter_add_p.def_transpose  # the adjoint of scatter-add is gather
def _scatter_add_transpose(ct, x, idx, u, *, axes, mode):
    ct_u = gather_p.bind(ct, idx, axes=axes, mode=_GATHER_FOR[mode],
                         fill_value=None if mode == "clip" else 0)
    return [ct, None, ct_u]


# --- scatter (set) ------------------------------------------------------------------------
scatter_p = _scatter_primitive("scatter", "set")
scatter = _scatter_wrapper(scatter_p, "scatter")


@scatter_p.def_jvp  # linear in (x, updates); the same update wins
def _scatter_jvp(primals, tangents, **params):
    x, idx, u = primals
    tx, _, tu = tangents
    out = scatter_p.bind(x, idx, u, **params)
    if tx is None and tu is None:
        return out, None
    return out, scatter_p.bind(_inst(tx, x), idx, _inst(tu, u), **params)


@scatter_p.def_vjp
def _scatter_vjp(ct, out, x, idx, u, *, axes, mode):
    ua = aval_of(u)
    ct_x = scatter_p.bind(ct, idx, _zeros(ua, aval_of(ct).dtype), axes=axes, mode=mode)
    # only the update that won each position receives its cotangent
    ids = reshape(iota(dtypes.int32, (ua.size,)), ua.shape)
    owner = scatter_p.bind(full(aval_of(x).shape, -1, dtypes.int32), idx, ids, axes=axes, mode=mode)
    won = ew.eq(gather_p.bind(owner, idx, axes=axes, mode=_GATHER_FOR[mode],
                              fill_value=None if mode == "clip" else -2), ids)
    g = gather_p.bind(ct, idx, axes=axes, mode=_GATHER_FOR[mode],
                      fill_value=None if mode == "clip" else 0)
    return [ct_x, None, ew.select(won, g, ew.zeros_like(g))]


# --- scatter_mul --------------------------------------------------------------------------
# NOTE: as in JAX, the derivative with respect to `updates` assumes unique indices.
scatter_mul_p = _scatter_primitive("scatter_mul", "mul")
scatter_mul = _scatter_wrapper(scatter_mul_p, "scatter_mul")


def _gather_like(v, idx, axes, mode):
    return gather_p.bind(v, idx, axes=axes, mode=_GATHER_FOR[mode],
                         fill_value=None if mode == "clip" else 0)


@scatter_mul_p.def_jvp  # d(x * prod u) = dx * prod u + x du (unique)
def _scatter_mul_jvp(primals, tangents, *, axes, mode):
    x, idx, u = primals
    tx, _, tu = tangents
    out = scatter_mul_p.bind(x, idx, u, axes=axes, mode=mode)
    t = None if tx is None else scatter_mul_p.bind(tx, idx, u, axes=axes, mode=mode)
    if tu is not None:
        tu = ew.mul(_gather_like(x, idx, axes, mode), tu)
        t = scatter_add_p.bind(_inst(t, x), idx, tu, axes=axes, mode=mode)
    return out, t


@scatter_mul_p.def_vjp
def _scatter_mul_vjp(ct, out, x, idx, u, *, axes, mode):
    ct_x = scatter_mul_p.bind(ct, idx, u, axes=axes, mode=mode)
    return [ct_x, None, _gather_like(ew.mul(ct, x), idx, axes, mode)]


# --- scatter_min / scatter_max ------------------------------------------------------------
# The winner's derivative passes through; ties (x and/or several updates equal to the
# result) split it evenly, as elementwise max/min do (API.md).
def _minmax_weights(x, idx, u, out, axes, mode):
    dt = aval_of(out).dtype
    x_hit = ew.convert_element_type(ew.eq(x, out), dt)
    back = gather_p.bind(out, idx, axes=axes, mode=_GATHER_FOR[mode],
                         fill_value=None if mode == "clip" else float("nan"))
    u_hit = ew.convert_element_type(ew.eq(u, back), dt)
    count = ew.add(x_hit, scatter_add_p.bind(ew.zeros_like(x_hit), idx, u_hit, axes=axes,
                                             mode=mode))
    return x_hit, u_hit, ew.max(count, 1.0)


def _minmax_rules(p):
    @p.def_jvp
    def _jvp(primals, tangents, *, axes, mode):
        x, idx, u = primals
        tx, _, tu = tangents
        out = p.bind(x, idx, u, axes=axes, mode=mode)
        x_hit, u_hit, count = _minmax_weights(x, idx, u, out, axes, mode)
        t = None if tx is None else ew.mul(tx, x_hit)
        if tu is not None:
            t = scatter_add_p.bind(_inst(t, x), idx, ew.mul(tu, u_hit), axes=axes, mode=mode)
        return out, None if t is None else ew.div(t, count)

    @p.def_vjp
    def _vjp(ct, out, x, idx, u, *, axes, mode):
        x_hit, u_hit, count = _minmax_weights(x, idx, u, out, axes, mode)
        ctc = ew.div(ct, count)
        return [ew.mul(ctc, x_hit), None, ew.mul(_gather_like(ctc, idx, axes, mode), u_hit)]


scatter_min_p = _scatter_primitive("scatter_min", "min")
scatter_min = _scatter_wrapper(scatter_min_p, "scatter_min")
_minmax_rules(scatter_min_p)
scatter_max_p = _scatter_primitive("scatter_max", "max")
scatter_max = _scatter_wrapper(scatter_max_p, "scatter_max")
_minmax_rules(scatter_max_p)
