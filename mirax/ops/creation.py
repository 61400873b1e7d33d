"""Turning outside data into arrays: asarray (NumPy, Python scalars and lists, DLPack)."""
from __future__ import annotations

import numpy as np

from mirax.core import dtypes
from mirax.core.array import Array
from mirax.core.trace import Tracer


def _host_array(obj) -> tuple[np.ndarray, bool]:
    """A NumPy array for obj and whether it is weakly typed (a Python scalar)."""
    if dtypes.is_python_scalar(obj):
        d = dtypes.python_scalar_dtype(obj)
        return np.asarray(obj, d), not isinstance(obj, bool)
    if isinstance(obj, (np.ndarray, np.generic)):
        if obj.dtype not in dtypes.SHORT_NAMES:
            dtypes.input_dtype(obj)  # raises a clear TypeError for unsupported dtypes
        return np.array(obj), False  # a copy: mx.Array is immutable
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
        if leaves.dtype.kind == "c":
            return leaves.astype(dtypes.default_complex), False
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
    elif dtype is not None and isinstance(obj, (bool, int, float, complex)):
        # NOTE: straight to the asked dtype (0.999 as float64 must not pass through float32)
        out = Array(np.asarray(obj, dtypes.canonicalize(dtype)), False)
    else:
        try:
            buf, weak = _host_array(obj)
            out = Array(buf, weak)
        except _NotHost:
            from mirax.backends import from_dlpack_device
            out = Array(from_dlpack_device(obj), False)
    if dtype is not None:
        dtype = dtypes.canonicalize(dtype)
        if out.dtype != dtype or out.weak_type:
            from mirax.ops.elementwise import convert_element_type
            out = convert_element_type(out, dtype)
    if device is not None:
        from mirax.ops.transfer import device_put
        out = device_put(out, device)
    return out


def from_dlpack(obj) -> Array:
    return asarray(obj)
