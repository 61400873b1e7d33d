"""Collectives in CPU plans, overlapped with the computation around them.

A collective node (psum of a gradient bucket, say) need not hold the plan up: its
all-reduce can travel while the plan computes whatever does not depend on it (the rest
of the backward pass). Two pieces:
- `hoist`, the backend's pass (Graph -> Graph): every collective, with the nodes it
  needs that are not placed yet, moves as early as its inputs allow; the other nodes keep
  their order after it. Collectives are issued in the order their operands become ready
  (a gradient bucket of the last layers before the first layers'); every member compiles
  the same graph, so every member issues them in the same order (as MPI requires).
- `start(fn, *args)`: the plan's line for a collective hands it to this thread's
  communication thread and goes on; the line before its first use waits for the result
  (`lower.py`). The communication thread runs one collective at a time, in issue order,
  under the caller's axis frames and config overrides (the engine of a member is found
  through its frames, core/axes.py). Each calling thread (a member of pmap) has its own,
  so members in one process never queue behind each other's collectives.
Values are the same as running the collective in place: the same engine call on the same
buffers.
"""
from __future__ import annotations

import queue
import threading
from concurrent.futures import Future

from mirax.core import axes, config
from mirax.graph.graph import Graph

# primitives that exchange buffers through a member's engine (axis_index only reads its rank)
COLLECTIVES = frozenset({"psum", "pmax", "pmin", "all_gather", "psum_scatter", "ppermute",
                         "all_to_all"})


def hoist(graph: Graph) -> Graph:
    """Each collective, in the order they can become ready (fewest ancestors first: the
    least work before it; ties keep the original order), preceded only by what it needs:
    its not-yet-placed ancestors, in their original order; then everything else in its
    original order."""
    if not any(n.prim.name in COLLECTIVES for n in graph.nodes):
        return graph
    producer = {v: i for i, n in enumerate(graph.nodes) for v in n.outputs}

    def ancestors(i):
        stack, seen = [i], set()
        while stack:
            j = stack.pop()
            if j not in seen:
                seen.add(j)
                stack.extend(producer[v] for v in graph.nodes[j].inputs if v in producer)
        return seen

    needs = {i: ancestors(i) for i, n in enumerate(graph.nodes) if n.prim.name in COLLECTIVES}
    ready = sorted(needs, key=lambda i: (len(needs[i]), i))
    placed: set = set()
    order: list = []
    for i in ready:
        for j in sorted(needs[i] - placed):   # original order is a topological order
            placed.add(j)
            order.append(j)
    order += [i for i in range(len(graph.nodes)) if i not in placed]
    if order == list(range(len(graph.nodes))):
        return graph
    return graph.replace(nodes=[graph.nodes[i] for i in order])


IDLE = 5.0   # seconds a communication thread waits for work before it ends


class _CommThread:
    """One daemon thread running submitted collectives in order; it ends after IDLE
    seconds without work (pmap's member threads are made per call: theirs must go)."""

    def __init__(self):
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.alive = True
        threading.Thread(target=self._run, name="mirax-comm", daemon=True).start()

    def _run(self):
        while True:
            try:
                job = self.jobs.get(timeout=IDLE)
            except queue.Empty:
                with _lock:
                    if self.jobs.empty():
                        self.alive = False
                        return
                continue
            fut, fn, args, frames, knobs = job
            try:
                with config.inherit(knobs), axes.bind_axis(*frames):
                    fut.set_result(fn(*args))
            except BaseException as e:   # raised again at the wait, on the plan's thread
                fut.set_exception(e)


_local = threading.local()
_lock = threading.Lock()


def start(fn, *args) -> Future:
    """`fn(*args)` (a collective's impl) on this thread's communication thread; the
    result (or the error) comes from the Future's `result()`."""
    fut: Future = Future()
    job = (fut, fn, args, tuple(axes.frames()), config.thread_overrides())
    with _lock:
        comm = getattr(_local, "comm", None)
        if comm is None or not comm.alive:
            comm = _local.comm = _CommThread()
        comm.jobs.put(job)
    return fut
