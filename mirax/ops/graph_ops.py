"""Graph ops: index_select / index_add (each the other's adjoint), embedding, and the
segment reductions (segment_sum / mean / max / softmax) of message passing.

Where it sits: mirax.nn.functional re-exports these wrappers (and mirax.ops.nn, where they
lived before); each is a primitive (segment_softmax a fused composite, see
ops/composite.py) with all its rules, lowered by the backends (CPU: np.add.at kernels).
Rows are axis 0; segment ids / indices are 1-d integer arrays.

Out-of-range ids (negative, or >= the row count) follow JAX and never raise, eagerly or
under jit (the same result both ways): index_add and the segment reductions drop their rows
(jax.ops.segment_sum), index_select reads zeros for them (so that it stays index_add's
adjoint), and embedding is table[ids] as in JAX (negative ids count from the end, the rest
are clamped). A vmap that offsets each member's ids keeps an out-of-range id out of range.
"""
from __future__ import annotations

import numpy as np

from mirax.core import dtypes
from mirax.core.avals import ShapedArray
from mirax.core.primitive import Primitive
from mirax.core.trace import aval_of
from mirax.ops.common import batch_size, float_operand, operand, short, static_int
from mirax.ops.composite import cast_like, composite, in_float32, quiet_np
from mirax.ops.elementwise import (
    add, convert_element_type, div, eq, exp, ge, is_finite, logical_and, lt, max, min, mul,
    select, sub, zeros_like)
from mirax.ops.shape import broadcast_in_dim, iota, reshape
from mirax.ops.shape import moveaxis, full
from mirax.interpreters.vmap import move_bdim


# --- graph ops: index_select / index_add (each the other's adjoint) ----------------------
# index_select(x, idx)[i] = x[idx[i]]; index_add(x, idx, num_rows)[r] = sum of x[i] with
# idx[i] = r, accumulated in index order (np.add.at), so repeated indices are bitwise
# deterministic. Both are linear in x: each one's transpose is the other.
def valid_rows(x, idx, n):
    """(x, idx) without the rows whose index is outside [0, n) (they are dropped)."""
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        keep = (idx >= 0) & (idx < n)
        return x[keep], idx[keep]
    return x, idx


def _offset_ids(ids, num):
    """Batched ids [b, k] as flat ids into b * num rows (member i's at i * num); an id
    outside [0, num) stays outside (-1), so that it cannot land in another member's rows."""
    inside = logical_and(ge(ids, 0), lt(ids, num))
    off = add(ids, mul(iota(ids.dtype, ids.shape, 0), num))
    return reshape(select(inside, off, add(zeros_like(ids), -1)), (-1,))


def _index_operands(x, idx, op):
    x, idx = operand(x, op), operand(idx, op)
    if not dtypes.is_int(idx.dtype) or idx.ndim != 1:
        raise TypeError(f"{op}: indices must be a 1-d integer array, got {short(idx)}")
    if x.ndim < 1:
        raise ValueError(f"{op}: x must have a row axis, got {short(x)}")
    return x, idx


def _scatter_operands(x, idx, num, op, param, what):
    """x, idx and the static output row count `num` of a rows -> `num` rows op
    (index_add, segment_max, segment_softmax), validated."""
    x, idx = _index_operands(x, idx, op)
    num = static_int(num, op, param)
    if idx.shape[0] != x.shape[0]:
        raise ValueError(f"{op}: {short(idx)} {what} for {short(x)} rows")
    if num < 0:
        raise ValueError(f"{op}: {param} must be non-negative, got {num}")
    return x, idx, num


index_select_p = Primitive("index_select")
index_add_p = Primitive("index_add")


def index_select(x, idx):
    x, idx = _index_operands(x, idx, "index_select")
    return index_select_p.bind(x, idx)


index_select_p.def_abstract_eval(
    lambda x, idx: ShapedArray((idx.shape[0],) + tuple(x.shape[1:]), x.dtype))


@index_select_p.def_impl
def _index_select_impl(x, idx):
    n = x.shape[0]
    if idx.size and (idx.min() < 0 or idx.max() >= n):  # out of range: a zero row
        inside = (idx >= 0) & (idx < n)
        out = np.take(x, np.where(inside, idx, 0), axis=0) if n else \
            np.zeros((idx.shape[0],) + x.shape[1:], x.dtype)
        out[~inside] = 0
        return out
    return np.take(x, idx, axis=0)


index_select_p.def_jvp(lambda primals, tangents: (
    index_select_p.bind(*primals),
    None if tangents[0] is None else index_select_p.bind(tangents[0], primals[1])))
index_select_p.def_transpose(lambda ct, x, idx: [
    index_add_p.bind(ct, idx, num_rows=aval_of(x).shape[0]), None])


