"""The Graph IR: SSA nodes in definition order.

A `Var` is a value (its aval, nothing else: identity is the name). A `Node` applies a
primitive to input vars with hashable static params and defines output vars; it remembers
the user source line that made it. A `Graph` has input vars, constants (vars bound to
concrete buffers), nodes and output vars. Control-flow and call primitives carry Graphs
in their params. Transforms never edit a graph in place: passes build new ones.
"""
from __future__ import annotations

from typing import Any, Sequence

from mirax.core.avals import ShapedArray
from mirax.core import dtypes
from mirax.core.trace import aval_of
from mirax.core.primitive import registry
from mirax.graph.printer import listing


class Var:
    __slots__ = ("aval", "hint")

    def __init__(self, aval: ShapedArray, hint: str | None = None):
        self.aval = aval
        self.hint = hint  # a preferred name in listings (argument names)

    def __repr__(self):
        return f"Var({self.aval.str_short()})"


class Node:
    __slots__ = ("prim", "inputs", "params", "outputs", "source")

    def __init__(self, prim, inputs: Sequence[Var], params: dict, outputs: Sequence[Var],
                 source: str = ""):
        self.prim = prim
        self.inputs = list(inputs)
        self.params = params
        self.outputs = list(outputs)
        self.source = source

    def __repr__(self):
        return f"Node({self.prim.name}, {len(self.inputs)} in, {len(self.outputs)} out)"


class Graph:
    """A traced program. Build by hand with `input`, `add` and `output`."""

    def __init__(self, name: str = "f"):
        self.name = name
        self.inputs: list[Var] = []
        self.consts: dict[Var, Any] = {}
        self.nodes: list[Node] = []
        self.outputs: list[Var] = []
        self.in_tree = None    # pytree structure of the arguments (set by make_graph)
        self.out_tree = None   # pytree structure of the result
        self.cache: dict = {}  # derived things: executables, transformed graphs

    # --- building by hand ---------------------------------------------------------------
    def input(self, shape, dtype="float32", name: str | None = None) -> Var:
        v = Var(ShapedArray(shape, dtypes.canonicalize(dtype)), name)
        self.inputs.append(v)
        return v

    def const(self, value) -> Var:
        import numpy as np
        buf = value._buf if hasattr(value, "_buf") else np.asarray(value)
        v = Var(aval_of(value).update(weak_type=False) if hasattr(value, "_buf")
                else ShapedArray(buf.shape, buf.dtype, True))
        self.consts[v] = buf
        return v

    def add(self, prim, *inputs: Var, source: str = "", **params):
        """Append `prim(*inputs, **params)`; returns its output var (or list of vars)."""
        if isinstance(prim, str):
            prim = registry[prim]
        out = prim.abstract_eval(*(v.aval for v in inputs), **params)
        outs = [Var(a) for a in (out if prim.multiple_results else [out])]
        self.nodes.append(Node(prim, inputs, params, outs, source))
        return outs if prim.multiple_results else outs[0]

    def output(self, *vars: Var) -> Graph:
        self.outputs = list(vars)
        return self

    # --- reading ------------------------------------------------------------------------
    @property
    def in_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.inputs]

    @property
    def out_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.outputs]

    def __str__(self):
        return listing(self)

    def __repr__(self):
        ins = ", ".join(a.str_short() for a in self.in_avals)
        outs = ", ".join(a.str_short() for a in self.out_avals)
        return f"<Graph {self.name}({ins}) -> ({outs}), {len(self.nodes)} nodes>"

    def typecheck(self) -> Graph:
        """Re-run abstract eval over every node; raise on the first disagreement."""
        defined = set(self.inputs) | set(self.consts)
        for i, node in enumerate(self.nodes):
            for v in node.inputs:
                if v not in defined:
                    raise ValueError(f"typecheck: node {i} ({node.prim.name}) uses a var "
                                     "that is not defined before it")
            out = node.prim.abstract_eval(*(v.aval for v in node.inputs), **node.params)
            out = out if node.prim.multiple_results else [out]
            for o, v in zip(out, node.outputs):
                if (o.shape, o.dtype) != (v.aval.shape, v.aval.dtype):
                    raise ValueError(f"typecheck: node {i} ({node.prim.name}) declares "
                                     f"{v.aval.str_short()} but computes {o.str_short()}")
            defined.update(node.outputs)
        for v in self.outputs:
            if v not in defined:
                raise ValueError("typecheck: an output var is never defined")
        return self

    def replace(self, nodes=None, outputs=None, inputs=None, consts=None) -> Graph:
        """A new graph sharing this one's name and tree structure."""
        g = Graph(self.name)
        g.inputs = list(self.inputs if inputs is None else inputs)
        g.consts = dict(self.consts if consts is None else consts)
        g.nodes = list(self.nodes if nodes is None else nodes)
        g.outputs = list(self.outputs if outputs is None else outputs)
        g.in_tree, g.out_tree = self.in_tree, self.out_tree
        return g
