"""simplify: constant folding and algebraic identities (the first pass).

Walks the nodes once in order with a substitution map (old var -> var that replaces it):
- a node whose inputs are all constants is evaluated with its reference impl and becomes
  a constant, when inputs and result are at most FOLD_MAX elements (iota-made masks such
  as jacrev's identity seed; a broadcast only up to SMALL);
- an elementwise op on a broadcast scalar reads the scalar (NumPy broadcasts it): no
  array of one value is made (grad's seeds, their fan-out sums);
- identities drop a node in favour of one of its inputs: x*1, 1*x, x+0, 0+x, x-0, x/1,
  neg(neg x), convert_element_type to the same dtype, select with a constant predicate,
  reshape / transpose / broadcast to what the input already is;
- chains collapse into one node: transpose of transpose, reshape of reshape, broadcast of
  broadcast;
- a matrix product with a diagonal matrix (identity constant times a vector: jacrev's seed
  after an elementwise op) is a scaling of the other operand;
- a sum of two zero pads that put their operands side by side along one axis is the pad
  of their concatenation (jnp.split's transpose: one write, no sum);
- a transpose that swaps the two free-axis blocks of a dot_general used only by it becomes
  the dot_general of the swapped operands (the result comes out in the wanted layout: no
  transposed view feeding later elementwise ops, no copy).
Invariant: every replacement has the replaced var's shape and dtype; nothing is edited in
place (new nodes, same vars). Dead producers are left for dce.
"""
from __future__ import annotations

import numpy as np

from mirax.graph.graph import Graph, Node, Var
from mirax.ops import elementwise as ew
from mirax.ops.elementwise import mul_p
from mirax.ops.shape import broadcast_in_dim_p, concatenate_p, pad_p, reshape_p, transpose_p

SMALL = 1024  # constants up to this many elements count as values in the identities
FOLD_MAX = 1 << 18  # fold only when every constant input and the result have at most this
# many (a broadcast only up to SMALL: a broadcast scalar stays a scalar, see below)


def simplify(graph: Graph) -> Graph:
    consts = dict(graph.consts)
    subst: dict[Var, Var] = {}
    producer: dict[Var, Node] = {}
    nodes: list[Node] = []
    for node in graph.nodes:
        ins = [subst.get(v, v) for v in node.inputs]
        if _fold(node, ins, consts):
            continue
        new = None
        for rule in (*RULES.get(node.prim.name, ()), _elementwise_rule(node.prim.name)):
            if new is None and rule is not None:
                new = rule(node, ins, consts, producer)
        if isinstance(new, Var):
            subst[node.outputs[0]] = new
            continue
        if isinstance(new, list):  # new nodes, the last one defining the node's outputs
            for n in new[:-1]:
                if not _fold(n, n.inputs, consts):
                    nodes.append(n)
                    producer[n.outputs[0]] = n
            new = new[-1]
        if new is None:
            new = Node(node.prim, ins, node.params, node.outputs, node.source)
        nodes.append(new)
        for o in new.outputs:
            producer[o] = new
    outputs = [subst.get(v, v) for v in graph.outputs]
    return graph.replace(nodes=_swap_transposed_dots(nodes, outputs), consts=consts,
                         outputs=outputs)


def _swap_transposed_dots(nodes, outputs):
    """transpose(dot_general(a, b)) -> dot_general(b, a) where the transpose moves the
    rhs free axes before the lhs free ones and the dot has no other use. (The dot left
    behind is dead; dce drops it.)"""
    uses: dict[Var, int] = {}
    for v in outputs:
        uses[v] = uses.get(v, 0) + 1
    for n in nodes:
        for v in n.inputs:
            uses[v] = uses.get(v, 0) + 1
    producer = {n.outputs[0]: n for n in nodes if n.prim.name == "dot_general"}
    out = []
    for n in nodes:
        d = producer.get(n.inputs[0]) if n.prim.name == "transpose" else None
        if d is not None and uses[n.inputs[0]] == 1:
            (lc, rc), (lb, rb) = d.params["dimension_numbers"]
            nb = len(lb)
            nl = len(d.inputs[0].aval.shape) - nb - len(lc)
            nr = len(d.inputs[1].aval.shape) - nb - len(rc)
            swapped = (tuple(range(nb)) + tuple(range(nb + nl, nb + nl + nr)) +
                       tuple(range(nb, nb + nl)))
            if nl and nr and tuple(n.params["permutation"]) == swapped:
                params = {**d.params, "dimension_numbers": ((rc, lc), (rb, lb))}
                n = Node(d.prim, [d.inputs[1], d.inputs[0]], params, n.outputs, n.source)
        out.append(n)
    return out


