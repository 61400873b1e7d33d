"""Regrouping fusion nodes after `fuse`, for a backend that compiles each fusion node into
one kernel (CUDA): Graph -> Graph passes over the planned graph's top level, run in this
order.

- `fold_broadcasts`: fusion nodes read a broadcast's operand (per-row values as [B, T, 1])
  instead of the broadcast array, which is then not made.
- `rematerialize`: a fusion node (elementwise, or ending in a reduction) that reads values
  an elementwise group made recomputes them from that group's own inputs when it then
  reads no more arrays of its shape than before. The group stops storing values nobody
  reads any more. A tanh-gelu's forward stored six arrays of [B, T, 4D] for its backward;
  recomputed there, it stores one (the activation the next GEMM reads), and its backward
  reads the pre-activation instead of five arrays.
- `merge_elementwise`: an elementwise group joins its consumer (elementwise, or ending in
  a reduction: a bias gradient) where `fuse`, which grows one group along the node order,
  left them apart.

They read only the graph; recomputed values are bitwise what the group computed, up to a
float32 chain contracted to an FMA differently in two kernels.
"""
from __future__ import annotations

from mirax.compiler.cse import cse
from mirax.compiler.fusion import REDUCTIONS, elementwise_names
from mirax.ops.call import fusion_p
from mirax.graph.graph import Graph, Node, Var
from mirax.ops.shape import reshape_p

REMAT_MAX_OPS = 48  # at most this many ops recomputed into one consumer from one group


def _members(node, ew, reduction: bool = False) -> list | None:
    """The nodes `node` computes (itself, or a fusion node's chain) when they are all
    elementwise (with `reduction`, the last may be a reduction), else None."""
    nodes = list(node.params["graph"].nodes) if node.prim is fusion_p else [node]
    if node.prim is not fusion_p and (len(node.outputs) != 1 or node.prim.name not in ew
                                      and not (reduction and node.prim.name in REDUCTIONS)):
        return None
    last = len(nodes) - 1 if reduction and nodes[-1].prim.name in REDUCTIONS else len(nodes)
    return nodes if all(n.prim.name in ew for n in nodes[:last]) else None


def _domain(members) -> tuple:
    """The shape an elementwise chain (maybe ending in a reduction) runs over."""
    last = members[-1]
    v = last.inputs[0] if last.prim.name in REDUCTIONS else last.outputs[0]
    return tuple(v.aval.shape)


def _scalar_reads(n, scalar_of):
    """`n`'s inputs with 0-d values in place of their broadcasts (`scalar_of`), or None:
    none to swap, or `n` is no elementwise op whose result keeps its shape with them."""
    import numpy as np
    if n.prim.name in REDUCTIONS or not any(v in scalar_of for v in n.inputs):
        return None
    ins = [scalar_of.get(v, v) for v in n.inputs]
    if np.broadcast_shapes(*(tuple(v.aval.shape) for v in ins)) != \
            tuple(n.outputs[0].aval.shape):
        return None  # (a unary op of the broadcast: it reads the array)
    return ins


def _group(c, members, extra_outs, c_outs, scalar_of=None):
    """A fusion node computing `members`, with outputs `c_outs` + `extra_outs`; elementwise
    members read 0-d values in place of their broadcasts (`scalar_of`) where their results
    keep their shapes."""
    scalar_of = scalar_of or {}
    members = [n if (ins := _scalar_reads(n, scalar_of)) is None else
               Node(n.prim, ins, n.params, n.outputs, n.source) for n in members]
    made = {o for n in members for o in n.outputs}
    ins = {}
    for n in members:
        for v in n.inputs:
            if v not in made:
                ins[v] = None
    outputs = list(dict.fromkeys(list(c_outs) + list(extra_outs)))
    name = c.params["name"] if c.prim is fusion_p else c.prim.name
    name = name if name.startswith("merged_") else "merged_" + name
    sub = Graph(name)
    sub.inputs, sub.nodes, sub.outputs = list(ins), members, outputs
    return Node(fusion_p, list(ins), {"graph": sub, "name": name}, outputs, c.source)


