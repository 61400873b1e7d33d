"""scan (JAX's lax.scan) as the `scan` primitive with a body sub-graph, and map over it.

Where it sits: mirax.lax re-exports these wrappers (and mirax.ops.control_flow); fori_loop
and while_loop's vjp (ops/loops.py) are built on scan_p; the sub-graph tracing and graph
transforms are ops/subgraph.py's.

Reverse mode: scan stores the carry before every step (one extra forward scan) and runs a
reverse scan that recomputes each step's vjp. `scan(..., checkpoint="sqrt")` stores only
every ceil(sqrt(T))-th carry and recomputes each segment in the backward pass
(O(sqrt T) memory).
"""
from __future__ import annotations

import math


from mirax.core import dtypes, tree
from mirax.core.avals import ShapedArray
from mirax.core.primitive import Primitive
from mirax.core.trace import aval_of
from mirax.graph.graph import Graph
from mirax.graph.interpret import eval_graph
from mirax.core.errors import ShapeError
from mirax.ops.common import batch_size, operand, short
from mirax.ops.subgraph import (
    batched_aval, cached, carry_check, compiled, interleave, is_float, jvp_graph, permute,
    promote_weak, rule_graph, same_aval, to_front, trace_fn, vmap_graph)
from mirax.ops import shape as shape_ops
from mirax.interpreters.jvp import instantiate
from mirax.ops import elementwise as elementwise_ops
from mirax.interpreters.vjp import vjp_flat

