"""Staging: the interpreter that records primitive applications into a Graph.

`trace_to_graph(f, avals)` runs `f` on staging tracers with this interpreter pushed as the
dynamic one, so every op (even on constants) lands in the graph. Concrete arrays met on the
way become graph constants; tracers of enclosing transforms become extra ("captured")
inputs. `make_graph(f)(*args)` is the user-facing face.
"""
from __future__ import annotations

import functools
import inspect
import os
import sys

import numpy as np

from mirax.core.errors import check_callable, int_tuple, naming_errors
from mirax.core import tree
from mirax.core.array import Array
from mirax.core.avals import ShapedArray
from mirax.core.errors import ConcretizationError
from mirax.core.trace import Trace, Tracer, aval_of, new_trace, state, wrappers
from mirax.graph.graph import Graph, Node, Var

_MIRAX_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_USER_DIRS = (os.path.join(_MIRAX_DIR, "examples"),)


def user_source_line() -> str:
    """`file.py:LINE` of the innermost frame outside mirax's own code."""
    f = sys._getframe(2)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_MIRAX_DIR) or fn.startswith(_USER_DIRS):
            return f"{os.path.basename(fn)}:{f.f_lineno}"
        f = f.f_back
    return ""


class StagingTracer(Tracer):
    __slots__ = ("var",)

    def __init__(self, trace, var: Var):
        self._trace = trace
        self.var = var

    @property
    def aval(self):
        return self.var.aval

    def _concrete(self, what: str):
        raise ConcretizationError(self._trace.concretization_message(self, what))

    def __bool__(self):
        self._concrete("bool()")

    def __int__(self):
        self._concrete("int()")

    def __float__(self):
        self._concrete("float()")

    def __index__(self):
        self._concrete("using as an index")

    def item(self):
        self._concrete(".item()")

    def tolist(self):
        self._concrete(".tolist()")


class StagingTrace(Trace):
    def __init__(self, graph: Graph, arg_names=()):
        self.graph = graph
        # constants by id(); the values are kept alive so ids stay unique while tracing
        self.const_vars: dict[int, tuple[Var, object]] = {}
        self.captured: list[Tracer] = []   # lower-level tracers, as extra inputs
        self.captured_vars: list[Var] = []
        self._captured_index: dict[int, Var] = {}
        self.arg_names = arg_names
        self.producer: dict[Var, Node] = {}

    def pure(self, val):
        known = self.const_vars.get(id(val))
        if known is not None:
            return StagingTracer(self, known[0])
        if isinstance(val, Array):
            buf, aval = val._buf, val.aval
        else:
            buf, aval = np.asarray(val), aval_of(val)
        var = Var(aval)
        self.graph.consts[var] = buf
        self.const_vars[id(val)] = (var, val)
        return StagingTracer(self, var)

    def lift(self, tracer):
        var = self._captured_index.get(id(tracer))  # the tracer is held in self.captured
        if var is None:
            var = self._captured_index[id(tracer)] = Var(tracer.aval)
            self.captured.append(tracer)
            self.captured_vars.append(var)
        return StagingTracer(self, var)

    def process_primitive(self, prim, tracers, params):
        inline = getattr(prim, "inline_when_staged", None)
        if inline is not None:
            return inline(*tracers, **params)
        out = prim.abstract_eval(*(t.aval for t in tracers), **params)
        outs = [Var(a) for a in (out if prim.multiple_results else [out])]
        node = Node(prim, [t.var for t in tracers], params, outs,
                    state.source or user_source_line())  # (set: a replayed or vjp op's)
        self.graph.nodes.append(node)
        for v in outs:
            self.producer[v] = node
        res = [StagingTracer(self, v) for v in outs]
        return res if prim.multiple_results else res[0]

    def concretization_message(self, tracer: StagingTracer, what: str) -> str:
        deps = self._depends_on(tracer.var)
        names = [self.arg_names[i] for i in deps if i < len(self.arg_names)]
        where = f"inside jit({self.graph.name})"
        if names:
            dep = ", ".join(repr(n) for n in names)
            roots = sorted({n.split("[")[0].split(".")[0] for n in names})
            fix = (f"Use mx.lax.cond / mx.lax.while_loop for value-dependent control flow, "
                   f"or mark it static: static_argnames=({', '.join(map(repr, roots))},).")
            return (f"{what} of a traced {tracer.aval.str_short()} {where}; it depends on "
                    f"argument {dep}. {fix}")
        return (f"{what} of a traced {tracer.aval.str_short()} {where}. Use mx.lax.cond / "
                "mx.lax.while_loop for value-dependent control flow.")

    def _depends_on(self, var: Var) -> list[int]:
        index = {v: i for i, v in enumerate(self.graph.inputs)}
        seen, stack, found = set(), [var], set()
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if v in index:
                found.add(index[v])
            node = self.producer.get(v)
            if node is not None:
                stack.extend(node.inputs)
        return sorted(found)


