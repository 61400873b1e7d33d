"""mirax.numpy's dtype names (`mnp.float32`, ...): callable scalar types, as in jax.numpy.

Each is a class whose `.dtype` is the NumPy dtype, so it works wherever a dtype is taken
(`dtype=mnp.float32`, `np.dtype(mnp.float32)`, `x.dtype == mnp.float32`, dict lookups keyed
by dtype), and calling it casts: `mnp.float32(1.5)` is a 0-d float32 Array, `mnp.int32(x)`
converts an array or tracer (JAX's `jnp.float32(x)`).
"""
from __future__ import annotations

import numpy as np

from mirax.core import dtypes
from mirax.ops.creation import asarray


class _ScalarMeta(type):
    def __call__(cls, x=0):
        return asarray(x, dtype=cls.dtype)

    def __eq__(cls, other):
        if cls is other:
            return True
        try:
            return cls.dtype == np.dtype(other)
        except TypeError:
            return False

    def __ne__(cls, other):
        return not cls == other

    def __hash__(cls):  # equal to its dtype's hash, so it finds dtype-keyed entries
        return hash(cls.dtype)

    def __instancecheck__(cls, instance):
        return isinstance(instance, cls.dtype.type)

    def __repr__(cls):
        return f"<class 'mirax.numpy.{cls.__name__}'>"


def _scalar_type(name: str, dtype: np.dtype) -> type:
    return _ScalarMeta(name, (object,), {"dtype": dtype, "__module__": "mirax.numpy"})


bool_ = _scalar_type("bool_", dtypes.bool_)
int8, int16, int32, int64 = (_scalar_type(n, d) for n, d in (
    ("int8", dtypes.int8), ("int16", dtypes.int16), ("int32", dtypes.int32),
    ("int64", dtypes.int64)))
uint8, uint16, uint32, uint64 = (_scalar_type(n, d) for n, d in (
    ("uint8", dtypes.uint8), ("uint16", dtypes.uint16), ("uint32", dtypes.uint32),
    ("uint64", dtypes.uint64)))
float16, float32, float64 = (_scalar_type(n, d) for n, d in (
    ("float16", dtypes.float16), ("float32", dtypes.float32), ("float64", dtypes.float64)))
bfloat16 = _scalar_type("bfloat16", dtypes.bfloat16)