def _fold(node, ins, consts) -> bool:
    prim = node.prim
    if prim.impl is None or any(isinstance(p, Graph) for p in node.params.values()):
        return False
    if prim.named_axes:   # a collective: its value depends on the other members (and one
        return False      # graph serves them all: axis_index must not become a constant)
    limit = SMALL if prim.name == "broadcast_in_dim" else FOLD_MAX
    if not all(v in consts and v.aval.size <= FOLD_MAX for v in ins):
        return False
    if any(o.aval.size > limit for o in node.outputs):
        return False
    try:
        with np.errstate(all="ignore"):
            out = prim.impl(*(consts[v] for v in ins), **node.params)
    except Exception:  # leave it to run time (and its error message) instead
        return False
    outs = out if prim.multiple_results else [out]
    # contiguous: a folded transpose is a view, which every use would read strided
    bufs = [b if b.ndim == 0 or b.flags.c_contiguous else np.ascontiguousarray(b)
            for b in map(np.asarray, outs)]
    if any(b.shape != o.aval.shape or b.dtype != o.aval.dtype
           for b, o in zip(bufs, node.outputs)):
        return False
    for o, b in zip(node.outputs, bufs):
        consts[o] = b
    return True


# --- identities ---------------------------------------------------------------------------
def _is_const(v, consts, value, producer=None) -> bool:
    """`v` is a constant (or a broadcast of one) whose every entry equals `value`."""
    p = producer.get(v) if producer is not None else None
    if p is not None and p.prim.name == "broadcast_in_dim":
        v = p.inputs[0]
    b = consts.get(v)
    return b is not None and b.size <= SMALL and bool(np.all(b == value))


def _same(v, out) -> bool:
    return v.aval.shape == out.aval.shape and v.aval.dtype == out.aval.dtype


def _unit(left, right):
    """x op c -> x when c equals `right` (and c op x -> x when c equals `left`)."""
    def rule(node, ins, consts, producer):
        x, y = ins
        out = node.outputs[0]
        if right is not None and _is_const(y, consts, right, producer) and _same(x, out):
            return x
        if left is not None and _is_const(x, consts, left, producer) and _same(y, out):
            return y
        return None
    return rule


def _neg(node, ins, consts, producer):
    p = producer.get(ins[0])
    if p is not None and p.prim.name == "neg" and _same(p.inputs[0], node.outputs[0]):
        return p.inputs[0]
    return None


def _convert(node, ins, consts, producer):
    return ins[0] if _same(ins[0], node.outputs[0]) else None


def _select(node, ins, consts, producer):
    pred, a, b = ins
    out = node.outputs[0]
    if _is_const(pred, consts, True, producer) and _same(a, out):
        return a
    if _is_const(pred, consts, False, producer) and _same(b, out):
        return b
    if a is b and _same(a, out):
        return a
    return None


def _transpose(node, ins, consts, producer):
    x, perm = ins[0], node.params["permutation"]
    p = producer.get(x)
    if p is not None and p.prim.name == "transpose":  # out axis i = inner axis perm[i]
        x, perm = p.inputs[0], tuple(p.params["permutation"][j] for j in perm)
    if perm == tuple(range(len(perm))):
        return x
    if x is ins[0]:
        return None
    return Node(node.prim, [x], {**node.params, "permutation": perm}, node.outputs,
                node.source)


def _reshape(node, ins, consts, producer):
    x = ins[0]
    p = producer.get(x)
    if p is not None and p.prim.name == "reshape":
        x = p.inputs[0]
    if x.aval.shape == node.outputs[0].aval.shape:
        return x
    if x is ins[0]:
        return None
    return Node(node.prim, [x], node.params, node.outputs, node.source)


def _broadcast(node, ins, consts, producer):
    x, dims = ins[0], node.params["broadcast_dimensions"]
    p = producer.get(x)
    if p is not None and p.prim.name == "broadcast_in_dim":  # x axis i -> dims[inner[i]]
        x, dims = p.inputs[0], tuple(dims[d] for d in p.params["broadcast_dimensions"])
    out = node.outputs[0]
    if x.aval.shape == out.aval.shape and dims == tuple(range(len(dims))):
        return x
    if x is ins[0]:
        return None
    return Node(node.prim, [x], {**node.params, "broadcast_dimensions": dims}, node.outputs,
                node.source)


