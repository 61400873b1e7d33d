"""Loops: while_loop (the `while` primitive, with a sub-graph for the condition and one
for the body) and fori_loop (a scan with concrete bounds, else a while_loop).

Where it sits: mirax.lax re-exports these wrappers (and mirax.ops.control_flow); the
sub-graph tracing and graph transforms are ops/subgraph.py's, shared with cond and scan.

Reverse mode: while_loop is reverse-differentiable only with `max_steps=N`: its vjp is the
vjp of a scan of N steps whose body is `cond(pred, body, identity)` (steps after the loop
has finished are identities; since cond_fun is pure, a finished loop stays finished).
fori_loop with concrete bounds is a scan (as in JAX), so it is reverse-differentiable.
"""
from __future__ import annotations

import numpy as np

from mirax.core import dtypes, tree
from mirax.core.primitive import Primitive
from mirax.core.trace import Tracer, aval_of
from mirax.graph.interpret import eval_graph
from mirax.ops.common import batch_size, operand, short
from mirax.ops.scan import scan, scan_p
from mirax.ops.subgraph import (
    cached, carry_check, compiled, interleave, is_float, jvp_graph, permute, promote_weak,
    rule_graph, same_aval, to_front, trace_fn, vmap_graph)
from mirax.interpreters.jvp import instantiate
from mirax.ops import control_flow as control_flow_ops
from mirax.interpreters.vjp import vjp_flat
from mirax.ops import elementwise as elementwise_ops
from mirax.ops import shape as shape_ops
from mirax.ops import reduction as reduction_ops

while_p = Primitive("while", multiple_results=True)


# --- while_loop ---------------------------------------------------------------------------
def while_loop(cond_fun, body_fun, init_val, max_steps=None):
    """`while cond_fun(val): val = body_fun(val)`. With `max_steps=N` the loop stops after
    at most N iterations and becomes reverse-differentiable (a masked scan of N steps in
    the backward pass); without it, grad raises."""
    if max_steps is not None:
        max_steps = int(max_steps)
        if max_steps < 0:
            raise ValueError(f"while_loop: max_steps must be >= 0, got {max_steps}")
    leaves, init_tree = tree.flatten(init_val)
    leaves = [operand(x, "while_loop") for x in leaves]
    for attempt in range(2):
        avals = [aval_of(x) for x in leaves]
        cg, cc, _ = trace_fn(lambda *xs: ([cond_fun(tree.unflatten(init_tree, list(xs)))],
                                        None), avals, "cond", "while_loop")
        pa = cg.out_avals[0]
        if pa.shape != () or pa.dtype != np.bool_:
            raise TypeError(f"while_loop: cond_fun must return a bool scalar, got {short(pa)}")

        def body(*xs):
            out = body_fun(tree.unflatten(init_tree, list(xs)))
            out_leaves, out_tree = tree.flatten(out)
            if out_tree != init_tree:
                raise TypeError(f"while_loop: body_fun returned structure {out_tree}, but "
                                f"the carry has structure {init_tree}")
            return out_leaves, out_tree
        bg, bc, _ = trace_fn(body, avals, "body", "while_loop")
        promote = carry_check("while_loop", "carry", init_tree, avals, bg.out_avals,
                               attempt == 0)
        if not promote:
            break
        leaves = promote_weak(leaves, promote)
    outs = while_p.bind(*cc, *bc, *leaves, cond_graph=cg, body_graph=bg,
                        cond_nconsts=len(cc), body_nconsts=len(bc), max_steps=max_steps)
    return tree.unflatten(init_tree, outs)


def _split_while(args, cond_nconsts, body_nconsts):
    return (list(args[:cond_nconsts]), list(args[cond_nconsts:cond_nconsts + body_nconsts]),
            list(args[cond_nconsts + body_nconsts:]))


@while_p.def_abstract_eval
def _while_abstract_eval(*avals, cond_graph, body_graph, cond_nconsts, body_nconsts,
                         max_steps):
    cc, bc, carry = _split_while(avals, cond_nconsts, body_nconsts)
    for k, (a, b) in enumerate(zip(carry, body_graph.out_avals)):
        if not same_aval(a, b):
            raise TypeError(f"while_loop: carry[{k}] changed from {short(a)} to {short(b)}")
    return [a.update(weak_type=a.weak_type and b.weak_type)
            for a, b in zip(carry, body_graph.out_avals)]


