"""dce: drop nodes whose outputs nothing uses, and constants nothing reads."""
from __future__ import annotations

from mirax.graph.graph import Graph


def dce(graph: Graph) -> Graph:
    live = set(graph.outputs)
    kept = []
    for node in reversed(graph.nodes):
        if any(o in live for o in node.outputs):
            kept.append(node)
            live.update(node.inputs)
    kept.reverse()
    consts = {v: b for v, b in graph.consts.items() if v in live}
    return graph.replace(nodes=kept, consts=consts)
