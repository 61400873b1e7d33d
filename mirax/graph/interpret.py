"""`eval_graph`: run a Graph by binding each node's primitive, so that whatever
interpreters are active (jvp, vjp, vmap, staging) process it: one implementation of
each transform serves both functions and graphs."""
from __future__ import annotations

from mirax.core.array import Array
from mirax.graph.graph import Graph


def eval_graph(graph: Graph, *args) -> list:
    if len(args) != len(graph.inputs):
        raise TypeError(f"eval_graph: {graph.name} takes {len(graph.inputs)} inputs, "
                        f"got {len(args)}")
    env = dict(zip(graph.inputs, args))
    for v, buf in graph.consts.items():
        env[v] = Array(buf, v.aval.weak_type)
    for node in graph.nodes:
        out = node.prim.bind(*(env[v] for v in node.inputs), **node.params)
        if node.prim.multiple_results:
            env.update(zip(node.outputs, out))
        else:
            env[node.outputs[0]] = out
    return [env[v] for v in graph.outputs]
