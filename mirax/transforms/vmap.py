"""mx.vmap: batching on pytrees (in_axes / out_axes prefixes, axis_size, chunk_size),
over interpreters/vmap.py's driver."""
from __future__ import annotations

from mirax.core import tree
from mirax.core.trace import aval_of
from mirax.interpreters.vmap import vmap_flat
from mirax.ops.common import operand, short, static_int
from mirax.ops.shape import concatenate, slice_in_dim


def _resolve_axes(args, in_axes):
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if not isinstance(in_axes, tuple) or len(in_axes) != len(args):
        if isinstance(in_axes, tuple):
            raise ValueError(f"vmap: in_axes has {len(in_axes)} entries but the function was "
                             f"called with {len(args)} arguments")
        in_axes = (in_axes,) * len(args)
    return tree.prefix_broadcast(in_axes, tuple(args), "vmap in_axes")


def vmap(f, in_axes=0, out_axes=0, axis_size=None, chunk_size=None, *,
         axis_name=None):
    """Map f over an axis of its arguments. `axis_name` names the mapped axis for the
    collectives inside f (mx.lax.psum(x, axis_name), ...), with JAX's semantics."""
    if not callable(f):
        raise TypeError(f"vmap: expected a function, got {type(f).__name__}")
    for what, v in (("axis_size", axis_size), ("chunk_size", chunk_size)):
        if v is not None and static_int(v, "vmap", what) < 1:
            raise ValueError(f"vmap: {what} must be a positive int, got {v}")
    if axis_name is not None and chunk_size is not None:
        raise ValueError("vmap: chunk_size cannot split an axis named for collectives "
                         f"(axis_name={axis_name!r})")

    def vmapped(*args, **kwargs):
        leaves, in_tree = tree.flatten(tuple(args))
        axes = _resolve_axes(args, in_axes)
        paths = [tree.keystr(p) for p, _ in tree.leaves_with_path(tuple(args))]
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
        res = vmap_flat(flat_fn, mapped, dims, size, _OutAxes(out_axes, out_box),
                        axis_name=axis_name)
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
            n = self.box[0].num_leaves
            dummy = tree.unflatten(self.box[0], [0] * n)
            self.resolved = tree.prefix_broadcast(self.spec, dummy, "vmap out_axes")
        return self.resolved[i]


def _chunked(f, args, kwargs, in_axes, out_axes, size, chunk):
    """vmap over slices of at most `chunk` members, results concatenated."""
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
