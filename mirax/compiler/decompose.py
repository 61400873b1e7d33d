"""decompose: inline composite (fused) primitives into the basic primitives of their
bodies, recursively (a body may itself use composites, e.g. a backward op's body).

The graph is re-staged by an interpreter that, for a primitive with a decomposition,
runs the body on its staging tracers instead of recording a node; sub-graphs in params
(control flow, calls) are decomposed too. `keep` names primitives to leave alone (those a
backend claims as fused kernels).
"""
from __future__ import annotations

from mirax.core.array import Array
from mirax.core.trace import new_trace
from mirax.graph.build import StagingTrace, StagingTracer
from mirax.graph.graph import Graph, Var


class _DecomposeTrace(StagingTrace):
    def __init__(self, graph: Graph, keep: frozenset):
        super().__init__(graph)
        self.keep = keep

    def process_primitive(self, prim, tracers, params):
        if prim.decomposition is not None and prim.name not in self.keep:
            return prim.decomposition(*tracers, **params)
        params = {k: decompose(v, self.keep) if isinstance(v, Graph) else v
                  for k, v in params.items()}
        return super().process_primitive(prim, tracers, params)


def decompose(graph: Graph, keep=()) -> Graph:
    """A new graph computing the same outputs with every composite inlined."""
    keep = frozenset(keep)
    if not any(n.prim.decomposition is not None and n.prim.name not in keep or
               any(isinstance(v, Graph) for v in n.params.values()) for n in graph.nodes):
        return graph
    out = Graph(graph.name)
    trace = _DecomposeTrace(out, keep)
    with new_trace(trace, dynamic=True):
        env = {}
        for v in graph.inputs:
            nv = Var(v.aval, v.hint)
            out.inputs.append(nv)
            env[v] = StagingTracer(trace, nv)
        for v, buf in graph.consts.items():
            env[v] = trace.pure(Array(buf, v.aval.weak_type))
        for node in graph.nodes:
            res = trace.process_primitive(node.prim, [env[v] for v in node.inputs],
                                          node.params)
            res = res if node.prim.multiple_results else [res]
            env.update(zip(node.outputs, res))
        outs = [env[v] if isinstance(env[v], StagingTracer) and env[v]._trace is trace
                else trace.pure(env[v]) for v in graph.outputs]
    assert not trace.captured, "decompose: a body captured an outer tracer"
    out.outputs = [t.var for t in outs]
    out.in_tree, out.out_tree = graph.in_tree, graph.out_tree
    return out
