"""Reverse mode on a tape.

While the function runs, each primitive application on a `VJPTracer` is evaluated one
level down and recorded (primitive, params, input tracers, primal inputs, outputs). The
backward pass walks the tape in reverse, applying vjp rules through `bind`, so whatever
interpreter is active then (a jvp for hvp, another tape for grad of grad, staging under
jit) records the backward pass in turn: every derivative is itself differentiable.
Fan-out cotangents are summed; None is a symbolic zero cotangent.
"""
from __future__ import annotations

from mirax.core import dtypes
from mirax.core.trace import (PrimalTracer, Trace, aval_of, new_trace, owned,
                               zeros_like_aval)


class VJPTracer(PrimalTracer):
    __slots__ = ("idx",)

    def __init__(self, trace, primal, idx: int):
        self._trace = trace
        self.primal = primal
        self._aval = aval_of(primal)
        self.idx = idx  # this value's slot in the tape's cotangent table


class Entry:
    __slots__ = ("prim", "params", "in_idx", "primals", "out", "out_idx")

    def __init__(self, prim, params, in_idx, primals, out, out_idx):
        self.prim, self.params, self.in_idx = prim, params, in_idx
        self.primals, self.out, self.out_idx = primals, out, out_idx


class VJPTrace(Trace):
    def __init__(self):
        self.tape: list[Entry] = []
        self.count = 0

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
        self.tape.append(Entry(prim, params, in_idx, ins, out,
                               [t.idx for t in tracers_out]))
        return tracers_out if prim.multiple_results else tracers_out[0]


def backward(trace: VJPTrace, out_idx: list, cts: list, in_idx: list) -> list:
    """Cotangents of the tape inputs `in_idx` given cotangents of outputs `out_idx`."""
    from mirax.ops.elementwise import add
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
    out_idx = [o.idx if owned(o, trace) else None for o in outs]
    in_idx = [t.idx for t in ins]
    in_avals = [aval_of(p) for p in primals]

    def backward_fn(cts: list) -> list:
        res = backward(trace, out_idx, cts, in_idx)
        return [zeros_like_aval(a) if c is None and
                dtypes.is_inexact(a.dtype) else c for c, a in zip(res, in_avals)]
    return out_primals, backward_fn


# --- public API ---------------------------------------------------------------------------
def _scalar_check(name, out, holomorphic=False):
    from mirax.ops.common import short
    a = aval_of(out)
    if a.shape != ():
        raise TypeError(f"{name}: the function must return a scalar (shape ()), got "
                        f"{short(a)}; use mx.vjp or mx.jacrev for non-scalar outputs")
    if holomorphic:
        if not dtypes.is_complex(a.dtype):
            raise TypeError(f"{name}(holomorphic=True): the function must return a complex "
                            f"scalar, got {short(a)}")
    elif dtypes.is_complex(a.dtype):
        raise TypeError(f"{name}: the function must return a real scalar, got {short(a)}; "
                        "for a holomorphic function pass holomorphic=True, otherwise take "
                        "mnp.real / mnp.abs of the output")
    elif not dtypes.is_inexact(a.dtype):
        raise TypeError(f"{name}: the function must return a float scalar, got {short(a)}")


def value_and_grad(f, argnums=0, has_aux=False, holomorphic=False):
    from mirax.core import tree
    from mirax.ops.common import operand
    from mirax.transforms.api_util import check_argnums, check_float_inputs, split_args

    def value_and_grad_f(*args, **kwargs):
        nums = check_argnums("grad", argnums, len(args))
        leaves, treedef, rebuild = split_args(args, nums)
        check_float_inputs("grad", leaves, holomorphic=holomorphic)
        aux_box = []

        def flat_fn(*xs):
            out = f(*rebuild(xs), **kwargs)
            if has_aux:
                if not (isinstance(out, (tuple, list)) and len(out) == 2):
                    raise TypeError("grad(has_aux=True): the function must return a pair "
                                    "(output, aux)")
                out, aux = out
                aux_box.append(aux)
            out = operand(out, "grad")
            _scalar_check("grad", out, holomorphic)
            return [out]

        trace_box = []
        (value,), bwd = vjp_flat(flat_fn, leaves, trace_box)
        grads = bwd([_ones_like(value)])
        g = tree.unflatten(treedef, grads)
        g = g[0] if isinstance(argnums, int) else tuple(g)
        if has_aux:
            from mirax.transforms.api_util import strip_aux
            return (value, strip_aux(aux_box[0], trace_box[0])), g
        return value, g
    value_and_grad_f.__name__ = f"value_and_grad({getattr(f, '__name__', 'f')})"
    value_and_grad_f.__wrapped__ = f  # signature (argument names) for listings and errors
    return value_and_grad_f


def grad(f, argnums=0, has_aux=False, holomorphic=False):
    """The gradient of a real scalar f. For complex inputs it is JAX's convention: the
    conjugate of the steepest-ascent direction, df/dx - i df/dy (z = x + iy). With
    holomorphic=True, f is complex-valued and holomorphic in complex inputs and the result
    is the complex derivative f'(z)."""
    vg = value_and_grad(f, argnums, has_aux, holomorphic)

    def grad_f(*args, **kwargs):
        out = vg(*args, **kwargs)
        if has_aux:
            (_, aux), g = out
            return g, aux
        return out[1]
    grad_f.__name__ = f"grad({getattr(f, '__name__', 'f')})"
    grad_f.__wrapped__ = f
    return grad_f


def _ones_like(x):
    from mirax.ops.shape import full
    a = aval_of(x)
    return full(a.shape, 1, a.dtype)


def vjp(f, *primals, has_aux=False):
    """(out, vjp_fn) or (out, vjp_fn, aux); vjp_fn(ct) returns a tuple, one per primal."""
    from mirax.core import tree
    from mirax.ops.common import operand, short
    leaves, in_tree = tree.flatten(list(primals))
    leaves = [operand(x, "vjp") for x in leaves]
    box, aux_box, trace_box = [], [], []

    def flat_fn(*xs):
        out = f(*tree.unflatten(in_tree, list(xs)))
        if has_aux:
            out, aux = out
            aux_box.append(aux)
        out_leaves, out_tree = tree.flatten(out)
        box.append(out_tree)
        return [operand(o, "vjp") for o in out_leaves]

    outs, bwd = vjp_flat(flat_fn, leaves, trace_box)
    out_tree = box[0]

    def vjp_fn(ct):
        ct_leaves, ct_tree = tree.flatten(ct)
        if ct_tree != out_tree:
            raise ValueError(f"vjp_fn: cotangent structure {ct_tree} does not match the "
                             f"output structure {out_tree}")
        cts = []
        for c, o in zip(ct_leaves, outs):
            c = operand(c, "vjp_fn")
            if tuple(c.shape) != tuple(aval_of(o).shape):
                raise ValueError(f"vjp_fn: cotangent {short(c)} does not match output "
                                 f"{short(aval_of(o))}")
            cts.append(c)
        return tuple(tree.unflatten(in_tree, bwd(cts)))

    out = tree.unflatten(out_tree, outs)
    if has_aux:
        from mirax.transforms.api_util import strip_aux
        return out, vjp_fn, strip_aux(aux_box[0], trace_box[0])
    return out, vjp_fn
