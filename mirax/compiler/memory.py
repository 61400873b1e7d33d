"""plan_memory: lifetimes, buffer reuse and donation (the last pass before lowering).

Reads a Graph and attaches a `MemoryPlan` (in `graph.cache["memory_plan"]`); the nodes are
unchanged. For each node it says which dead input buffer the node may write its result
into (`out=`), and which intermediates die after it (so lowering can free them early).

Invariant (why reuse is safe): a var's buffer is reused only when
- the node can write its result into a given buffer (`writes_into(node)`, a backend claim:
  on the CPU, elementwise ufunc impls), and its single output has the var's shape and dtype
  and at least one dimension (0-d ufunc results are NumPy scalars, not buffers);
- the var dies at this node and is not a graph output;
- the var owns its buffer: it was made by a writes-into node (a fresh array), or it is a
  donated input (`jit(donate_argnums=...)`);
- every reader of the var is a writes-into node, so no view of its buffer (reshape,
  transpose, slice results) can still be alive.
"""
from __future__ import annotations

from typing import Callable

from mirax.graph.graph import Graph, Var
from mirax.graph.printer import listing

FREE_MIN_SIZE = 4096  # free intermediates early only when they are this big (elements)


class MemoryPlan:
    """reuse: node index -> input position whose buffer receives the output.
    free_after: node index -> vars that die after it (big ones only)."""

    def __init__(self, reuse: dict[int, int], free_after: dict[int, list[Var]],
                 donated: tuple[int, ...]):
        self.reuse, self.free_after, self.donated = reuse, free_after, donated

    def __repr__(self):
        return f"MemoryPlan(reuse={self.reuse}, donated={self.donated})"


def never(node) -> bool:
    return False


def plan_memory(graph: Graph, donated: tuple[int, ...] = (),
                writes_into: Callable = never) -> Graph:
    outputs = set(graph.outputs)
    last_use: dict[Var, int] = {}
    readers: dict[Var, list] = {}
    for i, node in enumerate(graph.nodes):
        for v in node.inputs:
            last_use[v] = i
            readers.setdefault(v, []).append(node)
    owned = {graph.inputs[i] for i in donated if i < len(graph.inputs)}
    reuse: dict[int, int] = {}
    free_after: dict[int, list[Var]] = {}
    taken: set[Var] = set()
    for i, node in enumerate(graph.nodes):
        ok = writes_into(node)
        if ok and len(node.outputs) == 1:
            o = node.outputs[0].aval
            for k, v in enumerate(node.inputs):
                a = v.aval
                if (v in owned and v not in taken and v not in outputs and last_use[v] == i
                        and a.shape == o.shape and a.dtype == o.dtype and a.shape
                        and all(writes_into(r) for r in readers[v])):
                    reuse[i] = k
                    taken.add(v)
                    break
        if ok:
            owned.update(node.outputs)
        dead = [v for v in dict.fromkeys(node.inputs)
                if last_use[v] == i and v not in outputs and v not in graph.consts
                and v.aval.size >= FREE_MIN_SIZE]
        if dead:
            free_after[i] = dead
    g = graph.replace()
    g.cache["memory_plan"] = MemoryPlan(reuse, free_after, tuple(donated))
    return g


def format_plan(graph: Graph) -> str:
    """The listing with each reusing node annotated `<- writes into NAME`: for tests and
    MIRAX_DEBUG=2."""
    plan = graph.cache.get("memory_plan")
    text = listing(graph).splitlines()
    if plan is None:
        return "\n".join(text)
    # listing rows: header, consts, then one row per node at indent 2 (a node's sub-graph
    # rows, deeper, follow it)
    first = 1 + len(graph.consts)
    rows = [r for r in range(first, len(text))
            if text[r].startswith("  ") and not text[r].startswith("   ")]
    for i, k in sorted(plan.reuse.items()):
        row = text[rows[i]]
        var = row.split("=", 1)[1].split()[1:][k].rstrip(",")
        text[rows[i]] = row.split("      #")[0].rstrip() + f"  <- writes into {var}"
    return "\n".join(text)