def _scalar_of(v, producer):
    """The 0-d operand of a broadcast that makes `v`, or None."""
    p = producer.get(v)
    if p is not None and p.prim.name == "broadcast_in_dim" and p.inputs[0].aval.shape == ():
        return p.inputs[0]
    return None


def _elementwise_rule(name):
    if name not in ew.BINARY_OPS and name not in ew.UNARY_OPS:
        return None
    return _scalar_operands


def _scalar_operands(node, ins, consts, producer):
    """An elementwise op reads a broadcast scalar as the scalar itself (the op broadcasts;
    no big array of one value); when every operand is one, the op runs on the scalars
    and its result is broadcast (and folds when they are constants)."""
    scalars = [_scalar_of(v, producer) for v in ins]
    if all(s is None for s in scalars):
        return None
    out = node.outputs[0]
    new_ins = [v if s is None else s for v, s in zip(ins, scalars)]
    if any(s is None and v.aval.shape == out.aval.shape for v, s in zip(ins, scalars)):
        return Node(node.prim, new_ins, node.params, node.outputs, node.source)
    if any(s is None for s in scalars):
        return None     # the other operands broadcast too: keep the full-size one
    small = Var(out.aval.update(shape=()))
    bcast = producer[ins[scalars.index(next(s for s in scalars if s is not None))]]
    return [Node(node.prim, new_ins, node.params, [small], node.source),
            Node(bcast.prim, [small], {**bcast.params, "shape": tuple(out.aval.shape),
                                       "broadcast_dimensions": ()}, node.outputs,
                 node.source)]


def _strong(node, ins, consts, producer):
    """mul_strong (0 * inf = 0) is a plain mul when that case cannot arise: the first
    factor is a nonzero constant or the second a finite one; then x*1 folds as usual."""
    unit = _unit(1, 1)(node, ins, consts, producer)
    if unit is not None:
        return unit
    g, d = (_const_value(v, consts, producer) for v in ins)
    if (g is not None and np.all(g != 0)) or (d is not None and np.all(np.isfinite(d))):
        plain = Node(mul_p, ins, node.params, node.outputs, node.source)
        return _unit(1, 1)(plain, ins, consts, producer) or plain
    return None


def _const_value(v, consts, producer):
    p = producer.get(v)
    if p is not None and p.prim.name == "broadcast_in_dim":
        v = p.inputs[0]
    b = consts.get(v)
    return b if b is not None and b.size <= SMALL else None


def _diag_of(v, consts, producer):
    """(n, o) when `v` is, up to reshapes adding unit axes, identity(n) * o: the diagonal
    matrix of o (jacrev's seed times the cotangent of an elementwise op), else None."""
    p = producer.get(v)
    while p is not None and p.prim.name == "reshape" and \
            _squeezed(p.inputs[0].aval.shape) == _squeezed(v.aval.shape):
        v = p.inputs[0]
        p = producer.get(v)
    shape = v.aval.shape
    if p is None or p.prim.name not in ("mul", "mul_strong") or len(shape) != 2 or \
            shape[0] != shape[1]:
        return None
    n = shape[0]
    for e, o in (p.inputs, p.inputs[::-1]):
        eye = consts.get(e)
        if eye is None or eye.shape != (n, n) or not _is_identity(eye):
            continue
        q = producer.get(o)   # o broadcast along either axis: the diagonal is o either way
        if q is not None and q.prim.name == "broadcast_in_dim" and \
                q.inputs[0].aval.shape == (n,):
            o = q.inputs[0]
        if o.aval.shape == (n,) and o.aval.dtype == v.aval.dtype:
            return n, o
    return None


def _squeezed(shape) -> tuple:
    return tuple(d for d in shape if d != 1)


def _is_identity(b) -> bool:
    n = b.shape[0]
    return bool(np.all(np.diagonal(b) == 1)) and np.count_nonzero(b) == n


