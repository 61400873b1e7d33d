"""mx.autograd: PyTorch-style eager tape mode, a thin facade over the reverse-mode tape of
mirax/transforms/vjp.py (the same `VJPTrace`, `Entry` and `backward`, hence the same rules
as `mx.grad`; not a second system).

How it works: a `Tensor` is a tracer of one process-wide interpreter, `AutogradTrace`,
kept in the interpreter stack just above evaluation while any Tensor is alive (so every
mirax op — operators, mirax.numpy, mirax.nn, jit-compiled functions — reaches it). It
applies each primitive under the current session, a long-lived `VJPTrace`, pushed for
the duration of that one op, so the op is recorded on the session's tape; the Tensor keeps
the session's tracer. `loss.backward()` walks that tape with `vjp.backward` and adds the
cotangents of the leaves into their `.grad`.

`backward(create_graph=True)` replays the session's tape under a fresh session with a
second tape inside it, then walks the inner tape while the new session records: the
`.grad` it leaves is a Tensor of the new session, differentiable again.

Limitations (honest list): tensors are immutable (no in-place ops, no `.data` writes);
`backward()` without `retain_graph=True` frees the session, and later using a non-leaf
Tensor of a freed session raises (as PyTorch does for a second backward through a freed
graph, even for disjoint graphs here); Tensors are for define-by-run code outside other
transforms (inside `mx.grad`/`jit` they act as constants of the session); no hooks, no
`retain_grad`, no sparse gradients.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from mirax.core import dtypes, tree
from mirax.core.array import Array
from mirax.interpreters.vjp import VJPTrace, VJPTracer, backward as _tape_backward
from mirax.ops.creation import asarray
from mirax.ops.shape import full
from mirax.ops.common import operand
from mirax.core.trace import Trace, Tracer, new_trace, set_active, state

__all__ = ["Tensor", "tensor", "no_grad", "enable_grad", "is_grad_enabled", "grad"]


class _Session(VJPTrace):
    """A tape of autograd ops and the leaves that entered it (idx -> leaf Tensor)."""

    def __init__(self):
        super().__init__()
        self.leaves: dict[int, tuple] = {}  # idx -> (weakref to the leaf Tensor, its data)
        self.freed = False


class _ModeState(threading.local):
    """Per thread: each thread has its own no_grad state and current session."""
    enabled = True
    session = None  # a weakref to the current session: it dies with its last Tensor


_live = [0]  # Tensors alive (all threads): AutogradTrace stays in the stack while any are
_live_lock = threading.RLock()  # (reentrant: a Tensor may die inside the locked update)
_Mode = _ModeState()


def _session() -> _Session:
    sess = _Mode.session() if _Mode.session is not None else None
    if sess is None or sess.freed:
        sess = _Session()
        _Mode.session = weakref.ref(sess)
    return sess


class AutogradTrace(Trace):
    """Sits in the interpreter stack between evaluation (level 0) and every transform."""
    level = 0.5

    def pure(self, val):
        return val

    def lift(self, tracer):
        return tracer

    def process_primitive(self, prim, tracers, params):
        record = _Mode.enabled and any(isinstance(t, Tensor) and t.requires_grad
                                       for t in tracers)
        if not record:
            out = prim.bind(*[t.data if isinstance(t, Tensor) else t for t in tracers],
                            **params)
            return tree.map(lambda o: Tensor(o), out)
        sess = _session()
        ins = [_node_in(t, sess) if isinstance(t, Tensor) else t for t in tracers]
        with new_trace(sess):
            out = prim.bind(*ins, **params)
        return tree.map(lambda o: _wrap(o, sess), out)


_AUTOGRAD = AutogradTrace()


def _node_in(t: Tensor, sess: _Session):
    """t's value as seen by the session's tape (a tracer if it takes part)."""
    if t._node is not None and t._node._trace is sess:
        return t._node
    if t._node is not None:
        raise RuntimeError("autograd: this tensor belongs to a graph freed by backward(); "
                           "call backward(retain_graph=True), or recompute it")
    if t._leaf_node is not None and t._leaf_node._trace is sess:
        return t._leaf_node
    if t.requires_grad and dtypes.is_inexact(t.data.dtype):
        node = sess.new(t.data)
        sess.leaves[node.idx] = (weakref.ref(t), t.data)
        t._leaf_node = node
        return node
    return t.data


def _wrap(o, sess):
    if isinstance(o, VJPTracer) and o._trace is sess:
        return Tensor(o.primal, _node=o)
    return Tensor(o)


def _enter_stack():
    # the stack of the thread making the Tensor (a thread that only receives Tensors from
    # another must make one itself, e.g. mx.autograd.tensor(0.0), before using them)
    if _AUTOGRAD not in state.stack:
        state.stack.insert(1, _AUTOGRAD)
        _AUTOGRAD.alive = True
        set_active(True)


def _leave_stack():
    # only when nothing sits above it: levels of later pushes must stay increasing
    if state.stack[-1] is _AUTOGRAD and len(state.stack) == 2 and _live[0] == 0:
        state.stack.pop()
        set_active(state.dynamic is not state.eval_trace)


class Tensor(Tracer):
    """An array that records operations for `backward()` (see the module docstring)."""
    __slots__ = ("data", "_node", "_leaf_node", "requires_grad", "grad", "__weakref__")

    def __init__(self, data, requires_grad: bool = False, _node=None):
        with _live_lock:
            _live[0] += 1
        self._trace = _AUTOGRAD
        self.data = data.data if isinstance(data, Tensor) else operand(data, "tensor")
        self._node = _node
        self._leaf_node = None
        self.requires_grad = bool(requires_grad) or _node is not None
        if requires_grad and not dtypes.is_inexact(self.data.dtype):
            raise TypeError(f"tensor: only float tensors can require gradients, got "
                            f"{self.data.aval.str_short()}")
        self.grad = None
        _enter_stack()

    def __del__(self):
        with _live_lock:
            _live[0] -= 1
        try:
            _leave_stack()
        except Exception:  # interpreter shutdown
            pass

    # --- array protocol ------------------------------------------------------------------
    @property
    def aval(self):
        return self.data.aval

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.data, dtype=dtype)

    def __bool__(self):
        return bool(self.data)

    def __float__(self):
        return float(self.data)

    def __int__(self):
        return int(self.data)

    def __index__(self):
        return self.data.__index__()

    def item(self):
        return self.data.item()

    def numpy(self) -> np.ndarray:
        return np.asarray(self.data)

    def tolist(self):
        return self.numpy().tolist()

    def detach(self) -> Tensor:
        return Tensor(self.data)

    def __repr__(self):
        body = np.array2string(np.asarray(self.data), separator=", ", prefix="tensor(")
        extra = ", requires_grad=True" if self.requires_grad else ""
        return f"tensor({body}, dtype={dtypes.short_name(self.dtype)}{extra})"

    # --- backward --------------------------------------------------------------------------
    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False):
        """Add d self / d leaf (times `gradient`) into every leaf's `.grad`."""
        if self._node is None:
            raise RuntimeError("backward: this tensor does not require grad and has no "
                               "grad_fn (no input it depends on has requires_grad=True)")
        sess = self._node._trace
        if sess.freed:
            raise RuntimeError("backward: trying to backward through the graph a second "
                               "time; use backward(retain_graph=True) the first time")
        if gradient is None:
            if self.shape != ():
                raise RuntimeError(f"backward: grad can be implicitly created only for "
                                   f"scalar outputs, got {self.aval.str_short()}; pass "
                                   "gradient=")
            gradient = full((), 1, self.dtype)
        pairs, new = _leaf_grads(self, gradient, list(sess.leaves), create_graph)
        if not (retain_graph or create_graph):
            sess.freed = True
        if new is not None:
            _Mode.session = weakref.ref(new)
        for leaf, g in pairs:
            if g is not None and leaf is not None:
                leaf.grad = g if leaf.grad is None else _accumulate(leaf.grad, g, new)


