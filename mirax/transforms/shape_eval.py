"""Small API pieces around tracing: ShapeDtypeStruct, eval_shape, block_until_ready,
named_call, ensure_compile_time_eval.

eval_shape traces with the staging interpreter (as make_graph) and keeps only the output
avals: nothing is computed. A ShapeDtypeStruct is accepted wherever an argument is only
traced (eval_shape, make_graph): it has `.shape` and `.dtype`, which is all tracing reads.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np

from mirax.core.errors import check_callable
from mirax.core import dtypes, tree
from mirax.core.avals import ShapedArray
from mirax.core.trace import aval_of, new_base
from mirax.graph.build import trace_to_graph


class ShapeDtypeStruct:
    """An array's shape and dtype, without data (jax.ShapeDtypeStruct)."""
    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape, dtype, weak_type: bool = False):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtypes.canonicalize(dtype))
        self.weak_type = bool(weak_type)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak})"

    def __eq__(self, other):
        return (isinstance(other, ShapeDtypeStruct) and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))


def _aval(x) -> ShapedArray:
    if isinstance(x, ShapeDtypeStruct):
        return ShapedArray(x.shape, x.dtype, x.weak_type)
    return aval_of(x)


def eval_shape(fun, *args, **kwargs):
    """The ShapeDtypeStruct pytree of fun(*args, **kwargs), by tracing (no computation).
    Arguments may be arrays, NumPy arrays, scalars or ShapeDtypeStructs."""
    check_callable(fun, "eval_shape")
    leaves, in_tree = tree.flatten((args, kwargs))
    out_tree = []

    def flat_fn(*tracers):
        a, kw = tree.unflatten(in_tree, list(tracers))
        out_leaves, treedef = tree.flatten(fun(*a, **kw))
        out_tree.append(treedef)
        return out_leaves

    graph, _ = trace_to_graph(flat_fn, [_aval(x) for x in leaves],
                              getattr(fun, "__name__", "f"))
    outs = [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type) for a in graph.out_avals]
    return tree.unflatten(out_tree[0], outs)


def block_until_ready(x):
    """Wait for every array leaf of x to be computed; returns x."""
    for leaf in tree.leaves(x):
        sync = getattr(leaf, "block_until_ready", None)
        if sync is not None:
            sync()
    return x


def named_call(fun, *, name=None):
    """fun itself: mirax's graph listings name nodes by source line, not by call scopes."""
    return check_callable(fun, "named_call")


@contextlib.contextmanager
def ensure_compile_time_eval():
    """Inside the block, ops on concrete values evaluate at once even under jit (so
    `int(...)` of them works); ops on traced values are still traced."""
    with new_base():
        yield
