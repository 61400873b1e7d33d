"""`mx.make_jaxpr`: JAX's name and object shape over mirax's Graph IR.

Where it sits: a view over `make_graph`. A `ClosedJaxpr` wraps the traced Graph: its str is
the Graph listing; `.jaxpr.invars / outvars / constvars` are the Graph's own Vars (each has
`.aval`), `.jaxpr.eqns` one `JaxprEqn` per node (`.primitive` is the registered Primitive,
so `.primitive.name` is the op; `.invars`, `.outvars`, `.params`), `.consts` the constant
values as arrays. Invariant: nothing is copied or renamed, so a program that walks a jaxpr's
equations sees exactly the nodes mirax compiles (names are mirax's primitive names, which
often but not always equal JAX's: see `primitive.name`).
"""
from __future__ import annotations

import functools
import inspect

from mirax.core import tree
from mirax.core.array import Array
from mirax.core.errors import int_tuple
from mirax.graph.build import make_graph
from mirax.graph.graph import Graph, Node
from mirax.transforms.shape_eval import ShapeDtypeStruct

__all__ = ["ClosedJaxpr", "Jaxpr", "JaxprEqn", "make_jaxpr"]


def _view(v):
    """A param as JAX shows it: sub-Graphs (cond branches, scan bodies) as ClosedJaxprs."""
    if isinstance(v, Graph):
        return ClosedJaxpr(v)
    if isinstance(v, tuple) and v and all(isinstance(g, Graph) for g in v):
        return tuple(ClosedJaxpr(g) for g in v)
    return v


class JaxprEqn:
    """One node: `outvars = primitive[params] invars`."""
    __slots__ = ("node",)

    def __init__(self, node: Node):
        self.node = node

    primitive = property(lambda self: self.node.prim)
    invars = property(lambda self: list(self.node.inputs))
    outvars = property(lambda self: list(self.node.outputs))
    source_info = property(lambda self: self.node.source)

    @property
    def params(self) -> dict:
        return {k: _view(v) for k, v in self.node.params.items()}

    def __repr__(self):
        ins = ", ".join(v.aval.str_short() for v in self.node.inputs)
        outs = ", ".join(v.aval.str_short() for v in self.node.outputs)
        return f"JaxprEqn({outs} = {self.node.prim.name} {ins})"


class Jaxpr:
    """The open program: constvars and invars in, eqns, outvars out."""
    __slots__ = ("graph",)

    def __init__(self, graph: Graph):
        self.graph = graph

    invars = property(lambda self: list(self.graph.inputs))
    outvars = property(lambda self: list(self.graph.outputs))
    constvars = property(lambda self: list(self.graph.consts))
    eqns = property(lambda self: [JaxprEqn(n) for n in self.graph.nodes])
    in_avals = property(lambda self: self.graph.in_avals)
    out_avals = property(lambda self: self.graph.out_avals)
    effects = property(lambda self: set())

    def __str__(self):
        return str(self.graph)

    def __repr__(self):
        return repr(self.graph)


class ClosedJaxpr:
    """A Jaxpr with the values of its constvars (`consts`, in constvars order)."""
    __slots__ = ("graph",)

    def __init__(self, graph: Graph):
        self.graph = graph

    jaxpr = property(lambda self: Jaxpr(self.graph))
    eqns = property(lambda self: self.jaxpr.eqns)
    in_avals = property(lambda self: self.graph.in_avals)
    out_avals = property(lambda self: self.graph.out_avals)
    consts = property(lambda self: [Array(buf) for buf in self.graph.consts.values()])
    literals = consts
    effects = property(lambda self: set())

    def __str__(self):
        return str(self.graph)

    def __repr__(self):
        return repr(self.graph)

    def pretty_print(self, **_) -> str:
        return str(self.graph)


def _positional(fun, n: int, keys: tuple):
    """fun(*args, **kwargs) as a function of n + len(keys) positional arguments, whose
    signature names them (so the listing calls a keyword argument by its key)."""
    def call(*a):
        return fun(*a[:n], **dict(zip(keys, a[n:])))
    try:
        names = [p for p in inspect.signature(fun).parameters][:n]
    except (TypeError, ValueError):
        names = []
    names += [f"args{i}" for i in range(len(names), n)]
    kind = inspect.Parameter.POSITIONAL_ONLY
    call.__signature__ = inspect.Signature([inspect.Parameter(k, kind) for k in names + list(keys)])
    call.__name__ = getattr(fun, "__name__", "f")
    return call


def make_jaxpr(fun, static_argnums=(), axis_env=None, return_shape=False):
    """`make_jaxpr(f)(*args, **kwargs) -> ClosedJaxpr` (and the output's
    ShapeDtypeStruct tree when return_shape=True). Keyword arguments are traced like
    positional ones; static_argnums are Python values baked into the program."""
    if axis_env:
        raise NotImplementedError("make_jaxpr: axis_env is not supported; trace the function "
                                  "under mx.vmap(..., axis_name=) instead")
    static = int_tuple("make_jaxpr", "static_argnums", static_argnums)

    @functools.wraps(fun)
    def jaxpr_maker(*args, **kwargs):
        if kwargs:
            graph = make_graph(_positional(fun, len(args), tuple(kwargs)), static)(
                *args, *kwargs.values())
        else:
            graph = make_graph(fun, static)(*args)
        closed = ClosedJaxpr(graph)
        if not return_shape:
            return closed
        shapes = [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type) for a in graph.out_avals]
        return closed, tree.unflatten(graph.out_tree, shapes)
    return jaxpr_maker
