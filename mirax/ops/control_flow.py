"""Control flow: cond / switch as a primitive with one sub-graph per branch.

Where it sits: mirax.lax re-exports these wrappers; `cond_p` is a node of the Graph IR that
carries its branches as Graph params (see ops/subgraph.py for the tracing and the graph
transforms shared by every control-flow rule). The loops live in ops/loops.py
(while_loop, fori_loop) and ops/scan.py (scan, map); they are re-exported here so that
`mirax.ops.control_flow.<name>` keeps working.

Each user function is traced once into a Graph that becomes a param of the primitive;
values the function closes over that belong to an enclosing transform (the "captured"
tracers) become explicit leading operands, so every interpreter sees them. Impls run the
sub-graphs' compiled executables on concrete buffers. Rules transform the sub-graphs by
tracing `eval_graph` under the transform (as jit's `call` does) and re-bind the same
primitive, so every derivative is again a control-flow primitive: grad of grad, jvp of
grad and vmap of grad all work.
"""
from __future__ import annotations

import numpy as np

from mirax.core import dtypes, tree
from mirax.core.primitive import Primitive
from mirax.core.trace import Tracer, aval_of, state
from mirax.graph.graph import Var
from mirax.graph.interpret import eval_graph
from mirax.ops.common import batch_size, operand, short
from mirax.ops.subgraph import (
    compiled, is_float, jvp_graph, same_aval, to_front, trace_fn, vjp_graph, vmap_graph)
from mirax.ops import elementwise as elementwise_ops
from mirax.ops import shape as shape_ops
from mirax.interpreters.vmap import move_bdim, vmap_flat

cond_p = Primitive("cond", multiple_results=True)


# --- cond / switch ------------------------------------------------------------------------
def cond(pred, true_fun, false_fun, *operands):
    """`true_fun(*operands) if pred else false_fun(*operands)`; both branches are traced."""
    p = operand(pred, "cond")
    if p.shape != ():
        raise TypeError(f"cond: pred must be a scalar, got {short(p)}")
    if not isinstance(p, Tracer) and not state.active:   # eager: run the taken branch
        return _as_arrays((true_fun if bool(np.asarray(p)) else false_fun)(*operands), "cond")
    if p.dtype != np.bool_:
        p = elementwise_ops.ne(p, 0)
    index = elementwise_ops.convert_element_type(p, dtypes.int32)
    return _switch("cond", index, (false_fun, true_fun), operands)


def switch(index, branches, *operands):
    """`branches[clamp(index, 0, len-1)](*operands)`."""
    branches = tuple(branches)
    if not branches:
        raise ValueError("switch: need at least one branch")
    i = operand(index, "switch")
    if i.shape != () or not dtypes.is_int(i.dtype) and i.dtype != np.bool_:
        raise TypeError(f"switch: index must be an integer scalar, got {short(i)}")
    n = len(branches)
    if not isinstance(i, Tracer) and not state.active:
        return _as_arrays(branches[min(max(int(np.asarray(i)), 0), n - 1)](*operands), "switch")
    i = elementwise_ops.convert_element_type(i, dtypes.int32)
    if n > 1:
        i = elementwise_ops.min(elementwise_ops.max(i, 0), n - 1)
    return _switch("switch", i, branches, operands)


def _as_arrays(out, op):
    """A branch's outputs as arrays, as the staged cond returns them (Python scalars too)."""
    return tree.map(lambda o: operand(o, op), out)


def _switch(op, index, branches, operands):
    leaves, in_tree = tree.flatten(tuple(operands))
    leaves = [operand(x, op) for x in leaves]
    avals = [aval_of(x) for x in leaves]
    traced = []
    for k, fn in enumerate(branches):
        def flat(*xs, fn=fn):
            return tree.flatten(fn(*tree.unflatten(in_tree, list(xs))))
        traced.append(trace_fn(flat, avals, f"branch{k}", op))
    _check_branches(op, traced)
    graphs, consts = _join_consts(traced, len(avals))
    outs = cond_p.bind(index, *consts, *leaves, branches=graphs)
    return tree.unflatten(traced[0][2], outs)


def _branch_name(op, k):
    return f"{'false_fun' if k == 0 else 'true_fun'} (branch {k})" if op == "cond" \
        else f"branch {k}"


