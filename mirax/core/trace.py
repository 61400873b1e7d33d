"""Interpreters: the current-interpreter context and the eager dispatch path.

`bind(prim, args, params)` hands a primitive application to the innermost interpreter
that owns one of the arguments (or the dynamic one, when `jit` is staging). With no
transform active it goes straight to the backend impl: the eager fast path.

Each transform (transforms/jvp.py, vjp.py, vmap.py, ir/build.py's staging) is a `Trace`
subclass with its `Tracer`; rules call wrappers on the values one level down, so whatever
interpreter sits below records or evaluates them in turn.

The interpreter context (`state`: the stack, the dynamic trace, `active`) is per thread:
each thread traces and differentiates on its own; `busy` counts the threads with an
interpreter active, so that eager fast paths pay for the thread-local read only then.
"""
from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np

from mirax.core import dtypes
from mirax.core.array import Array, ArrayOps
from mirax.core.avals import ShapedArray
from mirax.core.errors import ConcretizationError, UnexpectedTracerError
from mirax.core.runtime import impl_for, nonhost_buffers

# The few wrappers that the interpreters (mirax/interpreters/, below ops) call: `add` to sum
# fan-out cotangents, `full` for zeros and ones, `broadcast_in_dim`, `moveaxis`,
# `index_in_dim` and `stack` to move and loop over batch axes, `operand` for array-likes.
# mirax/ops/__init__.py fills it when it registers the primitives.
wrappers = SimpleNamespace()


class Trace:
    """One active interpreter. `level` orders nested transforms (higher = inner)."""
    level: int = 0
    alive: bool = True

    def pure(self, val):
        """Wrap a value that no interpreter above `val`'s owns (a constant for this one)."""
        raise NotImplementedError

    def lift(self, tracer):
        """Wrap a tracer of a lower interpreter (by default, like a constant)."""
        return self.pure(tracer)

    def process_primitive(self, prim, tracers, params):
        raise NotImplementedError


class Tracer(ArrayOps):
    __slots__ = ("_trace",)

    @property
    def aval(self) -> ShapedArray:
        raise NotImplementedError

    @property
    def shape(self):
        return self.aval.shape

    @property
    def dtype(self):
        return self.aval.dtype

    @property
    def ndim(self):
        return len(self.aval.shape)

    @property
    def size(self):
        return self.aval.size

    @property
    def weak_type(self):
        return self.aval.weak_type

    def __len__(self):
        if not self.aval.shape:
            raise TypeError("len() of a 0-d array")
        return self.aval.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __hash__(self):
        raise TypeError(f"a traced {self.aval.str_short()} is unhashable")

    def __repr__(self):
        return f"{type(self).__name__}({self.aval.str_short()})"

    def __format__(self, spec):
        if not spec:
            return repr(self)
        raise ConcretizationError(
            f"format() of a traced {self.aval.str_short()}: the value is not known while "
            "tracing; use mx.debug.print inside jit, or format the result outside")

    def __array__(self, dtype=None, copy=None):
        raise ConcretizationError(
            f"np.asarray() of a traced {self.aval.str_short()} inside a transform: "
            "NumPy cannot see traced values; use mirax.numpy instead")


class PrimalTracer(Tracer):
    """A tracer carrying a value of the level below (`primal`): Python control flow on it
    works whenever that value is concrete (eager grad/jvp, as in autograd)."""
    __slots__ = ("primal", "_aval")

    @property
    def aval(self):
        return self._aval

    def __bool__(self):
        return bool(self.primal)

    def __int__(self):
        return int(self.primal)

    def __float__(self):
        return float(self.primal)

    def __complex__(self):
        return complex(self.primal)

    def __format__(self, spec):
        return format(self.primal, spec)

    def __index__(self):
        return self.primal.__index__()

    def item(self):
        return self.primal.item()


class EvalTrace(Trace):
    """The bottom interpreter: evaluate at once on the arguments' backend."""
    level = 0

    def pure(self, val):
        return val

    def process_primitive(self, prim, tracers, params):
        return eager(prim, tracers, params)


_EVAL = EvalTrace()
# Threads whose `state.active` is True. Hot paths test `busy[0] and state.active`: reading
# a thread-local attribute costs ~0.1 us, a tenth of an eager op, so it is read only while
# some thread has an interpreter active.
busy = [0]
_busy_lock = threading.Lock()


class _Busy:
    """A thread's share of `busy`, given back if the thread ends while active (a worker
    thread that made autograd Tensors and returned them, say)."""
    __slots__ = ("on",)

    def __init__(self):
        self.on = False

    def set(self, on: bool):
        if on != self.on:
            with _busy_lock:
                busy[0] += 1 if on else -1
            self.on = on

    def __del__(self):  # the thread's locals are dropped when it ends
        if self.on:
            self.set(False)


class _State(threading.local):
    """The interpreter context of one thread (each thread starts with just evaluation)."""

    def __init__(self):
        self.eval_trace = _EVAL
        self.stack: list[Trace] = [_EVAL]
        self.dynamic: Trace = _EVAL
        self.active = False  # any interpreter above eval, or a dynamic one
        self.source = None   # a source line that staged nodes take (set_source)
        self.busy = _Busy()


state = _State()


