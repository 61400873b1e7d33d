"""Primitive families: one file per family, each primitive one block with every rule
(wrapper, abstract eval, NumPy impl, jvp, vjp or transpose, vmap). Importing this package
registers every primitive; `call` and `fusion` (primitives carrying a sub-graph) sit in
call.py beside the control-flow families.

Where it sits: above core, graph and the interpreters (whose rules these are), below the
transforms and the compiler."""
from mirax.core.trace import wrappers
from mirax.ops import common, elementwise, shape
from mirax.ops import creation, dot, indexing, reduction  # noqa: F401
from mirax.ops import cumulative, linalg, lu, sort  # noqa: F401
from mirax.ops import call, control_flow, loops, scan  # noqa: F401
from mirax.ops import composite, conv, graph_ops, nn, quant  # noqa: F401
from mirax.ops import collective  # noqa: F401

wrappers.add = elementwise.add
wrappers.full = shape.full
wrappers.broadcast_in_dim = shape.broadcast_in_dim
wrappers.moveaxis = shape.moveaxis
wrappers.index_in_dim = shape.index_in_dim
wrappers.stack = shape.stack
wrappers.operand = common.operand
