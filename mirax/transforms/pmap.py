"""mx.pmap: map a function over devices, one member per device, its collectives over the
mapped axis running on the devices' engines (threads between this process's CPU devices,
MPI between processes, NCCL between GPUs).

On concrete arrays each member runs `jit(f)` on its slice, on its device, on a thread of its
own (the SPMD runner, distributed/spmd.py); the outputs are stacked into arrays that know
their sharding (PmapSharding). Under multiple processes (mpiexec) each process maps over
its local devices and the axis spans every process's (JAX's semantics): the axis size is
the local size times the process count.

Called on tracers (grad, jvp, vmap or jit of a pmap) it runs as vmap(f, axis_name=) of the
same function: the same values and derivatives (vmap's collectives are the reference the
device engines are tested against), in one program on one device.
"""
from __future__ import annotations

import itertools

import numpy as np

from mirax.core import axes, config, runtime, tree
from mirax.core.array import Array
from mirax.core.errors import check_callable
from mirax.core.sharding import PmapSharding, Shard, sharded
from mirax.core.trace import Tracer, aval_of
from mirax.ops import shape as sh
from mirax.ops.common import operand, short
from mirax.transforms.jit import jit
from mirax.transforms.vmap import _resolve_axes, vmap

_anonymous = itertools.count()


class _AxisMesh:
    """A one-axis mesh for the runner: `n` members on each of `pcount` processes."""

    def __init__(self, name, n, pcount):
        self.axis_names, self.axis_sizes = (name,), (n * pcount,)
        self.processes = [g // n for g in range(n * pcount)]


def _default_devices():
    want = config.get("device").lower()
    return runtime.devices("cuda" if want.startswith("cuda") or want == "gpu" else "cpu")


def _static_tuple(argnums):
    return (argnums,) if isinstance(argnums, int) else tuple(argnums)


def pmap(f, axis_name=None, in_axes=0, out_axes=0, static_broadcasted_argnums=(),
         devices=None):
    check_callable(f, "pmap")
    statics = _static_tuple(static_broadcasted_argnums)
    name = axis_name if axis_name is not None else ("_pmap", next(_anonymous))
    compiled = jit(f, static_argnums=statics)

    def pmapped(*args, **kwargs):
        if kwargs:
            raise TypeError("pmap: keyword arguments are not mapped; pass them positionally "
                            "(or close over them)")
        dyn_pos = [i for i in range(len(args)) if i not in statics]
        dyn = [args[i] for i in dyn_pos]
        axes_in = in_axes
        if isinstance(in_axes, (tuple, list)) and len(in_axes) == len(args) and statics:
            axes_in = tuple(in_axes[i] for i in dyn_pos)

        def with_statics(*ds):
            full = list(args)
            for i, d in zip(dyn_pos, ds):
                full[i] = d
            return full

        leaves, in_tree = tree.flatten(tuple(dyn))
        if any(isinstance(x, Tracer) for x in leaves):   # a transform outside: vmap's form
            return vmap(lambda *ds: f(*with_statics(*ds)), axes_in, out_axes,
                        axis_name=name)(*dyn)
        leaf_axes = _resolve_axes(dyn, axes_in)
        leaves = [operand(x, "pmap") if a is not None else x for x, a in zip(leaves, leaf_axes)]
        sizes = {aval_of(x).shape[a % aval_of(x).ndim] for x, a in zip(leaves, leaf_axes)
                 if a is not None}
        if len(sizes) != 1:
            raise ValueError(f"pmap: the mapped axes must have one size (one member per "
                             f"device); got sizes {sorted(sizes) or 'none (nothing mapped)'}")
        n = sizes.pop()
        devs = list(devices) if devices is not None else _default_devices()
        if n > len(devs):
            raise ValueError(f"pmap: {n} members but only {len(devs)} local devices "
                             f"({devs}); set MIRAX_CPU_DEVICES={n} (cpu_devices) for {n} CPU "
                             "devices in one process")
        devs = devs[:n]
        member_args = [[_member_slice(x, a, k, devs[k]) for x, a in zip(leaves, leaf_axes)]
                       for k in range(n)]
        pidx, pcount = axes.world()
        box = []

        def member(k, *xs):
            out = compiled(*with_statics(*tree.unflatten(in_tree, list(xs))))
            out_leaves, out_tree = tree.flatten(out)
            if k == 0:
                box.append(out_tree)
            return out_leaves

        outs = axes.run_spmd(member, member_args, _AxisMesh(name, n, pcount),
                             [(pidx * n + k,) for k in range(n)], devs)
        out_tree = box[0]
        dummy = tree.unflatten(out_tree, [0] * out_tree.num_leaves)
        oaxes = tree.prefix_broadcast(out_axes, dummy, "pmap out_axes")
        res = [_stack([o[i] for o in outs], oa, devs) for i, oa in enumerate(oaxes)]
        return tree.unflatten(out_tree, res)

    pmapped.__name__ = f"pmap({getattr(f, '__name__', 'f')})"
    pmapped.__wrapped__ = f
    return pmapped


def _member_slice(x, axis, k, device):
    """Member k's argument: index k of the mapped axis (a pmap-sharded argument's own
    shard when it lies there), on member k's device."""
    if axis is None:
        return _on(x, device) if isinstance(x, Array) else x
    sharding = getattr(x, "sharding", None)
    if isinstance(sharding, PmapSharding) and sharding.axis == axis % x.ndim \
            and len(sharding.devices) > k and sharding.devices[k] == device:
        return x.addressable_shards[k].data
    if _device_of(x).platform != "cpu":   # sliced where it lives (no trip through the host)
        return _on(sh.index_in_dim(x, k, axis % x.ndim), device)
    host = np.asarray(x)
    part = np.ascontiguousarray(np.take(host, k, axis=axis % host.ndim))
    return _on(Array(part, x.weak_type), device)


def _device_of(x: Array):
    return runtime.device_of_buffer(x._buf)


def _on(x: Array, device) -> Array:
    if _device_of(x) == device or device.platform == "cpu":
        return x
    return Array(device.backend.from_host(np.asarray(x), device), x._weak)


def _stack(parts, axis, devs):
    """The members' outputs stacked along `axis` (None: the members' common value)."""
    if axis is None:
        return parts[0]
    first = parts[0]
    nd = aval_of(first).ndim + 1
    if not -nd <= axis < nd:
        raise ValueError(f"pmap: out_axes {axis} is out of range for an output "
                         f"{short(aval_of(first))}")
    axis %= nd
    if devs[0].platform != "cpu" and all(_device_of(p) == devs[0] for p in parts):
        buf = sh.stack(parts, axis)._buf   # stacked where they live (one device)
    else:
        host = np.stack([np.asarray(p) for p in parts], axis)
        buf = host if devs[0].platform == "cpu" else devs[0].backend.from_host(host, devs[0])
    shards = [Shard(d, (slice(None),) * axis + (k,), p) for k, (d, p) in
              enumerate(zip(devs, parts))]
    return sharded(Array(buf, first.weak_type), shards, PmapSharding(devs, axis))