def set_active(on: bool) -> None:
    """Set this thread's `state.active`, keeping `busy` in step."""
    on = bool(on)
    if on != state.active:
        state.busy.set(on)
        state.active = on


def push(trace: Trace, dynamic: bool = False) -> Trace:
    trace.level = len(state.stack)
    trace.alive = True
    trace.prev_dynamic = state.dynamic
    state.stack.append(trace)
    if dynamic:
        state.dynamic = trace
    set_active(True)
    return trace


def pop(trace: Trace) -> None:
    assert state.stack[-1] is trace, "interpreter stack out of order"
    state.stack.pop()
    trace.alive = False
    state.dynamic = trace.prev_dynamic
    set_active(len(state.stack) > 1)


class new_trace:
    """`with new_trace(T(...)) as trace:` pushes an interpreter for the block."""

    def __init__(self, trace: Trace, dynamic: bool = False):
        self.trace, self.dynamic = trace, dynamic

    def __enter__(self):
        return push(self.trace, self.dynamic)

    def __exit__(self, *exc):
        pop(self.trace)


class new_base:
    """Run a block with evaluation at the bottom, hiding the dynamic (staging) trace.

    Used to evaluate concrete values while tracing (e.g. building constants)."""

    def __enter__(self):
        self.saved = (state.dynamic, state.active)
        state.dynamic = state.eval_trace
        set_active(len(state.stack) > 1)

    def __exit__(self, *exc):
        state.dynamic = self.saved[0]
        set_active(self.saved[1])


class set_source:
    """`with set_source("f.py:12"):` nodes staged in the block carry that source line (the
    backward ops of a forward op carry the forward op's line). None (or "") keeps the line
    set outside the block; with none set, the staging trace looks up the user's frame."""

    def __init__(self, source):
        self.source = source or None

    def __enter__(self):
        if self.source is not None:  # (None, as eagerly: no thread-local access at all)
            self.saved = state.source
            state.source = self.source

    def __exit__(self, *exc):
        if self.source is not None:
            state.source = self.saved


# --- bind -------------------------------------------------------------------------------
def find_top_trace(args) -> Trace:
    top = state.dynamic
    for a in args:
        if isinstance(a, Tracer):
            t = a._trace
            if not t.alive:
                raise UnexpectedTracerError(
                    f"a traced {a.aval.str_short()} escaped the transform that made it "
                    "(stored in a global or returned through a side channel?)")
            if t.level > top.level:
                top = t
    return top


def full_raise(trace: Trace, val):
    if isinstance(val, Tracer):
        if val._trace is trace:
            return val
        if val._trace.level < trace.level:
            return trace.lift(val)
        raise UnexpectedTracerError(f"a traced {val.aval.str_short()} from an inner "
                                    "transform reached an outer one")
    return trace.pure(val)


def bind(prim, args, params):
    if not (busy[0] and state.active):
        return eager(prim, args, params)
    top = find_top_trace(args)
    if top is state.eval_trace:
        return eager(prim, args, params)
    return top.process_primitive(prim, [full_raise(top, a) for a in args], params)


# --- eager evaluation ---------------------------------------------------------------------
def eager(prim, args, params):
    """Run the primitive's impl on concrete arguments and wrap the result."""
    bufs = []
    weak = prim.keeps_weak
    for a in args:
        if type(a) is Array:
            bufs.append(a._buf)
            weak = weak and a._weak
        else:
            bufs.append(a)
    if nonhost_buffers[0]:
        impl = impl_for(prim, bufs)
    else:
        impl = prim.impl
        if impl is None:
            impl = impl_for(prim, bufs)
    try:
        out = impl(*bufs, **params)
    except Exception:
        explain_failure(prim, args, params)
        raise
    if prim.multiple_results:
        return [Array(o, False) for o in out]
    return Array(out, weak)


def explain_failure(prim, args, params):
    """An impl raised: re-run abstract eval, which raises the op's own clear error.

    Wrappers validate cheaply and leave shape checks to abstract eval, which the eager
    path skips for speed; so when NumPy fails we ask abstract eval what is wrong."""
    if prim.abstract_eval_rule is None:
        return
    prim.abstract_eval(*(aval_of(a) for a in args), **params)


# --- avals of values ----------------------------------------------------------------------
def aval_of(x) -> ShapedArray:
    if isinstance(x, (Array, Tracer)):
        return x.aval
    if isinstance(x, (np.ndarray, np.generic)):  # NumPy arrays keep their dtype (strong)
        return ShapedArray(x.shape, *dtypes.input_dtype(x))  # (scalars, 0-d: weak)
    if isinstance(x, (bool, int, float)):
        return ShapedArray((), dtypes.python_scalar_dtype(x), not isinstance(x, bool))
    if hasattr(x, "shape") and hasattr(x, "dtype"):  # a backend buffer
        return ShapedArray(x.shape, x.dtype, False)
    raise TypeError(f"{type(x).__name__} is not a valid mirax array type")


def zeros_like_aval(aval: ShapedArray):
    return wrappers.full(aval.shape, 0, aval.dtype)


def owned(x, trace: Trace) -> bool:
    """x is a tracer of `trace` (anything else is a constant as far as `trace` goes)."""
    return isinstance(x, Tracer) and x._trace is trace


def is_concrete(x) -> bool:
    return not isinstance(x, Tracer)
