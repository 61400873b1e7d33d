"""Composite (fused) primitives: a primitive with a body written in basic primitives.

`composite(name, body, ...)` declares one. Its pieces, and where each comes from:
- abstract eval: traced from the body (Primitive.abstract_eval falls back to it);
- impl: a fused NumPy kernel when given, else the body evaluated eagerly;
- jvp: the jvp of the body (trace-through), unless a rule is given;
- vjp: when `bwd_impl` is given, a second composite `<name>_bwd` carries the backward
  pass: its body is the vjp of the forward body, its impl the fused backward kernel. So a
  first derivative runs the fused kernel, and differentiating it again goes through the
  body. Without `bwd_impl`, the vjp is the vjp of the body;
- vmap: a rule factory `vmap(prim) -> rule` when given (`batch_front` for ops on trailing
  axes), else the vmap of the body.

The invariant: impl(*xs) == body(*xs) (tests check every fused kernel against its body,
forward and backward), so a backend may run either; `mirax.compiler.decompose` inlines
bodies.
"""
from __future__ import annotations

import numpy as np

from mirax.core import dtypes
from mirax.core.array import Array
from mirax.core.primitive import Primitive
from mirax.core.trace import aval_of, new_base
from mirax.graph.build import traced_abstract_eval
from mirax.ops.common import batch_size
from mirax.interpreters.jvp import jvp_flat
from mirax.interpreters.vjp import vjp_flat
from mirax.interpreters.vmap import vmap_flat, move_bdim

COMPOSITES: dict[str, Primitive] = {}


# --- helpers for the fused NumPy kernels of the composite families (nn, graph_ops, quant) --
def cast_like(a, like):
    """A kernel's result in the dtype of `like` (NumPy may have widened it)."""
    return np.asarray(a).astype(like.dtype, copy=False)


def in_float32(fn):
    """`fn` with 16-bit float arrays computed in float32 and its float32 results rounded
    back to that dtype, when every float argument has that one dtype: NumPy sums a
    bfloat16 array in bfloat16 (a softmax over rows of 1000 came out 8% off, a layer_norm
    10%; in float32, rounded once, 0.4%, as JAX)."""
    def run(*args, **kw):
        floats = {a.dtype for a in args if getattr(a, "dtype", None) is not None and
                  dtypes.is_inexact(a.dtype)}
        low = floats.pop() if len(floats) == 1 else None
        if low not in dtypes.LOW_FLOATS:
            return fn(*args, **kw)
        out = fn(*(a.astype(np.float32) if getattr(a, "dtype", None) == low else a
                   for a in args), **kw)
        back = (lambda r: r.astype(low) if r.dtype == np.float32 else r)
        return [back(r) for r in out] if isinstance(out, list) else back(out)
    return run


def quiet_np(fn):
    """`fn` with NumPy's floating-point warnings off: kernels produce inf / NaN exactly
    where the body does, and say nothing about it."""
    def run(*args, **kw):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
            return fn(*args, **kw)
    return run


def _as_list(out, multiple):
    return list(out) if multiple else [out]


def eval_body(prim: Primitive, *args, **params):
    """Run a composite's body on `args` with whatever interpreters are active."""
    return prim.decomposition(*args, **params)


def _eager_body(prim):
    """An impl that evaluates the body eagerly (no fused kernel)."""
    def impl(*bufs, **params):
        with new_base():
            out = prim.decomposition(*(Array(b) for b in bufs), **params)
        if prim.multiple_results:
            return [o._buf for o in out]
        return out._buf
    return impl


def _body_jvp(prim):
    def jvp(primals, tangents, **params):
        outs, touts = jvp_flat(
            lambda *xs: _as_list(prim.decomposition(*xs, **params), prim.multiple_results),
            list(primals), list(tangents))
        return (outs, touts) if prim.multiple_results else (outs[0], touts[0])
    return jvp


def _body_vjp(prim):
    def vjp(ct, out, *primals, **params):
        _, bwd = vjp_flat(
            lambda *xs: _as_list(prim.decomposition(*xs, **params), prim.multiple_results),
            list(primals))
        res = bwd(_as_list(ct, prim.multiple_results))
        return [r if dtypes.is_inexact(aval_of(x).dtype) else None
                for r, x in zip(res, primals)]
    return vjp


