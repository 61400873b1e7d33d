"""Turning outside data into arrays: asarray (NumPy, Python scalars and lists, DLPack)."""
from __future__ import annotations

import numpy as np

from mirax.core import dtypes
from mirax.core.array import Array
from mirax.core.errors import ShapeError
from mirax.core.trace import Tracer
from mirax.ops import transfer as transfer_ops
from mirax.ops import elementwise as elementwise_ops
from mirax.core.runtime import from_dlpack_device
from mirax.ops import elementwise as ew
from mirax.ops import shape as sh
from mirax.ops.common import operand, result_dtype, short
from mirax.ops.transfer import device_put


def _host_array(obj) -> tuple[np.ndarray, bool]:
    """A NumPy array for obj and whether it is weakly typed (a Python scalar)."""
    if dtypes.is_python_scalar(obj):
        d = dtypes.python_scalar_dtype(obj)
        return np.asarray(obj, d), not isinstance(obj, bool)
    if isinstance(obj, (np.ndarray, np.generic)):
        _, weak = dtypes.input_dtype(obj)  # raises a clear TypeError for unsupported dtypes
        return np.array(obj), weak  # a copy: mx.Array is immutable
    if isinstance(obj, (list, tuple)):
        leaves = np.asarray(obj)
        if leaves.dtype == object:
            raise TypeError("asarray: ragged or non-numeric nested sequence")
        if leaves.dtype.kind == "f":
            return leaves.astype(dtypes.default_float), False
        if leaves.dtype.kind in "iu":
            return leaves.astype(dtypes.default_int), False
        if leaves.dtype.kind == "b":
            return leaves, False
        raise TypeError(f"asarray: cannot make an array of {leaves.dtype} elements")
    if hasattr(obj, "__dlpack__"):
        return from_dlpack_host(obj), False
    if hasattr(obj, "__array__"):
        return _host_array(np.asarray(obj))
    raise TypeError(f"asarray: cannot make an array from {type(obj).__name__}")


def from_dlpack_host(obj) -> np.ndarray:
    dev = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else (1, 0)
    if dev[0] != 1:  # not host memory: a backend that owns such buffers takes it
        raise _NotHost
    try:
        return np.array(np.from_dlpack(obj))
    except (BufferError, TypeError, RuntimeError):  # e.g. bfloat16, which NumPy's DLPack lacks
        if str(getattr(obj, "dtype", "")).endswith("bfloat16") and hasattr(obj, "float"):
            # torch: neither its __array__ nor NumPy's DLPack knows bfloat16; widening to
            # float32 and back is exact
            obj = obj.detach() if hasattr(obj, "detach") else obj
            return np.asarray(obj.float()).astype(dtypes.bfloat16)
        return np.array(obj)


class _NotHost(Exception):
    pass


def asarray(obj, dtype=None, device=None) -> Array:
    """An mx.Array from NumPy arrays, Python scalars/lists, or DLPack-capable arrays."""
    if isinstance(obj, (Array, Tracer)):
        out = obj
    elif isinstance(obj, (list, tuple)) and _holds_arrays(obj):
        return _from_sequence(obj, dtype, device)
    elif dtype is not None and isinstance(obj, (bool, int, float)):
        # NOTE: straight to the asked dtype (0.999 as float64 must not pass through float32)
        out = Array(np.asarray(obj, dtypes.canonicalize(dtype)), False)
    else:
        try:
            buf, weak = _host_array(obj)
            out = Array(buf, weak)
        except _NotHost:
            out = Array(from_dlpack_device(obj), False)
    if dtype is not None:
        dtype = dtypes.canonicalize(dtype)
        if out.dtype != dtype or out.weak_type:
            out = elementwise_ops.convert_element_type(out, dtype)
    if device is not None:
        out = transfer_ops.device_put(out, device)
    return out


def _holds_arrays(obj) -> bool:
    if isinstance(obj, (list, tuple)):
        return any(_holds_arrays(o) for o in obj)
    return isinstance(obj, (Array, Tracer))


def _from_sequence(obj, dtype, device):
    """A nested list / tuple holding mirax arrays or tracers (jnp.array([x, 2 * x])): the
    leaves promoted together (JAX's weak-type rules; the result is strongly typed) and
    stacked level by level, so it works on traced values too."""
    leaves = []

    def to_arrays(o):
        if isinstance(o, (list, tuple)):
            return [to_arrays(e) for e in o]
        leaves.append(operand(o, "array"))
        return leaves[-1]

    nested = to_arrays(obj)
    d = dtypes.canonicalize(dtype) if dtype is not None else result_dtype(*leaves)[0]
    if device is None and not any(isinstance(v, Tracer) for v in leaves):
        try:   # all concrete: one NumPy call instead of an op per element
            return Array(np.array(_to_host(nested), dtype=d), False)
        except ValueError:
            pass  # ragged: the stacking below names the shapes

    def build(o):
        if not isinstance(o, list):
            return ew.convert_element_type(o, d)
        if not o:
            return sh.full((0,), 0, d)
        parts = [build(e) for e in o]
        if len({p.shape for p in parts}) > 1:
            raise ShapeError("array: the sequence is ragged: its elements have shapes "
                             + ", ".join(short(p) for p in parts))
        return sh.stack(parts, 0)

    out = build(nested)
    return out if device is None else device_put(out, device)


def _to_host(o):
    return [_to_host(e) for e in o] if isinstance(o, list) else np.asarray(o)


def from_dlpack(obj) -> Array:
    return asarray(obj)
