"""fuse: chains of elementwise ops, and reductions with their elementwise producers, into
`fusion` nodes that carry the chain as a sub-graph.

A backend claims fusion (`backend.fuses`) and may say which groups it wants
(`backend.fuse_group(members)`): the CUDA backend turns each fusion node into one
generated kernel. The CPU backend takes only groups big enough for cache-blocked
execution to win (backends/cpu/blocked.py); run op by op, a fusion node measured no
faster than the unfused plan and blocks buffer reuse across the boundary.

Grouping, in one walk over the nodes: an elementwise node joins the open group of one of
its inputs (or, when the backend wants sibling groups, one of the newest groups) when it
has that group's shape and none of its other inputs depends on the group (else the
fusion node would be its own ancestor; dependencies are bitsets of groups, expanded
through each group's ancestors when asked); otherwise it starts a group. A reduction
joins its input's group and closes it. Groups of one node stay as they are. The nodes are
then put back in topological order, each fusion node where all its inputs exist,
everything else in its original order where it can be.
"""
from __future__ import annotations

import functools
import heapq
from typing import Callable

from mirax.graph.graph import Graph, Node, Var
from mirax.ops.call import fusion_p
from mirax.ops import elementwise as ew

REDUCTIONS = {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod"}

@functools.cache
def elementwise_names() -> frozenset[str]:
    return frozenset(ew.UNARY_OPS) | set(ew.BINARY_OPS) | {"select", "convert_element_type"}


# --- the pass ------------------------------------------------------------------------------
class _Group:
    def __init__(self, gid: int, shape):
        self.gid, self.shape = gid, shape
        self.members: list[int] = []
        self.closed = False
        self.anc = 0   # bitset of the groups that the members' outside inputs depend on


def fuse(graph: Graph, accept: Callable | None = None, siblings: bool = False) -> Graph:
    """`accept(members)` (a backend's claim; default: every group) says whether a group of
    nodes becomes a fusion node; a refused group that ends in a reduction is offered again
    without it. With `siblings`, an elementwise node that cannot join a group of its inputs
    may join one of the newest open groups of its shape (one loop over shared inputs: W4's
    sin x, cos x, x*x...); else it starts a group."""
    ew = elementwise_names()
    dep: dict[Var, int] = {}   # var -> bitset of groups it depends on (expand with _reaches)
    group_of: dict[Var, _Group] = {}
    groups: list[_Group] = []
    for i, node in enumerate(graph.nodes):
        name = node.prim.name
        g = None
        if len(node.outputs) == 1 and (name in ew or name in REDUCTIONS):
            g = _join(node, group_of, dep, groups, name in REDUCTIONS, siblings)
            if g is None and name in ew:
                g = _Group(len(groups), node.outputs[0].aval.shape)
                groups.append(g)
        below = 0
        for v in node.inputs:
            if g is None or group_of.get(v) is not g:
                below |= dep.get(v, 0)
        if g is not None:
            g.members.append(i)
            g.closed = g.closed or name in REDUCTIONS
            g.anc |= below
            group_of[node.outputs[0]] = g
            below = 1 << g.gid
        for o in node.outputs:
            dep[o] = below
    nodes = graph.nodes
    kept = []
    for g in groups:
        if accept is not None and len(g.members) > 1 and \
                not accept([nodes[i] for i in g.members]):
            if nodes[g.members[-1]].prim.name in REDUCTIONS:
                g.members.pop()
            if len(g.members) > 1 and not accept([nodes[i] for i in g.members]):
                continue
        if len(g.members) > 1:
            kept.append(g)
    return _rebuild(graph, kept)


def _reaches(bits: int, target: int, groups) -> bool:
    """Whether a value depending on the groups in `bits` depends on group `target`
    (through any path: group ancestors are expanded)."""
    seen = 0
    while bits:
        if bits >> target & 1:
            return True
        seen |= bits
        nxt = 0
        while bits:
            low = bits & -bits
            nxt |= groups[low.bit_length() - 1].anc
            bits ^= low
        bits = nxt & ~seen
    return False


def _join(node, group_of, dep, groups, reduction: bool, siblings: bool):
    """An open group that `node` may join, one of its inputs' groups first, else one of
    the newest groups: same shape, and no input made outside the group depends on it (the
    fusion node would then be its own ancestor)."""
    shape = node.inputs[0].aval.shape if reduction else node.outputs[0].aval.shape
    candidates = [group_of.get(v) for v in node.inputs]
    if siblings and not reduction:
        candidates += [g for g in reversed(groups[-8:]) if g.shape == shape]
    for g in dict.fromkeys(candidates):
        if g is None or g.closed or g.shape != shape:
            continue
        if not any(group_of.get(u) is not g and _reaches(dep.get(u, 0), g.gid, groups)
                   for u in node.inputs):
            return g
    return None


def _rebuild(graph: Graph, groups: list[_Group]) -> Graph:
    """Each group becomes one fusion node; nodes are put back in topological order, in
    their original order where they can be (a group goes where all its inputs exist)."""
    if not groups:
        return graph.replace()
    nodes = graph.nodes
    unit = list(range(len(nodes)))    # node index -> unit key (its group's first member)
    for g in groups:
        for i in g.members:
            unit[i] = g.members[0]
    made_by: dict[Var, int] = {}
    for i, node in enumerate(nodes):
        for o in node.outputs:
            made_by[o] = unit[i]
    used_outside: set[Var] = set(graph.outputs)
    needs: dict[int, set] = {}
    for i, node in enumerate(nodes):
        for v in node.inputs:
            p = made_by.get(v)
            if p != unit[i]:
                used_outside.add(v)
                if p is not None:
                    needs.setdefault(unit[i], set()).add(p)
    users: dict[int, list] = {}
    waiting = {}
    for u, ps in needs.items():
        waiting[u] = len(ps)
        for p in ps:
            users.setdefault(p, []).append(u)
    by_key = {g.members[0]: g for g in groups}
    ready = [u for u in dict.fromkeys(unit) if not waiting.get(u)]
    heapq.heapify(ready)
    out_nodes = []
    while ready:
        u = heapq.heappop(ready)
        g = by_key.get(u)
        out_nodes.append(nodes[u] if g is None else
                         _fusion_node(graph, [nodes[j] for j in g.members], used_outside))
        for w in users.get(u, ()):
            waiting[w] -= 1
            if not waiting[w]:
                heapq.heappush(ready, w)
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
