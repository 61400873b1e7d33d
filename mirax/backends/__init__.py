"""Backends: each folder is one backend (cpu/, cuda/) behind the protocol of
mirax/core/runtime.py. Importing this package registers them: the CPU backend always,
CUDA on first need (it needs CuPy and a GPU). Nothing outside backends/ touches a
backend's buffer type; everything else reaches backends through the runtime's registry.
"""
from __future__ import annotations

from mirax.backends.cpu import CpuBackend
from mirax.core import runtime

runtime.register(CpuBackend())


def _load_cuda():
    try:  # optional dependency: CuPy (and a GPU)
        from mirax.backends.cuda import CudaBackend
        be = CudaBackend()
    except Exception:  # noqa: BLE001 - no CuPy, no driver or no GPU: CUDA is not there
        return None
    return be if be.devices() else None


runtime.register_loader("cuda", _load_cuda)
