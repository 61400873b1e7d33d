"""`mx.debug.print`: print formatted values.

Eager code (including eager grad/jvp/vmap) prints at once, showing the concrete values.
mirax has no host-callback primitive, so under jit / make_graph (where values exist only
when the compiled program runs) it raises a clear error instead of printing tracers.
"""
from __future__ import annotations

import builtins

import numpy as np

from mirax.core import tree
from mirax.core.array import Array
from mirax.core.trace import PrimalTracer, Tracer
from mirax.ops.shape import moveaxis


def _concrete(x):
    while isinstance(x, Tracer):
        if isinstance(x, PrimalTracer):  # eager jvp / grad: the value is right here
            x = x.primal
        elif hasattr(x, "bdim") and hasattr(x, "val"):  # eager vmap: the batched value
            x = x.val if x.bdim is None else _moved(x.val, x.bdim)
        else:
            raise NotImplementedError(
                f"mx.debug.print: a traced {x.aval.str_short()} inside jit / make_graph has "
                "no value until the compiled program runs, and mirax has no host callback "
                "to print it then. Print outside jit (or return the value).")
    return np.asarray(x) if isinstance(x, Array) else x


def _moved(v, d):
    return moveaxis(v, d, 0)


def print(fmt: str, *args, ordered: bool = False, **kwargs) -> None:  # noqa: A001
    """`fmt.format(*args, **kwargs)` with array leaves shown as NumPy arrays."""
    args, kwargs = tree.map(_concrete, (args, kwargs))
    builtins.print(fmt.format(*args, **kwargs))