def _diag_dot(node, ins, consts, producer):
    """diag(o) . B -> o * B (B's contracted axis first): a scaling, not a matrix product
    (jacrev seeds the identity; the first cotangent product is diagonal). Exact: the
    product's other terms are zeros (and 0 * inf counts as 0, as in mul_strong)."""
    (lc, rc), (lb, rb) = node.params["dimension_numbers"]
    a, b = ins
    out = node.outputs[0]
    if lb or rb or len(lc) != 1 or b.aval.dtype != out.aval.dtype:
        return None
    d = _diag_of(a, consts, producer)
    if d is None or a.aval.shape[lc[0]] != d[0]:
        return None
    n, o = d
    perm = (rc[0],) + tuple(i for i in range(len(b.aval.shape)) if i != rc[0])
    bt_shape = tuple(b.aval.shape[i] for i in perm)
    new = []
    if perm != tuple(range(len(perm))):
        bt = Var(out.aval.update(shape=bt_shape))
        new.append(Node(transpose_p, [b], {"permutation": perm}, [bt], node.source))
        b = bt
    ob = Var(out.aval.update(shape=bt_shape))
    prod = Var(out.aval.update(shape=bt_shape))
    new += [Node(broadcast_in_dim_p, [o], {"shape": bt_shape, "broadcast_dimensions": (0,)},
                 [ob], node.source),
            Node(mul_p, [ob, b], {}, [prod], node.source),
            Node(reshape_p, [prod], {"new_sizes": tuple(out.aval.shape)}, node.outputs,
                 node.source)]
    return new


def _adjacent_pads(node, ins, consts, producer):
    """pad(a) + pad(b), zero pads along one axis that put a and b side by side -> pad of
    concatenate(a, b) (or the concatenate alone where it fills the axis): one array
    written, no sum. The transpose of cutting an array into pieces (jnp.split, a fused
    qkv projection's q, k, v) is such a sum of pads, one per piece."""
    pa, pb = producer.get(ins[0]), producer.get(ins[1])
    out = node.outputs[0]
    if pa is None or pb is None or pa.prim is not pad_p or pb.prim is not pad_p or \
            not (_same(ins[0], out) and _same(ins[1], out)) or \
            pa.inputs[0].aval.dtype != out.aval.dtype or \
            pb.inputs[0].aval.dtype != out.aval.dtype or \
            not (_is_const(pa.inputs[1], consts, 0, producer) and
                 _is_const(pb.inputs[1], consts, 0, producer)):
        return None
    ca, cb = pa.params["padding_config"], pb.params["padding_config"]
    axes = [d for d, (x, y) in enumerate(zip(ca, cb)) if x != (0, 0, 0) or y != (0, 0, 0)]
    if len(axes) != 1:
        return None
    d = axes[0]
    if ca[d][0] > cb[d][0]:
        pa, pb, ca, cb = pb, pa, cb, ca
    (la, ha, ia), (lb, hb, ib) = ca[d], cb[d]
    if ia or ib or min(la, ha, lb, hb) < 0 or la + pa.inputs[0].aval.shape[d] != lb:
        return None
    shape = list(out.aval.shape)
    shape[d] -= la + hb
    pieces = []   # a concatenate this rule made of earlier pieces: its pieces
    for v in (pa.inputs[0], pb.inputs[0]):
        p = producer.get(v)
        joined = p is not None and p.prim is concatenate_p and p.params["dimension"] == d
        pieces += list(p.inputs) if joined else [v]
    cat = Node(concatenate_p, pieces, {"dimension": d},
               [Var(out.aval.update(shape=tuple(shape)))], node.source)
    if la == 0 and hb == 0:
        return [Node(cat.prim, cat.inputs, cat.params, node.outputs, node.source)]
    config = tuple((la, hb, 0) if i == d else (0, 0, 0) for i in range(len(shape)))
    return [cat, Node(pad_p, [cat.outputs[0], pa.inputs[1]], {"padding_config": config},
                      node.outputs, node.source)]


RULES = {  # primitive name -> its rules, tried in order (the first that applies wins)
    "dot_general": (_diag_dot,),
    "mul": (_unit(1, 1),),
    "mul_strong": (_strong,),
    "add": (_unit(0, 0), _adjacent_pads),
    "sub": (_unit(None, 0),),
    "div": (_unit(None, 1),),
    "neg": (_neg,),
    "convert_element_type": (_convert,),
    "select": (_select,),
    "transpose": (_transpose,),
    "reshape": (_reshape,),
    "broadcast_in_dim": (_broadcast,),
}
