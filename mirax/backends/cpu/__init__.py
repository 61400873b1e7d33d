"""The CPU backend: buffers are NumPy arrays; every reference impl is native here."""
from __future__ import annotations

import numpy as np

from mirax.backends.base import Backend, Device


class CpuBackend(Backend):
    platform = "cpu"
    fuses = True  # only groups that run faster cache-blocked (blocked.py, fuse_group)
    fuse_siblings = True  # independent chains over one shape share a blocked loop

    def __init__(self):
        super().__init__()
        self._devices = [Device("cpu", 0, self)]

    def devices(self):
        return self._devices

    def owns(self, buf) -> bool:
        return isinstance(buf, (np.ndarray, np.generic))

    def to_host(self, buf):
        return buf

    def from_host(self, host, device):
        return np.asarray(host)

    def impl(self, prim):
        if prim.impl is None:
            raise NotImplementedError(f"{prim.name}: no CPU implementation")
        from mirax.backends.cpu.kernels import impl_of
        return impl_of(prim)

    def fuse_group(self, members) -> bool:
        from mirax.backends.cpu.blocked import accepts
        return accepts(members)

    def writes_into(self, node) -> bool:
        from mirax.backends.cpu.lower import writes_into
        return writes_into(node)

    def compile(self, graph):
        from mirax.backends.cpu.lower import lower
        return lower(graph)