def _accumulate(old: Tensor, g: Tensor, new: _Session | None) -> Tensor:
    """old + g; recorded (on `new`) only under create_graph and when old lives there."""
    if new is None or old._node is None or old._node._trace is not new:
        old = old.detach()
    if new is None:
        with no_grad():
            return old + g
    return old + g


def _leaf_grads(root: Tensor, gradient, leaf_idx: list, create_graph: bool):
    """[(leaf, d root / d leaf as a Tensor or None)] for the session's leaves `leaf_idx`,
    and the new session when create_graph."""
    sess = root._node._trace
    ct = gradient.data if isinstance(gradient, Tensor) else gradient
    if create_graph:
        return _replay_backward(sess, root._node.idx, ct, leaf_idx)[::-1]
    cts = _tape_backward(sess, [root._node.idx], [ct], leaf_idx)
    return [(sess.leaves[i][0](), None if c is None else Tensor(c))
            for i, c in zip(leaf_idx, cts)], None


def _replay_backward(sess: _Session, root: int, ct, leaf_idx: list):
    """Rerun sess's tape under a new session `new` with an inner tape, then walk the inner
    tape while `new` records: cotangents that are Tensors of `new`."""
    new = _Session()
    inner = VJPTrace()
    mapping = {}
    with new_trace(new):
        with new_trace(inner):
            for i in leaf_idx:
                leaf = sess.leaves[i][0]()
                outer = new.new(sess.leaves[i][1])
                new.leaves[outer.idx] = sess.leaves[i]
                if leaf is not None:
                    leaf._leaf_node = outer
                mapping[i] = inner.new(outer)
            for e in sess.tape:
                args = [mapping[i] if i is not None and i in mapping else p
                        for i, p in zip(e.in_idx, e.primals)]
                out = e.prim.bind(*args, **e.params) if "res" not in e.params else \
                    e.prim.bind(*args, **{k: v for k, v in e.params.items() if k != "res"})
                outs = out if e.prim.multiple_results else [out]
                for i, o in zip(e.out_idx, outs):
                    mapping[i] = o
        r = mapping[root]
        cts = _tape_backward(inner, [r.idx if isinstance(r, VJPTracer) else None], [ct],
                             [mapping[i].idx for i in leaf_idx])
    return new, [(sess.leaves[i][0](), None if c is None else _wrap(c, new))
                 for i, c in zip(leaf_idx, cts)]


