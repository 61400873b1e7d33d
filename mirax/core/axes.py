"""Named axes: the per-thread environment of bound axis names.

A frame binds an axis name to a size and says how a collective over it runs:
- a vmap frame (`trace` set: the BatchTrace of `vmap(..., axis_name=)`): a collective over
  the name is raised to that interpreter, whose rule turns it into ordinary ops over its
  batch axis (interpreters/vmap.py, ops/collective.py);
- a device frame (`spmd` set): this thread runs one member of an SPMD program (pmap,
  shard_map); the collective's impl hands its buffer to `spmd.comm(names)`, an engine over
  the members (distributed/engines.py: threads in one process, MPI between processes,
  NCCL between GPUs). Inside `jit` the collective is a node of the plan, and the engine is
  looked up when the node runs, in the thread that runs it.

Where it sits: core, beside the interpreter context (trace.py); read by the collective
primitives (ops) and pushed by vmap (interpreters) and pmap / shard_map (transforms).
"""
from __future__ import annotations

import threading
from collections.abc import Hashable

from mirax.core.errors import UnboundAxisError


class AxisFrame:
    __slots__ = ("name", "size", "trace", "spmd")

    def __init__(self, name, size: int, trace=None, spmd=None):
        self.name, self.size, self.trace, self.spmd = name, size, trace, spmd

    def __repr__(self):
        kind = "vmap" if self.trace is not None else "devices"
        return f"AxisFrame({self.name!r}, size={self.size}, {kind})"


class _Env(threading.local):
    def __init__(self):
        self.frames: list[AxisFrame] = []


_env = _Env()
# Threads with any frame bound: hot paths (jit's fast path) read the thread-local only then.
busy = [0]
_lock = threading.Lock()


def frames() -> list[AxisFrame]:
    return _env.frames


def lookup(name, op: str = "collective") -> AxisFrame:
    """The innermost frame binding `name`; a NameError naming the op when none does."""
    for f in reversed(_env.frames):
        if f.name == name:
            return f
    bound = [f.name for f in _env.frames]
    raise UnboundAxisError(f"{op}: unbound axis name {name!r}; bound here: {bound or 'none'} "
                    "(collectives run inside vmap(..., axis_name=), pmap or shard_map)")


def signature() -> tuple:
    """The bound names and sizes (part of a jit cache key: shapes depend on them)."""
    return tuple((f.name, f.size) for f in _env.frames)


class bind_axis:
    """`with bind_axis(AxisFrame(...)):` binds a name for the block (this thread)."""

    def __init__(self, *frames: AxisFrame):
        self.new = frames

    def __enter__(self):
        if not _env.frames and self.new:
            with _lock:
                busy[0] += 1
        _env.frames.extend(self.new)
        return self.new

    def __exit__(self, *exc):
        for _ in self.new:
            _env.frames.pop()
        if not _env.frames and self.new:
            with _lock:
                busy[0] -= 1


def as_names(axis_name, op: str = "collective") -> tuple:
    """axis_name as a tuple of names (a single name or a tuple/list of them); a name is any
    hashable value that is not an array (JAX's rule; strings in practice)."""
    names = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    for n in names:
        if hasattr(n, "shape") or not isinstance(n, Hashable):
            raise TypeError(f"{op}: an axis name must be a hashable name such as 'batch', "
                            f"got {type(n).__name__}")
    return names


# --- running SPMD programs ----------------------------------------------------------------
# mirax/distributed registers the runner (members on threads of this process and on other
# processes, engines for their collectives); pmap and shard_map (transforms) call it.
_runner: list = [None]
_world: list = [lambda: (0, 1)]   # (process index, process count), set by distributed


def set_world(fn) -> None:
    _world[0] = fn


def world() -> tuple[int, int]:
    """(this process's index, the number of processes) of the process group."""
    return _world[0]()


_gather: list = [lambda obj: [obj]]   # set by distributed: an allgather between processes


def set_gather(fn) -> None:
    _gather[0] = fn


def gather_objects(obj) -> list:
    """Every process's `obj`, in process order (for assembling shard_map's outputs)."""
    return _gather[0](obj)


def set_runner(fn) -> None:
    """fn(member_fn, member_args, mesh, local, devices) -> the local members' outputs."""
    _runner[0] = fn


def run_spmd(member_fn, member_args, mesh, local, devices=None):
    """Run member_fn(k, *member_args[k]) for each local member k while every member of
    `mesh` (an object with `axis_names` and `axis_sizes`) runs the same program; `local[k]`
    is member k's coordinate tuple in the mesh, `devices[k]` its device."""
    if _runner[0] is None:
        raise RuntimeError("pmap/shard_map: no SPMD runner registered (import mirax)")
    return _runner[0](member_fn, member_args, mesh, local, devices)
