"""Collective engines: how the members of a device group exchange buffers.

One interface (`Comm`), seen from one member: `rank`, `size`, and allreduce, allgather,
reduce_scatter, ppermute, all_to_all on that member's buffer. The collective primitives'
impls (ops/collective.py) call it; which engine serves a group is decided by the SPMD
runner (spmd.py):
- `ThreadComm`: members are threads of this process (several CPU devices, MIRAX_CPU_DEVICES).
- `MpiComm`: one member per process, over MPI (mpi4py) on host buffers; buffer-based
  calls (Allreduce, Allgather, Alltoall), non-blocking so that a wait is bounded.
- `WorldComm`: several members per process and several processes: the local members
  exchange through threads, one of them through MPI, and each keeps its group's values.
- `NcclComm`: CUDA buffers, through CuPy's NCCL binding, on the current stream (the plan's).

Every engine checks that the members passed the same shape and dtype and raises a
ValueError naming the collective otherwise; a member that stops answering makes the others
raise a TimeoutError naming the collective after `collective_timeout` seconds, never
a silent hang.

Reductions sum members in rank order, so every member gets bit-identical results.
"""
from __future__ import annotations

import threading
import time
import zlib

import numpy as np

from mirax.core import config
from mirax.core.dtypes import short_name

_REDUCE = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def _timeout():
    t = config.get("collective_timeout")
    return None if not t else float(t)


def _short(x) -> str:
    return f"{short_name(x.dtype)}[{','.join(map(str, x.shape))}]"


class CollectiveError(RuntimeError):
    """A collective could not complete (another member failed or timed out)."""


class MismatchError(ValueError):
    """The members passed different shapes to a collective (every member sees it, so the
    group is not aborted: each member raises this same error)."""


class Comm:
    """One member's view of a group; subclasses give `exchange` (or override the ops)."""
    rank: int = 0
    size: int = 1
    what: str = "group"

    def exchange(self, value, op: str) -> list:
        raise NotImplementedError

    def index_array(self):
        """This member's rank as an int32 buffer of the member's backend."""
        return np.asarray(self.rank, np.int32)

    def _same(self, x, vals, op):
        if any(v.shape != x.shape or v.dtype != x.dtype for v in vals):
            got = ", ".join(f"member {i}: {_short(v)}" for i, v in enumerate(vals))
            raise MismatchError(f"{op}: the members of {self.what} passed different shapes or "
                             f"dtypes ({got})")

    def allreduce(self, x, op: str, name: str = "psum"):
        x = np.asarray(x)
        vals = self.exchange(x, name)
        self._same(x, vals, name)
        out = vals[0].copy()
        for v in vals[1:]:
            _REDUCE[op](out, v, out=out)
        return out

    def allgather(self, x, axis: int, tiled: bool, name: str = "all_gather"):
        x = np.asarray(x)
        vals = self.exchange(x, name)
        self._same(x, vals, name)
        return np.concatenate(vals, axis) if tiled else np.stack(vals, axis)

    def reduce_scatter(self, x, dim: int, tiled: bool, name: str = "psum_scatter"):
        total = self.allreduce(x, "sum", name)
        if tiled:
            k = total.shape[dim] // self.size
            return _contiguous(
                np.take(total, range(self.rank * k, (self.rank + 1) * k), axis=dim))
        return _contiguous(np.take(total, self.rank, axis=dim))

    def ppermute(self, x, perm, name: str = "ppermute"):
        x = np.asarray(x)
        vals = self.exchange(x, name)
        self._same(x, vals, name)
        src = {d: s for s, d in perm}.get(self.rank)
        return np.zeros_like(x) if src is None else vals[src].copy()

    def all_to_all(self, x, split: int, concat: int, name: str = "all_to_all"):
        x = np.asarray(x)
        chunks = np.split(x, self.size, axis=split)
        vals = self.exchange(chunks, name)
        got = [v[self.rank] for v in vals]
        self._same(got[0], got, name)
        return np.concatenate(got, axis=concat)


# --- threads of one process -------------------------------------------------------------
class ThreadGroup:
    """The shared slots of `size` member threads; a round is write, barrier, read. Rounds
    alternate between two sets of slots: a member writing round r + 1 has passed its
    barrier, so every member has finished reading round r - 1 from the other set."""

    def __init__(self, size: int, what: str):
        self.size, self.what = size, what
        self.slots = ([None] * size, [None] * size)
        self.rounds = [0] * size
        self.barrier = threading.Barrier(size)
        self.failed = None   # why the group was aborted (a member raised)

    def abort(self, why: str):
        self.failed = self.failed or why
        self.barrier.abort()

    def _wait(self, op):
        try:
            self.barrier.wait(_timeout())
        except threading.BrokenBarrierError:
            if self.failed:
                raise CollectiveError(f"{op}: another member of {self.what} failed "
                                      f"({self.failed})") from None
            raise TimeoutError(f"{op}: timed out after {_timeout():.0f}s waiting for the "
                               f"other members of {self.what} (collective_timeout)") from None

    def exchange(self, rank: int, value, op: str) -> list:
        slots = self.slots[self.rounds[rank] & 1]
        self.rounds[rank] += 1
        slots[rank] = value
        self._wait(op)
        return list(slots)


