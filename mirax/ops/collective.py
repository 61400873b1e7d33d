"""Collectives over named axes: psum, pmax, pmin, all_gather, psum_scatter, ppermute,
all_to_all, axis_index (and pmean, a psum divided by the group size). JAX semantics.

A collective names axes bound by `vmap(..., axis_name=)`, `pmap` or `shard_map`
(core/axes.py). It is bound through the interpreter of its axis (`_bind`): under vmap the
batching rule (`trace=` the BatchTrace) turns it into ordinary ops over the batch axis; on
devices its impl hands the buffer to the engine of the device group (distributed/), and
inside `jit` it is a node of the plan whose engine is looked up when the node runs.

Conventions (as in JAX's pmap): a collective's result is the same on every member; psum's
transpose is psum (so grad inside pmap of a psum'd loss sums the members' cotangents);
all_gather and psum_scatter are each other's transposes; ppermute's is the inverse
permutation, all_to_all's the swapped split/concat axes. Several names (psum over
('data', 'model')) make one group, members numbered row-major in the order given.
"""
from __future__ import annotations

import numpy as np

from mirax.core import axes as axes_env
from mirax.core import dtypes, tree
from mirax.core.avals import ShapedArray
from mirax.core.primitive import Primitive
from mirax.core.trace import aval_of, eager, find_top_trace, full_raise, state
from mirax.ops import elementwise as ew
from mirax.ops import reduction as red
from mirax.ops import shape as sh
from mirax.ops.common import operand, short


def _bind(prim, args, params):
    """Bind through the innermost of: the arguments' interpreters and the vmap traces that
    bound the collective's axis names (so psum(1, 'i') reaches vmap's trace although 1
    belongs to no interpreter)."""
    top = find_top_trace(args)
    for name in _names(params, prim.name):
        f = axes_env.lookup(name, prim.name)
        if f.trace is not None and f.trace.alive and f.trace.level > top.level:
            top = f.trace
    if top is state.eval_trace:
        return eager(prim, args, params)
    return top.process_primitive(prim, [full_raise(top, a) for a in args], params)


def _names(params, op: str = "collective") -> tuple:
    return axes_env.as_names(params["axis_name"], op)


def _collective(name: str) -> Primitive:
    p = Primitive(name)
    p.named_axes = True
    p.bind = lambda *args, **params: _bind(p, args, params)
    return p


def _size(names, op) -> int:
    n = 1
    for name in axes_env.as_names(names):
        n *= axes_env.lookup(name, op).size
    return n


def _comm(names, op):
    """The engine over the device group of `names` for the member this thread runs (it
    takes and returns buffers of the member's backend: NumPy arrays, or CuPy's for NCCL)."""
    frames = [axes_env.lookup(n, op) for n in axes_env.as_names(names)]
    if any(f.spmd is None for f in frames):
        raise RuntimeError(f"{op}: axis {[f.name for f in frames]} is bound by vmap but the "
                           "collective reached evaluation (a rule bypassed vmap's trace)")
    return frames[0].spmd.comm(tuple(f.name for f in frames))


def _split_mine(names, trace):
    """(whether the trace's axis is among `names`, the other names)."""
    mine = trace.axis_name is not None and trace.axis_name in names
    return mine, tuple(n for n in names if n != trace.axis_name)


def _to_front(x, d, size):
    """x with its batch axis first (an unbatched x broadcast to `size` members)."""
    if d is None:
        a = aval_of(x)
        return sh.broadcast_in_dim(x, (size,) + a.shape, tuple(range(1, a.ndim + 1)))
    return x if d == 0 else sh.moveaxis(x, d, 0)


def _check_axis(op, x, axis, extra=0):
    nd = aval_of(x).ndim + extra
    if not isinstance(axis, (int, np.integer)) or not -nd <= axis < nd:
        raise ValueError(f"{op}: axis {axis} is out of range for {short(aval_of(x))}")
    return int(axis) % nd