scan_p = Primitive("scan", multiple_results=True)


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
        raise ShapeError("scan: xs leaves have different leading sizes "
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
        g, consts, _ = trace_fn(body, avals, "body", "scan")
        promote = carry_check("scan", "carry", init_tree, avals[:nk], g.out_avals[:nk],
                               attempt == 0)
        if not promote:
            break
        init_leaves = promote_weak(init_leaves, promote)
    outs = scan_p.bind(*consts, *init_leaves, *xs_leaves, body=g, num_consts=len(consts),
                       num_carry=nk, length=length, reverse=bool(reverse),
                       checkpoint=checkpoint)
    return tree.unflatten(init_tree, outs[:nk]), tree.unflatten(y_box[0], outs[nk:])


def _split_scan(args, num_consts, num_carry):
    return (list(args[:num_consts]), list(args[num_consts:num_consts + num_carry]),
            list(args[num_consts + num_carry:]))


@scan_p.def_abstract_eval
def _scan_abstract_eval(*avals, body, num_consts, num_carry, length, reverse, checkpoint):
    consts, carry, xs = _split_scan(avals, num_consts, num_carry)
    for x, b in zip(xs, body.in_avals[num_consts + num_carry :]):
        if tuple(x.shape) != (length,) + tuple(b.shape) or x.dtype != b.dtype:
            raise TypeError(f"scan: xs entry {short(x)} does not match length {length} and "
                            f"the body's input {short(b)}")
    outs = body.out_avals
    for k, (a, b) in enumerate(zip(carry, outs[:num_carry])):
        if not same_aval(a, b):
            raise TypeError(f"scan: carry[{k}] changed from {short(a)} to {short(b)}")
    return [a.update(weak_type=a.weak_type and b.weak_type) for a, b in zip(carry, outs)] + [
        batched_aval(y, length) for y in outs[num_carry:]
    ]


@scan_p.def_impl
def _scan_impl(*args, body, num_consts, num_carry, length, reverse, checkpoint):
    consts, carry, xs = _split_scan(args, num_consts, num_carry)
    run, be = compiled(body, args)
    ys = [be.empty((length,) + tuple(a.shape), a.dtype) for a in body.out_avals[num_carry:]]
    for i in range(length - 1, -1, -1) if reverse else range(length):
        out = run(*consts, *carry, *[x[i] for x in xs])
        carry = out[:num_carry]
        for y, o in zip(ys, out[num_carry:]):
            y[i] = o
    return [be.adopt(c) for c in carry] + ys


@scan_p.def_jvp
def _scan_jvp(primals, tangents, *, body, num_consts, num_carry, length, reverse, checkpoint):
    nc, nk = num_consts, num_carry
    consts, init, xs = _split_scan(primals, nc, nk)
    ct_, kt, xt = _split_scan(tangents, nc, nk)
    cnz = tuple(t is not None for t in ct_)
    xnz = tuple(t is not None for t in xt)
    knz = tuple(t is not None and is_float(x) for t, x in zip(kt, init))
    ny = len(body.outputs) - nk
    while True:
        jg, onz = jvp_graph(body, cnz + knz + xnz, knz + (False,) * ny)
        new = tuple(a or b for a, b in zip(knz, onz[:nk]))
        if new == knz:
            break
        knz = new
    ynz = onz[nk:]
    nx, nkt, nyt = len(xs), sum(knz), sum(ynz)
    jg = permute(jg, inputs=interleave([nc, nk, nx], [sum(cnz), nkt, sum(xnz)]),
                 outputs=interleave([nk, ny], [nkt, nyt]))
    kts = [instantiate(t, x) for t, x, z in zip(kt, init, knz) if z]
    res = scan_p.bind(*consts, *[t for t in ct_ if t is not None], *init, *kts, *xs,
                      *[t for t in xt if t is not None], body=jg, num_consts=nc + sum(cnz),
                      num_carry=nk + nkt, length=length, reverse=reverse, checkpoint=checkpoint)
    k_out, k_t, y_out, y_t = (res[:nk], iter(res[nk:nk + nkt]), res[nk + nkt:nk + nkt + ny],
                              iter(res[nk + nkt + ny:]))
    return k_out + y_out, ([next(k_t) if z else None for z in knz] +
                           [next(y_t) if z else None for z in ynz])


@scan_p.def_vmap
def _scan_vmap(args, dims, *, body, num_consts, num_carry, length, reverse, checkpoint):
    size = batch_size(args, dims)
    nc, nk = num_consts, num_carry
    consts, init, xs = _split_scan(args, nc, nk)
    cd, kd, xd = _split_scan(dims, nc, nk)
    consts, cd = to_front(consts, cd, size)
    xs, xd = to_front(xs, xd, size, at=1)
    ny = len(body.outputs) - nk
    kb = tuple(d is not None for d in kd)
    while True:
        kdims = tuple(0 if b else None for b in kb)
        bg, od = vmap_graph(body, cd + kdims + xd, size, kb + (False,) * ny)
        new = tuple(b or d is not None for b, d in zip(kb, od[:nk]))
        if new == kb:
            break
        kb = new
    init, _ = to_front(init, kd, size, force=kb)
    outs = scan_p.bind(*consts, *init, *xs, body=bg, num_consts=nc, num_carry=nk, length=length,
                       reverse=reverse, checkpoint=checkpoint)
    return outs, list(kdims) + [None if d is None else 1 for d in od[nk:]]


@scan_p.def_vjp
def _scan_vjp(cts, outs, *primals, body, num_consts, num_carry, length, reverse, checkpoint):
    nc, nk = num_consts, num_carry
    consts, init, xs = _split_scan(primals, nc, nk)
    ct_k, ct_y = list(cts[:nk]), list(cts[nk:])
    if checkpoint == "sqrt" and length >= 4:
        if reverse:  # work in forward order
            xs, ct_y = [shape_ops.rev(x, (0,)) for x in xs], [shape_ops.rev(c, (0,)) for c in ct_y]
        ct_c, ct_i, ct_x = _scan_bwd_sqrt(body, nc, nk, consts, init, xs, ct_k, ct_y, length)
        if reverse:
            ct_x = [None if c is None else shape_ops.rev(c, (0,)) for c in ct_x]
    else:
        ct_c, ct_i, ct_x = _scan_bwd(body, nc, nk, consts, init, xs, ct_k, ct_y, length, reverse)
    return ct_c + ct_i + ct_x


def _stack_graph(body: Graph, nc: int, nk: int) -> Graph:
    """(consts, c, x) -> (c', c): a scan of it stacks the carry before every step."""
    return cached(body, ("cf_stack",), lambda: rule_graph(
        lambda *a: eval_graph(body, *a)[:nk] + list(a[nc:nc + nk]), body.in_avals,
        "save_carries"))


def _pick(xs, mask):
    """The entries of xs where mask is true (the float ones, in the backward pass)."""
    return [x for x, m in zip(xs, mask) if m]


def _spread(vals, mask):
    """_pick's inverse: vals in the true places of mask, None in the others."""
    it = iter(vals)
    return [next(it) if m else None for m in mask]


def _float_masks(body: Graph, nk: int, consts, init, xs):
    """Which consts, carries, xs and ys of a scan are float (get cotangents)."""
    return ([is_float(c) for c in consts], [is_float(c) for c in init],
            [is_float(x) for x in xs], [dtypes.is_inexact(a.dtype) for a in body.out_avals[nk:]])


def _bwd_avals(body: Graph, nc: int, nk: int, masks, seg=None):
    """Input avals of a backward step (consts | acc, ct_c | c, x, ct_y); with `seg`, the xs
    and ct_ys are segments of `seg` steps."""
    dc, dk, _, dy = masks
    ins, ys = body.in_avals, _pick(body.out_avals[nk:], dy)
    xs = list(ins[nc + nk :])
    if seg is not None:
        xs, ys = [batched_aval(a, seg) for a in xs], [batched_aval(a, seg) for a in ys]
    return (list(ins[:nc]) + _pick(ins[:nc], dc) + _pick(ins[nc:nc + nk], dk) +
            list(ins[nc:nc + nk]) + xs + ys)


def _split_bwd_args(args, nc, nk, masks):
    """A backward step's operands (consts | acc, ct_c | c, x, ct_y) unpacked, with ct_c and
    ct_y spread to full length (None for non-float entries)."""
    dc, dk, dx, dy = masks
    it = iter(args)

    def take(n):
        return [next(it) for _ in range(n)]

    consts = take(nc)
    acc = take(sum(dc))
    ct_c = _spread(take(sum(dk)), dk)
    c = take(nk)
    x = take(len(dx))
    ct_y = _spread(take(sum(dy)), dy)
    return consts, acc, ct_c, c, x, ct_y


def _bwd_graph(body: Graph, nc: int, nk: int) -> Graph:
    """One reverse step: (consts | acc, ct_c | c, x, ct_y) -> (acc', ct_c_prev | ct_x),
    over the float consts / carries / xs / ys only."""
    ins, outs = body.in_avals, body.out_avals
    fl = lambda avals: [dtypes.is_inexact(a.dtype) for a in avals]
    masks = (fl(ins[:nc]), fl(ins[nc : nc + nk]), fl(ins[nc + nk :]), fl(outs[nk:]))
    dc, dk, dx, _ = masks

    def fn(*a):
        consts, acc, ct_c, c, x, ct_y = _split_bwd_args(a, nc, nk, masks)
        _, bwd = vjp_flat(lambda *ys: eval_graph(body, *ys), consts + c + x)
        res = bwd(ct_c + ct_y)
        g_c, g_k, g_x = res[:nc], res[nc : nc + nk], res[nc + nk :]
        acc = [elementwise_ops.add(s, g) for s, g in zip(acc, _pick(g_c, dc))]
        return acc + _pick(g_k, dk) + _pick(g_x, dx)

    return cached(body, ("cf_bwd",),
                  lambda: rule_graph(fn, _bwd_avals(body, nc, nk, masks), f"bwd_{body.name}"))


def _scan_bwd(body, nc, nk, consts, init, xs, ct_k, ct_y, length, reverse):
    """Cotangents (consts, init, xs) of a scan: save carries, then a reverse scan that
    recomputes each step's vjp. Entries of non-float inputs are None."""
    params = dict(num_consts=nc, length=length, checkpoint=None)
    saved = scan_p.bind(*consts, *init, *xs, body=_stack_graph(body, nc, nk), num_carry=nk,
                        reverse=reverse, **params)[nk:]
    dc, dk, dx, dy = _float_masks(body, nk, consts, init, xs)
    acc0 = [instantiate(None, c) for c in _pick(consts, dc)]
    ck = _pick(ct_k, dk)
    res = scan_p.bind(*consts, *acc0, *ck, *saved, *xs, *_pick(ct_y, dy),
                      body=_bwd_graph(body, nc, nk), num_carry=len(acc0) + len(ck),
                      reverse=not reverse, **params)
    na, nck = len(acc0), len(ck)
    return (_spread(res[:na], dc), _spread(res[na : na + nck], dk), _spread(res[na + nck :], dx))


def _scan_bwd_sqrt(body, nc, nk, consts, init, xs, ct_k, ct_y, length):
    """`_scan_bwd` (forward order) keeping only ceil(sqrt(T)) checkpoint carries."""
    seg = math.isqrt(length - 1) + 1
    nseg = length // seg
    main, tail = nseg * seg, length - nseg * seg

    def split(v):
        a = aval_of(v)
        head = shape_ops.reshape(shape_ops.slice_in_dim(v, 0, main),
                                 (nseg, seg) + tuple(a.shape[1:]))
        return head, (shape_ops.slice_in_dim(v, main, length) if tail else None)

    xs_m, xs_t = zip(*[split(x) for x in xs]) if xs else ((), ())
    ct_m, ct_t = zip(*[split(c) for c in ct_y]) if ct_y else ((), ())
    xs_m, xs_t, ct_m, ct_t = list(xs_m), list(xs_t), list(ct_m), list(ct_t)
    sub = dict(num_consts=nc, num_carry=nk, length=seg, reverse=False, checkpoint=None)

    def seg_fwd(*a):  # (consts, c, xseg) -> (c_end, c)
        return scan_p.bind(*a, body=body, **sub)[:nk] + list(a[nc : nc + nk])

    fg = cached(body, ("cf_sqrt_fwd", seg), lambda: rule_graph(
        seg_fwd, list(body.in_avals[:nc + nk]) +
        [batched_aval(a, seg) for a in body.in_avals[nc + nk:]], "save_segments"))
    res = scan_p.bind(*consts, *init, *xs_m, body=fg, num_consts=nc, num_carry=nk, length=nseg,
                      reverse=False, checkpoint=None)
    c_main, saved = res[:nk], res[nk:]
    if tail:
        g_c, ct_k, g_xt = _scan_bwd(body, nc, nk, consts, c_main, xs_t, ct_k, ct_t, tail, False)
    masks = _float_masks(body, nk, consts, init, xs)
    dc, dk, dx, dy = masks

    def seg_bwd(*a):  # (consts | acc, ct_c | c0, xseg, ct_yseg) -> (acc', ct_c0 | ct_xseg)
        cs, acc, ctc, c0, xseg, cty = _split_bwd_args(a, nc, nk, masks)
        gc, gk, gx = _scan_bwd(body, nc, nk, cs, c0, xseg, ctc, cty, seg, False)
        acc = [elementwise_ops.add(s, g) for s, g in zip(acc, [g for g in gc if g is not None])]
        return acc + [g for g in gk if g is not None] + [g for g in gx if g is not None]

    bg = cached(body, ("cf_sqrt_bwd", seg),
                lambda: rule_graph(seg_bwd, _bwd_avals(body, nc, nk, masks, seg), "bwd_segments"))
    acc0 = [instantiate(None, c) for c in _pick(consts, dc)]
    ck = _pick(ct_k, dk)
    res = scan_p.bind(*consts, *acc0, *ck, *saved, *xs_m, *_pick(ct_m, dy), body=bg, num_consts=nc,
                      num_carry=len(acc0) + len(ck), length=nseg, reverse=True, checkpoint=None)
    acc = res[: len(acc0)]
    rk = iter(res[len(acc0) : len(acc0) + len(ck)])
    rx = iter(res[len(acc0) + len(ck) :])
    if tail:
        acc = [elementwise_ops.add(a, g) for a, g in zip(acc, [g for g in g_c if g is not None])]
    acc = iter(acc)
    g_xt = iter(g_xt if tail else [])
    ct_x = []
    for x, d in zip(xs, dx):
        if not d:
            ct_x.append(None)
            continue
        r = next(rx)
        r = shape_ops.reshape(r, (main,) + tuple(aval_of(x).shape[1:]))
        ct_x.append(shape_ops.concatenate([r, next(g_xt)], 0) if tail else r)
    return ([next(acc) if d else None for d in dc], [next(rk) if d else None for d in dk], ct_x)
