"""Beyond one device: the process group (process.py), the collective engines (engines.py:
threads, MPI, NCCL) and the SPMD runner that pmap and shard_map use (spmd.py).

Where it sits: above the backends, below the public faces. Importing it registers the
runner with core/axes.py.

Devices: `local_devices()` are this process's (CPU devices, MIRAX_CPU_DEVICES=N of them, or
the GPUs CuPy sees); `devices()` are every process's, in process order.
"""
from __future__ import annotations

from mirax.core import axes, config, runtime
from mirax.distributed import spmd  # noqa: F401  (registers the SPMD runner)
from mirax.distributed import data_parallel  # noqa: F401
from mirax.distributed import process
from mirax.distributed.process import initialize, process_count, process_index  # noqa: F401


class RemoteDevice:
    """A device of another process (a member of pmap / shard_map, never a place for
    this process's arrays)."""
    __slots__ = ("platform", "id", "process_index")

    def __init__(self, platform: str, id: int, process_index: int):
        self.platform, self.id, self.process_index = platform, id, process_index

    def __repr__(self):
        return f"{self.platform}:{self.id}(process {self.process_index})"

    def __eq__(self, other):
        return isinstance(other, RemoteDevice) and (self.platform, self.id, self.process_index) \
            == (other.platform, other.id, other.process_index)

    def __hash__(self):
        return hash((self.platform, self.id, self.process_index))


def default_platform() -> str:
    """The platform of the default device (the `device` knob): what pmap maps over."""
    want = config.get("device").lower()
    return "cuda" if want.startswith("cuda") or want == "gpu" else "cpu"


def local_devices(platform: str | None = None):
    """This process's devices of `platform` (default: every backend's; JAX's name 'gpu'
    means 'cuda')."""
    return runtime.devices("cuda" if platform == "gpu" else platform)


def devices(platform: str | None = None):
    """Every process's devices: this process's own Device objects in its place, the others'
    as RemoteDevice (ids are global: process p's k-th device has id p * local count + k)."""
    local = local_devices(platform)
    n = process_count()
    if n == 1:
        return local
    me, out = process_index(), []
    for p in range(n):
        for k, d in enumerate(local):
            out.append(d if p == me else RemoteDevice(d.platform, p * len(local) + k, p))
    return out


def device_count(platform: str | None = None) -> int:
    return len(devices(platform))


def local_device_count(platform: str | None = None) -> int:
    return len(local_devices(platform))


axes.set_world(lambda: (process_index(), process_count()))
axes.set_gather(lambda obj: process.group.comm.allgather(obj)
                if process.group.comm is not None else [obj])
