"""The device registry: which backends exist, where a buffer lives, moving buffers.

Nothing outside backends/ touches a backend's buffer type directly.
"""
from __future__ import annotations

import os

from mirax.backends.base import Backend, Device
from mirax.backends.cpu import CpuBackend

cpu_backend = CpuBackend()
_backends: dict[str, Backend] = {"cpu": cpu_backend}


def _load_cuda():
    if "cuda" in _backends:
        return _backends["cuda"]
    try:
        from mirax.backends.cuda import CudaBackend
        be = CudaBackend()
        if not be.devices():
            return None
    except Exception:  # no CuPy or no GPU: CUDA simply is not there
        return None
    _backends["cuda"] = be
    return be


def backends() -> list[Backend]:
    _load_cuda()
    return list(_backends.values())


def devices(platform: str | None = None) -> list[Device]:
    out = []
    for be in backends():
        if platform is None or be.platform == platform:
            out.extend(be.devices())
    return out


def device_count(backend: str | None = None) -> int:
    """How many devices (of `backend`'s platform when given; JAX's 'gpu' is 'cuda')."""
    return len(local_devices(backend))


def local_devices(backend: str | None = None) -> list[Device]:
    """The devices this process drives (all of them, in a single process)."""
    return devices("cuda" if backend == "gpu" else backend)


def local_device_count(backend: str | None = None) -> int:
    return len(local_devices(backend))


def default_device() -> Device:
    want = os.environ.get("MIRAX_DEVICE", "cpu").lower()
    if want.startswith("cuda") or want == "gpu":
        be = _load_cuda()
        if be is None:
            raise RuntimeError("MIRAX_DEVICE=cuda but no CUDA device is available "
                               "(install the `cuda` extra: CuPy, and run on a GPU machine)")
        return be.devices()[0]
    return cpu_backend.devices()[0]


def get_device(device) -> Device:
    if device is None:
        return default_device()
    if isinstance(device, Device):
        return device
    name = str(device).lower()
    for d in devices():
        if d == name:
            return d
    raise ValueError(f"device_put: unknown device {device!r}; available: {devices()}")


def backend_of_buffer(buf) -> Backend:
    if cpu_backend.owns(buf):
        return cpu_backend
    for be in _backends.values():
        if be.owns(buf):
            return be
    raise TypeError(f"{type(buf).__name__} is not a buffer of any mirax backend")


def device_of_buffer(buf) -> Device:
    be = backend_of_buffer(buf)
    if be is cpu_backend:
        return be.devices()[0]
    return be.device_of(buf)


def to_host(buf):
    return backend_of_buffer(buf).to_host(buf)


def from_dlpack_device(obj):
    """A device buffer for a DLPack object living outside host memory (a CUDA tensor)."""
    be = _load_cuda()
    if be is None:
        raise TypeError(f"asarray: {type(obj).__name__} lives on device "
                        f"{obj.__dlpack_device__()} and mirax has no CUDA backend here "
                        "(install CuPy and run on a GPU machine)")
    return be.from_dlpack(obj)


def synchronize(buf):
    """Wait until the work producing `buf` is done (no-op on the CPU)."""
    be = backend_of_buffer(buf)
    sync = getattr(be, "synchronize", None)
    if sync is not None:
        sync(buf)


def impl_for(prim, bufs):
    """The impl of `prim` for the backend owning the first device buffer among `bufs`."""
    for b in bufs:
        if hasattr(b, "shape") and not cpu_backend.owns(b):
            return backend_of_buffer(b).impl(prim)
    return cpu_backend.impl(prim)
