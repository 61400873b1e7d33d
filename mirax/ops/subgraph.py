"""Sub-graph machinery shared by the control-flow primitives (ops/control_flow.py: cond,
switch; ops/loops.py: while_loop, fori_loop; ops/scan.py: scan, map).

Where it sits: a control-flow wrapper traces each user function once into a Graph
(`trace_fn`) that becomes a param of its primitive; values the function closes over that
belong to an enclosing transform (the "captured" tracers) become explicit leading operands.
Impls run the sub-graphs' compiled executables (`compiled`). Rules transform the sub-graphs
by tracing `eval_graph` under the transform (`jvp_graph`, `vjp_graph`, `vmap_graph`, as
jit's `call` does); the results are cached on the graph, keyed by the rule's static choices.
"""
from __future__ import annotations

from mirax.core import dtypes, runtime, tree
from mirax.core.avals import ShapedArray
from mirax.core.trace import aval_of
from mirax.graph.build import trace_to_graph
from mirax.graph.graph import Graph
from mirax.graph.interpret import eval_graph
from mirax.ops.common import operand, short
from mirax.core.runtime import executable
from mirax.ops import elementwise as elementwise_ops
from mirax.interpreters.jvp import instantiate, jvp_flat
from mirax.interpreters.vjp import vjp_flat
from mirax.interpreters.vmap import BatchTracer, batching, inherited_axis_name, move_bdim


# --- tracing user functions ---------------------------------------------------------------
def trace_fn(fn, in_avals, name, op):
    """Trace `fn(*leaves) -> (out_leaves, out_tree)`; returns (graph, consts, out_tree).

    The graph's inputs are (consts, args): captured tracers of enclosing transforms first."""
    box = []

    def flat(*xs):
        leaves, out_tree = fn(*xs)
        box.append(out_tree)
        return [operand(o, op) for o in leaves]

    graph, captured = trace_to_graph(flat, list(in_avals), name)
    n = len(in_avals)
    graph.inputs = graph.inputs[n:] + graph.inputs[:n]
    return graph, list(captured), box[0]


def same_aval(a: ShapedArray, b: ShapedArray) -> bool:
    return tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype


def is_float(x) -> bool:
    return dtypes.is_inexact(aval_of(x).dtype)


def rule_graph(fn, in_avals, name) -> Graph:
    """Trace a rule's helper function; it closes over nothing traced."""
    graph, captured = trace_to_graph(fn, list(in_avals), name)
    assert not captured, "control flow rule closed over a traced value"
    return graph


def cached(graph: Graph, key, build):
    hit = graph.cache.get(key)
    if hit is None:
        hit = graph.cache.setdefault(key, build())  # concurrent builds: the first wins
    return hit


def compiled(graph: Graph, bufs):
    """(the executable of `graph` on the platform of `bufs`, that backend): the impls of
    cond / while / scan are one driver for every backend."""
    be = runtime.backend(runtime.platform_of(bufs))
    return executable(graph, be.platform), be


def carry_check(op, what, init_tree, in_avals, out_avals, allow_promote=True):
    """Raise `scan: carry[1] changed from f32[3] to f32[4]`; return the leaves whose
    weak-typed input should be promoted to the body's output dtype (JAX's rule)."""
    paths = [tree.keystr(p) for p, _ in tree.leaves_with_path(
        tree.unflatten(init_tree, [0] * len(in_avals)))]
    promote = []
    for i, (a, b) in enumerate(zip(in_avals, out_avals)):
        if same_aval(a, b):
            continue
        if allow_promote and a.weak_type and tuple(a.shape) == tuple(b.shape):
            promote.append((i, b.dtype))
            continue
        raise TypeError(f"{op}: {what}{paths[i]} changed from {short(a)} to {short(b)}; "
                        f"the {what} must keep its shape and dtype across iterations")
    return promote


def promote_weak(leaves, promote):
    leaves = list(leaves)
    for i, dt in promote:
        leaves[i] = elementwise_ops.convert_element_type(leaves[i], dt)
    return leaves