class ThreadComm(Comm):
    def __init__(self, group: ThreadGroup, rank: int):
        self.group, self.rank, self.size, self.what = group, rank, group.size, group.what

    def exchange(self, value, op):
        return self.group.exchange(self.rank, value, op)


# --- MPI between processes ----------------------------------------------------------------
def mpi_wait(req, op: str, what: str):
    """Wait for a non-blocking MPI request, at most `collective_timeout` seconds: polled
    without pause for the first millisecond (a collective between ready peers completes
    in microseconds), then with growing sleeps (the peers may be computing on the same
    cores)."""
    if req.Test():
        return
    t = _timeout()
    start = time.monotonic()
    spin_until, deadline, pause = start + 1e-3, None if t is None else start + t, 0.0
    while not req.Test():
        now = time.monotonic()
        if now < spin_until:
            continue
        pause = min(1e-3, pause + 2e-5)
        time.sleep(pause)
        if deadline is not None and now > deadline:
            raise TimeoutError(f"{op}: timed out after {t:.0f}s waiting for the other "
                               f"processes of {what} (a process died or stopped "
                               "calling collectives; collective_timeout)")


def _cupy_contiguous(x):
    import cupy   # optional dependency
    x = cupy.asarray(x)
    return x if x.flags.c_contiguous else x.copy()


def _contiguous(x):
    return np.require(x, requirements="C")   # (np.ascontiguousarray makes 0-d arrays 1-d)


_SIG = 12   # ints in a signature: op code, dtype, ndim, shape (up to 9 dims)


class MpiComm(Comm):
    """One member per process: the MPI communicator's rank is the member's rank."""

    def __init__(self, comm, what: str):
        self.comm, self.rank, self.size, self.what = comm, comm.Get_rank(), comm.Get_size(), what

    def _check(self, x, op):
        """All processes pass the same collective, shape and dtype (one small allgather)."""
        sig = np.full(_SIG, -1, np.int64)
        sig[0], sig[1], sig[2] = zlib.crc32(op.encode()), x.dtype.num, x.ndim   # (str hash varies)
        sig[3:3 + min(x.ndim, _SIG - 3)] = x.shape[:_SIG - 3]
        allsig = np.empty((self.size, _SIG), np.int64)
        mpi_wait(self.comm.Iallgather(sig, allsig), op, self.what)
        if (allsig != sig).any():
            def desc(s):
                return f"{'this collective' if s[0] == sig[0] else 'another collective'} " \
                       f"with {s[2]} dims {tuple(int(v) for v in s[3:3 + s[2]])}"
            got = "; ".join(f"process {i}: {desc(s)}" for i, s in enumerate(allsig))
            raise MismatchError(f"{op}: the processes of {self.what} disagree ({got}); this "
                             f"process passed {_short(x)}")

    def exchange(self, value, op):
        return self.comm.allgather(value)

    def allreduce(self, x, op, name="psum"):
        MPI = _mpi()
        x = _contiguous(x)
        self._check(x, name)
        out = np.empty_like(x)
        red = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op]
        mpi_wait(self.comm.Iallreduce(x, out, op=red), name, self.what)
        return out

    def allgather(self, x, axis, tiled, name="all_gather"):
        x = _contiguous(x)
        self._check(x, name)
        out = np.empty((self.size,) + x.shape, x.dtype)
        mpi_wait(self.comm.Iallgather(x, out), name, self.what)
        if tiled:
            return np.concatenate(list(out), axis)
        return np.ascontiguousarray(np.moveaxis(out, 0, axis))

    def ppermute(self, x, perm, name="ppermute"):
        x = _contiguous(x)
        self._check(x, name)
        out = np.zeros_like(x)
        reqs = []
        for s, d in perm:
            if s == self.rank:
                reqs.append(self.comm.Isend(x, dest=d, tag=17))
            if d == self.rank:
                reqs.append(self.comm.Irecv(out, source=s, tag=17))
        for r in reqs:
            mpi_wait(r, name, self.what)
        return out

    def all_to_all(self, x, split, concat, name="all_to_all"):
        x = _contiguous(x)
        self._check(x, name)
        send = np.ascontiguousarray(np.stack(np.split(x, self.size, axis=split)))
        recv = np.empty_like(send)
        mpi_wait(self.comm.Ialltoall(send, recv), name, self.what)
        return np.concatenate(list(recv), axis=concat)


def _mpi():
    from mpi4py import MPI   # optional dependency (the `distributed` extra)
    return MPI


