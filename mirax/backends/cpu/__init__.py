"""The CPU backend: buffers are NumPy arrays; every reference impl is native here."""
from __future__ import annotations

import numpy as np

from mirax.backends.base import Backend, Device


class CpuBackend(Backend):
    platform = "cpu"

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
        return prim.impl

    def compile(self, graph):
        from mirax.backends.cpu.lower import lower
        return lower(graph)