# --- graph transforms shared by the rules -------------------------------------------------
def jvp_graph(graph: Graph, nz: tuple, inst: tuple):
    """graph's jvp: inputs (primals, tangents where nz), outputs (primals, tangents where
    nonzero or inst). Returns (graph, out_nz)."""
    n = len(graph.inputs)
    inst = tuple(i and dtypes.is_inexact(a.dtype) for i, a in zip(inst, graph.out_avals))

    def build():
        box = []

        def fn(*args):
            xs, ts = list(args[:n]), iter(args[n:])
            ts = [next(ts) if z else None for z in nz]
            outs, touts = jvp_flat(lambda *ys: eval_graph(graph, *ys), xs, ts)
            mask = tuple(t is not None or w for t, w in zip(touts, inst))
            box.append(mask)
            return outs + [instantiate(t, o) for t, o, k in zip(touts, outs, mask) if k]
        avals = graph.in_avals + [a for a, z in zip(graph.in_avals, nz) if z]
        return rule_graph(fn, avals, f"jvp_{graph.name}"), box[0]
    return cached(graph, ("cf_jvp", nz, inst), build)


def vjp_graph(graph: Graph, diff_out: tuple) -> Graph:
    """graph's vjp: inputs (primals, cts of float outputs) -> cts of float inputs."""
    n = len(graph.inputs)

    def build():
        def fn(*args):
            xs, cs = list(args[:n]), iter(args[n:])
            _, bwd = vjp_flat(lambda *ys: eval_graph(graph, *ys), xs)
            cts = bwd([next(cs) if d else None for d in diff_out])
            return [c for c, a in zip(cts, graph.in_avals) if dtypes.is_inexact(a.dtype)]
        avals = graph.in_avals + [a for a, d in zip(graph.out_avals, diff_out) if d]
        return rule_graph(fn, avals, f"vjp_{graph.name}")
    return cached(graph, ("cf_vjp", diff_out), build)


def batched_aval(aval: ShapedArray, size: int, at: int = 0) -> ShapedArray:
    s = tuple(aval.shape)
    return ShapedArray(s[:at] + (size,) + s[at:], aval.dtype, aval.weak_type)


def vmap_graph(graph: Graph, in_dims: tuple, size: int, force: tuple):
    """graph batched: in_dims entries are 0 or None; outputs batched at 0 where they
    depend on a batched input or `force` says so. Returns (graph, out_dims)."""

    name = inherited_axis_name(size)   # (a scan of psums under vmap(axis_name=))

    def build():
        box = []

        def fn(*args):
            with batching(size, name) as tr:
                ins = [BatchTracer(tr, a, d) for a, d in zip(args, in_dims)]
                outs = eval_graph(graph, *ins)
                vals, ods = [], []
                for o, f in zip(outs, force):
                    v, d = (o.val, o.bdim) if isinstance(o, BatchTracer) and o._trace is tr \
                        else (o, None)
                    if d is not None or f:
                        v, d = move_bdim(operand(v), d, 0, size), 0
                    vals.append(v)
                    ods.append(d)
            box.append(tuple(ods))
            return vals
        avals = [a if d is None else batched_aval(a, size) for a, d in zip(graph.in_avals, in_dims)]
        return rule_graph(fn, avals, graph.name), box[0]
    return cached(graph, ("cf_vmap", tuple(in_dims), size, tuple(force), name), build)


def to_front(xs, dims, size, at=0, force=None):
    """Batched xs with their batch axis at `at` (and unbatched ones where `force`)."""
    out, new = [], []
    for k, (x, d) in enumerate(zip(xs, dims)):
        if d is not None or (force is not None and force[k]):
            out.append(move_bdim(x, d, at, size))
            new.append(0)
        else:
            out.append(x)
            new.append(None)
    return out, tuple(new)


def permute(graph: Graph, inputs=None, outputs=None) -> Graph:
    return graph.replace(
        inputs=None if inputs is None else [graph.inputs[i] for i in inputs],
        outputs=None if outputs is None else [graph.outputs[i] for i in outputs])


def interleave(groups_p, groups_t):
    """Index order (p0, t0, p1, t1, ...) for lists laid out as (p0, p1, .., t0, t1, ..)."""
    order, off_p, off_t = [], 0, sum(groups_p)
    for np_, nt in zip(groups_p, groups_t):
        order += list(range(off_p, off_p + np_)) + list(range(off_t, off_t + nt))
        off_p += np_
        off_t += nt
    return order
