"""mx.shard_map(f, mesh, in_specs, out_specs): f runs once per device of the mesh on that
device's block of each argument (as its PartitionSpec says), with every mesh axis name
bound for collectives; the outputs' blocks are put together as out_specs say (a mesh axis
an out spec does not name must hold the same value on its members, as in JAX).

On concrete arrays the members run on the SPMD runner (threads of this process, and the
other processes' members when the mesh has their devices: every process passes the same
global arguments and gets the whole outputs), each member `jit(f)`. Called on tracers
(grad, jvp, vmap or jit outside) it runs as nested vmap(axis_name=) over the mesh axes of
the blocked arguments: same values and derivatives, one program.
"""
from __future__ import annotations

import math

import numpy as np

from mirax.core import axes, tree
from mirax.core.array import Array
from mirax.core.errors import check_callable
from mirax.core.sharding import Mesh, NamedSharding, PartitionSpec, Shard, sharded, \
    spec_names
from mirax.core.trace import Tracer, aval_of
from mirax.ops import shape as sh
from mirax.ops.common import operand
from mirax.transforms.jit import jit
from mirax.interpreters.vmap import vmap_flat


def _specs(specs, full, what):
    if isinstance(specs, PartitionSpec):
        return [specs] * len(tree.leaves(full))
    return tree.prefix_broadcast(specs, full, what)


def shard_map(f, mesh: Mesh, in_specs, out_specs, check_rep: bool = True):
    check_callable(f, "shard_map")
    if not isinstance(mesh, Mesh):
        raise TypeError(f"shard_map: mesh must be an mx.sharding.Mesh, got "
                        f"{type(mesh).__name__}")
    compiled = jit(f)

    def mapped(*args):
        leaves, in_tree = tree.flatten(tuple(args))
        specs_in = in_specs if isinstance(in_specs, (tuple, list)) and \
            not isinstance(in_specs, PartitionSpec) else (in_specs,) * len(args)
        if len(specs_in) != len(args):
            raise ValueError(f"shard_map: in_specs has {len(specs_in)} entries for "
                             f"{len(args)} arguments")
        lspecs = _specs(tuple(specs_in), tuple(args), "shard_map in_specs")
        leaves = [operand(x, "shard_map") for x in leaves]
        shardings = [NamedSharding(mesh, s) for s in lspecs]
        for x, s in zip(leaves, shardings):
            s.check(aval_of(x).shape, "shard_map")
        if any(isinstance(x, Tracer) for x in leaves):
            return _as_vmap(f, mesh, leaves, in_tree, shardings, out_specs)
        return _on_devices(compiled, mesh, leaves, in_tree, shardings, out_specs)

    mapped.__name__ = f"shard_map({getattr(f, '__name__', 'f')})"
    mapped.__wrapped__ = f
    return mapped


def _on_devices(compiled, mesh, leaves, in_tree, shardings, out_specs):
    members = mesh.local_members()
    hosts = [np.asarray(x) for x in leaves]
    member_args = [[Array(np.ascontiguousarray(h[s.index(c, h.shape)]), x.weak_type)
                    for h, x, s in zip(hosts, leaves, shardings)] for c, _ in members]
    box = []

    def member(k, *xs):
        out = compiled(*tree.unflatten(in_tree, list(xs)))
        out_leaves, out_tree = tree.flatten(out)
        if k == 0:
            box.append(out_tree)
        return out_leaves

    outs = axes.run_spmd(member, member_args, mesh, [c for c, _ in members],
                         [d for _, d in members])
    out_tree = box[0]
    dummy = tree.unflatten(out_tree, [0] * out_tree.num_leaves)
    ospecs = _specs(out_specs, dummy, "shard_map out_specs")
    res = []
    for i, spec in enumerate(ospecs):
        s = NamedSharding(mesh, spec)
        first = outs[0][i]
        local = aval_of(first).shape
        gshape = tuple(n * (s.blocks(spec[d]) if d < len(spec) else 1)
                       for d, n in enumerate(local))
        out = np.empty(gshape, aval_of(first).dtype)
        shards = [Shard(dev, s.index(c, gshape), o[i]) for (c, dev), o in zip(members, outs)]
        blocks = [(sd.index, np.asarray(sd.data)) for sd in shards]
        if len(members) != mesh.size:   # other processes hold the other blocks
            blocks = [b for part in axes.gather_objects(blocks) for b in part]
        for idx, b in blocks:
            out[idx] = b
        res.append(sharded(Array(out, first.weak_type), shards, s))
    return tree.unflatten(out_tree, res)


