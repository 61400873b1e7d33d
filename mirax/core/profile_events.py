"""The profiler's recording state, at the bottom of the package so that every layer may
record into it (plans of the backends, compiler passes, jit's compile phases, transfers);
`mirax.profiler` starts and stops recordings and writes them out.

`active` is the current Recorder, or None. Code that records checks `active is not None`
first and does nothing else when no trace is on: plans run their plain variant and only
switch to an instrumented one (built at the first traced call) while a trace is active.
Times are `time.perf_counter_ns()` (ns), on the recording thread's id.
"""
from __future__ import annotations

import contextlib
import threading
import time

now = time.perf_counter_ns


class Recorder:
    """Complete slices (name, category, start ns, end ns, thread, args) of one trace."""

    def __init__(self):
        self.events: list = []
        self.start = now()
        self.threads: dict = {}   # thread id -> name
        self._lock = threading.Lock()

    def add(self, name: str, cat: str, t0: int, t1: int, args: dict | None = None,
            tid: int | None = None):
        if tid is None:
            tid = threading.get_ident()
            if tid not in self.threads:
                self.threads[tid] = threading.current_thread().name
        self.events.append((name, cat, t0, t1, tid, args))   # list.append is atomic


active: Recorder | None = None


def start() -> Recorder:
    global active
    if active is not None:
        raise RuntimeError("profiler.trace: a trace is already being recorded (traces do "
                           "not nest)")
    active = Recorder()
    return active


def stop() -> Recorder | None:
    global active
    rec, active = active, None
    return rec


@contextlib.contextmanager
def span(name: str, cat: str, args: dict | None = None):
    """Record the block as one slice when a trace is active (for rare events: compile
    phases, transfers; plans use their instrumented variant instead)."""
    rec = active
    if rec is None:
        yield
        return
    t0 = now()
    try:
        yield
    finally:
        rec.add(name, cat, t0, now(), args)