def _check_branches(op, traced):
    g0, _, t0 = traced[0]
    for k, (g, _, t) in enumerate(traced[1:], 1):
        if t != t0:
            raise TypeError(f"{op}: {_branch_name(op, k)} returns structure {t} but "
                            f"{_branch_name(op, 0)} returns {t0}")
        paths = [tree.keystr(p) for p, _ in tree.leaves_with_path(
            tree.unflatten(t0, [0] * len(g0.outputs)))]
        for path, a, b in zip(paths, g0.out_avals, g.out_avals):
            if not same_aval(a, b):
                raise TypeError(f"{op}: {_branch_name(op, k)} returns {short(b)} for output"
                                f"{path or ' '}{'' if not path else ''} but "
                                f"{_branch_name(op, 0)} returns {short(a)}; branches must "
                                "return the same shapes and dtypes")


def _join_consts(traced, n_args):
    """One operand list for all branches: the union of their captured tracers."""
    union: list = []
    for _, consts, _ in traced:
        for c in consts:
            if not any(c is u for u in union):
                union.append(c)
    graphs = []
    for g, consts, _ in traced:
        own = g.inputs[:len(consts)]
        ins = []
        for u in union:
            k = next((j for j, c in enumerate(consts) if c is u), None)
            ins.append(own[k] if k is not None else Var(aval_of(u)))
        graphs.append(g.replace(inputs=ins + g.inputs[len(consts):]))
    return tuple(graphs), union


@cond_p.def_abstract_eval
def _cond_abstract_eval(index, *avals, branches):
    if index.shape != () or index.dtype != dtypes.int32:
        raise TypeError(f"cond: index must be i32[], got {short(index)}")
    for k, g in enumerate(branches):
        if len(g.inputs) != len(avals) or not all(
                same_aval(a, b) for a, b in zip(g.in_avals, avals)):
            raise TypeError(f"cond: branch {k} takes ({', '.join(short(a) for a in g.in_avals)})"
                            f" but got ({', '.join(short(a) for a in avals)})")
    weak = [all(g.out_avals[i].weak_type for g in branches)
            for i in range(len(branches[0].outputs))]
    return [a.update(weak_type=w) for a, w in zip(branches[0].out_avals, weak)]


@cond_p.def_impl
def _cond_impl(index, *args, branches):
    k = min(max(int(index), 0), len(branches) - 1)
    run, be = compiled(branches[k], args)
    return [be.adopt(o) for o in run(*args)]


@cond_p.def_jvp
def _cond_jvp(primals, tangents, *, branches):
    index, args, ts = primals[0], primals[1:], tangents[1:]
    nz = tuple(t is not None for t in ts)
    m = len(branches[0].outputs)
    out_nz = [False] * m
    for g in branches:
        _, onz = jvp_graph(g, nz, (False,) * m)
        out_nz = [a or b for a, b in zip(out_nz, onz)]
    out_nz = tuple(out_nz)
    new = tuple(jvp_graph(g, nz, out_nz)[0] for g in branches)
    res = cond_p.bind(index, *args, *[t for t in ts if t is not None], branches=new)
    touts = iter(res[m:])
    return res[:m], [next(touts) if z else None for z in out_nz]


@cond_p.def_vjp
def _cond_vjp(cts, outs, index, *args, branches):
    diff_out = tuple(is_float(o) for o in outs)
    new = tuple(vjp_graph(g, diff_out) for g in branches)
    res = iter(cond_p.bind(index, *args, *[c for c, d in zip(cts, diff_out) if d],
                           branches=new))
    return [None] + [next(res) if is_float(a) else None for a in args]


@cond_p.def_vmap
def _cond_vmap(args, dims, *, branches):
    index, xs, idim, xdims = args[0], args[1:], dims[0], dims[1:]
    size = batch_size(args, dims)
    m = len(branches[0].outputs)
    if idim is None:
        xs, in_dims = to_front(xs, xdims, size)
        force = (False,) * m
        for g in branches:
            _, od = vmap_graph(g, in_dims, size, force)
            force = tuple(f or d is not None for f, d in zip(force, od))
        new = tuple(vmap_graph(g, in_dims, size, force)[0] for g in branches)
        return cond_p.bind(index, *xs, branches=new), [0 if f else None for f in force]
    # a batched predicate: run every branch on the whole batch, then select per member
    outs = [vmap_flat(lambda *ys, g=g: eval_graph(g, *ys), list(xs), list(xdims), size,
                      [0] * m) for g in branches]
    index = move_bdim(index, idim, 0, size)
    res = list(outs[0])
    for k in range(1, len(branches)):
        for j in range(m):
            shape = aval_of(res[j]).shape
            pred = shape_ops.broadcast_in_dim(elementwise_ops.eq(index, k), shape, (0,))
            res[j] = elementwise_ops.select(pred, outs[k][j], res[j])
    return res, [0] * m
