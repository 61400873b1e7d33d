"""Moving arrays between devices: `device_put` (pytrees of arrays)."""
from __future__ import annotations

from mirax.core import tree
from mirax.core.array import Array
from mirax.core.trace import Tracer
from mirax.core import runtime
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


def device_put(x, device=None):
    """Copy arrays (or a pytree of them) to `device` ("cpu", "cuda", "cuda:0" or a Device)."""
    return tree.map(lambda a: _put(a, device), x)