# --- psum, pmax, pmin -----------------------------------------------------------------------
def _reduction(name, np_op, batch_reduce, unbatched):
    p = _collective(name)

    @p.def_abstract_eval
    def _abstract(x, *, axis_name):
        _size(axis_name, name)  # every name bound
        return ShapedArray(x.shape, x.dtype, x.weak_type)

    @p.def_impl
    def _impl(x, *, axis_name):
        return _comm(axis_name, name).allreduce(x, np_op, name)

    @p.def_vmap
    def _vmap(args, dims, *, trace, axis_name):
        (x,), (d,) = args, dims
        mine, rest = _split_mine(axis_name, trace)
        if not mine:
            return p.bind(x, axis_name=axis_name), d
        y = unbatched(x, trace.axis_size) if d is None else batch_reduce(x, (d,))
        return (p.bind(y, axis_name=rest) if rest else y), None
    return p


psum_p = _reduction("psum", "sum", red.reduce_sum, lambda x, n: ew.mul(x, n))
pmax_p = _reduction("pmax", "max", red.reduce_max, lambda x, n: x)
pmin_p = _reduction("pmin", "min", red.reduce_min, lambda x, n: x)


def _reduce_wrapper(p, x, axis_name):
    names = axes_env.as_names(axis_name)
    _size(names, p.name)

    def one(leaf):
        leaf = operand(leaf, p.name)
        if aval_of(leaf).dtype == dtypes.bool_:  # (JAX sums booleans as integers)
            leaf = ew.convert_element_type(leaf, dtypes.int32)
        return p.bind(leaf, axis_name=names)
    return tree.map(one, x)


def psum(x, axis_name):
    """The sum of x over the members of the named axis (a pytree of arrays works too)."""
    return _reduce_wrapper(psum_p, x, axis_name)


def pmax(x, axis_name):
    return _reduce_wrapper(pmax_p, x, axis_name)


def pmin(x, axis_name):
    return _reduce_wrapper(pmin_p, x, axis_name)


def pmean(x, axis_name):
    n = _size(axis_name, "pmean")
    return tree.map(lambda s: ew.div(s, n), psum(x, axis_name))


@psum_p.def_transpose  # linear: the adjoint of a sum replicated to all is psum (JAX's rule)
def _psum_transpose(ct, x, *, axis_name):
    return [psum_p.bind(ct, axis_name=axis_name)]


def _extremum_rules(p):
    """d pmax = the tangent of the members that attain it (ties share it equally)."""
    def mask(x, y):
        return ew.convert_element_type(ew.eq(x, y), aval_of(x).dtype)

    @p.def_jvp
    def _jvp(primals, tangents, *, axis_name):
        (x,), (t,) = primals, tangents
        y = p.bind(x, axis_name=axis_name)
        if t is None:
            return y, None
        m = mask(x, y)
        count = psum_p.bind(m, axis_name=axis_name)
        return y, ew.div(psum_p.bind(ew.mul(m, t), axis_name=axis_name), count)

    @p.def_vjp
    def _vjp(ct, y, x, *, axis_name):
        m = mask(x, y)
        count = psum_p.bind(m, axis_name=axis_name)
        return [ew.div(ew.mul(m, psum_p.bind(ct, axis_name=axis_name)), count)]


_extremum_rules(pmax_p)
_extremum_rules(pmin_p)


# --- all_gather -----------------------------------------------------------------------------
all_gather_p = _collective("all_gather")


def all_gather(x, axis_name, *, axis=0, tiled=False):
    """Every member's x, stacked along a new `axis` (or concatenated along it: tiled).
    Several names gather row-major: the last name varies fastest."""
    names = axes_env.as_names(axis_name)
    _size(names, "all_gather")

    def one(leaf):
        leaf = operand(leaf, "all_gather")
        a = _check_axis("all_gather", leaf, axis, extra=0 if tiled else 1)
        out = all_gather_p.bind(leaf, axis_name=names[-1], axis=a, tiled=bool(tiled))
        for name in reversed(names[:-1]):
            out = all_gather_p.bind(out, axis_name=name, axis=a, tiled=True)
        return out
    return tree.map(one, x)


