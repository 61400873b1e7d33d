"""Control flow: cond / switch, while_loop, fori_loop, scan, map as primitives with sub-graphs.

Each user function is traced once into a Graph (`trace_to_graph`) that becomes a param of
the primitive; values the function closes over that belong to an enclosing transform
(the "captured" tracers) become explicit leading operands, so every interpreter sees them.
Impls run the sub-graphs' compiled executables on concrete buffers. Rules transform the
sub-graphs by tracing `eval_graph` under the transform (as jit's `call` does) and re-bind
the same primitive, so every derivative is again a control-flow primitive: grad of grad,
jvp of grad and vmap of grad all work.

Reverse mode:
- scan stores the carry before every step (one extra forward scan) and runs a reverse scan
  that recomputes each step's vjp. `scan(..., checkpoint="sqrt")` stores only every
  ceil(sqrt(T))-th carry and recomputes each segment in the backward pass (O(sqrt T) memory).
- while_loop is reverse-differentiable only with `max_steps=N`: its vjp is the vjp of a
  scan of N steps whose body is `cond(pred, body, identity)` (steps after the loop has
  finished are identities; since cond_fun is pure, a finished loop stays finished).
- fori_loop with concrete bounds is a scan (as in JAX); with traced bounds a while_loop.
"""
from __future__ import annotations

import math

import numpy as np

from mirax.core import dtypes, tree
from mirax.core.avals import ShapedArray
from mirax.core.primitive import Primitive
from mirax.core.trace import Tracer, aval_of, new_trace, state
from mirax.ir.build import trace_to_graph
from mirax.ir.graph import Graph, Var
from mirax.ir.interpret import eval_graph
from mirax.ops.common import operand, short

cond_p = Primitive("cond", multiple_results=True)
while_p = Primitive("while", multiple_results=True)
scan_p = Primitive("scan", multiple_results=True)


# --- tracing user functions ---------------------------------------------------------------
def _trace(fn, in_avals, name, op):
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


def _same(a: ShapedArray, b: ShapedArray) -> bool:
    return tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype


def _is_float(x) -> bool:
    return dtypes.is_float(aval_of(x).dtype)


def _rule_graph(fn, in_avals, name) -> Graph:
    """Trace a rule's helper function; it closes over nothing traced."""
    graph, captured = trace_to_graph(fn, list(in_avals), name)
    assert not captured, "control flow rule closed over a traced value"
    return graph


def _cached(graph: Graph, key, build):
    hit = graph.cache.get(key)
    if hit is None:
        hit = build()
        graph.cache[key] = hit
    return hit


def _run(graph: Graph):
    from mirax.transforms.jit import executable
    return executable(graph, "cpu")


def _carry_check(op, what, init_tree, in_avals, out_avals, allow_promote=True):
    """Raise `scan: carry[1] changed from f32[3] to f32[4]`; return the leaves whose
    weak-typed input should be promoted to the body's output dtype (JAX's rule)."""
    paths = [tree.keystr(p) for p, _ in tree.flatten_with_path(
        tree.unflatten(init_tree, [0] * len(in_avals)))]
    promote = []
    for i, (a, b) in enumerate(zip(in_avals, out_avals)):
        if _same(a, b):
            continue
        if allow_promote and a.weak_type and tuple(a.shape) == tuple(b.shape):
            promote.append((i, b.dtype))
            continue
        raise TypeError(f"{op}: {what}{paths[i]} changed from {short(a)} to {short(b)}; "
                        f"the {what} must keep its shape and dtype across iterations")
    return promote


def _promote_weak(leaves, promote):
    from mirax.ops.elementwise import convert_element_type
    leaves = list(leaves)
    for i, dt in promote:
        leaves[i] = convert_element_type(leaves[i], dt)
    return leaves


# --- cond / switch ------------------------------------------------------------------------
def cond(pred, true_fun, false_fun, *operands):
    """`true_fun(*operands) if pred else false_fun(*operands)`; both branches are traced."""
    p = operand(pred, "cond")
    if p.shape != ():
        raise TypeError(f"cond: pred must be a scalar, got {short(p)}")
    if not isinstance(p, Tracer) and not state.active:
        return (true_fun if bool(np.asarray(p)) else false_fun)(*operands)
    from mirax.ops.elementwise import convert_element_type, ne
    if p.dtype != np.bool_:
        p = ne(p, 0)
    index = convert_element_type(p, dtypes.int32)
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
        return branches[min(max(int(np.asarray(i)), 0), n - 1)](*operands)
    from mirax.ops.elementwise import convert_element_type, max as max_, min as min_
    i = convert_element_type(i, dtypes.int32)
    if n > 1:
        i = min_(max_(i, 0), n - 1)
    return _switch("switch", i, branches, operands)


