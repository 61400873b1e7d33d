"""The CPU backend: buffers are NumPy arrays; every reference impl is native here."""
from __future__ import annotations

import ctypes
import sys

import numpy as np

from mirax.core import config
from mirax.core.runtime import Backend, Device
from mirax.backends.cpu import collectives
from mirax.backends.cpu.kernels import impl_of
from mirax.backends.cpu import blocked, loops, tape
from mirax.backends.cpu.lower import lower, writes_into


class CpuBackend(Backend):
    platform = "cpu"
    fuses = True  # only groups that run faster fused (fuse_group)
    fuse_siblings = True  # independent chains over one shape share a blocked loop
    # this backend's own passes, run by the compiler's pipeline after `fuse`
    passes = (("hoist_collectives", collectives.hoist),)   # all-reduces overlap compute

    def __init__(self):
        super().__init__()
        self._devices = [Device("cpu", 0, self)]

    def devices(self):
        """cpu_devices of them (read now: a test may override the knob). They share host
        memory: a buffer's device is cpu:0 unless a sharded array says where its shards are."""
        n = max(1, config.get("cpu_devices"))
        while len(self._devices) < n:
            self._devices.append(Device("cpu", len(self._devices), self))
        return self._devices[:n]

    def owns(self, buf) -> bool:
        return isinstance(buf, (np.ndarray, np.generic))

    def to_host(self, buf):
        return buf

    def from_host(self, host, device):
        return np.asarray(host)

    def adopt(self, buf):
        return np.asarray(buf)

    def empty(self, shape, dtype):
        return np.empty(shape, dtype)

    def impl(self, prim):
        if prim.impl is None:
            raise NotImplementedError(f"{prim.name}: no CPU implementation")
        return impl_of(prim)

    def fuse_group(self, members) -> bool:
        """Groups that run fused faster than op by op: a compiled loop, the tape for few
        elements, or cache-blocked chunks (lower.fusion runs them)."""
        return loops.eligible(members) or tape.eligible(members) or blocked.accepts(members)

    def writes_into(self, node) -> bool:
        return writes_into(node)

    def compile(self, graph):
        _keep_freed_memory()
        return lower(self, graph)


_tuned = False


def _keep_freed_memory():
    """Let glibc's malloc keep freed memory for reuse (once per process, at the first
    compiled plan; MIRAX_CPU_MALLOC=default leaves malloc alone). A compiled step
    allocates its outputs afresh on every call. By default glibc serves big blocks with
    mmap and returns freed ones to the system, so every call pays a page fault per 4 KiB
    of output: measured 2 ms of a 13 ms MLP training step (W1 in benchmarks/suite.py).
    Served from the heap and kept, the same blocks are reused warm: the process holds on
    to its peak memory, as the caching allocators of JAX and PyTorch do."""
    global _tuned
    if _tuned or not sys.platform.startswith("linux") or \
            config.get("cpu_malloc") == "default":
        return
    _tuned = True
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:   # not glibc (musl): nothing to tune
        return
    m_trim_threshold, m_mmap_threshold = -1, -3
    libc.mallopt(m_mmap_threshold, 32 << 20)   # glibc's maximum: blocks < 32 MiB from the heap
    libc.mallopt(m_trim_threshold, 1 << 30)    # keep up to 1 GiB free at the heap's top