@all_gather_p.def_abstract_eval
def _all_gather_abstract_eval(x, *, axis_name, axis, tiled):
    n = _size(axis_name, "all_gather")
    s = list(x.shape)
    if tiled:
        s[axis] *= n
    else:
        s.insert(axis, n)
    return ShapedArray(tuple(s), x.dtype)


@all_gather_p.def_impl
def _all_gather_impl(x, *, axis_name, axis, tiled):
    return _comm(axis_name, "all_gather").allgather(x, axis, tiled)


@all_gather_p.def_transpose
def _all_gather_transpose(ct, x, *, axis_name, axis, tiled):
    return [psum_scatter_p.bind(ct, axis_name=axis_name, scatter_dimension=axis, tiled=tiled)]


@all_gather_p.def_vmap
def _all_gather_vmap(args, dims, *, trace, axis_name, axis, tiled):
    (x,), (d,) = args, dims
    if axis_name != trace.axis_name:
        if d is None:
            return all_gather_p.bind(x, axis_name=axis_name, axis=axis, tiled=tiled), None
        x = _to_front(x, d, trace.axis_size)
        return all_gather_p.bind(x, axis_name=axis_name, axis=axis + 1, tiled=tiled), 0
    x = _to_front(x, d, trace.axis_size)    # (members, *shape): the gathered stack
    y = sh.moveaxis(x, 0, axis)
    if tiled:  # merge the members axis into the next one
        s = aval_of(y).shape
        y = sh.reshape(y, s[:axis] + (s[axis] * s[axis + 1],) + s[axis + 2:])
    return y, None


# --- psum_scatter ---------------------------------------------------------------------------
psum_scatter_p = _collective("psum_scatter")


def psum_scatter(x, axis_name, *, scatter_dimension=0, tiled=False):
    """The psum of x, of which member i keeps slice i along `scatter_dimension` (tiled: block
    i of the dimension split in as many blocks as members)."""
    names = axes_env.as_names(axis_name)
    n = _size(names, "psum_scatter")

    def one(leaf):
        leaf = operand(leaf, "psum_scatter")
        d = _check_axis("psum_scatter", leaf, scatter_dimension)
        _scatter_size_check(aval_of(leaf), names[0] if len(names) == 1 else names, d,
                            tiled, n)
        if len(names) == 1:
            return psum_scatter_p.bind(leaf, axis_name=names[0], scatter_dimension=d,
                                       tiled=bool(tiled))
        # several names: scatter over the first (tiled blocks), then the next, ...
        for name in names:
            leaf = psum_scatter_p.bind(leaf, axis_name=name, scatter_dimension=d, tiled=True)
        return leaf if tiled else sh.squeeze(leaf, (d,))
    return tree.map(one, x)


def _scatter_size_check(x, axis_name, d, tiled, n):
    k = x.shape[d]
    if (tiled and k % n) or (not tiled and k != n):
        want = f"a multiple of {n}" if tiled else f"{n}"
        raise ValueError(f"psum_scatter: dimension {d} of {short(x)} must be {want} (the size "
                         f"of axis {axis_name!r}){'' if tiled else '; or pass tiled=True'}")


@psum_scatter_p.def_abstract_eval
def _psum_scatter_abstract_eval(x, *, axis_name, scatter_dimension, tiled):
    n = _size(axis_name, "psum_scatter")
    d = scatter_dimension
    _scatter_size_check(x, axis_name, d, tiled, n)
    s = list(x.shape)
    if tiled:
        s[d] //= n
    else:
        del s[d]
    return ShapedArray(tuple(s), x.dtype)


@psum_scatter_p.def_impl
def _psum_scatter_impl(x, *, axis_name, scatter_dimension, tiled):
    return _comm(axis_name, "psum_scatter").reduce_scatter(x, scatter_dimension, tiled)


@psum_scatter_p.def_transpose
def _psum_scatter_transpose(ct, x, *, axis_name, scatter_dimension, tiled):
    return [all_gather_p.bind(ct, axis_name=axis_name, axis=scatter_dimension, tiled=tiled)]


