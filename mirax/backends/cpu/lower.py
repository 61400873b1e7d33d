"""CPU lowering: a Graph becomes one generated Python function of NumPy calls.

Each node is one line. Elementwise primitives whose impl is a NumPy ufunc are called
directly (`v3 = _add(v1, v2)`), writing into a dead input's buffer (`out=v1`) when the
memory plan (compiler/memory.py) says it is safe; impls that only wrap a ufunc in
`np.errstate` are called as raw ufuncs inside one errstate block for the whole function
(one context switch per call instead of one per op). Other nodes call their impl with the
params bound (`v5 = _k5(v4)`). Big intermediates are freed after their last use.
MIRAX_DEBUG=3 prints the source.
"""
from __future__ import annotations

import functools
import sys

import numpy as np

from mirax.ir.graph import Graph

_ERRSTATE = "_np.errstate(divide='ignore', invalid='ignore', over='ignore')"


def ufunc_of(prim):
    """(ufunc, needs_errstate) when `prim`'s CPU impl is a ufunc, or wraps one only to
    silence floating-point warnings; else (None, False)."""
    impl = prim.impl
    if isinstance(impl, np.ufunc):
        return impl, False
    u = getattr(impl, "ufunc", None)
    if isinstance(u, np.ufunc):
        return u, True
    return None, False


def writes_into(node) -> bool:
    """Whether the lowered node can write its result into a given buffer (`out=`)."""
    return not node.params and ufunc_of(node.prim)[0] is not None


def lower(graph: Graph):
    from mirax.backends import cpu_backend
    names: dict = {}
    env: dict = {"_np": np}

    def name(v):
        if v not in names:
            names[v] = f"v{len(names)}"
        return names[v]

    plan = graph.cache.get("memory_plan")
    reuse = plan.reuse if plan is not None else {}
    free_after = plan.free_after if plan is not None else {}
    args = [name(v) for v in graph.inputs]
    for v, buf in graph.consts.items():
        env[name(v)] = buf
    n_err = sum(1 for n in graph.nodes if not n.params and ufunc_of(n.prim)[1])
    body = []
    for i, node in enumerate(graph.nodes):
        prim = node.prim
        if prim.impl is None:
            raise NotImplementedError(f"{prim.name}: no CPU implementation")
        cpu_backend.report[(prim.name, "native")] += 1
        outs = ", ".join(name(o) for o in node.outputs)
        ins = [name(v) for v in node.inputs]
        u, err = ufunc_of(prim) if not node.params else (None, False)
        if u is not None and (not err or n_err > 1):
            k = f"_{u.__name__}"
            env[k] = u
            if i in reuse:
                ins.append(f"out={ins[reuse[i]]}")
        else:
            k = f"_k{i}"
            env[k] = functools.partial(prim.impl, **node.params) if node.params else prim.impl
        lhs = outs + ("," if prim.multiple_results and len(node.outputs) == 1 else "")
        body.append(f"{lhs} = {k}({', '.join(ins)})  # {prim.name}")
        if i in free_after:
            body.append(f"del {', '.join(name(v) for v in free_after[i])}")
    body.append(f"return [{', '.join(name(v) for v in graph.outputs)}]")
    if n_err > 1:
        body = [f"with {_ERRSTATE}:"] + ["    " + line for line in body]
    src = "\n".join([f"def run({', '.join(args)}):"] + ["    " + line for line in body])
    from mirax.compiler.pipeline import debug_level
    if debug_level() >= 3:
        print(f"# --- generated CPU plan for {graph.name} ---\n{src}", file=sys.stderr)
    exec(compile(src, f"<mirax plan {graph.name}>", "exec"), env)
    return env["run"]
