"""The NCCL engine: collectives between CUDA members, on CuPy buffers, through CuPy's
NCCL binding (`cupy.cuda.nccl`), launched on the current CuPy stream (inside a plan: the
plan's stream, so a collective is a node of the plan, not a host round trip).

`group_comm` is the CUDA backend's answer to `Backend.group_comm`: one communicator per
group of devices, made once; rank 0 makes NCCL's unique id and the group's host engine
(threads in one process, MPI between processes) hands it to the others.
"""
from __future__ import annotations

import threading

import cupy as cp
import numpy as np

from mirax.core.comm import Comm

try:
    from cupy.cuda import nccl
except ImportError:   # a CuPy built without NCCL: CUDA members cannot exchange
    nccl = None

_TYPES = {} if nccl is None else {
    np.dtype(np.float32): nccl.NCCL_FLOAT32, np.dtype(np.float64): nccl.NCCL_FLOAT64,
    np.dtype(np.float16): nccl.NCCL_FLOAT16, np.dtype(np.int32): nccl.NCCL_INT32,
    np.dtype(np.int64): nccl.NCCL_INT64, np.dtype(np.uint8): nccl.NCCL_UINT8,
    np.dtype(np.int8): nccl.NCCL_INT8}
_REDUCE = {} if nccl is None else {"sum": nccl.NCCL_SUM, "max": nccl.NCCL_MAX,
                                   "min": nccl.NCCL_MIN}


def _stream() -> int:
    return cp.cuda.get_current_stream().ptr


def _contiguous(x):
    x = cp.asarray(x)
    return x if x.flags.c_contiguous else x.copy()


class NcclComm(Comm):
    """One CUDA member's view of its group."""

    def __init__(self, comm, rank: int, size: int, what: str):
        self.nccl, self.rank, self.size, self.what = comm, rank, size, what

    def index_array(self):
        return cp.asarray(self.rank, cp.int32)

    def _type(self, x, name):
        t = _TYPES.get(np.dtype(x.dtype))
        if t is None:
            raise TypeError(f"{name}: NCCL has no {x.dtype} collectives (over {self.what})")
        return t

    def allreduce(self, x, op, name="psum"):
        x = _contiguous(x)
        out = cp.empty_like(x)
        self.nccl.allReduce(x.data.ptr, out.data.ptr, x.size, self._type(x, name),
                            _REDUCE[op], _stream())
        return out

    def allgather(self, x, axis, tiled, name="all_gather"):
        x = _contiguous(x)
        out = cp.empty((self.size,) + x.shape, x.dtype)
        self.nccl.allGather(x.data.ptr, out.data.ptr, x.size, self._type(x, name), _stream())
        if tiled:
            return cp.concatenate(list(out), axis)
        return cp.ascontiguousarray(cp.moveaxis(out, 0, axis))

    def reduce_scatter(self, x, dim, tiled, name="psum_scatter"):
        total = self.allreduce(x, "sum", name)
        k = total.shape[dim] // self.size if tiled else 1
        part = cp.take(total, cp.arange(self.rank * k, (self.rank + 1) * k), axis=dim)
        return part if tiled else cp.squeeze(part, dim)

    def ppermute(self, x, perm, name="ppermute"):
        x = _contiguous(x)
        out = cp.zeros_like(x)
        dt, stream = self._type(x, name), _stream()
        nccl.groupStart()
        for s, d in perm:
            if s == self.rank:
                self.nccl.send(x.data.ptr, x.size, dt, d, stream)
            if d == self.rank:
                self.nccl.recv(out.data.ptr, out.size, dt, s, stream)
        nccl.groupEnd()
        return out

    def all_to_all(self, x, split, concat, name="all_to_all"):
        send = cp.ascontiguousarray(cp.stack(cp.split(x, self.size, axis=split)))
        recv = cp.empty_like(send)
        n, dt, stream = send[0].size, self._type(send, name), _stream()
        nccl.groupStart()
        for peer in range(self.size):
            self.nccl.send(send[peer].data.ptr, n, dt, peer, stream)
            self.nccl.recv(recv[peer].data.ptr, n, dt, peer, stream)
        nccl.groupEnd()
        return cp.concatenate(list(recv), axis=concat)


_comms: dict = {}
_lock = threading.Lock()


def group_comm(device, host: Comm, key) -> NcclComm:
    """The NCCL communicator of `device`'s member in the group that `host` (the group's
    host engine) connects; made on first use, under `key`."""
    with _lock:
        comm = _comms.get(key)
    if comm is None:
        if nccl is None:
            raise RuntimeError(f"collectives over {host.what} on CUDA devices need CuPy "
                               "built with NCCL (cupy.cuda.nccl did not import)")
        uid = nccl.get_unique_id() if host.rank == 0 else None
        uid = host.exchange(uid, "nccl init")[0]
        with cp.cuda.Device(device.id):
            comm = NcclComm(nccl.NcclCommunicator(host.size, uid, host.rank), host.rank,
                            host.size, host.what)
        with _lock:
            _comms[key] = comm
    return comm