# --- several members per process, several processes ----------------------------------------
class WorldComm(Comm):
    """The local members exchange through threads; the first of them exchanges the local
    values with the other processes (MPI); every member then keeps its group's values.
    `members` are the global indices of the group's members in rank order, `local_ids`
    the global indices of this process's members (in local order)."""

    def __init__(self, local: ThreadGroup, local_rank: int, mpi_comm, members: list,
                 local_ids: list, what: str):
        self.local, self.local_rank, self.mpi = local, local_rank, mpi_comm
        self.local_ids = local_ids
        self.members, self.rank, self.size, self.what = members, \
            members.index(local_ids[local_rank]), len(members), what

    def exchange(self, value, op):
        local = self.local.exchange(self.local_rank, value, op)
        flat = None
        if self.local_rank == 0:   # the first local member talks to the other processes
            try:
                flat = {g: v for proc in self.mpi.allgather(list(zip(self.local_ids, local)))
                        for g, v in proc}
            except Exception as e:
                self.local.abort(f"{type(e).__name__}: {e}")
                raise
        flat = self.local.exchange(self.local_rank, flat, op)[0]
        return [flat[g] for g in self.members]


# --- NCCL between GPUs ------------------------------------------------------------------------
class NcclComm(Comm):
    """CUDA buffers through CuPy's NCCL binding, on the current CuPy stream (inside a plan:
    the plan's stream). The communicator is made once per group: the unique id is made by
    rank 0 and broadcast over MPI (or handed to the threads of one process)."""

    def __init__(self, nccl_comm, rank: int, size: int, what: str):
        self.nccl, self.rank, self.size, self.what = nccl_comm, rank, size, what

    def index_array(self):
        import cupy   # optional dependency
        return cupy.asarray(self.rank, cupy.int32)

    @staticmethod
    def create(rank: int, size: int, uid, what: str):
        from cupy.cuda import nccl   # optional dependency (CuPy with NCCL)
        return NcclComm(nccl.NcclCommunicator(size, uid, rank), rank, size, what)

    @staticmethod
    def unique_id():
        from cupy.cuda import nccl   # optional dependency (CuPy with NCCL)
        return nccl.get_unique_id()

    def _types(self, x):
        from cupy.cuda import nccl   # optional dependency (CuPy with NCCL)
        table = {np.dtype(np.float32): nccl.NCCL_FLOAT32, np.dtype(np.float64): nccl.NCCL_FLOAT64,
                 np.dtype(np.float16): nccl.NCCL_FLOAT16, np.dtype(np.int32): nccl.NCCL_INT32,
                 np.dtype(np.int64): nccl.NCCL_INT64, np.dtype(np.uint8): nccl.NCCL_UINT8,
                 np.dtype(np.int8): nccl.NCCL_INT8}
        if x.dtype not in table:
            raise TypeError(f"NCCL: no {x.dtype} collectives")
        return nccl, table[x.dtype]

    def allreduce(self, x, op, name="psum"):
        import cupy   # optional dependency
        nccl, dt = self._types(x)
        x = _cupy_contiguous(x)
        out = cupy.empty_like(x)
        red = {"sum": nccl.NCCL_SUM, "max": nccl.NCCL_MAX, "min": nccl.NCCL_MIN}[op]
        stream = cupy.cuda.get_current_stream().ptr
        self.nccl.allReduce(x.data.ptr, out.data.ptr, x.size, dt, red, stream)
        return out

    def allgather(self, x, axis, tiled, name="all_gather"):
        import cupy   # optional dependency
        nccl, dt = self._types(x)
        x = _cupy_contiguous(x)
        out = cupy.empty((self.size,) + x.shape, x.dtype)
        stream = cupy.cuda.get_current_stream().ptr
        self.nccl.allGather(x.data.ptr, out.data.ptr, x.size, dt, stream)
        if tiled:
            return cupy.concatenate(list(out), axis)
        return cupy.ascontiguousarray(cupy.moveaxis(out, 0, axis))

    def reduce_scatter(self, x, dim, tiled, name="psum_scatter"):
        import cupy   # optional dependency
        total = self.allreduce(x, "sum", name)
        k = total.shape[dim] // self.size if tiled else 1
        idx = cupy.arange(self.rank * k, (self.rank + 1) * k)
        part = cupy.take(total, idx, axis=dim)
        return part if tiled else cupy.squeeze(part, dim)

    def ppermute(self, x, perm, name="ppermute"):
        import cupy   # optional dependency
        nccl, dt = self._types(x)
        x = _cupy_contiguous(x)
        out = cupy.zeros_like(x)
        stream = cupy.cuda.get_current_stream().ptr
        nccl.groupStart()
        for s, d in perm:
            if s == self.rank:
                self.nccl.send(x.data.ptr, x.size, dt, d, stream)
            if d == self.rank:
                self.nccl.recv(out.data.ptr, out.size, dt, s, stream)
        nccl.groupEnd()
        return out

    def all_to_all(self, x, split, concat, name="all_to_all"):
        import cupy   # optional dependency
        nccl, dt = self._types(x)
        send = cupy.ascontiguousarray(cupy.stack(cupy.split(x, self.size, axis=split)))
        recv = cupy.empty_like(send)
        n = send[0].size
        stream = cupy.cuda.get_current_stream().ptr
        nccl.groupStart()
        for peer in range(self.size):
            self.nccl.send(send[peer].data.ptr, n, dt, peer, stream)
            self.nccl.recv(recv[peer].data.ptr, n, dt, peer, stream)
        nccl.groupEnd()
        return cupy.concatenate(list(recv), axis=concat)
