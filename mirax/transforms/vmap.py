"""Batching: tracers carry (value, batch axis); bdim None means not batched.

A primitive with no vmap rule runs as a Python loop over the batch axis, with a one-time
warning naming it: slow, never silently wrong."""
from __future__ import annotations

import warnings

from mirax.core.avals import ShapedArray
from mirax.core.trace import Trace, Tracer, aval_of, new_trace, owned


class BatchTracer(Tracer):
    __slots__ = ("val", "bdim", "_aval")

    def __init__(self, trace, val, bdim):
        self._trace = trace
        self.val = val
        self.bdim = bdim
        a = aval_of(val)
        if bdim is None:
            self._aval = a
        else:
            self._aval = ShapedArray(a.shape[:bdim] + a.shape[bdim + 1:], a.dtype, a.weak_type)

    @property
    def aval(self):
        return self._aval

    def __bool__(self):
        from mirax.core.errors import ConcretizationError
        raise ConcretizationError(f"bool() of a batched {self._aval.str_short()} inside "
                                  "vmap: each batch member may differ. Use mx.numpy.where "
                                  "or mx.lax.cond.")


class BatchTrace(Trace):
    def __init__(self, axis_size: int):
        self.axis_size = axis_size

    def pure(self, val):
        return BatchTracer(self, val, None)

    def process_primitive(self, prim, tracers, params):
        vals = [t.val for t in tracers]
        dims = [t.bdim for t in tracers]
        if all(d is None for d in dims):
            return prim.bind(*vals, **params)
        rule = prim.vmap_rule or _loop_rule(prim)
        out, out_dims = rule(vals, dims, **params)
        if prim.multiple_results:
            return [BatchTracer(self, o, d) for o, d in zip(out, out_dims)]
        return BatchTracer(self, out, out_dims)


_warned: set = set()


def _loop_rule(prim):
    if prim.name not in _warned:
        _warned.add(prim.name)
        warnings.warn(f"vmap: '{prim.name}' has no batching rule; running it as a loop over "
                      "the batch axis (slow)", RuntimeWarning, stacklevel=4)

    def rule(vals, dims, **params):
        from mirax.ops.shape import index_in_dim, stack
        size = next(aval_of(v).shape[d] for v, d in zip(vals, dims) if d is not None)
        outs = []
        for i in range(size):
            args = [v if d is None else index_in_dim(v, i, d) for v, d in zip(vals, dims)]
            outs.append(prim.bind(*args, **params))
        if prim.multiple_results:
            return [stack(list(o)) for o in zip(*outs)], [0] * len(outs[0])
        return stack(outs), 0
    return rule


def move_bdim(x, bdim, to, size):
    """x with its batch axis at `to` (broadcasting an unbatched x to `size`)."""
    from mirax.ops.shape import broadcast_in_dim, moveaxis
    if bdim is None:
        a = aval_of(x)
        shape = a.shape[:to] + (size,) + a.shape[to:]
        return broadcast_in_dim(x, shape, tuple(i for i in range(len(shape)) if i != to))
    return x if bdim == to else moveaxis(x, bdim, to)


def vmap_flat(fn, args: list, in_dims: list, axis_size: int, out_dims: list | None = None):
    """Run fn(*args) -> list batched along in_dims; outputs batched at out_dims (None ->
    unbatched; an output that is not batched is broadcast if its out dim is not None)."""
    with new_trace(BatchTrace(axis_size)) as trace:
        ins = [BatchTracer(trace, a, d) for a, d in zip(args, in_dims)]
        outs = fn(*ins)
        res = []
        for i, o in enumerate(outs):
            want = 0 if out_dims is None else out_dims[i]
            val, bd = (o.val, o.bdim) if owned(o, trace) else (o, None)
            if want is None:
                if bd is not None:
                    raise ValueError("vmap: out_axes=None for an output that depends on a "
                                     "mapped input")
                res.append(val)
            else:
                from mirax.ops.common import operand
                val = operand(val, "vmap")
                rank = aval_of(val).ndim + (bd is None)  # of the batched result
                if not isinstance(want, int) or isinstance(want, bool) or \
                        not -rank <= want < rank:
                    raise ValueError(f"vmap: out_axes {want!r} is out of range for an output "
                                     f"of rank {rank} (the mapped axis included)")
                res.append(move_bdim(val, bd, want % rank, axis_size))
    return res


# --- public API ---------------------------------------------------------------------------
def _resolve_axes(args, in_axes):
    from mirax.core import tree
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if not isinstance(in_axes, tuple) or len(in_axes) != len(args):
        if isinstance(in_axes, tuple):
            raise ValueError(f"vmap: in_axes has {len(in_axes)} entries but the function was "
                             f"called with {len(args)} arguments")
        in_axes = (in_axes,) * len(args)
    return tree.prefix_broadcast(in_axes, tuple(args), "vmap in_axes")