# --- merging --------------------------------------------------------------------------------
def merge_elementwise(graph: Graph) -> Graph:
    """Merge elementwise groups into their consumers where `fuse` left them apart: an
    optimizer's update `b1 * m + (1 - b1) * g` starts two groups, and the chain
    m -> m_hat -> update -> new p spans several; after merging, one kernel per parameter
    reads p, m, v, g and writes p, m, v. A group P joins its consumer C when P is
    elementwise over C's domain (C: elementwise, or elementwise ending in a reduction) and
    every other use of P's outputs comes after C (the merged node sits at C's position;
    P's outputs used elsewhere stay outputs). A broadcast of a 0-d value feeding a group
    is read as that value (no materialized array)."""
    ew = elementwise_names()
    nodes = list(graph.nodes)
    outs = set(graph.outputs)
    # 0-d broadcasts: out var -> the scalar var
    scalar_of = {n.outputs[0]: n.inputs[0] for n in nodes
                 if n.prim.name == "broadcast_in_dim" and n.inputs[0].aval.ndim == 0
                 and n.outputs[0] not in outs}
    changed = True
    merged_any = False
    while changed:
        changed = False
        producer, users = _uses(nodes)
        for ci, c in enumerate(nodes):
            members = c.params["graph"].nodes if c.prim is fusion_p else [c]
            if (c.prim is fusion_p or c.prim.name in ew) and \
                    any(_scalar_reads(n, scalar_of) is not None for n in members):
                nodes[ci] = _group(c, members, [], c.outputs, scalar_of)
                changed = merged_any = True
                break
            cm = _members(c, ew, reduction=True)
            if cm is None:
                continue
            shape = _domain(cm)
            for v in dict.fromkeys(c.inputs):
                pi = producer.get(v)
                if pi is None:
                    continue
                p = nodes[pi]
                pm = _members(p, ew)
                if pm is None or not _joins(p, ci, users, shape):
                    continue
                keep = [o for o in p.outputs if _kept(o, ci, users, outs)]
                nodes[ci] = _group(c, pm + cm, keep, c.outputs, scalar_of)
                del nodes[pi]
                changed = merged_any = True
                break
            if changed:
                break
    if not merged_any:
        return graph
    used = set(graph.outputs)
    for n in nodes:
        used.update(n.inputs)
    nodes = [n for n in nodes if n.prim is fusion_p or any(o in used for o in n.outputs)]
    return graph.replace(nodes=nodes)


def _joins(p, ci, users, shape) -> bool:
    """Whether elementwise node `p` may join the node at `ci` whose domain is `shape`:
    its outputs have that shape and every other use of them comes after `ci`."""
    return all(tuple(o.aval.shape) == shape for o in p.outputs) and \
        not any(u != ci and u < ci for o in p.outputs for u in users.get(o, ()))


def _kept(o, ci, users, outs) -> bool:
    """Whether value `o` is stored for more than the node at `ci`: the graph returns it,
    or another node reads it."""
    return o in outs or any(u != ci for u in users.get(o, ()))


def _uses(nodes):
    """(var -> index of the node making it, var -> indices of the nodes reading it)."""
    producer, users = {}, {}
    for i, n in enumerate(nodes):
        for v in n.inputs:
            users.setdefault(v, []).append(i)
        for o in n.outputs:
            producer[o] = i
    return producer, users