# --- public helpers ---------------------------------------------------------------------
def tensor(data, requires_grad: bool = False, dtype=None) -> Tensor:
    """A leaf Tensor (data: anything mx.asarray takes)."""
    if isinstance(data, Tensor):
        data = data.data
    return Tensor(asarray(data, dtype) if dtype is not None else data, requires_grad)


class no_grad:
    """`with no_grad():` ops inside record nothing (results do not require grad)."""

    def __enter__(self):
        self.prev = _Mode.enabled
        _Mode.enabled = False

    def __exit__(self, *exc):
        _Mode.enabled = self.prev

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapped(*a, **k):
            with no_grad():
                return fn(*a, **k)
        return wrapped


class enable_grad(no_grad):
    def __enter__(self):
        self.prev = _Mode.enabled
        _Mode.enabled = True


def is_grad_enabled() -> bool:
    return _Mode.enabled


def grad(outputs: Tensor, inputs, grad_outputs=None, retain_graph=None,
         create_graph: bool = False):
    """torch.autograd.grad: d outputs / d inputs (leaf Tensors) as a tuple, without
    touching any `.grad`; an input the output does not depend on gets None."""
    single = isinstance(inputs, Tensor)
    inputs = [inputs] if single else list(inputs)
    if outputs._node is None:
        raise RuntimeError("autograd.grad: the output does not require grad")
    sess = outputs._node._trace
    if sess.freed:
        raise RuntimeError("autograd.grad: the graph was freed by an earlier backward()")
    if grad_outputs is None:
        if outputs.shape != ():
            raise RuntimeError("autograd.grad: grad_outputs is needed for a non-scalar "
                               "output")
        grad_outputs = full((), 1, outputs.dtype)
    idx = []
    for t in inputs:
        if not t.is_leaf:
            raise RuntimeError("autograd.grad: only leaf tensors are supported as inputs")
        n = t._leaf_node
        idx.append(n.idx if n is not None and n._trace is sess else None)
    known = [i for i in idx if i is not None]
    pairs, new = _leaf_grads(outputs, grad_outputs, known, create_graph)
    if not (retain_graph or create_graph):
        sess.freed = True
    if new is not None:
        _Mode.session = weakref.ref(new)
    by_idx = dict(zip(known, (g for _, g in pairs)))
    return tuple(by_idx.get(i) if i is not None else None for i in idx)


del Array
