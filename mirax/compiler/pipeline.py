"""The pass pipeline, read top to bottom. Each pass is a Graph -> Graph function in its
own file. MIRAX_DEBUG=1 prints pass timings, =2 the listing after each pass."""
from __future__ import annotations

import os
import sys
import time

from mirax.compiler.dce import dce
from mirax.ir.graph import Graph

PASSES = [
    ("dce", dce),
]


def debug_level() -> int:
    try:
        return int(os.environ.get("MIRAX_DEBUG", "0"))
    except ValueError:
        return 0


def optimize(graph: Graph, backend=None) -> Graph:
    level = debug_level()
    for name, fn in PASSES:
        t0 = time.perf_counter()
        graph = fn(graph)
        if level >= 1:
            print(f"[mirax] pass {name}: {1e3 * (time.perf_counter() - t0):.2f} ms, "
                  f"{len(graph.nodes)} nodes", file=sys.stderr)
        if level >= 2:
            print(graph, file=sys.stderr)
    return graph
