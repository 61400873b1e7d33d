"""mx.profiler: where a program's time goes, per executed plan node.

    with mx.profiler.trace("step.json"):
        loss, grads = step(params, batch)
    mx.profiler.summary()          # the top nodes by total time

`trace(path)` records, while it is active, one slice per executed plan node (CPU plans;
CUDA plans with CUDA events, on a track of their own), nested in a slice named after the
jitted function, plus compile phases (trace, each compiler pass, lowering), host
transfers and the parts the CPU thread pool ran (category "pool", on each thread's
track; a compiled loop's parts on numba's native threads are inside its node's slice,
not traced apart), then writes them as Chrome-trace JSON (open it in https://ui.perfetto.dev or
chrome://tracing). Plans run an instrumented variant only while a trace is on; outside
one, the profiler costs a test per plan call.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
from collections import defaultdict

from mirax.core import profile_events

__all__ = ["trace", "summary", "events", "start_trace", "stop_trace"]

_last: list = [None]    # the Recorder of the last finished trace


def start_trace():
    """Start recording (one trace at a time); `stop_trace(path)` ends it."""
    return profile_events.start()


def stop_trace(path=None):
    """End the recording; write it to `path` as Chrome-trace JSON when given. Returns the
    trace as a dict (the JSON's contents)."""
    rec = profile_events.stop()
    if rec is None:
        raise RuntimeError("profiler.stop_trace: no trace is being recorded")
    _finish(rec)
    _last[0] = rec
    doc = chrome_trace(rec)
    if path is not None:
        path = os.fspath(path)
        if os.path.isdir(path):
            path = os.path.join(path, "mirax_trace.json")
        with open(path, "w") as f:
            json.dump(doc, f)
    return doc


@contextlib.contextmanager
def trace(path=None):
    """Record the block; write a Chrome-trace JSON to `path` (a file, or a directory to
    write `mirax_trace.json` into) at its end. Yields the recorder (`.events`)."""
    rec = start_trace()
    try:
        yield rec
    finally:
        stop_trace(path)


def _finish(rec):
    """Resolve deferred slices (CUDA events: their times are known once the GPU is done)."""
    for resolve in rec.__dict__.pop("deferred", []):
        resolve(rec)


def events(rec=None) -> list[dict]:
    """The slices of the last trace (or `rec`) as dicts: name, cat, ts and dur (us), tid,
    args."""
    rec = rec or _last[0]
    if rec is None:
        return []
    return [{"name": n, "cat": c, "ts": (t0 - rec.start) / 1e3, "dur": (t1 - t0) / 1e3,
             "tid": tid, "args": a or {}} for n, c, t0, t1, tid, a in rec.events]


def chrome_trace(rec) -> dict:
    pid = os.getpid()
    out = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": "mirax"}}]
    for tid, name in rec.threads.items():
        out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                    "args": {"name": name}})
    for e in sorted(events(rec), key=lambda e: (e["ts"], -e["dur"])):
        out.append({"name": e["name"], "cat": e["cat"], "ph": "X", "ts": e["ts"],
                    "dur": e["dur"], "pid": pid, "tid": e["tid"], "args": e["args"]})
    return {"traceEvents": out, "displayTimeUnit": "ms"}


def summary(top: int = 20, file=None, rec=None) -> str:
    """Print (and return) the `top` plan nodes of the last trace by total time: calls,
    total and mean ms, share of the time in plans."""
    evs = [e for e in events(rec) if e["cat"] in ("cpu", "cuda")]
    plan_ms = sum(e["dur"] for e in events(rec) if e["cat"] == "plan") / 1e3
    by = defaultdict(lambda: [0, 0.0, ""])
    for e in evs:
        key = (e["cat"], e["name"], e["args"].get("in", ""))
        s = by[key]
        s[0] += 1
        s[1] += e["dur"] / 1e3
        s[2] = e["args"].get("source", "")
    rows = sorted(by.items(), key=lambda kv: -kv[1][1])[:top]
    total = sum(v[1] for v in by.values())
    lines = [f"{'node':<44} {'dev':<5} {'calls':>6} {'total ms':>10} {'mean ms':>9} "
             f"{'%':>6}  operands / source"]
    for (cat, name, ins), (n, ms, src) in rows:
        share = 100 * ms / (plan_ms or total or 1)
        lines.append(f"{name[:44]:<44} {cat:<5} {n:>6} {ms:>10.3f} {ms / n:>9.4f} "
                     f"{share:>5.1f}%  {ins[:60]} {src}")
    lines.append(f"{len(evs)} node runs, {total:.3f} ms in nodes, {plan_ms:.3f} ms in plans")
    text = "\n".join(lines)
    print(text, file=file or sys.stdout)
    return text