@while_p.def_impl
def _while_impl(*args, cond_graph, body_graph, cond_nconsts, body_nconsts, max_steps):
    cc, bc, carry = _split_while(args, cond_nconsts, body_nconsts)
    (run_cond, be), (run_body, _) = compiled(cond_graph, args), compiled(body_graph, args)
    n = 0
    while (max_steps is None or n < max_steps) and bool(run_cond(*cc, *carry)[0]):
        carry = run_body(*bc, *carry)
        n += 1
    return [be.adopt(c) for c in carry]


@while_p.def_jvp
def _while_jvp(primals, tangents, *, cond_graph, body_graph, cond_nconsts, body_nconsts,
               max_steps):
    cc, bc, init = _split_while(primals, cond_nconsts, body_nconsts)
    _, bc_t, init_t = _split_while(tangents, cond_nconsts, body_nconsts)
    nb, nk = len(bc), len(init)
    bnz = tuple(t is not None for t in bc_t)
    knz = tuple(t is not None and is_float(x) for t, x in zip(init_t, init))
    while True:
        jg, onz = jvp_graph(body_graph, bnz + knz, knz)
        new = tuple(a or b for a, b in zip(knz, onz))
        if new == knz:
            break
        knz = new
    nbt, nkt = sum(bnz), sum(knz)
    # jg inputs: (bc, carry, bc_t, carry_t) -> (bc, bc_t, carry, carry_t)
    jg = permute(jg, inputs=interleave([nb, nk], [nbt, nkt]))
    cg = cached(cond_graph, ("cf_while_cond", cond_nconsts, knz), lambda: rule_graph(
        lambda *xs: eval_graph(cond_graph, *xs[:cond_nconsts + nk]),
        cond_graph.in_avals + [a for a, z in zip(cond_graph.in_avals[cond_nconsts:], knz)
                               if z], "cond"))
    kt = [instantiate(t, x) for t, x, z in zip(init_t, init, knz) if z]
    res = while_p.bind(*cc, *bc, *[t for t in bc_t if t is not None], *init, *kt,
                       cond_graph=cg, body_graph=jg, cond_nconsts=cond_nconsts,
                       body_nconsts=nb + nbt, max_steps=max_steps)
    touts = iter(res[nk:])
    return res[:nk], [next(touts) if z else None for z in knz]


@while_p.def_vjp
def _while_vjp(cts, outs, *primals, cond_graph, body_graph, cond_nconsts, body_nconsts,
               max_steps):
    if max_steps is None:
        raise ValueError(
            "while_loop: reverse-mode differentiation (grad / vjp) of a while_loop needs a "
            "bound on its trip count: pass max_steps=N (the backward pass then runs a masked "
            "scan of N steps), or use fori_loop with static bounds or scan")
    nk = len(outs)
    ident = cached(body_graph, ("cf_ident",), lambda: rule_graph(
        lambda *xs: list(xs[body_nconsts:]), body_graph.in_avals, "done"))

    def masked(*xs):
        cc, bc, init = _split_while(xs, cond_nconsts, body_nconsts)

        def step(*args):
            carry = list(args[:nk])
            pred = eval_graph(cond_graph, *cc, *carry)[0]
            idx = elementwise_ops.convert_element_type(pred, dtypes.int32)
            return control_flow_ops.cond_p.bind(idx, *bc, *carry, branches=(ident, body_graph))
        return _scan_from_fn(step, init, max_steps)
    diff_out = [is_float(o) for o in outs]
    _, bwd = vjp_flat(masked, list(primals))
    return bwd([c if d else None for c, d in zip(cts, diff_out)])


def _scan_from_fn(step, init, length):
    """scan of `step(*carry) -> carry` for `length` steps (no xs, no ys); step may close
    over traced values of the caller (they become the scan's consts)."""
    avals = [aval_of(c) for c in init]
    g, consts, _ = trace_fn(lambda *xs: (step(*xs), None), avals, "step", "while_loop")
    return scan_p.bind(*consts, *init, body=g, num_consts=len(consts), num_carry=len(init),
                       length=length, reverse=False, checkpoint=None)


