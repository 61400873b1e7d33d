"""Moving arrays between devices: `device_put` (pytrees of arrays)."""
from __future__ import annotations

import numpy as np

from mirax.core import tree
from mirax.core.array import Array
from mirax.core.trace import Tracer
from mirax.core import runtime
from mirax.core.sharding import NamedSharding, Shard, sharded
from mirax.ops import creation as creation_ops


def _put(x, device):
    dev = runtime.get_device(device)
    if isinstance(x, Tracer):
        return x  # placement of traced values is decided when the graph runs
    x = creation_ops.asarray(x)
    src = runtime.backend_of_buffer(x._buf)
    if src is dev.backend and x.device == dev:
        return x
    host = src.to_host(x._buf)
    return Array(dev.backend.from_host(host, dev), x._weak)


def _put_sharded(x, sharding: NamedSharding):
    """x split over the sharding's mesh: each local device gets its block."""
    if isinstance(x, Tracer):
        return x
    x = creation_ops.asarray(x)
    sharding.check(x.shape)
    host = np.asarray(x)
    shards = []
    for coords, dev in sharding.mesh.local_members():
        idx = sharding.index(coords, x.shape)
        block = np.ascontiguousarray(host[idx])
        buf = block if dev.platform == "cpu" else dev.backend.from_host(block, dev)
        shards.append(Shard(dev, idx, Array(buf, x._weak)))
    return sharded(Array(host, x._weak), shards, sharding)


def device_put(x, device=None):
    """Copy arrays (or a pytree of them) to `device` ("cpu", "cuda", "cuda:0" or a Device),
    or lay them out over a mesh (`mx.sharding.NamedSharding`): the result knows its
    sharding and holds one shard per local device."""
    if isinstance(device, NamedSharding):
        return tree.map(lambda a: _put_sharded(a, device), x)
    return tree.map(lambda a: _put(a, device), x)