def _body_vmap(prim):
    def vmap(args, dims, **params):
        size = batch_size(args, dims)
        outs = vmap_flat(
            lambda *xs: _as_list(prim.decomposition(*xs, **params), prim.multiple_results),
            list(args), list(dims), size)
        return (outs, [0] * len(outs)) if prim.multiple_results else (outs[0], 0)
    return vmap


def batch_front(prim, row_args=None):
    """vmap rule for ops that treat leading axes as independent rows (elementwise ops,
    ops on trailing axes given by negative axis numbers): move every batch axis to the
    front, broadcast the unbatched row operands, and bind again.

    `row_args` (a set of operand indices) names the operands that carry rows; when an
    operand outside it is batched (a layer_norm weight, say) the body's vmap is used."""
    fallback = _body_vmap(prim)

    def vmap(args, dims, **params):
        rows = range(len(args)) if row_args is None else row_args
        if any(d is not None and i not in rows for i, (d) in enumerate(dims)):
            return fallback(args, dims, **params)
        size = batch_size(args, dims)
        moved = [move_bdim(a, d, 0, size) if i in rows else a
                 for i, (a, d) in enumerate(zip(args, dims))]
        out = prim.bind(*moved, **params)
        return (out, [0] * len(out)) if prim.multiple_results else (out, 0)
    return vmap


def composite(name: str, body, *, impl=None, multiple_results: bool = False,
              jvp=None, vjp=None, vmap=None, abstract_eval=None,
              bwd_impl=None, bwd_vmap=None) -> Primitive:
    """Declare a composite primitive `name` with `body(*args, **params)`.

    `bwd_impl(*cts, *outs, *primals, wrt, nout, **params) -> list` is a fused backward
    kernel returning the cotangents of the primals whose indices are in `wrt` (the float
    ones); `nout` is the number of outputs (1 unless `multiple_results`). `vmap` and
    `bwd_vmap` are rule factories `fn(prim) -> rule`."""
    p = Primitive(name, multiple_results=multiple_results)
    p.def_decompose(body)
    p.def_abstract_eval(abstract_eval if abstract_eval is not None else
                        traced_abstract_eval(p))
    p.def_impl(impl if impl is not None else _eager_body(p))
    p.fused = impl is not None
    p.def_jvp(jvp if jvp is not None else _body_jvp(p))
    if vjp is not None:
        p.def_vjp(vjp)
    elif bwd_impl is not None:
        p.bwd = _backward_composite(p, bwd_impl, bwd_vmap)
        p.def_vjp(_fused_vjp(p, p.bwd))
    else:
        p.def_vjp(_body_vjp(p))
    p.def_vmap(vmap(p) if vmap is not None else _body_vmap(p))
    COMPOSITES[name] = p
    return p


def _backward_composite(fwd: Primitive, bwd_impl, bwd_vmap) -> Primitive:
    """`<name>_bwd(*cts, *outs, *primals, wrt, nout, **params)`: the backward composite,
    whose body is the vjp of the forward body (the outs are there for the fused kernel)."""
    def body(*args, wrt, nout, **params):
        cts, primals = args[:nout], args[2 * nout:]
        _, bwd = vjp_flat(
            lambda *xs: _as_list(fwd.decomposition(*xs, **params), fwd.multiple_results),
            list(primals))
        res = bwd(list(cts))
        return [res[i] for i in wrt]

    return composite(fwd.name + "_bwd", body, impl=bwd_impl, multiple_results=True,
                     vmap=bwd_vmap)


def _fused_vjp(fwd: Primitive, bwd: Primitive):
    def vjp(ct, out, *primals, **params):
        wrt = tuple(i for i, x in enumerate(primals) if dtypes.is_inexact(aval_of(x).dtype))
        cts = _as_list(ct, fwd.multiple_results)
        outs = _as_list(out, fwd.multiple_results)
        res = bwd.bind(*cts, *outs, *primals, wrt=wrt, nout=len(outs), **params)
        full = [None] * len(primals)
        for i, r in zip(wrt, res):
            full[i] = r
        return full
    return vjp
