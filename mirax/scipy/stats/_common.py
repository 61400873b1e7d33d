"""Shared helpers of mirax.scipy.stats: JAX's promote_args_inexact (one floating dtype for
all arguments, Python scalars weak) and the constants every distribution uses."""
from __future__ import annotations

import mirax.numpy as mnp

__all__ = ["promote_args_inexact", "inf", "nan"]

inf, nan = float("inf"), float("nan")


def promote_args_inexact(op: str, *args):
    """The arguments as arrays of one floating dtype (float32 when all are integers)."""
    args = [mnp.asarray(a) if isinstance(a, (list, tuple)) else a for a in args]
    try:
        dt = mnp.result_type(*args)
    except TypeError as e:
        raise TypeError(f"{op}: arguments must be arrays or numbers ({e})") from None
    if not mnp.issubdtype(dt, mnp.inexact):
        dt = mnp.float32
    return [mnp.asarray(a, dtype=dt) for a in args]   # (a Python float straight to dt)
