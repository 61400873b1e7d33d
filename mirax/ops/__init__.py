"""Primitive families. Importing this registers every primitive."""
from mirax.ops import creation, dot, elementwise, indexing, reduction, shape  # noqa: F401
from mirax.ops import cumulative, linalg, lu, sort  # noqa: F401
from mirax.ops import control_flow, loops, scan  # noqa: F401
from mirax.ops import composite, conv, graph_ops, nn, quant  # noqa: F401