# --- broadcasts read in place ---------------------------------------------------------------
def fold_broadcasts(graph: Graph) -> Graph:
    """Fusion nodes (and elementwise ones) read a broadcast's operand instead of the
    broadcast array where their elementwise ops broadcast it anyway: a layer norm's
    backward broadcasts per-row values [B, T] to [B, T, D] (broadcast_in_dim over dims
    (0, 1)); its fusion nodes now read them as [B, T, 1] (a reshape: a view), so the
    kernels index them and nothing of the full size is made or read. Only broadcasts that
    keep the operand's axis order, of an operand of rank >= 1 (0-d ones are
    merge_elementwise's), and only uses where every op's result keeps its shape; a
    broadcast nothing else reads is dropped."""
    ew = elementwise_names()
    nodes, extra = list(graph.nodes), {}
    made = {}  # broadcast output -> (its operand reshaped, the reshape node)
    for n in graph.nodes:
        if n.prim.name == "broadcast_in_dim" and n.inputs[0].aval.ndim >= 1 and \
                list(n.params["broadcast_dimensions"]) == \
                sorted(n.params["broadcast_dimensions"]):
            u, out = n.inputs[0], n.outputs[0]
            sizes = [1] * out.aval.ndim
            for d, size in zip(n.params["broadcast_dimensions"], u.aval.shape):
                sizes[d] = size
            r = Var(reshape_p.abstract_eval(u.aval, new_sizes=tuple(sizes)))
            made[out] = (r, Node(reshape_p, [u], {"new_sizes": tuple(sizes)}, [r], n.source))
    if not made:
        return graph
    changed = False
    for i, c in enumerate(nodes):
        if not (c.prim is fusion_p or c.prim.name in ew) or not any(v in made for v in c.inputs):
            continue
        members = c.params["graph"].nodes if c.prim is fusion_p else [c]
        swap = {v: made[v][0] for v in c.inputs
                if v in made and _folds(members, c.outputs, v, made[v][0], ew)}
        if not swap:
            continue
        body = [Node(m.prim, [swap.get(v, v) for v in m.inputs], m.params, m.outputs,
                     m.source) for m in members]
        if c.prim is fusion_p:
            new = Graph(c.params["graph"].name)
            new.inputs = list(dict.fromkeys(swap.get(v, v) for v in c.inputs))
            new.nodes, new.outputs = body, list(c.outputs)
            body = [Node(fusion_p, new.inputs, {**c.params, "graph": new}, c.outputs,
                         c.source)]
        nodes[i] = body[0]
        for v in swap:
            extra.setdefault(made[v][1], i)
        changed = True
    if not changed:
        return graph
    # each reshape goes right before its first reader; broadcasts nothing reads go
    first = {}
    for node, i in extra.items():
        first.setdefault(i, []).append(node)
    out = []
    for i, n in enumerate(nodes):
        out += first.get(i, [])
        out.append(n)
    used = set(graph.outputs) | {v for n in out for v in n.inputs}
    out = [n for n in out if n.prim.name != "broadcast_in_dim" or n.outputs[0] in used]
    return graph.replace(nodes=out)


def _folds(members, outputs, v, r, ew) -> bool:
    """Can the chain `members` read `r` (v's operand, reshaped) where it reads v: is every
    use elementwise, its result's shape the same with r in place of v?"""
    import numpy as np
    if v in outputs:
        return False
    for m in members:
        if v in m.inputs:
            if m.prim.name not in ew:
                return False
            shapes = [tuple((r if u is v else u).aval.shape) for u in m.inputs]
            if np.broadcast_shapes(*shapes) != tuple(m.outputs[0].aval.shape):
                return False
    return True