def _switch(op, index, branches, operands):
    leaves, in_tree = tree.flatten(tuple(operands))
    leaves = [operand(x, op) for x in leaves]
    avals = [aval_of(x) for x in leaves]
    traced = []
    for k, fn in enumerate(branches):
        def flat(*xs, fn=fn):
            return tree.flatten(fn(*tree.unflatten(in_tree, list(xs))))
        traced.append(_trace(flat, avals, f"branch{k}", op))
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
        paths = [tree.keystr(p) for p, _ in tree.flatten_with_path(
            tree.unflatten(t0, [0] * len(g0.outputs)))]
        for path, a, b in zip(paths, g0.out_avals, g.out_avals):
            if not _same(a, b):
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
                _same(a, b) for a, b in zip(g.in_avals, avals)):
            raise TypeError(f"cond: branch {k} takes ({', '.join(short(a) for a in g.in_avals)})"
                            f" but got ({', '.join(short(a) for a in avals)})")
    weak = [all(g.out_avals[i].weak_type for g in branches)
            for i in range(len(branches[0].outputs))]
    return [a.update(weak_type=w) for a, w in zip(branches[0].out_avals, weak)]


@cond_p.def_impl
def _cond_impl(index, *args, branches):
    k = min(max(int(index), 0), len(branches) - 1)
    return [np.asarray(o) for o in _run(branches[k])(*args)]


@cond_p.def_jvp
def _cond_jvp(primals, tangents, *, branches):
    index, args, ts = primals[0], primals[1:], tangents[1:]
    nz = tuple(t is not None for t in ts)
    m = len(branches[0].outputs)
    out_nz = [False] * m
    for g in branches:
        _, onz = _jvp_graph(g, nz, (False,) * m)
        out_nz = [a or b for a, b in zip(out_nz, onz)]
    out_nz = tuple(out_nz)
    new = tuple(_jvp_graph(g, nz, out_nz)[0] for g in branches)
    res = cond_p.bind(index, *args, *[t for t in ts if t is not None], branches=new)
    touts = iter(res[m:])
    return res[:m], [next(touts) if z else None for z in out_nz]


@cond_p.def_vjp
def _cond_vjp(cts, outs, index, *args, branches):
    diff_out = tuple(_is_float(o) for o in outs)
    new = tuple(_vjp_graph(g, diff_out) for g in branches)
    res = iter(cond_p.bind(index, *args, *[c for c, d in zip(cts, diff_out) if d],
                           branches=new))
    return [None] + [next(res) if _is_float(a) else None for a in args]


@cond_p.def_vmap
def _cond_vmap(args, dims, *, branches):
    from mirax.ops.elementwise import eq, select
    from mirax.ops.shape import broadcast_in_dim
    from mirax.transforms.vmap import move_bdim, vmap_flat
    index, xs, idim, xdims = args[0], args[1:], dims[0], dims[1:]
    size = next(aval_of(a).shape[d] for a, d in zip(args, dims) if d is not None)
    m = len(branches[0].outputs)
    if idim is None:
        xs, in_dims = _to_front(xs, xdims, size)
        force = (False,) * m
        for g in branches:
            _, od = _vmap_graph(g, in_dims, size, force)
            force = tuple(f or d is not None for f, d in zip(force, od))
        new = tuple(_vmap_graph(g, in_dims, size, force)[0] for g in branches)
        return cond_p.bind(index, *xs, branches=new), [0 if f else None for f in force]
    # a batched predicate: run every branch on the whole batch, then select per member
    outs = [vmap_flat(lambda *ys, g=g: eval_graph(g, *ys), list(xs), list(xdims), size,
                      [0] * m) for g in branches]
    index = move_bdim(index, idim, 0, size)
    res = list(outs[0])
    for k in range(1, len(branches)):
        for j in range(m):
            shape = aval_of(res[j]).shape
            pred = broadcast_in_dim(eq(index, k), shape, (0,))
            res[j] = select(pred, outs[k][j], res[j])
    return res, [0] * m


# --- graph transforms shared by the rules -------------------------------------------------
def _jvp_graph(graph: Graph, nz: tuple, inst: tuple):
    """graph's jvp: inputs (primals, tangents where nz), outputs (primals, tangents where
    nonzero or inst). Returns (graph, out_nz)."""
    from mirax.transforms.jvp import instantiate, jvp_flat
    n = len(graph.inputs)
    inst = tuple(i and dtypes.is_float(a.dtype) for i, a in zip(inst, graph.out_avals))

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
        return _rule_graph(fn, avals, f"jvp_{graph.name}"), box[0]
    return _cached(graph, ("cf_jvp", nz, inst), build)


