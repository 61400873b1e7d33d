"""Graph faces of the transforms: `grad`, `jvp`, `hvp`, `vmap`, `nth_order_grad` on a Graph.

One implementation, two faces (DESIGN.md): each interprets the input graph with
`eval_graph` under the function transform (vjp_flat / jvp_flat / vmap_flat) with the
staging interpreter (`trace_to_graph`) at the bottom, so the result is a new Graph; the
input graph is never edited. Results are cleaned with the compiler's simplify, cse and
dce passes.
"""
from __future__ import annotations

from typing import Sequence

from mirax.core import dtypes
from mirax.core.avals import ShapedArray
from mirax.graph.build import trace_to_graph
from mirax.graph.graph import Graph
from mirax.graph.interpret import eval_graph
from mirax.compiler.cse import cse
from mirax.compiler.dce import dce
from mirax.compiler.simplify import simplify as algebra
from mirax.core.trace import zeros_like_aval
from mirax.ops.shape import full
from mirax.interpreters.vjp import vjp_flat
from mirax.interpreters.jvp import instantiate, jvp_flat
from mirax.interpreters.vmap import vmap_flat
from mirax.ops.reduction import reduce_sum


def simplify(graph: Graph, rounds: int = 4) -> Graph:
    """simplify + cse + dce until the node count stops shrinking."""
    for _ in range(rounds):
        n = len(graph.nodes)
        graph = dce(cse(algebra(graph)))
        if len(graph.nodes) >= n:
            break
    return graph


def _stage(fn, in_avals, name) -> Graph:
    graph, captured = trace_to_graph(fn, list(in_avals), name)
    assert not captured, "a graph transform captured an outer tracer"
    return simplify(graph)


def _float_inputs(graph: Graph) -> list[int]:
    return [i for i, a in enumerate(graph.in_avals) if dtypes.is_inexact(a.dtype)]


def _check_scalar(graph: Graph, op: str):
    if len(graph.outputs) != 1:
        raise ValueError(f"{op}: the graph must have one output, it has {len(graph.outputs)}")
    a = graph.out_avals[0]
    if a.shape != () or not dtypes.is_float(a.dtype):  # real: as grad, no holomorphic here
        raise ValueError(f"{op}: the graph's output must be a float scalar, got "
                         f"{a.str_short()}")


def _instantiate(cts, avals):
    return [zeros_like_aval(a) if c is None else c for c, a in zip(cts, avals)]


def grad(graph: Graph, wrt: Sequence[int] | None = None) -> Graph:
    """A graph with the same inputs computing d out / d inputs[i] for i in `wrt` (default:
    every float input), for a graph with one float scalar output."""
    _check_scalar(graph, "ir.grad")
    n = len(graph.inputs)
    wrt = _float_inputs(graph) if wrt is None else [int(i) for i in wrt]
    for i in wrt:
        if not -n <= i < n:
            raise ValueError(f"ir.grad: wrt index {i} is out of range for a graph with "
                             f"{n} inputs")
        if not dtypes.is_inexact(graph.in_avals[i].dtype):
            raise ValueError(f"ir.grad: input {i} is {graph.in_avals[i].str_short()}; only "
                             "float inputs have gradients")
    wrt = [i % n for i in wrt]

    def fn(*xs):
        def f(*ws):
            full_args = list(xs)
            for i, w in zip(wrt, ws):
                full_args[i] = w
            return eval_graph(graph, *full_args)
        (out,), bwd = vjp_flat(f, [xs[i] for i in wrt])
        a = graph.out_avals[0]
        return _instantiate(bwd([full((), 1, a.dtype)]), [graph.in_avals[i] for i in wrt])
    return _stage(fn, graph.in_avals, f"grad_{graph.name}")


def jvp(graph: Graph) -> Graph:
    """Inputs: the primals, then one tangent per float input; outputs: the graph's outputs,
    then their tangents."""
    n = len(graph.inputs)
    fl = _float_inputs(graph)

    def fn(*args):
        xs, ts = list(args[:n]), [None] * n
        for i, t in zip(fl, args[n:]):
            ts[i] = t
        outs, touts = jvp_flat(lambda *ys: eval_graph(graph, *ys), xs, ts)
        return list(outs) + [instantiate(t, o) for t, o in zip(touts, outs)]
    return _stage(fn, graph.in_avals + [graph.in_avals[i] for i in fl], f"jvp_{graph.name}")


def hvp(graph: Graph) -> Graph:
    """Forward over reverse: inputs are the primals, then one tangent per float input;
    outputs: the Hessian-vector product, one per float input."""
    jg = jvp(grad(graph))  # the gradient graph has graph's inputs, so the same tangents
    m = len(_float_inputs(graph))
    out = simplify(jg.replace(outputs=jg.outputs[m:]))
    out.name = f"hvp_{graph.name}"
    return out


def vmap(graph: Graph, in_axes=0, axis_size: int | None = None) -> Graph:
    """The graph mapped over a new axis of size `axis_size` at `in_axes` (an int, or one int
    or None per input); every output is batched along axis 0."""
    n = len(graph.inputs)
    axes = list(in_axes) if isinstance(in_axes, (tuple, list)) else [in_axes] * n
    if len(axes) != n:
        raise ValueError(f"ir.vmap: in_axes has {len(axes)} entries for a graph with {n} "
                         "inputs")
    if axis_size is None:
        raise ValueError("ir.vmap: a graph has no batch to read the size from; pass "
                         "axis_size")
    avals, dims = [], []
    for a, ax in zip(graph.in_avals, axes):
        if ax is None:
            avals.append(a)
            dims.append(None)
            continue
        if not -a.ndim - 1 <= ax <= a.ndim:
            raise ValueError(f"ir.vmap: in_axes {ax} is out of range for an input "
                             f"{a.str_short()}")
        d = ax % (a.ndim + 1)
        avals.append(ShapedArray(a.shape[:d] + (axis_size,) + a.shape[d:], a.dtype,
                                 a.weak_type))
        dims.append(d)
    return _stage(lambda *xs: vmap_flat(lambda *ys: eval_graph(graph, *ys), list(xs), dims,
                                        axis_size), avals, f"vmap_{graph.name}")


def _sum_output(graph: Graph) -> Graph:
    """The graph returning the sum of all entries of its single output."""

    def fn(*xs):
        (out,) = eval_graph(graph, *xs)
        return [reduce_sum(out, tuple(range(out.ndim)))]
    return _stage(fn, graph.in_avals, graph.name)


def nth_order_grad(graph: Graph, order: int) -> Graph:
    """Nested gradients of a scalar function f of one float input x (any shape):
    g1 = grad f; g_k = grad(sum(g_{k-1})), so g_k[i] = sum over j1..j_{k-1} of
    d^k f / dx_i dx_j1 ... dx_j(k-1) (for elementwise f: the k-th derivative, pointwise).
    Each layer is simplified (simplify + cse + dce) before the next is built."""
    if not isinstance(order, int) or order < 1:
        raise ValueError(f"ir.nth_order_grad: order must be an int >= 1, got {order!r}")
    if len(graph.inputs) != 1 or not dtypes.is_float(graph.in_avals[0].dtype):
        raise ValueError("ir.nth_order_grad: the graph must have exactly one float input")
    _check_scalar(graph, "ir.nth_order_grad")
    g = grad(graph)
    for _ in range(order - 1):
        g = grad(_sum_output(g))
    g.name = f"grad{order}_{graph.name}"
    return g
