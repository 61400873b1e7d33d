"""Batching: tracers carry (value, batch axis); bdim None means not batched.

A primitive with no vmap rule runs as a Python loop over the batch axis, with a one-time
warning naming it: slow, never silently wrong.

Where it sits: the interpreter behind mx.vmap (transforms/vmap.py) and the control-flow
and call primitives' vmap rules (ops), which batch their sub-graphs with `vmap_flat`."""
from __future__ import annotations

import threading
import warnings

from mirax.core.axes import AxisFrame, bind_axis
from mirax.core.avals import ShapedArray
from mirax.core.errors import ConcretizationError
from mirax.core.trace import wrappers
from mirax.core.trace import Trace, Tracer, aval_of, new_trace, owned


class BatchTracer(Tracer):
    __slots__ = ("val", "bdim", "_aval")

    def __init__(self, trace, val, bdim):
        self._trace = trace
        self.val = val
        self.bdim = bdim
        a = aval_of(val)
        if bdim is None:
            self._aval = a
        else:
            self._aval = ShapedArray(a.shape[:bdim] + a.shape[bdim + 1:], a.dtype, a.weak_type)

    @property
    def aval(self):
        return self._aval

    def __bool__(self):
        raise ConcretizationError(f"bool() of a batched {self._aval.str_short()} inside "
                                  "vmap: each batch member may differ. Use mx.numpy.where "
                                  "or mx.lax.cond.")


class BatchTrace(Trace):
    def __init__(self, axis_size: int, axis_name=None):
        self.axis_size = axis_size
        self.axis_name = axis_name  # a named axis: collectives over it reduce the batch axis

    def pure(self, val):
        return BatchTracer(self, val, None)

    def process_primitive(self, prim, tracers, params):
        vals = [t.val for t in tracers]
        dims = [t.bdim for t in tracers]
        if prim.named_axes:  # a collective: its rule is told which axis this trace is
            out, out_dims = prim.vmap_rule(vals, dims, trace=self, **params)
        else:
            if all(d is None for d in dims):
                return prim.bind(*vals, **params)
            rule = prim.vmap_rule or _loop_rule(prim)
            saved, _running.trace = _running.trace, self
            try:
                out, out_dims = rule(vals, dims, **params)
            finally:
                _running.trace = saved
        if prim.multiple_results:
            return [BatchTracer(self, o, d) for o, d in zip(out, out_dims)]
        return BatchTracer(self, out, out_dims)


class _Running(threading.local):
    trace = None   # the BatchTrace whose (non-collective) rule is running in this thread


_running = _Running()
INHERIT = object()
_warned: set = set()
_warned_lock = threading.Lock()


def _loop_rule(prim):
    with _warned_lock:  # once per primitive, whichever thread meets it first
        first = prim.name not in _warned
        _warned.add(prim.name)
    if first:
        warnings.warn(f"vmap: '{prim.name}' has no batching rule; running it as a loop over "
                      "the batch axis (slow)", RuntimeWarning, stacklevel=4)

    def rule(vals, dims, **params):
        index_in_dim, stack = wrappers.index_in_dim, wrappers.stack
        size = next(aval_of(v).shape[d] for v, d in zip(vals, dims) if d is not None)
        outs = []
        for i in range(size):
            args = [v if d is None else index_in_dim(v, i, d) for v, d in zip(vals, dims)]
            outs.append(prim.bind(*args, **params))
        if prim.multiple_results:
            return [stack(list(o)) for o in zip(*outs)], [0] * len(outs[0])
        return stack(outs), 0
    return rule


def move_bdim(x, bdim, to, size):
    """x with its batch axis at `to` (broadcasting an unbatched x to `size`)."""
    if bdim is None:
        a = aval_of(x)
        shape = a.shape[:to] + (size,) + a.shape[to:]
        return wrappers.broadcast_in_dim(x, shape,
                                         tuple(i for i in range(len(shape)) if i != to))
    return x if bdim == to else wrappers.moveaxis(x, bdim, to)


def inherited_axis_name(axis_size: int):
    """The axis name of the BatchTrace whose rule is running (None outside a rule, or for
    another size): a rule that re-batches a sub-graph batches the same named axis."""
    outer = _running.trace
    return outer.axis_name if outer is not None and outer.axis_size == axis_size else None


class batching:
    """`with batching(size, axis_name) as trace:` pushes a BatchTrace, and binds its axis
    name (if any) for collectives."""

    def __init__(self, axis_size: int, axis_name=None):
        self.trace = BatchTrace(axis_size, axis_name)
        frames = () if axis_name is None else \
            (AxisFrame(axis_name, axis_size, trace=self.trace),)
        self.push, self.bind = new_trace(self.trace), bind_axis(*frames)

    def __enter__(self):
        self.push.__enter__()
        self.bind.__enter__()
        return self.trace

    def __exit__(self, *exc):
        self.bind.__exit__(*exc)
        self.push.__exit__(*exc)


def vmap_flat(fn, args: list, in_dims: list, axis_size: int, out_dims: list | None = None,
              axis_name=INHERIT):
    """Run fn(*args) -> list batched along in_dims; outputs batched at out_dims (None ->
    unbatched; an output that is not batched is broadcast if its out dim is not None).

    `axis_name` binds a name for collectives (mx.vmap passes its own, None or a name). Left
    out (the rules of call, cond, scan, custom_vjp, which re-batch a sub-graph), the new
    trace inherits the name of the trace whose rule is running: the sub-graph's axis is
    that trace's axis."""
    if axis_name is INHERIT:
        axis_name = inherited_axis_name(axis_size)
    with batching(axis_size, axis_name) as trace:
        ins = [BatchTracer(trace, a, d) for a, d in zip(args, in_dims)]
        outs = fn(*ins)
        res = []
        for i, o in enumerate(outs):
            want = 0 if out_dims is None else out_dims[i]
            val, bd = (o.val, o.bdim) if owned(o, trace) else (o, None)
            if want is None:
                if bd is not None:
                    raise ValueError("vmap: out_axes=None for an output that depends on a "
                                     "mapped input")
                res.append(val)
            else:
                val = wrappers.operand(val, "vmap")
                rank = aval_of(val).ndim + (bd is None)  # of the batched result
                if not isinstance(want, int) or isinstance(want, bool) or \
                        not -rank <= want < rank:
                    raise ValueError(f"vmap: out_axes {want!r} is out of range for an output "
                                     f"of rank {rank} (the mapped axis included)")
                res.append(move_bdim(val, bd, want % rank, axis_size))
    return res