def _vjp_graph(graph: Graph, diff_out: tuple) -> Graph:
    """graph's vjp: inputs (primals, cts of float outputs) -> cts of float inputs."""
    from mirax.transforms.vjp import vjp_flat
    n = len(graph.inputs)

    def build():
        def fn(*args):
            xs, cs = list(args[:n]), iter(args[n:])
            _, bwd = vjp_flat(lambda *ys: eval_graph(graph, *ys), xs)
            cts = bwd([next(cs) if d else None for d in diff_out])
            return [c for c, a in zip(cts, graph.in_avals) if dtypes.is_float(a.dtype)]
        avals = graph.in_avals + [a for a, d in zip(graph.out_avals, diff_out) if d]
        return _rule_graph(fn, avals, f"vjp_{graph.name}")
    return _cached(graph, ("cf_vjp", diff_out), build)


def _batched(aval: ShapedArray, size: int, at: int = 0) -> ShapedArray:
    s = tuple(aval.shape)
    return ShapedArray(s[:at] + (size,) + s[at:], aval.dtype, aval.weak_type)


def _vmap_graph(graph: Graph, in_dims: tuple, size: int, force: tuple):
    """graph batched: in_dims entries are 0 or None; outputs batched at 0 where they
    depend on a batched input or `force` says so. Returns (graph, out_dims)."""
    from mirax.transforms.vmap import BatchTrace, BatchTracer, move_bdim

    def build():
        box = []

        def fn(*args):
            with new_trace(BatchTrace(size)) as tr:
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
        avals = [a if d is None else _batched(a, size) for a, d in zip(graph.in_avals, in_dims)]
        return _rule_graph(fn, avals, graph.name), box[0]
    return _cached(graph, ("cf_vmap", tuple(in_dims), size, tuple(force)), build)


def _to_front(xs, dims, size, at=0, force=None):
    """Batched xs with their batch axis at `at` (and unbatched ones where `force`)."""
    from mirax.transforms.vmap import move_bdim
    out, new = [], []
    for k, (x, d) in enumerate(zip(xs, dims)):
        if d is not None or (force is not None and force[k]):
            out.append(move_bdim(x, d, at, size))
            new.append(0)
        else:
            out.append(x)
            new.append(None)
    return out, tuple(new)


def _permute(graph: Graph, inputs=None, outputs=None) -> Graph:
    return graph.replace(
        inputs=None if inputs is None else [graph.inputs[i] for i in inputs],
        outputs=None if outputs is None else [graph.outputs[i] for i in outputs])