@while_p.def_vmap
def _while_vmap(args, dims, *, cond_graph, body_graph, cond_nconsts, body_nconsts,
                max_steps):
    size = batch_size(args, dims)
    cc, bc, init = _split_while(args, cond_nconsts, body_nconsts)
    ccd, bcd, kd = _split_while(dims, cond_nconsts, body_nconsts)
    cc, ccd = to_front(cc, ccd, size)
    bc, bcd = to_front(bc, bcd, size)
    kb = tuple(d is not None for d in kd)
    while True:
        bg, od = vmap_graph(body_graph, bcd + tuple(0 if b else None for b in kb), size, kb)
        new = tuple(b or d is not None for b, d in zip(kb, od))
        if new == kb:
            break
        kb = new
    kdims = tuple(0 if b else None for b in kb)
    cg, (pd,) = vmap_graph(cond_graph, ccd + kdims, size, (False,))
    params = dict(cond_nconsts=len(cc), max_steps=max_steps)
    if pd is None:
        init, _ = to_front(init, kd, size, force=kb)
        outs = while_p.bind(*cc, *bc, *init, cond_graph=cg, body_graph=bg,
                            body_nconsts=len(bc), **params)
        return outs, list(kdims)
    # a batched predicate: every member is carried batched; finished members keep their
    # carry (select) until the last one is done
    init, _ = to_front(init, kd, size, force=(True,) * len(init))
    allb = (0,) * len(init)
    bg, _ = vmap_graph(body_graph, bcd + allb, size, (True,) * len(init))
    cg, _ = vmap_graph(cond_graph, ccd + allb, size, (True,))
    nc = len(cc)
    key = ("cf_while_masked", bg, cg, nc)
    mb = cached(body_graph, key, lambda: rule_graph(
        lambda *xs: _masked_body(cg, bg, xs, nc, len(xs) - len(init)),
        [aval_of(x) for x in cc + bc + init], "body"))
    anyg = cached(body_graph, key + ("any",), lambda: rule_graph(
        lambda *xs: [_any(eval_graph(cg, *xs)[0])], [aval_of(x) for x in cc + init], "cond"))
    outs = while_p.bind(*cc, *cc, *bc, *init, cond_graph=anyg, body_graph=mb,
                        body_nconsts=len(cc) + len(bc), **params)
    return outs, [0] * len(init)


def _masked_body(cg, bg, xs, nc, nconsts):
    cc, bc, carry = list(xs[:nc]), list(xs[nc:nconsts]), list(xs[nconsts:])
    pred = eval_graph(cg, *cc, *carry)[0]
    new = eval_graph(bg, *bc, *carry)
    return [elementwise_ops.select(shape_ops.broadcast_in_dim(pred, aval_of(c).shape, (0,)), n, c)
            for n, c in zip(new, carry)]


def _any(pred):
    as_int = elementwise_ops.convert_element_type(pred, dtypes.int32)
    return elementwise_ops.gt(reduction_ops.reduce_max(as_int), 0)


# --- fori_loop ----------------------------------------------------------------------------
def fori_loop(lower, upper, body_fun, init_val):
    """`for i in range(lower, upper): val = body_fun(i, val)`. Concrete bounds give a scan
    (reverse-differentiable); traced bounds give a while_loop."""
    if not isinstance(lower, Tracer) and not isinstance(upper, Tracer):
        lo, hi = int(np.asarray(lower)), int(np.asarray(upper))
        dt = _index_dtype(lower, upper)

        def step(carry, _):
            i, x = carry
            return (i + 1, body_fun(i, x)), None

        (_, out), _ = scan(step, (shape_ops.full((), lo, dt), init_val), None,
                           length=max(hi - lo, 0))
        return out
    dt = _index_dtype(lower, upper)
    lo = elementwise_ops.convert_element_type(operand(lower, "fori_loop"), dt)
    hi = elementwise_ops.convert_element_type(operand(upper, "fori_loop"), dt)
    _, out = while_loop(lambda c: c[0] < hi, lambda c: (c[0] + 1, body_fun(c[0], c[1])),
                        (lo, init_val))
    return out


def _index_dtype(lower, upper):
    for b in (lower, upper):
        if hasattr(b, "dtype") and dtypes.is_int(b.dtype):
            return b.dtype
    return dtypes.int32