@psum_scatter_p.def_vmap
def _psum_scatter_vmap(args, dims, *, trace, axis_name, scatter_dimension, tiled):
    (x,), (b,) = args, dims
    d = scatter_dimension
    if axis_name != trace.axis_name:
        if b is None:
            return psum_scatter_p.bind(x, axis_name=axis_name, scatter_dimension=d,
                                       tiled=tiled), None
        x = _to_front(x, b, trace.axis_size)
        return psum_scatter_p.bind(x, axis_name=axis_name, scatter_dimension=d + 1,
                                   tiled=tiled), 0
    n = trace.axis_size
    total = ew.mul(x, n) if b is None else red.reduce_sum(x, (b,))
    if not tiled:  # member i's result is slice i of the scatter dimension
        return total, d
    s = aval_of(total).shape
    return sh.reshape(total, s[:d] + (n, s[d] // n) + s[d + 1:]), d


# --- ppermute -------------------------------------------------------------------------------
ppermute_p = _collective("ppermute")


def ppermute(x, axis_name, perm):
    """Member `dst` receives x from member `src` for each (src, dst) pair of `perm`;
    members that receive nothing get zeros."""
    names = axes_env.as_names(axis_name)
    if len(names) != 1:
        raise ValueError(f"ppermute: one axis name expected, got {names}")
    n = _size(names, "ppermute")
    perm = tuple((int(s), int(t)) for s, t in perm)
    srcs, dsts = [s for s, _ in perm], [t for _, t in perm]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts) or \
            any(not 0 <= i < n for i in srcs + dsts):
        raise ValueError(f"ppermute: perm {perm} is not a partial permutation of the "
                         f"{n} members of axis {names[0]!r}")
    return tree.map(lambda leaf: ppermute_p.bind(operand(leaf, "ppermute"),
                                                  axis_name=names[0], perm=perm), x)


ppermute_p.def_abstract_eval(lambda x, *, axis_name, perm: ShapedArray(x.shape, x.dtype))


@ppermute_p.def_impl
def _ppermute_impl(x, *, axis_name, perm):
    return _comm(axis_name, "ppermute").ppermute(x, perm)


@ppermute_p.def_transpose
def _ppermute_transpose(ct, x, *, axis_name, perm):
    return [ppermute_p.bind(ct, axis_name=axis_name, perm=tuple((t, s) for s, t in perm))]


@ppermute_p.def_vmap
def _ppermute_vmap(args, dims, *, trace, axis_name, perm):
    (x,), (b,) = args, dims
    if axis_name != trace.axis_name:
        return ppermute_p.bind(x, axis_name=axis_name, perm=perm), b
    n = trace.axis_size
    x = _to_front(x, b, n)
    src_of = {t: s for s, t in perm}
    zero = None
    rows = []
    for i in range(n):
        if i in src_of:
            rows.append(sh.index_in_dim(x, src_of[i], 0))
        else:
            if zero is None:
                a = aval_of(x)
                zero = sh.full(a.shape[1:], 0, a.dtype)
            rows.append(zero)
    return sh.stack(rows, 0), 0


# --- all_to_all -----------------------------------------------------------------------------
all_to_all_p = _collective("all_to_all")


def all_to_all(x, axis_name, split_axis, concat_axis, *, tiled=False):
    """Split x in as many chunks as members along `split_axis`; member j receives chunk j of
    every member, concatenated in member order along `concat_axis`. Untiled (JAX's default):
    the split axis must have the axis's size; it is removed and a new axis of that size
    is inserted at `concat_axis`."""
    names = axes_env.as_names(axis_name)
    if len(names) != 1:
        raise ValueError(f"all_to_all: one axis name expected, got {names}")
    n = _size(names, "all_to_all")

    def one(leaf):
        leaf = operand(leaf, "all_to_all")
        a = aval_of(leaf)
        s = _check_axis("all_to_all", leaf, split_axis)
        c = _check_axis("all_to_all", leaf, concat_axis)
        k = a.shape[s]
        if (tiled and k % n) or (not tiled and k != n):
            want = f"a multiple of {n}" if tiled else f"{n}"
            raise ValueError(f"all_to_all: split axis {s} of {short(a)} must be {want} (the "
                             f"size of axis {names[0]!r})")
        if tiled:
            return all_to_all_p.bind(leaf, axis_name=names[0], split_axis=s, concat_axis=c)
        if c <= s:   # a unit axis where the gathered one goes, split one moved past it
            y = sh.expand_dims(leaf, (c,))
            y = all_to_all_p.bind(y, axis_name=names[0], split_axis=s + 1, concat_axis=c)
            return sh.squeeze(y, (s + 1,))
        y = sh.expand_dims(leaf, (c + 1,))
        y = all_to_all_p.bind(y, axis_name=names[0], split_axis=s, concat_axis=c + 1)
        return sh.squeeze(y, (s,))
    return tree.map(one, x)


@all_to_all_p.def_abstract_eval
def _all_to_all_abstract_eval(x, *, axis_name, split_axis, concat_axis):
    n = _size(axis_name, "all_to_all")
    s = list(x.shape)
    s[split_axis] //= n
    s[concat_axis] *= n
    return ShapedArray(tuple(s), x.dtype)


@all_to_all_p.def_impl
def _all_to_all_impl(x, *, axis_name, split_axis, concat_axis):
    return _comm(axis_name, "all_to_all").all_to_all(x, split_axis, concat_axis)


@all_to_all_p.def_transpose
def _all_to_all_transpose(ct, x, *, axis_name, split_axis, concat_axis):
    return [all_to_all_p.bind(ct, axis_name=axis_name, split_axis=concat_axis,
                              concat_axis=split_axis)]


@all_to_all_p.def_vmap
def _all_to_all_vmap(args, dims, *, trace, axis_name, split_axis, concat_axis):
    (x,), (b,) = args, dims
    n = trace.axis_size
    x = _to_front(x, b, n)
    s, c = split_axis + 1, concat_axis + 1   # axes of the stacked x (members first)
    if axis_name != trace.axis_name:
        return all_to_all_p.bind(x, axis_name=axis_name, split_axis=s, concat_axis=c), 0
    # X[i, ..., S, ...] -> X[i, ..., j, S/n, ...]; out[j] = concat over i along c
    shp = aval_of(x).shape
    y = sh.reshape(x, shp[:s] + (n, shp[s] // n) + shp[s + 1:])   # axis s: j
    c2 = c if c < s else c + 1                                     # c in y
    y = sh.moveaxis(y, s, 0)             # (j, i, ...): the source i is now axis 1
    c3 = c2 + (c2 < s)                   # c after moving axis s to the front
    y = sh.moveaxis(y, 1, c3 - 1)        # i just before the concat axis
    ys = aval_of(y).shape
    k = c3 - 1
    return sh.reshape(y, ys[:k] + (ys[k] * ys[k + 1],) + ys[k + 2:]), 0


# --- axis_index -----------------------------------------------------------------------------
axis_index_p = _collective("axis_index")


def axis_index(axis_name):
    """This member's index along the named axis (int32; several names: row-major)."""
    names = axes_env.as_names(axis_name)
    out = None
    for name in names:
        i = axis_index_p.bind(axis_name=name)
        out = i if out is None else ew.add(ew.mul(out, _size(name, "axis_index")), i)
    return out


@axis_index_p.def_abstract_eval
def _axis_index_abstract_eval(*, axis_name):
    _size(axis_name, "axis_index")
    return ShapedArray((), dtypes.int32)


@axis_index_p.def_impl
def _axis_index_impl(*, axis_name):
    return _comm(axis_name, "axis_index").index_array()


@axis_index_p.def_vmap
def _axis_index_vmap(args, dims, *, trace, axis_name):
    if axis_name != trace.axis_name:
        return axis_index_p.bind(axis_name=axis_name), None
    return sh.iota(dtypes.int32, trace.axis_size), 0


axis_index_p.def_jvp(lambda primals, tangents, *, axis_name:
                     (axis_index_p.bind(axis_name=axis_name), None))
axis_index_p.def_vjp(lambda ct, out, *, axis_name: [])
