"""Kernel launches with their argument blocks made once: any CuPy RawKernel (or a
RawModule's function) launched through the driver (cuLaunchKernel) on the current stream.

CuPy's own launch converts every argument on every call (19 us of host time for the
attention forward's 20 arguments on the H200's host, longer than the kernel at small
sizes). Here an argument is a NumPy scalar of the kernel's C type: np.uint64 for a buffer's
address, which changes from call to call, np.int64 / np.int32 / np.float32 for the rest.
Each signature of the rest gets a ctypes block once; a call writes the addresses into it
and launches. Used by the attention kernels (attention.py); the generated elementwise,
reduction and row kernels (codegen.py, row_kernels.py) and the graph copies still launch
through CuPy."""
from __future__ import annotations

import ctypes
import threading

import cupy as cp
import numpy as np
from cupy.cuda import driver

_CTYPE = {np.uint64: ctypes.c_uint64, np.int64: ctypes.c_int64, np.int32: ctypes.c_int32,
          np.float32: ctypes.c_float}
_kernels: dict = {}   # (module id, kernel name, device) -> Kernel


class Kernel:
    """`fn` (a RawKernel) launched as `k(grid, block, args, shared_mem=0)`, CuPy's call
    form, with `smem` bytes of dynamic shared memory allowed."""

    MAX_BLOCKS = 256  # signatures kept (the oldest dropped past this)

    def __init__(self, fn, smem: int = 0):
        if smem > 48 * 1024:  # over the default: opt in (Hopper allows 227 KB a block)
            fn.max_dynamic_shared_size_bytes = smem
        self.ptr = fn.kernel.ptr
        self.blocks: dict = {}  # signature -> (argument values, their block, address slots)
        self.lock = threading.Lock()  # a block is written and launched by one thread at a time

    def __call__(self, grid, block, args, shared_mem=0):
        key = (grid, block, shared_mem, *(None if type(a) is np.uint64 else a for a in args))
        with self.lock:
            entry = self.blocks.get(key)
            if entry is None:
                if len(self.blocks) >= self.MAX_BLOCKS:
                    del self.blocks[next(iter(self.blocks))]
                vals = [_CTYPE[type(a)](a) for a in args]
                params = (ctypes.c_void_p * len(vals))(*map(ctypes.addressof, vals))
                slots = [i for i, a in enumerate(args) if type(a) is np.uint64]
                entry = self.blocks[key] = (vals, params, slots)
            vals, params, slots = entry
            for i in slots:
                vals[i].value = int(args[i])
            driver.launchKernel(self.ptr, *(*grid, 1, 1)[:3], *(*block, 1, 1)[:3], shared_mem,
                                cp.cuda.get_current_stream().ptr, ctypes.addressof(params), 0)


def kernel(mod, name: str, smem: int = 0) -> Kernel:
    """The module's kernel `name` (with `smem` bytes of dynamic shared memory), made once
    for the current device."""
    key = (id(mod), name, cp.cuda.runtime.getDevice())
    k = _kernels.get(key)
    if k is None:
        k = _kernels.setdefault(key, Kernel(mod.get_function(name), smem))
    return k