def _interleave(groups_p, groups_t):
    """Index order (p0, t0, p1, t1, ...) for lists laid out as (p0, p1, .., t0, t1, ..)."""
    order, off_p, off_t = [], 0, sum(groups_p)
    for np_, nt in zip(groups_p, groups_t):
        order += list(range(off_p, off_p + np_)) + list(range(off_t, off_t + nt))
        off_p += np_
        off_t += nt
    return order


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
        cg, cc, _ = _trace(lambda *xs: ([cond_fun(tree.unflatten(init_tree, list(xs)))],
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
        bg, bc, _ = _trace(body, avals, "body", "while_loop")
        promote = _carry_check("while_loop", "carry", init_tree, avals, bg.out_avals,
                               attempt == 0)
        if not promote:
            break
        leaves = _promote_weak(leaves, promote)
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
        if not _same(a, b):
            raise TypeError(f"while_loop: carry[{k}] changed from {short(a)} to {short(b)}")
    return [a.update(weak_type=a.weak_type and b.weak_type)
            for a, b in zip(carry, body_graph.out_avals)]


@while_p.def_impl
def _while_impl(*args, cond_graph, body_graph, cond_nconsts, body_nconsts, max_steps):
    cc, bc, carry = _split_while(args, cond_nconsts, body_nconsts)
    run_cond, run_body = _run(cond_graph), _run(body_graph)
    n = 0
    while (max_steps is None or n < max_steps) and bool(run_cond(*cc, *carry)[0]):
        carry = run_body(*bc, *carry)
        n += 1
    return [np.asarray(c) for c in carry]


@while_p.def_jvp
def _while_jvp(primals, tangents, *, cond_graph, body_graph, cond_nconsts, body_nconsts,
               max_steps):
    from mirax.transforms.jvp import instantiate
    cc, bc, init = _split_while(primals, cond_nconsts, body_nconsts)
    _, bc_t, init_t = _split_while(tangents, cond_nconsts, body_nconsts)
    nb, nk = len(bc), len(init)
    bnz = tuple(t is not None for t in bc_t)
    knz = tuple(t is not None and _is_float(x) for t, x in zip(init_t, init))
    while True:
        jg, onz = _jvp_graph(body_graph, bnz + knz, knz)
        new = tuple(a or b for a, b in zip(knz, onz))
        if new == knz:
            break
        knz = new
    nbt, nkt = sum(bnz), sum(knz)
    # jg inputs: (bc, carry, bc_t, carry_t) -> (bc, bc_t, carry, carry_t)
    jg = _permute(jg, inputs=_interleave([nb, nk], [nbt, nkt]))
    cg = _cached(cond_graph, ("cf_while_cond", cond_nconsts, knz), lambda: _rule_graph(
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
    from mirax.transforms.vjp import vjp_flat
    if max_steps is None:
        raise ValueError(
            "while_loop: reverse-mode differentiation (grad / vjp) of a while_loop needs a "
            "bound on its trip count: pass max_steps=N (the backward pass then runs a masked "
            "scan of N steps), or use fori_loop with static bounds or scan")
    nk = len(outs)
    ident = _cached(body_graph, ("cf_ident",), lambda: _rule_graph(
        lambda *xs: list(xs[body_nconsts:]), body_graph.in_avals, "done"))

    def masked(*xs):
        cc, bc, init = _split_while(xs, cond_nconsts, body_nconsts)

        def step(*args):
            carry = list(args[:nk])
            pred = eval_graph(cond_graph, *cc, *carry)[0]
            from mirax.ops.elementwise import convert_element_type
            idx = convert_element_type(pred, dtypes.int32)
            return cond_p.bind(idx, *bc, *carry, branches=(ident, body_graph))
        return _scan_from_fn(step, init, max_steps)
    diff_out = [_is_float(o) for o in outs]
    _, bwd = vjp_flat(masked, list(primals))
    return bwd([c if d else None for c, d in zip(cts, diff_out)])


def _scan_from_fn(step, init, length):
    """scan of `step(*carry) -> carry` for `length` steps (no xs, no ys); step may close
    over traced values of the caller (they become the scan's consts)."""
    avals = [aval_of(c) for c in init]
    g, consts, _ = _trace(lambda *xs: (step(*xs), None), avals, "step", "while_loop")
    return scan_p.bind(*consts, *init, body=g, num_consts=len(consts), num_carry=len(init),
                       length=length, reverse=False, checkpoint=None)


@while_p.def_vmap
def _while_vmap(args, dims, *, cond_graph, body_graph, cond_nconsts, body_nconsts,
                max_steps):
    size = next(aval_of(a).shape[d] for a, d in zip(args, dims) if d is not None)
    cc, bc, init = _split_while(args, cond_nconsts, body_nconsts)
    ccd, bcd, kd = _split_while(dims, cond_nconsts, body_nconsts)
    cc, ccd = _to_front(cc, ccd, size)
    bc, bcd = _to_front(bc, bcd, size)
    kb = tuple(d is not None for d in kd)
    while True:
        bg, od = _vmap_graph(body_graph, bcd + tuple(0 if b else None for b in kb), size, kb)
        new = tuple(b or d is not None for b, d in zip(kb, od))
        if new == kb:
            break
        kb = new
    kdims = tuple(0 if b else None for b in kb)
    cg, (pd,) = _vmap_graph(cond_graph, ccd + kdims, size, (False,))
    params = dict(cond_nconsts=len(cc), max_steps=max_steps)
    if pd is None:
        init, _ = _to_front(init, kd, size, force=kb)
        outs = while_p.bind(*cc, *bc, *init, cond_graph=cg, body_graph=bg,
                            body_nconsts=len(bc), **params)
        return outs, list(kdims)
    # a batched predicate: every member is carried batched; finished members keep their
    # carry (select) until the last one is done
    init, _ = _to_front(init, kd, size, force=(True,) * len(init))
    allb = (0,) * len(init)
    bg, _ = _vmap_graph(body_graph, bcd + allb, size, (True,) * len(init))
    cg, _ = _vmap_graph(cond_graph, ccd + allb, size, (True,))
    nc = len(cc)
    key = ("cf_while_masked", bg, cg, nc)
    mb = _cached(body_graph, key, lambda: _rule_graph(
        lambda *xs: _masked_body(cg, bg, xs, nc, len(xs) - len(init)),
        [aval_of(x) for x in cc + bc + init], "body"))
    anyg = _cached(body_graph, key + ("any",), lambda: _rule_graph(
        lambda *xs: [_any(eval_graph(cg, *xs)[0])], [aval_of(x) for x in cc + init], "cond"))
    outs = while_p.bind(*cc, *cc, *bc, *init, cond_graph=anyg, body_graph=mb,
                        body_nconsts=len(cc) + len(bc), **params)
    return outs, [0] * len(init)


def _masked_body(cg, bg, xs, nc, nconsts):
    from mirax.ops.elementwise import select
    from mirax.ops.shape import broadcast_in_dim
    cc, bc, carry = list(xs[:nc]), list(xs[nc:nconsts]), list(xs[nconsts:])
    pred = eval_graph(cg, *cc, *carry)[0]
    new = eval_graph(bg, *bc, *carry)
    return [select(broadcast_in_dim(pred, aval_of(c).shape, (0,)), n, c)
            for n, c in zip(new, carry)]


def _any(pred):
    from mirax.ops.elementwise import convert_element_type, gt
    from mirax.ops.reduction import reduce_max
    return gt(reduce_max(convert_element_type(pred, dtypes.int32)), 0)


# --- fori_loop ----------------------------------------------------------------------------
def fori_loop(lower, upper, body_fun, init_val):
    """`for i in range(lower, upper): val = body_fun(i, val)`. Concrete bounds give a scan
    (reverse-differentiable); traced bounds give a while_loop."""
    if not isinstance(lower, Tracer) and not isinstance(upper, Tracer):
        lo, hi = int(np.asarray(lower)), int(np.asarray(upper))
        dt = _index_dtype(lower, upper)
        from mirax.ops.shape import full

        def step(carry, _):
            i, x = carry
            return (i + 1, body_fun(i, x)), None
        (_, out), _ = scan(step, (full((), lo, dt), init_val), None, length=max(hi - lo, 0))
        return out
    from mirax.ops.elementwise import convert_element_type
    dt = _index_dtype(lower, upper)
    lo = convert_element_type(operand(lower, "fori_loop"), dt)
    hi = convert_element_type(operand(upper, "fori_loop"), dt)
    _, out = while_loop(lambda c: c[0] < hi, lambda c: (c[0] + 1, body_fun(c[0], c[1])),
                        (lo, init_val))
    return out


def _index_dtype(lower, upper):
    for b in (lower, upper):
        if hasattr(b, "dtype") and dtypes.is_int(b.dtype):
            return b.dtype
    return dtypes.int32


# --- scan ---------------------------------------------------------------------------------
def scan(f, init, xs=None, length=None, reverse=False, unroll=1, checkpoint=None):
    """JAX's scan: `f(carry, x) -> (carry, y)` over the leading axis of xs; returns
    (final carry, stacked ys). `unroll` is accepted and ignored (the body is compiled once).
    `checkpoint="sqrt"` keeps only every ceil(sqrt(length))-th carry for the backward pass
    and recomputes the rest: O(sqrt T) memory for ~one more forward pass."""
    if checkpoint not in (None, "sqrt"):
        raise ValueError(f"scan: checkpoint must be None or 'sqrt', got {checkpoint!r}")
    init_leaves, init_tree = tree.flatten(init)
    init_leaves = [operand(x, "scan") for x in init_leaves]
    xs_leaves, xs_tree = tree.flatten(xs)
    xs_leaves = [operand(x, "scan") for x in xs_leaves]
    for x in xs_leaves:
        if x.ndim == 0:
            raise ValueError(f"scan: xs leaves need a leading axis to scan over, got {short(x)}")
    lengths = sorted({x.shape[0] for x in xs_leaves})
    if length is not None:
        length = int(length)
        if lengths and lengths != [length]:
            raise ValueError(f"scan: length={length} but xs have leading sizes {lengths}")
    elif len(lengths) > 1:
        raise ValueError("scan: xs leaves have different leading sizes "
                         f"{', '.join(short(x) for x in xs_leaves)}")
    elif not lengths:
        raise ValueError("scan: length must be given when there are no xs")
    else:
        length = lengths[0]
    x_avals = [ShapedArray(x.shape[1:], x.dtype, x.weak_type) for x in xs_leaves]
    nk = len(init_leaves)
    for attempt in range(2):
        avals = [aval_of(x) for x in init_leaves] + x_avals
        y_box = []

        def body(*ls):
            out = f(tree.unflatten(init_tree, list(ls[:nk])),
                    tree.unflatten(xs_tree, list(ls[nk:])))
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                raise TypeError("scan: f must return a pair (carry, y)")
            c_leaves, c_tree = tree.flatten(out[0])
            if c_tree != init_tree:
                raise TypeError(f"scan: f returned a carry of structure {c_tree}, but init "
                                f"has structure {init_tree}")
            y_leaves, y_tree = tree.flatten(out[1])
            y_box.append(y_tree)
            return c_leaves + y_leaves, None
        g, consts, _ = _trace(body, avals, "body", "scan")
        promote = _carry_check("scan", "carry", init_tree, avals[:nk], g.out_avals[:nk],
                               attempt == 0)
        if not promote:
            break
        init_leaves = _promote_weak(init_leaves, promote)
    outs = scan_p.bind(*consts, *init_leaves, *xs_leaves, body=g, num_consts=len(consts),
                       num_carry=nk, length=length, reverse=bool(reverse),
                       checkpoint=checkpoint)
    return tree.unflatten(init_tree, outs[:nk]), tree.unflatten(y_box[0], outs[nk:])


def map(f, xs):  # noqa: A001 (lax.map)
    """`stack([f(x) for x in xs])` over the leading axis, as a scan."""
    return scan(lambda c, x: (c, f(x)), None, xs)[1]


def _split_scan(args, num_consts, num_carry):
    return (list(args[:num_consts]), list(args[num_consts:num_consts + num_carry]),
            list(args[num_consts + num_carry:]))


@scan_p.def_abstract_eval
def _scan_abstract_eval(*avals, body, num_consts, num_carry, length, reverse, checkpoint):
    consts, carry, xs = _split_scan(avals, num_consts, num_carry)
    for x, b in zip(xs, body.in_avals[num_consts + num_carry:]):
        if tuple(x.shape) != (length,) + tuple(b.shape) or x.dtype != b.dtype:
            raise TypeError(f"scan: xs entry {short(x)} does not match length {length} and "
                            f"the body's input {short(b)}")
    outs = body.out_avals
    for k, (a, b) in enumerate(zip(carry, outs[:num_carry])):
        if not _same(a, b):
            raise TypeError(f"scan: carry[{k}] changed from {short(a)} to {short(b)}")
    return [a.update(weak_type=a.weak_type and b.weak_type)
            for a, b in zip(carry, outs)] + [_batched(y, length) for y in outs[num_carry:]]


@scan_p.def_impl
def _scan_impl(*args, body, num_consts, num_carry, length, reverse, checkpoint):
    consts, carry, xs = _split_scan(args, num_consts, num_carry)
    run = _run(body)
    ys = [np.empty((length,) + tuple(a.shape), a.dtype) for a in body.out_avals[num_carry:]]
    for i in (range(length - 1, -1, -1) if reverse else range(length)):
        out = run(*consts, *carry, *[x[i] for x in xs])
        carry = out[:num_carry]
        for y, o in zip(ys, out[num_carry:]):
            y[i] = o
    return [np.asarray(c) for c in carry] + ys


@scan_p.def_jvp
def _scan_jvp(primals, tangents, *, body, num_consts, num_carry, length, reverse,
              checkpoint):
    from mirax.transforms.jvp import instantiate
    nc, nk = num_consts, num_carry
    consts, init, xs = _split_scan(primals, nc, nk)
    ct_, kt, xt = _split_scan(tangents, nc, nk)
    cnz = tuple(t is not None for t in ct_)
    xnz = tuple(t is not None for t in xt)
    knz = tuple(t is not None and _is_float(x) for t, x in zip(kt, init))
    ny = len(body.outputs) - nk
    while True:
        jg, onz = _jvp_graph(body, cnz + knz + xnz, knz + (False,) * ny)
        new = tuple(a or b for a, b in zip(knz, onz[:nk]))
        if new == knz:
            break
        knz = new
    ynz = onz[nk:]
    nx, nkt, nyt = len(xs), sum(knz), sum(ynz)
    jg = _permute(jg, inputs=_interleave([nc, nk, nx], [sum(cnz), nkt, sum(xnz)]),
                  outputs=_interleave([nk, ny], [nkt, nyt]))
    kts = [instantiate(t, x) for t, x, z in zip(kt, init, knz) if z]
    res = scan_p.bind(*consts, *[t for t in ct_ if t is not None], *init, *kts, *xs,
                      *[t for t in xt if t is not None], body=jg, num_consts=nc + sum(cnz),
                      num_carry=nk + nkt, length=length, reverse=reverse,
                      checkpoint=checkpoint)
    k_out, k_t, y_out, y_t = (res[:nk], iter(res[nk:nk + nkt]), res[nk + nkt:nk + nkt + ny],
                              iter(res[nk + nkt + ny:]))
    return k_out + y_out, ([next(k_t) if z else None for z in knz] +
                           [next(y_t) if z else None for z in ynz])


@scan_p.def_vmap
def _scan_vmap(args, dims, *, body, num_consts, num_carry, length, reverse, checkpoint):
    size = next(aval_of(a).shape[d] for a, d in zip(args, dims) if d is not None)
    nc, nk = num_consts, num_carry
    consts, init, xs = _split_scan(args, nc, nk)
    cd, kd, xd = _split_scan(dims, nc, nk)
    consts, cd = _to_front(consts, cd, size)
    xs, xd = _to_front(xs, xd, size, at=1)
    ny = len(body.outputs) - nk
    kb = tuple(d is not None for d in kd)
    while True:
        kdims = tuple(0 if b else None for b in kb)
        bg, od = _vmap_graph(body, cd + kdims + xd, size, kb + (False,) * ny)
        new = tuple(b or d is not None for b, d in zip(kb, od[:nk]))
        if new == kb:
            break
        kb = new
    init, _ = _to_front(init, kd, size, force=kb)
    outs = scan_p.bind(*consts, *init, *xs, body=bg, num_consts=nc, num_carry=nk,
                       length=length, reverse=reverse, checkpoint=checkpoint)
    return outs, list(kdims) + [None if d is None else 1 for d in od[nk:]]


@scan_p.def_vjp
def _scan_vjp(cts, outs, *primals, body, num_consts, num_carry, length, reverse,
              checkpoint):
    from mirax.ops.shape import rev
    nc, nk = num_consts, num_carry
    consts, init, xs = _split_scan(primals, nc, nk)
    ct_k, ct_y = list(cts[:nk]), list(cts[nk:])
    if checkpoint == "sqrt" and length >= 4:
        if reverse:  # work in forward order
            xs, ct_y = [rev(x, (0,)) for x in xs], [rev(c, (0,)) for c in ct_y]
        ct_c, ct_i, ct_x = _scan_bwd_sqrt(body, nc, nk, consts, init, xs, ct_k, ct_y, length)
        if reverse:
            ct_x = [None if c is None else rev(c, (0,)) for c in ct_x]
    else:
        ct_c, ct_i, ct_x = _scan_bwd(body, nc, nk, consts, init, xs, ct_k, ct_y, length,
                                     reverse)
    return ct_c + ct_i + ct_x


def _stack_graph(body: Graph, nc: int, nk: int) -> Graph:
    """(consts, c, x) -> (c', c): a scan of it stacks the carry before every step."""
    return _cached(body, ("cf_stack",), lambda: _rule_graph(
        lambda *a: eval_graph(body, *a)[:nk] + list(a[nc:nc + nk]), body.in_avals,
        "save_carries"))


def _bwd_graph(body: Graph, nc: int, nk: int) -> Graph:
    """One reverse step: (consts | acc, ct_c | c, x, ct_y) -> (acc', ct_c_prev | ct_x),
    over the float consts / carries / xs / ys only."""
    from mirax.ops.elementwise import add
    from mirax.transforms.vjp import vjp_flat
    ins, outs = body.in_avals, body.out_avals
    dc = [dtypes.is_float(a.dtype) for a in ins[:nc]]
    dk = [dtypes.is_float(a.dtype) for a in ins[nc:nc + nk]]
    dx = [dtypes.is_float(a.dtype) for a in ins[nc + nk:]]
    dy = [dtypes.is_float(a.dtype) for a in outs[nk:]]
    nx = len(dx)

    def fn(*a):
        it = iter(a)
        consts = [next(it) for _ in range(nc)]
        acc = [next(it) for _ in range(sum(dc))]
        ct_c = iter([next(it) for _ in range(sum(dk))])
        c = [next(it) for _ in range(nk)]
        x = [next(it) for _ in range(nx)]
        ct_y = iter([next(it) for _ in range(sum(dy))])
        _, bwd = vjp_flat(lambda *ys: eval_graph(body, *ys), consts + c + x)
        res = bwd([next(ct_c) if d else None for d in dk] +
                  [next(ct_y) if d else None for d in dy])
        g_c, g_k, g_x = res[:nc], res[nc:nc + nk], res[nc + nk:]
        acc = [add(s, g) for s, g in zip(acc, [g for g, d in zip(g_c, dc) if d])]
        return (acc + [g for g, d in zip(g_k, dk) if d] + [g for g, d in zip(g_x, dx) if d])

    def build():
        pick = (lambda avals, mask: [a for a, m in zip(avals, mask) if m])
        avals = (list(ins[:nc]) + pick(ins[:nc], dc) + pick(ins[nc:nc + nk], dk) +
                 list(ins[nc:]) + pick(outs[nk:], dy))
        return _rule_graph(fn, avals, f"bwd_{body.name}")
    return _cached(body, ("cf_bwd",), build)


def _scan_bwd(body, nc, nk, consts, init, xs, ct_k, ct_y, length, reverse):
    """Cotangents (consts, init, xs) of a scan: save carries, then a reverse scan that
    recomputes each step's vjp. Entries of non-float inputs are None."""
    from mirax.transforms.jvp import instantiate
    params = dict(num_consts=nc, length=length, checkpoint=None)
    saved = scan_p.bind(*consts, *init, *xs, body=_stack_graph(body, nc, nk), num_carry=nk,
                        reverse=reverse, **params)[nk:]
    dc = [_is_float(c) for c in consts]
    dk = [_is_float(c) for c in init]
    dx = [_is_float(x) for x in xs]
    dy = [dtypes.is_float(a.dtype) for a in body.out_avals[nk:]]
    acc0 = [instantiate(None, c) for c, d in zip(consts, dc) if d]
    ck = [c for c, d in zip(ct_k, dk) if d]
    cy = [c for c, d in zip(ct_y, dy) if d]
    res = scan_p.bind(*consts, *acc0, *ck, *saved, *xs, *cy, body=_bwd_graph(body, nc, nk),
                      num_carry=len(acc0) + len(ck), reverse=not reverse, **params)
    acc, rk, rx = iter(res[:len(acc0)]), iter(res[len(acc0):len(acc0) + len(ck)]), \
        iter(res[len(acc0) + len(ck):])
    return ([next(acc) if d else None for d in dc], [next(rk) if d else None for d in dk],
            [next(rx) if d else None for d in dx])


def _scan_bwd_sqrt(body, nc, nk, consts, init, xs, ct_k, ct_y, length):
    """`_scan_bwd` (forward order) keeping only ceil(sqrt(T)) checkpoint carries."""
    from mirax.ops.elementwise import add
    from mirax.ops.shape import concatenate, reshape, slice_in_dim
    seg = math.isqrt(length - 1) + 1
    nseg = length // seg
    main, tail = nseg * seg, length - nseg * seg

    def split(v):
        a = aval_of(v)
        head = reshape(slice_in_dim(v, 0, main), (nseg, seg) + tuple(a.shape[1:]))
        return head, (slice_in_dim(v, main, length) if tail else None)
    xs_m, xs_t = zip(*[split(x) for x in xs]) if xs else ((), ())
    ct_m, ct_t = zip(*[split(c) for c in ct_y]) if ct_y else ((), ())
    xs_m, xs_t, ct_m, ct_t = list(xs_m), list(xs_t), list(ct_m), list(ct_t)
    sub = dict(num_consts=nc, num_carry=nk, length=seg, reverse=False, checkpoint=None)

    def seg_fwd(*a):  # (consts, c, xseg) -> (c_end, c)
        return scan_p.bind(*a, body=body, **sub)[:nk] + list(a[nc:nc + nk])
    fg = _cached(body, ("cf_sqrt_fwd", seg), lambda: _rule_graph(
        seg_fwd, list(body.in_avals[:nc + nk]) +
        [_batched(a, seg) for a in body.in_avals[nc + nk:]], "save_segments"))
    res = scan_p.bind(*consts, *init, *xs_m, body=fg, num_consts=nc, num_carry=nk,
                      length=nseg, reverse=False, checkpoint=None)
    c_main, saved = res[:nk], res[nk:]
    if tail:
        g_c, ct_k, g_xt = _scan_bwd(body, nc, nk, consts, c_main, xs_t, ct_k, ct_t, tail,
                                    False)
    dc = [_is_float(c) for c in consts]
    dk = [_is_float(c) for c in init]
    dx = [_is_float(x) for x in xs]
    dy = [dtypes.is_float(a.dtype) for a in body.out_avals[nk:]]
    nx = len(xs)

    def seg_bwd(*a):  # (consts | acc, ct_c | c0, xseg, ct_yseg) -> (acc', ct_c0 | ct_xseg)
        it = iter(a)
        cs = [next(it) for _ in range(nc)]
        acc = [next(it) for _ in range(sum(dc))]
        ctc = iter([next(it) for _ in range(sum(dk))])
        c0 = [next(it) for _ in range(nk)]
        xseg = [next(it) for _ in range(nx)]
        cty = iter([next(it) for _ in range(sum(dy))])
        ctc = [next(ctc) if d else None for d in dk]
        cty = [next(cty) if d else None for d in dy]
        gc, gk, gx = _scan_bwd(body, nc, nk, cs, c0, xseg, ctc, cty, seg, False)
        acc = [add(s, g) for s, g in zip(acc, [g for g in gc if g is not None])]
        return acc + [g for g in gk if g is not None] + [g for g in gx if g is not None]
    ins = body.in_avals
    pick = (lambda avals, mask: [x for x, m in zip(avals, mask) if m])
    bg = _cached(body, ("cf_sqrt_bwd", seg), lambda: _rule_graph(
        seg_bwd, list(ins[:nc]) + pick(ins[:nc], dc) + pick(ins[nc:nc + nk], dk) +
        list(ins[nc:nc + nk]) + [_batched(a, seg) for a in ins[nc + nk:]] +
        [_batched(a, seg) for a in pick(body.out_avals[nk:], dy)], "bwd_segments"))
    from mirax.transforms.jvp import instantiate
    acc0 = [instantiate(None, c) for c, d in zip(consts, dc) if d]
    ck = [c for c, d in zip(ct_k, dk) if d]
    res = scan_p.bind(*consts, *acc0, *ck, *saved, *xs_m, *pick(ct_m, dy), body=bg,
                      num_consts=nc, num_carry=len(acc0) + len(ck), length=nseg,
                      reverse=True, checkpoint=None)
    acc = res[:len(acc0)]
    rk = iter(res[len(acc0):len(acc0) + len(ck)])
    rx = iter(res[len(acc0) + len(ck):])
    if tail:
        acc = [add(a, g) for a, g in zip(acc, [g for g in g_c if g is not None])]
    acc = iter(acc)
    g_xt = iter(g_xt if tail else [])
    ct_x = []
    for x, d in zip(xs, dx):
        if not d:
            ct_x.append(None)
            continue
        r = next(rx)
        r = reshape(r, (main,) + tuple(aval_of(x).shape[1:]))
        ct_x.append(concatenate([r, next(g_xt)], 0) if tail else r)
    return ([next(acc) if d else None for d in dc], [next(rk) if d else None for d in dk],
            ct_x)
