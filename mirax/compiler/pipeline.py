"""The pass pipeline, read top to bottom. Each pass is a Graph -> Graph function in its
own file; backend-dependent choices (fuse or not, which nodes may write into a buffer) are
the backend's claims, read from it here.

MIRAX_DEBUG=1 prints pass timings (and, at exit, the dispatch report), =2 the listing after
each pass, =3 also the generated source (backends print it).
"""
from __future__ import annotations

import atexit
import sys
import time
from collections import Counter

from mirax.core import config, profile_events
from mirax.compiler.cse import cse
from mirax.compiler.dce import dce
from mirax.compiler.fusion import fuse
from mirax.compiler.memory import format_plan, never, plan_memory
from mirax.compiler.simplify import simplify
from mirax.ir.graph import Graph

PASSES = [
    ("simplify", simplify),
    ("cse", cse),
    ("dce", dce),
    ("fuse", fuse),          # only when the backend claims fusion (see optimize)
    ("plan_memory", plan_memory),
]

pass_times: Counter = Counter()   # pass name -> total seconds (MIRAX_DEBUG=1 report)
pass_counts: Counter = Counter()


def debug_level() -> int:
    return config.get("debug")


def optimize(graph: Graph, backend=None) -> Graph:
    """Run the passes. `backend` (a Backend) decides fusion (`backend.fuses`, and which
    groups: `backend.fuse_group(members)`) and in-place writes (`backend.writes_into(node)`);
    without one, no fusion and no buffer reuse."""
    level = debug_level()
    if level >= 1:
        _register_report()
    donated = tuple(graph.cache.get("donate", ()))
    for name, fn in PASSES:
        if name == "fuse" and not getattr(backend, "fuses", False):
            continue
        t0 = time.perf_counter()
        if name == "plan_memory":
            graph = plan_memory(graph, donated, getattr(backend, "writes_into", never))
        elif name == "fuse":
            graph = fuse(graph, getattr(backend, "fuse_group", None),
                         getattr(backend, "fuse_siblings", False))
        else:
            graph = fn(graph)
        dt = time.perf_counter() - t0
        if profile_events.active is not None:
            t1 = profile_events.now()
            profile_events.active.add(f"pass {name}", "compile", t1 - int(dt * 1e9), t1,
                                      {"nodes": len(graph.nodes)})
        pass_times[name] += dt
        pass_counts[name] += 1
        if level >= 1:
            print(f"[mirax] pass {name}: {1e3 * dt:.2f} ms, {len(graph.nodes)} nodes",
                  file=sys.stderr)
        if level >= 2:
            print(format_plan(graph) if name == "plan_memory" else graph, file=sys.stderr)
    return graph


_registered = [False]


def _register_report():
    if not _registered[0]:
        _registered[0] = True
        atexit.register(lambda: print(report(), file=sys.stderr))


def report() -> str:
    """Pass timings and the dispatch report (per primitive: native / decomposed /
    host-fallback counts of every backend)."""
    from mirax.backends import backends
    lines = ["[mirax] pass timings (total over all compilations):"]
    for name, _ in PASSES:
        if pass_counts[name]:
            lines.append(f"  {name:<12} {1e3 * pass_times[name]:9.2f} ms  "
                         f"({pass_counts[name]} runs)")
    for be in backends():
        counts: dict = {}
        for (prim, how), n in be.report.items():
            counts.setdefault(prim, Counter())[how] += n
        if not counts:
            continue
        lines.append(f"[mirax] dispatch report, {be.platform} (compiled nodes and eager "
                     "fallbacks):")
        lines.append(f"  {'primitive':<24} {'native':>8} {'decomposed':>11} "
                     f"{'host-fallback':>14}")
        for prim in sorted(counts):
            c = counts[prim]
            lines.append(f"  {prim:<24} {c['native']:>8} {c['decomposed']:>11} "
                         f"{c['host-fallback']:>14}")
    return "\n".join(lines)
