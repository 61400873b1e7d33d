"""What every collective engine shares: one member's view of a group (`Comm`), the errors
a collective raises, and how long a member waits for the others.

The engines live beside their buffers: threads and MPI (host buffers) in
distributed/engines.py, NCCL (CUDA buffers) in backends/cuda/nccl.py, handed out by the
backend's `group_comm`. The collective primitives' impls (ops/collective.py) call the
engine of the member's device frame (core/axes.py).

Every engine checks that the members passed the same shape and dtype and raises a
MismatchError naming the collective otherwise; a member that stops answering makes the
others raise a TimeoutError naming the collective after `collective_timeout` seconds,
never a silent hang. Reductions sum members in rank order, so every member gets
bit-identical results.
"""
from __future__ import annotations

import numpy as np

from mirax.core import config
from mirax.core.dtypes import short_name

REDUCE = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def timeout() -> float | None:
    """Seconds a member waits for the others (the collective_timeout knob; None: forever)."""
    t = config.get("collective_timeout")
    return None if not t else float(t)


def short(x) -> str:
    return f"{short_name(x.dtype)}[{','.join(map(str, x.shape))}]"


def contiguous(x):
    return np.require(x, requirements="C")   # (np.ascontiguousarray makes 0-d arrays 1-d)


class CollectiveError(RuntimeError):
    """A collective could not complete (another member failed or timed out)."""


class MismatchError(ValueError):
    """The members passed different shapes to a collective (every member sees it, so the
    group is not aborted: each member raises this same error)."""


class Comm:
    """One member's view of a group: `rank`, `size`, and the collectives on that member's
    buffer. Subclasses give `exchange` (every member's value, in rank order) or override
    the collectives with an engine's own calls."""
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
            got = ", ".join(f"member {i}: {short(v)}" for i, v in enumerate(vals))
            raise MismatchError(f"{op}: the members of {self.what} passed different shapes "
                                f"or dtypes ({got})")

    def allreduce(self, x, op: str, name: str = "psum"):
        x = np.asarray(x)
        vals = self.exchange(x, name)
        self._same(x, vals, name)
        out = vals[0].copy()
        for v in vals[1:]:
            REDUCE[op](out, v, out=out)
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
            return contiguous(
                np.take(total, range(self.rank * k, (self.rank + 1) * k), axis=dim))
        return contiguous(np.take(total, self.rank, axis=dim))

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
