"""Forward mode: tracers carry (primal, tangent); a tangent of None is a symbolic zero.

Where it sits: the interpreter behind mx.jvp / linearize / jacfwd (transforms/jvp.py) and
behind the control-flow and call primitives' jvp rules (ops), which transform their
sub-graphs with `jvp_flat`.

A primitive whose inputs all have zero tangents is simply evaluated one level down and
its result is not a tracer of this interpreter at all (nothing to carry)."""
from __future__ import annotations

from mirax.core import dtypes
from mirax.core.trace import wrappers
from mirax.core.trace import PrimalTracer, Trace, aval_of, new_trace, owned, zeros_like_aval


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
        return wrappers.full(a.shape, 0, dtypes.float32)  # float0 stand-in: integer inputs
    return zeros_like_aval(a)
