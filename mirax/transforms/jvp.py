"""Forward mode: tracers carry (primal, tangent); a tangent of None is a symbolic zero.

A primitive whose inputs all have zero tangents is simply evaluated one level down and
its result is not a tracer of this interpreter at all (nothing to carry)."""
from __future__ import annotations

from mirax.core import dtypes
from mirax.core.trace import (PrimalTracer, Trace, aval_of, new_trace, owned,
                               zeros_like_aval)


class JVPTracer(PrimalTracer):
    __slots__ = ("tangent",)

    def __init__(self, trace, primal, tangent):
        self._trace = trace
        self.primal = primal
        self.tangent = tangent
        self._aval = aval_of(primal)


class JVPTrace(Trace):
    def pure(self, val):
        return JVPTracer(self, val, None)

    def process_primitive(self, prim, tracers, params):
        primals = [t.primal for t in tracers]
        tangents = [t.tangent for t in tracers]
        if all(t is None for t in tangents):
            return prim.bind(*primals, **params)
        if prim.jvp_rule is None:
            raise NotImplementedError(f"jvp: no differentiation rule for '{prim.name}'")
        out, t_out = prim.jvp_rule(primals, tangents, **params)
        if prim.multiple_results:
            return [JVPTracer(self, o, t) for o, t in zip(out, t_out)]
        return JVPTracer(self, out, t_out)


def has_tangent_space(x) -> bool:
    return dtypes.is_inexact(aval_of(x).dtype)


def jvp_flat(fn, primals: list, tangents: list, trace_box: list | None = None
             ) -> tuple[list, list]:
    """Run fn(*primals) -> list with forward-mode tangents; tangents may hold None."""
    trace = JVPTrace()
    if trace_box is not None:
        trace_box.append(trace)
    with new_trace(trace):
        ins = [JVPTracer(trace, p, t if has_tangent_space(p) else None)
               for p, t in zip(primals, tangents)]
        outs = fn(*ins)
    return ([o.primal if owned(o, trace) else o for o in outs],
            [o.tangent if owned(o, trace) else None for o in outs])


def instantiate(t, like):
    """A concrete zero for a symbolic-zero tangent (None), of `like`'s aval."""
    if t is not None:
        return t
    a = aval_of(like)
    if not dtypes.is_inexact(a.dtype):
        from mirax.ops.shape import full
        return full(a.shape, 0, dtypes.float32)  # float0 stand-in: integer inputs
    return zeros_like_aval(a)


# --- public API ---------------------------------------------------------------------------
def jvp(f, primals, tangents, has_aux=False):
    """(f(*primals), directional derivative along tangents); both are tuples as in JAX."""
    from mirax.core import tree
    from mirax.ops.common import operand, short
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp: primals and tangents must be tuples (one entry per argument)")
    p_leaves, p_tree = tree.flatten(list(primals))
    t_leaves, t_tree = tree.flatten(list(tangents))
    if p_tree != t_tree:
        raise ValueError(f"jvp: tangent structure {t_tree} does not match primals {p_tree}")
    p_leaves = [operand(x, "jvp") for x in p_leaves]
    ts = []
    for p, t in zip(p_leaves, t_leaves):
        t = operand(t, "jvp")
        if tuple(t.shape) != tuple(p.shape):
            raise ValueError(f"jvp: tangent {short(t)} does not match primal {short(p)}")
        if dtypes.is_inexact(p.dtype) and t.dtype != p.dtype:
            from mirax.ops.elementwise import convert_element_type
            t = convert_element_type(t, p.dtype)
        ts.append(t)
    box, aux_box = [], []

    def flat_fn(*xs):
        out = f(*tree.unflatten(p_tree, list(xs)))
        if has_aux:
            out, aux = out
            aux_box.append(aux)
        leaves, out_tree = tree.flatten(out)
        box.append(out_tree)
        return [operand(o, "jvp") for o in leaves]

    trace_box = []
    outs, touts = jvp_flat(flat_fn, p_leaves, ts, trace_box)
    touts = [instantiate(t, o) for t, o in zip(touts, outs)]
    res = tree.unflatten(box[0], outs), tree.unflatten(box[0], touts)
    if has_aux:
        from mirax.transforms.api_util import strip_aux
        return res + (strip_aux(aux_box[0], trace_box[0]),)
    return res


def linearize(f, *primals, has_aux=False):
    """(f(*primals), f_jvp) where f_jvp(*tangents) is the jvp at primals; with has_aux, f
    returns (out, aux) and so does this: (out, f_jvp, aux).

    NOTE: f_jvp re-runs the forward pass with tangents (JAX instead stages a linear
    graph once); the values are identical."""
    res = jvp(f, primals, tuple(_zeros_like_tree(p) for p in primals), has_aux=has_aux)

    def f_jvp(*tangents):
        return jvp(f, primals, tangents, has_aux=has_aux)[1]
    return (res[0], f_jvp, res[2]) if has_aux else (res[0], f_jvp)


def _zeros_like_tree(t):
    from mirax.core import tree
    from mirax.ops.common import operand
    return tree.map(lambda x: zeros_like_aval(aval_of(operand(x, "linearize"))), t)
