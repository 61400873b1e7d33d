"""The pass pipeline, read top to bottom. Each pass is a Graph -> Graph function in its
own file; backend-dependent choices are the backend's claims, read from it here: which
composites it has no kernel for (`backend.decomposes(prim)`: their bodies are inlined),
whether and what to fuse (`fuses`, `fuse_group`, `fuse_siblings`), its own passes
(`backend.passes`, run after `fuse`: CUDA regroups fusion nodes), and which nodes may
write into an input's buffer (`writes_into`).

Where it sits: `core.runtime.executable(graph, platform)` runs `optimize(graph, backend)`
and hands the result to `backend.compile`; this module registers `optimize` there.
`mx.ir.optimize` is the same function.

debug=1 (MIRAX_DEBUG) prints pass timings (and, at exit, the dispatch report), =2 the
listing after each pass, =3 also the generated source (backends print it).
"""
from __future__ import annotations

import atexit
import sys
import threading
import time
from collections import Counter

from mirax.core import config, profile_events
from mirax.compiler.cse import cse
from mirax.compiler.dce import dce
from mirax.compiler.decompose import decompose
from mirax.compiler.fusion import fuse
from mirax.compiler.memory import format_plan, never, plan_memory
from mirax.compiler.simplify import simplify
from mirax.core import runtime
from mirax.core.primitive import registry
from mirax.graph.graph import Graph


def _decompose(graph: Graph, backend) -> Graph:
    """Inline the composites this backend has no fused kernel for."""
    claims = getattr(backend, "decomposes", None)
    if claims is None or not _inlines(graph, claims):
        return graph
    keep = {n for n, p in registry.items() if p.decomposition is not None and not claims(p)}
    return decompose(graph, keep)


def _inlines(graph: Graph, claims) -> bool:
    return any(claims(n.prim) or any(_inlines(g, claims) for g in _subgraphs(n))
               for n in graph.nodes)


def _subgraphs(node) -> list:
    return [g for v in node.params.values()
            for g in (v if isinstance(v, tuple) else (v,)) if isinstance(g, Graph)]


def _fuse(graph: Graph, backend) -> Graph:
    if not getattr(backend, "fuses", False):
        return graph
    return fuse(graph, getattr(backend, "fuse_group", None),
                getattr(backend, "fuse_siblings", False))


def _backend_passes(graph: Graph, backend) -> Graph:
    for _, fn in getattr(backend, "passes", ()):
        graph = fn(graph)
    return graph


def _plan_memory(graph: Graph, backend) -> Graph:
    return plan_memory(graph, tuple(graph.cache.get("donate", ())),
                       getattr(backend, "writes_into", never))


PASSES = [
    ("decompose", _decompose),       # composites without a kernel on this backend
    ("simplify", lambda g, be: simplify(g)),
    ("cse", lambda g, be: cse(g)),
    ("dce", lambda g, be: dce(g)),
    ("fuse", _fuse),                 # when the backend claims fusion
    ("backend", _backend_passes),    # the backend's own passes (CUDA: regroup)
    ("plan_memory", _plan_memory),
]

pass_times: Counter = Counter()   # pass name -> total seconds (MIRAX_DEBUG=1 report)
pass_counts: Counter = Counter()


def debug_level() -> int:
    return config.get("debug")


def optimize(graph: Graph, backend=None) -> Graph:
    """Run the passes for `backend` (a Backend: its claims steer decompose, fuse and
    plan_memory); without one, nothing is inlined or fused and no buffer is reused."""
    level = debug_level()
    if level >= 1:
        _register_report()
    donated = graph.cache.get("donate", ())   # flat input indices jit may overwrite
    for name, fn in PASSES:
        t0 = time.perf_counter()
        out = fn(graph, backend)
        if out is not graph and donated:
            out.cache["donate"] = donated
        graph = out
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


runtime.set_pipeline(optimize)


_registered = [False]
_registered_lock = threading.Lock()


def _register_report():
    with _registered_lock:
        if _registered[0]:
            return
        _registered[0] = True
        atexit.register(lambda: print(report(), file=sys.stderr))


def report() -> str:
    """Pass timings and the dispatch report (per primitive: native / decomposed /
    host-fallback counts of every backend)."""
    lines = ["[mirax] pass timings (total over all compilations):"]
    for name, _ in PASSES:
        if pass_counts[name]:
            lines.append(f"  {name:<12} {1e3 * pass_times[name]:9.2f} ms  "
                         f"({pass_counts[name]} runs)")
    for be in runtime.backends():
        counts: dict = {}
        for (prim, how), n in list(be.report.items()):  # (a snapshot: threads add)
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
