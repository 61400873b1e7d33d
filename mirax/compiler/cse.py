"""cse: common subexpression elimination.

Two nodes with the same primitive, the same input vars and equal params compute the same
value (primitives are pure; random ones take their key as an input), so the later one is
dropped and its outputs replaced by the earlier one's. Small constants with equal
contents are merged first, so `x * 2.0` written twice is caught too.
Commutative primitives (add, mul and the like) match with their inputs in either order,
so `a * b` and `b * a` (a product rule's two terms) are one node.
Invariant: params are compared by value with their types (1 and 1.0 differ), Graphs
inside params by identity; the output avals must agree as well.
"""
from __future__ import annotations

from mirax.graph.graph import Graph, Node, Var

SMALL_CONST = 64  # constants up to this many elements are merged by content
# bitwise commutative in IEEE arithmetic too (not max/min: signed zeros; not mul_strong)
COMMUTATIVE = frozenset({"add", "mul", "eq", "ne", "and", "or", "xor"})


def _params_key(params: dict):
    try:
        key = tuple(sorted((k, type(v), id(v) if isinstance(v, Graph) else v)
                           for k, v in params.items()))
        hash(key)
    except TypeError:  # an unhashable param: never merged
        return None
    return key


def cse(graph: Graph) -> Graph:
    subst: dict[Var, Var] = {}
    consts: dict = {}
    seen_consts: dict = {}
    for v, b in graph.consts.items():
        key = None
        if getattr(b, "size", SMALL_CONST + 1) <= SMALL_CONST and hasattr(b, "tobytes"):
            key = (b.shape, str(b.dtype), v.aval.weak_type, b.tobytes())
        if key is not None and key in seen_consts:
            subst[v] = seen_consts[key]
            continue
        if key is not None:
            seen_consts[key] = v
        consts[v] = b
    seen: dict = {}
    nodes: list[Node] = []
    for node in graph.nodes:
        ins = [subst.get(v, v) for v in node.inputs]
        pk = _params_key(node.params)
        key = None
        if pk is not None:
            key_ins = tuple(sorted(ins, key=id)) if node.prim.name in COMMUTATIVE else tuple(ins)
            key = (node.prim.name, key_ins, pk,
                   tuple((o.aval.shape, o.aval.dtype) for o in node.outputs))
            prev = seen.get(key)
            if prev is not None:
                subst.update(zip(node.outputs, prev.outputs))
                continue
        new = Node(node.prim, ins, node.params, node.outputs, node.source)
        if key is not None:
            seen[key] = new
        nodes.append(new)
    return graph.replace(nodes=nodes, consts=consts,
                         outputs=[subst.get(v, v) for v in graph.outputs])
