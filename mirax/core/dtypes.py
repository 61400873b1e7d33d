"""dtypes and promotion: the bottom of the stack, used by every wrapper.

mirax dtypes are NumPy dtype objects (bfloat16 from ml_dtypes). Promotion follows JAX's
type lattice with weak types: a Python scalar (or an array made from one) is *weak* and
takes the other operand's dtype (f32 array * 2.0 -> f32; int32 + 2.5 -> f32). There is no
x64 switch: float64 appears only when asked for (dtype= or a NumPy float64 input).
complex64 and complex128 sit above the floats as in JAX (f32 + c64 -> c64, f64 + c64 ->
c128); a Python complex is a weak complex (f32 * 1j -> c64, f64 * 1j -> c128).
"""
from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
bfloat16 = np.dtype(ml_dtypes.bfloat16)
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

default_float = float32
default_int = int32
default_complex = complex64

SHORT_NAMES = {
    bool_: "bool", int8: "i8", int16: "i16", int32: "i32", int64: "i64",
    uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64",
    float16: "f16", bfloat16: "bf16", float32: "f32", float64: "f64",
    complex64: "c64", complex128: "c128",
}
ALL_DTYPES = tuple(SHORT_NAMES)
FLOATS = (float16, bfloat16, float32, float64)
LOW_FLOATS = (float16, bfloat16)   # 16-bit: their sums and products accumulate in float32
COMPLEXES = (complex64, complex128)


def short_name(dtype) -> str:
    return SHORT_NAMES.get(np.dtype(dtype), str(dtype))


def canonicalize(dtype) -> np.dtype:
    """A dtype argument (np.float32, 'float32', mx.float32, Python float) as a mirax dtype."""
    if dtype is float:
        return float32
    if dtype is int:
        return int32
    if dtype is bool:
        return bool_
    if dtype is complex:
        return complex64
    try:
        d = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"not a dtype: {dtype!r}") from None
    if d not in SHORT_NAMES:
        raise TypeError(f"mirax does not support dtype {d}")
    return d


def is_float(dtype) -> bool:
    return np.dtype(dtype) in FLOATS


def is_int(dtype) -> bool:
    return np.dtype(dtype).kind in "iu"


def is_bool(dtype) -> bool:
    return np.dtype(dtype) == bool_


def is_complex(dtype) -> bool:
    return np.dtype(dtype) in COMPLEXES


def is_inexact(dtype) -> bool:
    """Float or complex: the dtypes that carry tangents and cotangents."""
    d = np.dtype(dtype)
    return d in FLOATS or d in COMPLEXES


def real_dtype(dtype) -> np.dtype:
    """The dtype of the real and imaginary parts (c64 -> f32); real dtypes map to themselves."""
    d = np.dtype(dtype)
    return {complex64: float32, complex128: float64}.get(d, d)


def complex_dtype(dtype) -> np.dtype:
    """The complex dtype with parts of `dtype` (f64 -> c128; f32, f16, bf16, ints -> c64)."""
    d = np.dtype(dtype)
    if d in COMPLEXES:
        return d
    return complex128 if d == float64 else complex64


# --- the lattice -----------------------------------------------------------------------
# JAX's promotion lattice (jax._src.dtypes): "i*", "f*", "c*" are the weak int, float and
# complex (a Python scalar of that kind).
_WEAK_INT, _WEAK_FLOAT, _WEAK_COMPLEX = "i*", "f*", "c*"
_EDGES = {
    bool_: [_WEAK_INT],
    _WEAK_INT: [uint8, int8],
    uint8: [uint16, int16], uint16: [uint32, int32], uint32: [uint64, int64],
    uint64: [_WEAK_FLOAT],
    int8: [int16], int16: [int32], int32: [int64], int64: [_WEAK_FLOAT],
    _WEAK_FLOAT: [bfloat16, float16, _WEAK_COMPLEX],
    bfloat16: [float32], float16: [float32], float32: [float64, complex64],
    float64: [complex128],
    _WEAK_COMPLEX: [complex64], complex64: [complex128], complex128: [],
}


def _upper_bounds() -> dict:
    ub = {}
    for node in _EDGES:
        seen, stack = set(), [node]
        while stack:
            n = stack.pop()
            if n not in seen:
                seen.add(n)
                stack.extend(_EDGES[n])
        ub[node] = seen
    return ub