def trace_to_graph(fn, in_avals, name="f", arg_names=()) -> tuple[Graph, list]:
    """Trace `fn(*tracers) -> list of outputs` into a Graph.

    Returns the graph and the captured lower-level tracers (extra trailing inputs)."""
    graph = Graph(name)
    trace = StagingTrace(graph, arg_names)
    with new_trace(trace, dynamic=True):
        ins = []
        for i, aval in enumerate(in_avals):
            v = Var(aval, arg_names[i] if i < len(arg_names) else None)
            graph.inputs.append(v)
            ins.append(StagingTracer(trace, v))
        outs = fn(*ins)
        out_vars = []
        for o in outs:
            t = o if isinstance(o, StagingTracer) and o._trace is trace else \
                (trace.lift(o) if isinstance(o, Tracer) else trace.pure(_as_value(o)))
            out_vars.append(t.var)
    graph.inputs.extend(trace.captured_vars)
    graph.outputs = out_vars
    return graph, trace.captured


def _as_value(x):
    if isinstance(x, (Array, np.ndarray, np.generic)):
        return x
    return wrappers.operand(x, "output")


def arg_names_for(f, args, kwargs=None) -> list[str]:
    """Pytree paths of the leaves of `args`, named by f's parameters (`x`, `params['w']`)."""
    try:
        params = list(inspect.signature(f).parameters)
    except (TypeError, ValueError):
        params = []
    names = []
    for i, a in enumerate(args):
        base = params[i] if i < len(params) and params[i] not in ("args", "kwargs") \
            else f"args[{i}]"
        for path, _ in tree.leaves_with_path(a):
            names.append(base + tree.keystr(path))
    return names


def make_graph(f, static_argnums=()):
    """`make_graph(f)(*args) -> Graph`: the traced program of f at these arguments."""
    check_callable(f, "make_graph")
    static_argnums = int_tuple("make_graph", "static_argnums", static_argnums)

    @functools.wraps(f)
    def build(*args):
        dyn = [a for i, a in enumerate(args) if i not in static_argnums]
        leaves, in_tree = tree.flatten(dyn)
        names = arg_names_for(f, dyn)
        out_tree_box = []

        def flat_fn(*tracers):
            it = iter(tree.unflatten(in_tree, list(tracers)))
            full = [a if i in static_argnums else next(it) for i, a in enumerate(args)]
            out = f(*full)
            out_leaves, out_tree = tree.flatten(out)
            out_tree_box.append(out_tree)
            return out_leaves

        avals = [aval_of(x) for x in leaves]
        graph, captured = trace_to_graph(flat_fn, avals, getattr(f, "__name__", "f"), names)
        if captured:
            raise ValueError("make_graph: the function closes over values traced by an "
                             "enclosing transform; pass them as arguments instead")
        graph.in_tree, graph.out_tree = in_tree, out_tree_box[0]
        return graph
    return naming_errors(build, "make_graph")


@functools.lru_cache(maxsize=4096)
def _abstract_eval_cached(prim, avals, params_items):
    params = dict(params_items)
    graph, _ = trace_to_graph(lambda *xs: _as_list(prim.decomposition(*xs, **params), prim),
                              avals, prim.name)
    outs = graph.out_avals
    return outs if prim.multiple_results else outs[0]


def _as_list(out, prim):
    return list(out) if prim.multiple_results else [out]


def traced_abstract_eval(prim):
    """The abstract-eval rule of a primitive with a body (a composite, a custom rule's
    call): its output avals come from tracing the body once per (avals, params)."""
    return lambda *avals, **params: _abstract_eval_cached(prim, avals,
                                                          tuple(sorted(params.items())))


def shaped(shape, dtype) -> ShapedArray:
    return ShapedArray(shape, dtype)