def vmap(f, in_axes=0, out_axes=0, axis_size=None, chunk_size=None):
    from mirax.core import tree
    from mirax.ops.common import operand, short, static_int
    if not callable(f):
        raise TypeError(f"vmap: expected a function, got {type(f).__name__}")
    for what, v in (("axis_size", axis_size), ("chunk_size", chunk_size)):
        if v is not None and static_int(v, "vmap", what) < 1:
            raise ValueError(f"vmap: {what} must be a positive int, got {v}")

    def vmapped(*args, **kwargs):
        leaves, in_tree = tree.flatten(tuple(args))
        axes = _resolve_axes(args, in_axes)
        paths = [tree.keystr(p) for p, _ in tree.flatten_with_path(tuple(args))]
        leaves = [operand(x, "vmap") if a is not None else x for x, a in zip(leaves, axes)]
        dims, sizes = [], {}
        for x, a, path in zip(leaves, axes, paths):
            if a is None:
                dims.append(None)
                continue
            nd = aval_of(x).ndim
            if not isinstance(a, int) or not -nd <= a < nd:
                raise ValueError(f"vmap: in_axes {a} is out of range for argument "
                                 f"args{path} of shape {short(aval_of(x))}")
            dims.append(a % nd)
            sizes[f"args{path}"] = aval_of(x).shape[a % nd]
        if len(set(sizes.values())) > 1:
            detail = ", ".join(f"{k} has size {v}" for k, v in sizes.items())
            raise ValueError(f"vmap got inconsistent sizes for the mapped axis: {detail}")
        if not sizes and axis_size is None:
            raise ValueError("vmap: no argument is mapped (all in_axes are None); pass "
                             "axis_size")
        size = next(iter(sizes.values())) if sizes else axis_size
        if axis_size is not None and size != axis_size:
            raise ValueError(f"vmap: axis_size={axis_size} but the mapped axis has size {size}")
        if chunk_size is not None and size > chunk_size:
            return _chunked(f, args, kwargs, in_axes, out_axes, size, chunk_size)
        out_box = []

        def flat_fn(*xs):
            out = f(*tree.unflatten(in_tree, list(xs)), **kwargs)
            out_leaves, out_tree = tree.flatten(out)
            out_box.append(out_tree)
            return out_leaves

        mapped = [x for x, d in zip(leaves, dims)]
        # out_axes may be a pytree prefix of the output: resolved after tracing
        res = vmap_flat(flat_fn, mapped, dims, size, _OutAxes(out_axes, out_box))
        return tree.unflatten(out_box[0], res)
    vmapped.__name__ = f"vmap({getattr(f, '__name__', 'f')})"
    vmapped.__wrapped__ = f
    return vmapped


class _OutAxes:
    """out_axes resolved lazily against the output structure (known after tracing)."""

    def __init__(self, spec, box):
        self.spec, self.box, self.resolved = spec, box, None

    def __getitem__(self, i):
        if self.resolved is None:
            from mirax.core import tree
            n = self.box[0].num_leaves
            dummy = tree.unflatten(self.box[0], [0] * n)
            self.resolved = tree.prefix_broadcast(self.spec, dummy, "vmap out_axes")
        return self.resolved[i]


def _chunked(f, args, kwargs, in_axes, out_axes, size, chunk):
    """vmap over slices of at most `chunk` members, results concatenated."""
    from mirax.core import tree
    from mirax.ops.shape import concatenate, slice_in_dim
    axes = _resolve_axes(args, in_axes)
    leaves, in_tree = tree.flatten(tuple(args))
    pieces = []
    for start in range(0, size, chunk):
        stop = min(start + chunk, size)
        part = [x if a is None else slice_in_dim(x, start, stop, axis=a % aval_of(x).ndim)
                for x, a in zip(leaves, axes)]
        pieces.append(vmap(f, in_axes, out_axes)(*tree.unflatten(in_tree, part), **kwargs))
    out_leaves = [tree.leaves(p) for p in pieces]
    treedef = tree.structure(pieces[0])
    dummy = tree.unflatten(treedef, [0] * treedef.num_leaves)
    oaxes = tree.prefix_broadcast(out_axes, dummy, "vmap out_axes")
    joined = [ls[0] if oa is None else concatenate(list(ls), oa % aval_of(ls[0]).ndim)
              for ls, oa in zip(zip(*out_leaves), oaxes)]
    return tree.unflatten(treedef, joined)