_UB = _upper_bounds()


@functools.lru_cache(maxsize=None)
def _join(a, b):
    common = _UB[a] & _UB[b]
    # the least upper bound: the common bound that every other common bound is above
    for c in common:
        if common <= _UB[c]:
            return c
    raise TypeError(f"no promotion for {a} and {b}")  # pragma: no cover


def _key(dtype, weak: bool):
    if weak:
        if is_float(dtype):
            return _WEAK_FLOAT
        if is_int(dtype):
            return _WEAK_INT
        if is_complex(dtype):
            return _WEAK_COMPLEX
    return dtype


@functools.lru_cache(maxsize=None)
def promote_types_weak(a, a_weak: bool, b, b_weak: bool):
    """Promote two (dtype, weak) pairs; returns (dtype, weak) as JAX does."""
    j = _join(_key(a, a_weak), _key(b, b_weak))
    if j == _WEAK_FLOAT:
        # two weak floats keep the wider one; a weak int meeting a weak float takes the float
        weak_floats = [d for d, w in ((a, a_weak), (b, b_weak)) if w and is_float(d)]
        if not weak_floats:
            return default_float, True
        return max(weak_floats, key=lambda d: d.itemsize), True
    if j == _WEAK_COMPLEX:
        # a weak complex (Python complex) with a weak float or complex: complex parts as wide
        # as the widest weak operand's parts (complex64 by default)
        weak = [real_dtype(d) for d, w in ((a, a_weak), (b, b_weak)) if w and is_inexact(d)]
        return complex_dtype(max(weak, key=lambda d: d.itemsize)), True
    if j == _WEAK_INT:
        return (a if a_weak and is_int(a) else b), True
    return j, False


def promote_types(a, b) -> np.dtype:
    """Promotion of two strong dtypes (jnp.promote_types)."""
    return promote_types_weak(canonicalize(a), False, canonicalize(b), False)[0]


def python_scalar_dtype(x) -> np.dtype:
    if isinstance(x, bool):
        return bool_
    if isinstance(x, int):
        return default_int
    if isinstance(x, float):
        return default_float
    if isinstance(x, complex):
        return default_complex
    raise TypeError(f"not a Python scalar: {x!r}")


def is_python_scalar(x) -> bool:
    """A Python bool/int/float/complex (weakly typed), not a NumPy scalar (np.float64
    subclasses float but keeps its dtype)."""
    return isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic)


def input_dtype(x) -> tuple[np.dtype, bool]:
    """dtype and weakness of a NumPy array, NumPy scalar or Python scalar as mirax sees it.

    64-bit NumPy scalars and 0-d arrays (np.float64(0.5), np.log(2 * np.pi), np.array(0.5),
    np.int64(3)) are weakly typed like the Python scalars they stand for, so f32 computations
    written with them stay f32, as under JAX's default 32-bit mode (which narrows them to
    32 bits); narrower NumPy scalars (np.float32(2)) are strong as in JAX, and NumPy arrays
    of rank >= 1 keep their dtype."""
    if is_python_scalar(x):
        return python_scalar_dtype(x), not isinstance(x, bool)
    d = np.dtype(x.dtype)
    if d not in SHORT_NAMES:
        if d.kind == "f":
            return float64, False
        if d.kind == "c":
            return complex128, False
        raise TypeError(f"mirax does not support dtype {d}")
    return d, not x.ndim and d in _WEAK_NUMPY_SCALARS


_WEAK_NUMPY_SCALARS = (float64, int64)


def _info_dtype(dtype, op, kinds):
    try:
        d = np.dtype(getattr(dtype, "dtype", dtype))
    except TypeError:
        d = None
    if d is None or d.kind not in kinds and not (d == bfloat16 and "f" in kinds):
        what = "floating-point" if "f" in kinds else "integer"
        raise TypeError(f"{op}: expected a {what} dtype (or an array of one), got {dtype!r}")
    return d


def finfo(dtype):
    d = _info_dtype(dtype, "finfo", "fc")
    return ml_dtypes.finfo(d) if d == bfloat16 else np.finfo(d)


def iinfo(dtype):
    return np.iinfo(_info_dtype(dtype, "iinfo", "iu"))