@index_select_p.def_vmap
def _index_select_vmap(args, dims):
    (x, idx), (dx, di) = args, dims
    if di is None:                       # rows of x stay axis 0; the batch rides along
        return index_select_p.bind(moveaxis(x, dx, 1), idx), 1
    size = aval_of(idx).shape[di]
    idx = move_bdim(idx, di, 0, size)
    if dx is None:
        out = index_select_p.bind(x, reshape(idx, (-1,)))
        return reshape(out, tuple(idx.shape) + tuple(aval_of(x).shape[1:])), 0
    x = move_bdim(x, dx, 0, size)        # both batched: offset each member's rows
    b, n = x.shape[0], x.shape[1]
    out = index_select_p.bind(reshape(x, (b * n,) + tuple(x.shape[2:])), _offset_ids(idx, n))
    return reshape(out, tuple(idx.shape) + tuple(x.shape[2:])), 0


def index_add(x, idx, num_rows):
    """zeros((num_rows,) + x.shape[1:]) with x[i] added to row idx[i]."""
    x, idx, num_rows = _scatter_operands(x, idx, num_rows, "index_add", "num_rows",
                                         "indices")
    return index_add_p.bind(x, idx, num_rows=num_rows)


@index_add_p.def_abstract_eval
def _index_add_abstract_eval(x, idx, *, num_rows):
    if idx.shape != (x.shape[0],):
        raise ValueError(f"index_add: {short(idx)} indices for {short(x)} rows")
    return ShapedArray((num_rows,) + tuple(x.shape[1:]), x.dtype)


@index_add_p.def_impl
def _index_add_impl(x, idx, *, num_rows):
    x, idx = valid_rows(x, idx, num_rows)
    acc = np.float32 if x.dtype in dtypes.LOW_FLOATS else x.dtype
    out = np.zeros((num_rows,) + x.shape[1:], acc)
    np.add.at(out, idx, x)
    return out.astype(x.dtype, copy=False)


index_add_p.def_jvp(lambda primals, tangents, *, num_rows: (
    index_add_p.bind(*primals, num_rows=num_rows),
    None if tangents[0] is None else index_add_p.bind(tangents[0], primals[1],
                                                      num_rows=num_rows)))
index_add_p.def_transpose(lambda ct, x, idx, *, num_rows: [index_select_p.bind(ct, idx), None])


def _segment_vmap(prim, ids_pos, num_param):
    """vmap of an op whose operands are rows (axis 0) grouped by the ids at `ids_pos` into
    `num_param` segments, and whose outputs are rows too: with unbatched ids the batch
    axis rides along at axis 1; with batched ids each member's segments are offset."""
    def rule(args, dims, **params):
        ids, di = args[ids_pos], dims[ids_pos]
        size = batch_size(args, dims)
        rows = [i for i in range(len(args)) if i != ids_pos]
        moved = list(args)
        if di is None:
            for i in rows:
                moved[i] = move_bdim(args[i], dims[i], 1, size)
            out = prim.bind(*moved, **params)
            return (out, [1] * len(out)) if prim.multiple_results else (out, 1)
        for i in rows:
            a = move_bdim(args[i], dims[i], 0, size)
            moved[i] = reshape(a, (-1,) + tuple(a.shape[2:]))
        ids = move_bdim(ids, di, 0, size)
        num = params[num_param]
        moved[ids_pos] = _offset_ids(ids, num)
        out = prim.bind(*moved, **{**params, num_param: size * num})
        outs = out if prim.multiple_results else [out]
        outs = [reshape(o, (size, -1) + tuple(o.shape[1:])) for o in outs]
        return (outs, [0] * len(outs)) if prim.multiple_results else (outs[0], 0)
    return rule


index_add_p.def_vmap(_segment_vmap(index_add_p, 1, "num_rows"))


def embedding(table, ids):
    """table[ids]: rows of `table` for integer ids of any shape (as JAX's table[ids]: a
    negative id counts from the end, an id out of range is clamped)."""
    ids = operand(ids, "embedding")
    table = operand(table, "embedding")
    if not dtypes.is_int(ids.dtype):
        raise TypeError(f"embedding: ids must be integers, got {short(ids)}")
    if table.ndim < 1 or table.shape[0] == 0:
        raise ValueError(f"embedding: the table needs at least one row, got {short(table)}")
    n = table.shape[0]
    flat = reshape(ids, (-1,))
    flat = select(lt(flat, 0), add(flat, n), flat)
    flat = max(min(flat, n - 1), 0) if n > 1 else zeros_like(flat)
    out = index_select(table, flat)
    return reshape(out, tuple(ids.shape) + tuple(table.shape[1:]))


# --- segment ops --------------------------------------------------------------------------
def segment_sum(x, segment_ids, num_segments):
    """out[s] = sum of x[i] with segment_ids[i] = s (rows along axis 0)."""
    return index_add(x, segment_ids, num_segments)


def _segment_counts(ids, num, like):
    ones = full((aval_of(ids).shape[0],), 1, aval_of(like).dtype)
    return index_add_p.bind(ones, ids, num_rows=num)


