"""The SPMD runner: the local members of a device mesh run one program each, on threads of
this process (one member runs on the calling thread), with their axis names bound to
device frames whose engines (engines.py) connect them to every other member, here and in
the other processes.

A mesh has named axes (`axis_names`, sizes `shape`); a member is a coordinate tuple,
numbered row-major (its global index). The group of a collective over names N, seen from
member c, is the members that agree with c on every axis not in N, ranked row-major over N
in the order given. Engines: threads when the group lies in this process; MPI when it is
one member per process spanning the world; otherwise threads to one member per process and
MPI between processes. A device whose backend has its own engine uses that one
(`Backend.group_comm`: NCCL for CUDA members, bootstrapped over the host engine).

Registered into core/axes.py (`set_runner`) when mirax.distributed is imported; pmap and
shard_map (transforms/) call it.
"""
from __future__ import annotations

import math
import threading

from mirax.core import axes, comm, config
from mirax.core.axes import AxisFrame, bind_axis
from mirax.distributed import engines, process


class _Run:
    """One call of an SPMD program: the mesh, the local members, the groups made so far."""

    def __init__(self, names, shape, local, devices, processes):
        self.names, self.shape, self.local = tuple(names), tuple(shape), list(local)
        self.devices = devices
        self.processes = processes   # the process of every global member
        self.total = math.prod(self.shape)
        self.global_of = [self.linear(c) for c in self.local]
        self.lock = threading.Lock()
        self.groups: dict = {}
        self.thread_groups: list = []
        self.world_local = None   # the ThreadGroup of all local members (WorldComm)

    def linear(self, coords) -> int:
        g = 0
        for c, s in zip(coords, self.shape):
            g = g * s + c
        return g

    def _thread_group(self, key, size, what):
        with self.lock:
            g = self.groups.get(key)
            if g is None:
                g = self.groups[key] = engines.ThreadGroup(size, what)
                self.thread_groups.append(g)
            return g

    def members(self, coords, names):
        """The global indices of the group of `names` containing `coords`, in rank order."""
        idx = [self.names.index(n) for n in names]
        sizes = [self.shape[i] for i in idx]
        out = []
        for r in range(math.prod(sizes)):
            c = list(coords)
            for i, s in zip(reversed(idx), reversed(sizes)):
                c[i] = r % s
                r //= s
            out.append(self.linear(c))
        return out

    def comm(self, k: int, names):
        """The engine for local member k over the axes `names`."""
        coords = self.local[k]
        what = f"axis {names[0]!r}" if len(names) == 1 else f"axes {names}"
        members = self.members(coords, names)
        me = self.global_of[k]
        if all(m in self.global_of for m in members):   # the group lies in this process
            key = (names, tuple(c for i, c in enumerate(coords)
                                if self.names[i] not in names))
            cpu = engines.ThreadComm(self._thread_group(key, len(members), what),
                                     members.index(me))
        elif len(self.local) == 1 and process.group.size == len(members) and \
                [self.processes[m] for m in members] == list(range(len(members))):
            cpu = engines.MpiComm(process.group.comm, what)   # member of rank r on process r
        else:
            wl = self._thread_group(("world",), len(self.local), "this process's members")
            cpu = engines.WorldComm(wl, k, process.group.comm, members, self.global_of, what)
        dev = self.devices[k] if self.devices else None
        if dev is None:
            return cpu
        own = dev.backend.group_comm(
            dev, cpu, (tuple(members), dev.id, process.group.rank))
        return cpu if own is None else own

    def abort(self, why):
        for g in self.thread_groups:
            g.abort(why)


class _Member:
    """What a device frame holds: the run and which local member this thread is."""
    __slots__ = ("run", "k", "cache")

    def __init__(self, run, k):
        self.run, self.k, self.cache = run, k, {}

    def comm(self, names):
        c = self.cache.get(names)
        if c is None:
            c = self.cache[names] = self.run.comm(self.k, names)
        return c


def _processes(mesh) -> list:
    """The process of each member of the mesh, row-major."""
    if hasattr(mesh, "devices"):   # a Mesh: remote devices say their process
        me = process.process_index()
        return [getattr(d, "process_index", me) for d in mesh.devices.flat]
    return list(mesh.processes)


def run_spmd(member_fn, member_args, mesh, local, devices=None):
    names, shape = tuple(mesh.axis_names), tuple(mesh.axis_sizes)
    run = _Run(names, shape, local, devices, _processes(mesh))
    results: list = [None] * len(local)
    errors: list = [None] * len(local)
    knobs = config.thread_overrides()   # (the members see the caller's config.override)

    def member(k):
        m = _Member(run, k)
        frames = [AxisFrame(n, s, spmd=m) for n, s in zip(names, shape)]
        try:
            with config.inherit(knobs), bind_axis(*frames):
                results[k] = member_fn(k, *member_args[k])
        except BaseException as e:   # the others must not wait for this member forever
            errors[k] = e
            if not isinstance(e, comm.MismatchError):   # (the others raise it too)
                run.abort(f"member {run.global_of[k]}: {type(e).__name__}: {e}")

    if len(local) == 1:
        member(0)
    else:
        threads = [threading.Thread(target=member, args=(k,), daemon=True,
                                    name=f"mirax-member-{k}") for k in range(1, len(local))]
        for t in threads:
            t.start()
        member(0)
        for t in threads:
            t.join()
    failed = [e for e in errors if e is not None]
    if failed:   # the first member's own error, not the others' "a member failed"
        raise next((e for e in failed if not isinstance(e, comm.CollectiveError)),
                   failed[0])
    return results


axes.set_runner(run_spmd)