def _blocked(x, sharding):
    """x with one leading axis per mesh axis (its block index, or size 1 where the spec
    does not split over that axis), then the block's own shape."""
    mesh, spec = sharding.mesh, sharding.spec
    shp = aval_of(x).shape
    # split each sharded dimension d into (its mesh axes' sizes..., block)
    new, where = [], {}
    for d, n in enumerate(shp):
        names = spec_names(spec[d]) if d < len(spec) else ()
        for name in names:
            where[name] = len(new)
            new.append(mesh.shape[name])
        new.append(n // math.prod(mesh.shape[m] for m in names) if names else n)
    y = sh.reshape(x, tuple(new))
    src = [where[n] for n in mesh.axis_names if n in where]
    perm = src + [i for i in range(len(new)) if i not in src]
    y = sh.transpose(y, tuple(perm)) if perm != list(range(len(new))) else y
    return y, [n in where for n in mesh.axis_names]


def _as_vmap(f, mesh, leaves, in_tree, shardings, out_specs):
    blocked = [_blocked(x, s) for x, s in zip(leaves, shardings)]
    box = []

    def inner(*xs):
        out = f(*tree.unflatten(in_tree, list(xs)))
        out_leaves, out_tree = tree.flatten(out)
        box.append(out_tree)
        return out_leaves

    def ospecs():
        dummy = tree.unflatten(box[0], [0] * box[0].num_leaves)
        return _specs(out_specs, dummy, "shard_map out_specs")

    fn = inner
    for level in reversed(range(len(mesh.axis_names))):   # innermost: the last mesh axis
        fn = _level(fn, [0 if has[level] else None for _, has in blocked],
                    mesh.axis_names[level], mesh.axis_sizes[level], ospecs)
    outs = fn(*[y for y, _ in blocked])
    return tree.unflatten(box[0], [_unblock(o, NamedSharding(mesh, s))
                                   for o, s in zip(outs, ospecs())])


def _level(fn, in_dims, name, size, ospecs):
    """One mesh axis as a vmap named after it: outputs whose spec names the axis keep it in
    front; the others must be the same on its members (out dim None)."""
    class OutDims:
        def __getitem__(self, i):
            return 0 if any(name in spec_names(e) for e in ospecs()[i]) else None

    return lambda *xs: vmap_flat(fn, list(xs), in_dims, size, OutDims(), axis_name=name)


def _unblock(o, sharding):
    """The inverse of _blocked for an output: leading mesh axes (those the spec names, in
    mesh order) merged back into their dimensions."""
    mesh, spec = sharding.mesh, sharding.spec
    lead = [n for n in mesh.axis_names if any(n in spec_names(e) for e in spec)]
    shp = aval_of(o).shape
    nd = len(shp) - len(lead)
    # order the leading axes as each dimension's spec lists them, next to their dimension
    perm, new_shape = [], []
    for d in range(nd):
        names = spec_names(spec[d]) if d < len(spec) else ()
        perm.extend(lead.index(n) for n in names)
        perm.append(len(lead) + d)
        new_shape.append(math.prod(mesh.shape[n] for n in names) * shp[len(lead) + d])
    y = sh.transpose(o, tuple(perm)) if perm != list(range(len(shp))) else o
    return sh.reshape(y, tuple(new_shape))