def segment_mean(x, segment_ids, num_segments):
    """Mean of each segment's rows; an empty segment gives 0."""
    x = float_operand(x, "segment_mean")
    total = segment_sum(x, segment_ids, num_segments)
    count = _segment_counts(segment_ids, num_segments, x)
    count = max(count, add(zeros_like(count), 1.0))
    return div(total, broadcast_in_dim(count, total.shape, (0,)))


segment_max_p = Primitive("segment_max")


def segment_max(x, segment_ids, num_segments):
    """Max of each segment's rows; an empty segment gives -inf (as JAX)."""
    x, ids, num = _scatter_operands(x, segment_ids, num_segments, "segment_max",
                                    "num_segments", "segment ids")
    return segment_max_p.bind(x, ids, num_segments=num)


segment_max_p.def_abstract_eval(lambda x, ids, *, num_segments: ShapedArray(
    (num_segments,) + tuple(x.shape[1:]), x.dtype))


@segment_max_p.def_impl
def _segment_max_impl(x, ids, *, num_segments):
    x, ids = valid_rows(x, ids, num_segments)
    low = -np.inf if dtypes.is_float(x.dtype) else dtypes.iinfo(x.dtype).min
    out = np.full((num_segments,) + x.shape[1:], low, x.dtype)
    np.maximum.at(out, ids, x)
    return out


def _segment_max_weights(x, ids, out, num):
    """1/k on the k rows attaining their segment's max, else 0 (ties split evenly)."""
    hit = convert_element_type(eq(x, index_select_p.bind(out, ids)), aval_of(x).dtype)
    count = index_add_p.bind(hit, ids, num_rows=num)
    count = max(count, add(zeros_like(count), 1.0))
    return div(hit, index_select_p.bind(count, ids))


@segment_max_p.def_jvp
def _segment_max_jvp(primals, tangents, *, num_segments):
    (x, ids), (t, _) = primals, tangents
    out = segment_max_p.bind(x, ids, num_segments=num_segments)
    if t is None:
        return out, None
    w = _segment_max_weights(x, ids, out, num_segments)
    return out, index_add_p.bind(mul(t, w), ids, num_rows=num_segments)


@segment_max_p.def_vjp
def _segment_max_vjp(ct, out, x, ids, *, num_segments):
    if not dtypes.is_float(aval_of(x).dtype):
        return [None, None]
    w = _segment_max_weights(x, ids, out, num_segments)
    return [mul(index_select_p.bind(ct, ids), w), None]


segment_max_p.def_vmap(_segment_vmap(segment_max_p, 1, "num_segments"))


# --- segment_softmax ----------------------------------------------------------------------
def _segment_softmax_body(x, ids, *, num_segments):
    m = segment_max_p.bind(x, ids, num_segments=num_segments)
    m = select(is_finite(m), m, zeros_like(m))
    e = exp(sub(x, index_select_p.bind(m, ids)))
    s = index_add_p.bind(e, ids, num_rows=num_segments)
    # a row whose id is out of range belongs to no segment: its output is 0
    inside = broadcast_in_dim(logical_and(ge(ids, 0), lt(ids, num_segments)), x.shape, (0,))
    one = add(zeros_like(x), 1.0)
    return select(inside, div(e, select(inside, index_select_p.bind(s, ids), one)),
                  zeros_like(x))


def _np_rows(v, ids, n):
    """v[ids] with zero rows for ids outside [0, n) (index_select's rule; v has n rows)."""
    return _index_select_impl(v, ids)


@quiet_np
@in_float32
def _segment_softmax_impl(x, ids, *, num_segments):
    m = _segment_max_impl(x, ids, num_segments=num_segments)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(x - _np_rows(m, ids, num_segments))
    s = _np_rows(_index_add_impl(e, ids, num_rows=num_segments), ids, num_segments)
    inside = ((ids >= 0) & (ids < num_segments)).reshape((-1,) + (1,) * (x.ndim - 1))
    return cast_like(np.where(inside, e / np.where(inside, s, 1), 0), x)


@in_float32
def _segment_softmax_bwd_impl(ct, y, x, ids, *, wrt, nout, num_segments):
    s = _index_add_impl(ct * y, ids, num_rows=num_segments)
    return [cast_like(y * (ct - _np_rows(s, ids, num_segments)), x)]  # y (g - <g, y>_seg)


segment_softmax_p = composite(
    "segment_softmax", _segment_softmax_body, impl=_segment_softmax_impl,
    bwd_impl=_segment_softmax_bwd_impl,
    vmap=lambda p: _segment_vmap(p, 1, "num_segments"),
    bwd_vmap=lambda p: _segment_vmap(p, 3, "num_segments"))


def segment_softmax(x, segment_ids, num_segments):
    """Softmax over the rows of each segment (e.g. the in-edges of a node in a GAT)."""
    x, ids, num = _scatter_operands(float_operand(x, "segment_softmax"), segment_ids,
                                    num_segments, "segment_softmax", "num_segments",
                                    "segment ids")
    return segment_softmax_p.bind(x, ids, num_segments=num)

