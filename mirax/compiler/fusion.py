"""fuse: chains of elementwise ops, and reductions with their elementwise producers, into
`fusion` nodes that carry the chain as a sub-graph.

A backend claims fusion (`backend.fuses`): the CUDA backend turns each fusion node into one
generated kernel. The CPU backend does not fuse: a fusion node there could only run its
sub-graph's impls one by one (NumPy has no fused loops), which measured no faster than the
unfused plan and blocks buffer reuse across the boundary (benchmarks/overhead.py notes).

Grouping, in one walk over the nodes: an elementwise node joins the open group of one of
its inputs when it has that group's shape and each of its other inputs is either made in
the group or defined before the group's first node (so the fusion node can sit at the
group's first position without a cycle); otherwise it starts a group. A reduction joins
its input's group and closes it. Groups of one node stay as they are.
"""
from __future__ import annotations

from mirax.core.primitive import Primitive
from mirax.ir.graph import Graph, Node, Var

REDUCTIONS = {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod"}

# --- the fusion primitive ------------------------------------------------------------------
fusion_p = Primitive("fusion", multiple_results=True)
fusion_p.def_abstract_eval(lambda *avals, graph, name: graph.out_avals)


@fusion_p.def_impl
def _fusion_impl(*bufs, graph, name):
    run = graph.cache.get(("exe", "cpu"))
    if run is None:
        from mirax.backends import cpu_backend
        run = graph.cache[("exe", "cpu")] = cpu_backend.compile(graph)
    return run(*bufs)


def _via_call(rule):
    def apply(*args, graph, name):
        from mirax.transforms import jit
        return getattr(jit.call_p, rule)(*args, graph=graph)
    return apply


fusion_p.def_jvp(_via_call("jvp_rule"))
fusion_p.def_vjp(_via_call("vjp_rule"))
fusion_p.def_vmap(_via_call("vmap_rule"))
fusion_p.def_decompose(lambda *xs, graph, name: _eval(graph, xs))
fusion_p.inline_when_staged = lambda *xs, graph, name: _eval(graph, xs)


def _eval(graph, xs):
    from mirax.ir.interpret import eval_graph
    return eval_graph(graph, *xs)


def _elementwise_names() -> set[str]:
    from mirax.ops import elementwise as ew
    return set(ew.UNARY_OPS) | set(ew.BINARY_OPS) | {"select", "convert_element_type"}


# --- the pass ------------------------------------------------------------------------------
class _Group:
    def __init__(self, start: int, shape):
        self.start, self.shape = start, shape
        self.members: list[int] = []
        self.closed = False


def fuse(graph: Graph) -> Graph:
    ew = _elementwise_names()
    defined_at: dict[Var, int] = {}
    group_of: dict[Var, _Group] = {}
    groups: list[_Group] = []
    for i, node in enumerate(graph.nodes):
        name = node.prim.name
        if len(node.outputs) == 1 and (name in ew or name in REDUCTIONS):
            g = _join(node, group_of, defined_at, reduction=name in REDUCTIONS)
            if g is None and name in ew:
                g = _Group(i, node.outputs[0].aval.shape)
                groups.append(g)
            if g is not None:
                g.members.append(i)
                g.closed = g.closed or name in REDUCTIONS
                group_of[node.outputs[0]] = g
        for o in node.outputs:
            defined_at[o] = i
    return _rebuild(graph, [g for g in groups if len(g.members) > 1])


def _join(node, group_of, defined_at, reduction: bool):
    shape = node.inputs[0].aval.shape if reduction else node.outputs[0].aval.shape
    for v in node.inputs:
        g = group_of.get(v)
        if g is None or g.closed or g.shape != shape:
            continue
        if all(group_of.get(u) is g or defined_at.get(u, -1) < g.start for u in node.inputs):
            return g
    return None


def _rebuild(graph: Graph, groups: list[_Group]) -> Graph:
    if not groups:
        return graph.replace()
    nodes = graph.nodes
    member = {i: g for g in groups for i in g.members}
    used_outside: set[Var] = set(graph.outputs)
    for i, node in enumerate(nodes):
        g = member.get(i)
        for v in node.inputs:
            if g is None or not any(v in nodes[j].outputs for j in g.members):
                used_outside.add(v)
    out_nodes = []
    for i, node in enumerate(nodes):
        g = member.get(i)
        if g is None:
            out_nodes.append(node)
        elif i == g.start:
            out_nodes.append(_fusion_node(graph, [nodes[j] for j in g.members], used_outside))
    return graph.replace(nodes=out_nodes)


def _fusion_node(graph: Graph, members: list[Node], used_outside: set[Var]) -> Node:
    made = {o for n in members for o in n.outputs}
    ins: dict[Var, None] = {}
    for n in members:
        for v in n.inputs:
            if v not in made:
                ins[v] = None
    outs = [o for n in members for o in n.outputs if o in used_outside]
    names = [n.prim.name for n in members]
    name = "_".join(names[:4]) + ("_etc" if len(names) > 4 else "")
    sub = Graph(name)
    sub.inputs = list(ins)
    sub.nodes = list(members)
    sub.outputs = outs
    return Node(fusion_p, list(ins), {"graph": sub, "name": name}, outs, members[0].source)
