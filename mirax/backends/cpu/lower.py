"""CPU lowering: a Graph becomes one generated Python function of NumPy impl calls.

Each node is one line `v3 = _k3(v1, v2)` where `_k3` is the node's impl with its params
bound, so a call runs straight-line code with no interpretation left. MIRAX_DEBUG=3 prints
the source.
"""
from __future__ import annotations

import functools
import sys

from mirax.ir.graph import Graph


def lower(graph: Graph):
    names: dict = {}
    env: dict = {}

    def name(v):
        if v not in names:
            names[v] = f"v{len(names)}"
        return names[v]

    args = [name(v) for v in graph.inputs]
    lines = [f"def run({', '.join(args)}):"]
    for v, buf in graph.consts.items():
        env[name(v)] = buf
    for i, node in enumerate(graph.nodes):
        impl = node.prim.impl
        if impl is None:
            raise NotImplementedError(f"{node.prim.name}: no CPU implementation")
        k = f"_k{i}"
        env[k] = functools.partial(impl, **node.params) if node.params else impl
        outs = ", ".join(name(o) for o in node.outputs)
        ins = ", ".join(name(v) for v in node.inputs)
        lhs = outs + ("," if node.prim.multiple_results and len(node.outputs) == 1 else "")
        lines.append(f"    {lhs} = {k}({ins})  # {node.prim.name}")
    lines.append(f"    return [{', '.join(name(v) for v in graph.outputs)}]")
    src = "\n".join(lines)
    from mirax.compiler.pipeline import debug_level
    if debug_level() >= 3:
        print(f"# --- generated CPU plan for {graph.name} ---\n{src}", file=sys.stderr)
    exec(compile(src, f"<mirax plan {graph.name}>", "exec"), env)
    return env["run"]
