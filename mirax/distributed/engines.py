"""The host collective engines: how the members of a device group exchange host buffers.

One interface (core/comm.py's `Comm`), seen from one member: `rank`, `size`, and
allreduce, allgather, reduce_scatter, ppermute, all_to_all on that member's buffer. The
collective primitives' impls (ops/collective.py) call it; which engine serves a group is
decided by the SPMD runner (spmd.py):
- `ThreadComm`: members are threads of this process (several CPU devices, MIRAX_CPU_DEVICES).
- `MpiComm`: one member per process, over MPI (mpi4py) on host buffers; buffer-based
  calls (Allreduce, Allgather, Alltoall), non-blocking so that a wait is bounded.
- `WorldComm`: several members per process and several processes: the local members
  exchange through threads, one of them through MPI, and each keeps its group's values.
Members on a device whose backend has its own engine (CUDA: NCCL, backends/cuda/nccl.py)
use that one instead, bootstrapped over these (`Backend.group_comm`). Shape checks,
bounded waits and the errors: core/comm.py.
"""
from __future__ import annotations

import threading
import time
import zlib

import numpy as np

from mirax.core.comm import CollectiveError, Comm, MismatchError, contiguous, short, timeout


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
            self.barrier.wait(timeout())
        except threading.BrokenBarrierError:
            if self.failed:
                raise CollectiveError(f"{op}: another member of {self.what} failed "
                                      f"({self.failed})") from None
            raise TimeoutError(f"{op}: timed out after {timeout():.0f}s waiting for the "
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
    """Wait for a non-blocking MPI request, at most `collective_timeout` seconds. MPI
    moves a non-blocking collective along only inside MPI calls, so the request is tested
    back to back for the first SPIN seconds (after the first millisecond, yielding the GIL
    and the core between tests: a small collective between ready peers completes in
    microseconds, a big
    all-reduce needs many steps (with pauses between tests, 16 MiB took 35x as long as a
    blocking Allreduce under Open MPI). After that, with growing sleeps up to 1 ms: the
    peers are late (computing, perhaps on the same cores)."""
    if req.Test():
        return
    t = timeout()
    start = time.monotonic()
    spin_until, deadline, pause = start + SPIN, None if t is None else start + t, 0.0
    while not req.Test():
        now = time.monotonic()
        if now < spin_until:
            if now > start + 1e-3:   # (the first millisecond without a pause)
                time.sleep(0)
            continue
        pause = min(1e-3, pause + 2e-5)
        time.sleep(pause)
        if deadline is not None and now > deadline:
            raise TimeoutError(f"{op}: timed out after {t:.0f}s waiting for the other "
                               f"processes of {what} (a process died or stopped "
                               "calling collectives; collective_timeout)")


SPIN = 0.05   # seconds mpi_wait tests without sleeping
_SIG = 12     # ints in a signature: op code, dtype, ndim, shape (up to 9 dims)


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
                             f"process passed {short(x)}")

    def exchange(self, value, op):
        return self.comm.allgather(value)

    def allreduce(self, x, op, name="psum"):
        MPI = _mpi()
        x = contiguous(x)
        self._check(x, name)
        out = np.empty_like(x)
        red = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op]
        mpi_wait(self.comm.Iallreduce(x, out, op=red), name, self.what)
        return out

    def allgather(self, x, axis, tiled, name="all_gather"):
        x = contiguous(x)
        self._check(x, name)
        out = np.empty((self.size,) + x.shape, x.dtype)
        mpi_wait(self.comm.Iallgather(x, out), name, self.what)
        if tiled:
            return np.concatenate(list(out), axis)
        return np.ascontiguousarray(np.moveaxis(out, 0, axis))

    def ppermute(self, x, perm, name="ppermute"):
        x = contiguous(x)
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
        x = contiguous(x)
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
