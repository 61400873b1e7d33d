"""Reverse mode on a tape.

While the function runs, each primitive application on a `VJPTracer` is evaluated one
level down and recorded (primitive, params, input tracers, primal inputs, outputs). The
backward pass walks the tape in reverse, applying vjp rules through `bind`, so whatever
interpreter is active then (a jvp for hvp, another tape for grad of grad, staging under
jit) records the backward pass in turn: every derivative is itself differentiable.
Fan-out cotangents are summed; None is a symbolic zero cotangent.

Where it sits: the interpreter behind mx.grad / vjp / jacrev (transforms/vjp.py), the
control-flow and call primitives' vjp rules (ops) and mx.autograd.

Source lines: while something stages (jit, make_graph), each tape entry keeps the user's
source line of its forward op, and its vjp rule runs with that line set (`set_source`),
so the backward nodes in a listing point at the forward op they differentiate.
"""
from __future__ import annotations

from mirax.core import dtypes
from mirax.core.trace import (PrimalTracer, Trace, aval_of, new_trace, owned, set_source,
                               state, wrappers, zeros_like_aval)
from mirax.graph.build import user_source_line


class VJPTracer(PrimalTracer):
    __slots__ = ("idx",)

    def __init__(self, trace, primal, idx: int):
        self._trace = trace
        self.primal = primal
        self._aval = aval_of(primal)
        self.idx = idx  # this value's slot in the tape's cotangent table


class Entry:
    __slots__ = ("prim", "params", "in_idx", "primals", "out", "out_idx", "source")

    def __init__(self, prim, params, in_idx, primals, out, out_idx, source=None):
        self.prim, self.params, self.in_idx = prim, params, in_idx
        self.primals, self.out, self.out_idx = primals, out, out_idx
        self.source = source  # the forward op's user source line (None: not known)


class VJPTrace(Trace):
    def __init__(self):
        self.tape: list[Entry] = []
        self.count = 0
        self.out_idx: list = []  # the traced function's outputs (vjp_flat)

    def new(self, primal) -> VJPTracer:
        self.count += 1
        return VJPTracer(self, primal, self.count - 1)

    def pure(self, val):
        return val  # a constant: not on the tape

    def process_primitive(self, prim, tracers, params):
        ins = [t.primal if isinstance(t, VJPTracer) and t._trace is self else t
               for t in tracers]
        in_idx = [t.idx if isinstance(t, VJPTracer) and t._trace is self and
                  dtypes.is_inexact(t._aval.dtype) else None for t in tracers]
        out = prim.bind(*ins, **params)
        if all(i is None for i in in_idx):
            return out
        if prim.vjp_rule is None:
            raise NotImplementedError(f"grad: no reverse-mode rule for '{prim.name}'")
        outs = out if prim.multiple_results else [out]
        tracers_out = [self.new(o) for o in outs]
        source = state.source  # (looked up only when staging: eager grad never shows it)
        if source is None and state.dynamic is not state.eval_trace:
            source = user_source_line()
        self.tape.append(Entry(prim, params, in_idx, ins, out,
                               [t.idx for t in tracers_out], source))
        return tracers_out if prim.multiple_results else tracers_out[0]


def backward(trace: VJPTrace, out_idx: list, cts: list, in_idx: list) -> list:
    """Cotangents of the tape inputs `in_idx` given cotangents of outputs `out_idx`."""
    add = wrappers.add
    table: dict[int, object] = {}
    for i, ct in zip(out_idx, cts):
        if i is not None and ct is not None:
            table[i] = ct if i not in table else add(table[i], ct)
    for e in reversed(trace.tape):
        out_cts = [table.pop(i, None) for i in e.out_idx]
        if all(c is None for c in out_cts):
            continue
        params = e.params
        if e.prim.vjp_takes_needs:  # the rule skips cotangents nobody wants (a weight's)
            params = dict(params, needs=tuple(i is not None for i in e.in_idx))
        with set_source(e.source):  # the rule's ops carry the forward op's line
            if e.prim.multiple_results:
                out_cts = [c if c is not None else zeros_like_aval(aval_of(o))
                           for c, o in zip(out_cts, e.out)]
                in_cts = e.prim.vjp_rule(out_cts, e.out, *e.primals, **params)
            else:
                in_cts = e.prim.vjp_rule(out_cts[0], e.out, *e.primals, **params)
            for i, c in zip(e.in_idx, in_cts):
                if i is None or c is None:
                    continue
                table[i] = c if i not in table else add(table[i], c)
    return [table.get(i) if i is not None else None for i in in_idx]


def vjp_flat(fn, primals: list, trace_box: list | None = None):
    """Run fn(*primals) -> list on a tape. Returns (outputs, backward_fn(cts) -> cts)."""
    trace = VJPTrace()
    if trace_box is not None:
        trace_box.append(trace)
    with new_trace(trace):
        ins = [trace.new(p) for p in primals]
        outs = fn(*ins)
    out_primals = [o.primal if owned(o, trace) else o for o in outs]
    out_idx = trace.out_idx = [o.idx if owned(o, trace) else None for o in outs]
    in_idx = [t.idx for t in ins]
    in_avals = [aval_of(p) for p in primals]

    def backward_fn(cts: list) -> list:
        res = backward(trace, out_idx, cts, in_idx)
        return [zeros_like_aval(a) if c is None and
                dtypes.is_inexact(a.dtype) else c for c, a in zip(res, in_avals)]
    return out_primals, backward_fn


def source_of(trace: VJPTrace, idx):
    """The source line of the forward op that made tape value `idx` (None: not known)."""
    if idx is not None:
        for e in reversed(trace.tape):
            if idx in e.out_idx:
                return e.source
    return None
