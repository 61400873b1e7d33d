"""DLPack interop: hand an mx.Array's buffer to another framework without a copy.

`mx.asarray` / `mx.from_dlpack` take DLPack-capable arrays in (mirax/ops/creation.py); an
mx.Array implements `__dlpack__`, so `torch.from_dlpack(x)`, `jax.dlpack.from_dlpack(x)` and
`np.from_dlpack(x)` work directly. `to_dlpack(x)` gives the raw capsule for older consumers.
NOTE: NumPy's DLPack has no bfloat16; a bfloat16 array must be converted first.
"""
from __future__ import annotations

from mirax.core.array import Array

__all__ = ["to_dlpack"]


def to_dlpack(x: Array):
    """A DLPack capsule viewing x's buffer (x stays valid; mirax never writes into it)."""
    if not isinstance(x, Array):
        raise TypeError(f"to_dlpack: expected an mx.Array, got {type(x).__name__}")
    return x.__dlpack__()