# --- rematerialization ----------------------------------------------------------------------
def rematerialize(graph: Graph) -> Graph:
    """Consumers recompute cheap elementwise values instead of reading them (module
    docstring). For each fusion node C in order and each elementwise group P whose values
    of C's domain C reads: the part of P that makes them (at most REMAT_MAX_OPS ops) is
    copied into C when the inputs it needs add no more arrays of C's size than C stops
    reading (at least one). Not where P runs anyway (it makes values the graph returns or
    others read) and can join C (merge_elementwise then makes them one node: an
    optimizer's new second moment, returned and read by the parameter's update, is one
    kernel, not two that read the gradient twice). Copies get fresh vars; C's chain is
    then CSE'd (two copies of one value are one). Finally every fusion node's outputs that
    nothing reads are dropped (a group nothing reads any more, whole)."""
    ew = elementwise_names()
    nodes = list(graph.nodes)
    producer, users = _uses(nodes)
    outs = set(graph.outputs)
    changed = False
    for ci, c in enumerate(nodes):
        cm = _members(c, ew, reduction=True)
        if cm is None or c.prim is not fusion_p:
            continue
        domain = _domain(cm)
        size = _size(domain)
        for pi in sorted({producer[v] for v in c.inputs if v in producer}):
            pm = _members(nodes[pi], ew)
            read = [v for v in dict.fromkeys(c.inputs)
                    if producer.get(v) == pi and tuple(v.aval.shape) == domain]
            if pm is None or not read or _joins(nodes[pi], ci, users, domain) and \
                    any(_kept(o, ci, users, outs) for o in nodes[pi].outputs):
                continue
            part = _slice(pm, read)
            made = {o for n in part for o in n.outputs}
            need = {v: None for n in part for v in n.inputs if v not in made}
            new = [v for v in need if v not in c.inputs]
            if len(part) > REMAT_MAX_OPS or \
                    sum(v.aval.size == size for v in new) > len(read):
                continue
            nodes[ci] = c = _recompute(c, part)
            changed = True
    if not changed:
        return graph
    return _drop_unread(graph.replace(nodes=nodes))


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _slice(members, targets) -> list:
    """The members needed to compute `targets`, in order."""
    need = set(targets)
    part = []
    for n in reversed(members):
        if any(o in need for o in n.outputs):
            part.append(n)
            need.update(n.inputs)
    return part[::-1]


def _recompute(c, part) -> Node:
    """Fusion node `c` computing `part` (copied, fresh vars) in place of reading its
    outputs."""
    sub = c.params["graph"]
    fresh: dict[Var, Var] = {}
    copies = []
    for n in part:
        outs = [Var(o.aval) for o in n.outputs]
        fresh.update(zip(n.outputs, outs))
        copies.append(Node(n.prim, [fresh.get(v, v) for v in n.inputs], n.params, outs,
                           n.source))
    body = copies + [Node(n.prim, [fresh.get(v, v) for v in n.inputs], n.params, n.outputs,
                          n.source) for n in sub.nodes]
    made = {o for n in body for o in n.outputs}
    ins = list(dict.fromkeys(v for n in body for v in n.inputs if v not in made))
    new = Graph(sub.name)
    new.inputs, new.nodes, new.outputs = ins, body, list(sub.outputs)
    new = cse(new)
    used = {v for n in new.nodes for v in n.inputs} | set(new.outputs)
    new.inputs = [v for v in new.inputs if v in used]
    return Node(fusion_p, new.inputs, {**c.params, "graph": new}, c.outputs, c.source)


def _drop_unread(graph: Graph) -> Graph:
    """Fusion nodes keep only the outputs something reads (their chains pruned to them);
    a fusion node with none goes."""
    live = set(graph.outputs)
    kept = []
    for n in reversed(graph.nodes):
        if n.prim is fusion_p and not all(o in live for o in n.outputs):
            outs = [o for o in n.outputs if o in live]
            if not outs:
                continue
            sub = n.params["graph"]
            need, body = set(outs), []
            for m in reversed(sub.nodes):
                if any(o in need for o in m.outputs):
                    body.append(m)
                    need.update(m.inputs)
            new = Graph(sub.name)
            new.inputs = [v for v in sub.inputs if v in need]
            new.nodes, new.outputs = body[::-1], outs
            n = Node(fusion_p, new.inputs, {**n.params, "graph": new}, outs, n.source)
        if n.prim is fusion_p or any(o in live for o in n.outputs) or not n.outputs:
            kept.append(n)
            live.update(n.inputs)
    return graph.replace(nodes=kept[::-1])
