"""mirax.numpy gap-fillers against jax.numpy: Array-API aliases, dtype predicates, scalar
type names, creation / index helpers (logspace .. r_, c_), and more math (frexp .. i0).

Where it sits: written on mirax.ops and the other mirax.numpy modules, so grad, vmap and jit
go through everything here. Index helpers whose sizes are static (tril_indices, ix_, ...)
compute their indices on the host, as mirax's nonzero does for concrete values. Where
JAX and NumPy differ, JAX is followed (noted at each function).
"""
from __future__ import annotations

import builtins
import functools
import math

import numpy as np

from mirax.core import dtypes
from mirax.core.array import Array
from mirax.core.trace import Tracer
from mirax.core.errors import ShapeError
from mirax.numpy import _core as core
from mirax.numpy import _math as mth
from mirax.numpy import _shape_extra as shx
from mirax.numpy._indexing import _concrete, diag, nonzero
from mirax.numpy._sorting import cumsum
from mirax.ops import elementwise as ew
from mirax.ops import shape as sh
from mirax.ops.common import (float_operand, normalize_axis, operand, promote, short, static_int,
                              static_shape)
from mirax.transforms.vmap import vmap
from mirax.ops.common import result_dtype as _result_dtype
from mirax.ops.loops import while_loop
from mirax.lax._special import bessel_i0e, bessel_i1e
from mirax.transforms.custom import custom_jvp
from mirax.core.errors import ConcretizationError

__all__ = [
    "broadcast_shapes",
    # Array API aliases and dtype helpers
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "pow", "concat",
    "bitwise_invert", "bitwise_left_shift", "bitwise_right_shift", "matrix_transpose",
    "unstack", "vecdot", "matvec", "vecmat", "astype", "copy", "isdtype", "issubdtype",
    "isscalar", "iscomplexobj", "isrealobj", "dtype", "bool", "double", "single", "int_",
    "float_", "uint", "number", "floating", "integer", "signedinteger", "unsignedinteger",
    "inexact", "generic",
    # creation / index helpers
    "logspace", "geomspace", "tri", "tril_indices", "triu_indices", "tril_indices_from",
    "triu_indices_from", "diag_indices", "diag_indices_from", "indices", "ix_",
    "fromfunction", "diagflat", "vander", "mgrid", "ogrid", "r_", "c_", "s_", "index_exp",
    "fill_diagonal",
    # math
    "float_power", "logaddexp2", "ldexp", "frexp", "modf", "divmod", "gcd", "lcm", "spacing",
    "i0", "unwrap", "trapezoid", "gradient", "rollaxis", "resize", "trim_zeros",
]

# --- Array API aliases ----------------------------------------------------------------------
acos, acosh, asin, asinh, atan, atanh = (mth.arccos, mth.arccosh, mth.arcsin, mth.arcsinh,
                                         mth.arctan, mth.arctanh)
atan2, pow = mth.arctan2, mth.power
bitwise_invert = mth.invert
bitwise_left_shift, bitwise_right_shift = mth.left_shift, mth.right_shift


def concat(arrays, /, *, axis=0):
    """Array API concatenate (axis=None flattens first)."""
    return core.concatenate(arrays, axis)


def matrix_transpose(x, /):
    """Swap the last two axes."""
    x = operand(x, "matrix_transpose")
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: needs at least 2 dimensions, got {short(x)}")
    perm = list(range(x.ndim - 2)) + [x.ndim - 1, x.ndim - 2]
    return sh.transpose(x, perm)


def unstack(x, /, *, axis=0):
    """The slices of x along axis, as a tuple."""
    x = operand(x, "unstack")
    if x.ndim == 0:
        raise ValueError(f"unstack: needs at least 1 dimension, got {short(x)}")
    ax = normalize_axis(axis, x.ndim, "unstack", x)
    return tuple(sh.index_in_dim(x, i, ax, keepdims=False) for i in range(x.shape[ax]))


def vecdot(x1, x2, /, *, axis=-1):
    """sum(x1 * x2) along axis (each operand's own axis, then broadcast), as jnp.vecdot."""
    x1, x2 = operand(x1, "vecdot"), operand(x2, "vecdot")
    a1 = normalize_axis(axis, x1.ndim, "vecdot", x1)
    a2 = normalize_axis(axis, x2.ndim, "vecdot", x2)
    if x1.shape[a1] != x2.shape[a2]:
        raise ShapeError(f"vecdot: axis {axis} differs in length: {short(x1)} and {short(x2)}")
    prod = ew.mul(sh.moveaxis(x1, a1, -1), sh.moveaxis(x2, a2, -1))
    return core.sum(prod, axis=-1)


def matvec(x1, x2, /):
    """[..., m, n] @ [..., n] -> [..., m] (batch axes broadcast)."""
    x1, x2 = operand(x1, "matvec"), operand(x2, "matvec")
    if x1.ndim < 2 or x2.ndim < 1:
        raise ValueError(f"matvec: needs a matrix and a vector, got {short(x1)} and "
                         f"{short(x2)}")
    return core.matmul(x1, sh.expand_dims(x2, x2.ndim))[..., 0]


def vecmat(x1, x2, /):
    """[..., n] @ [..., n, m] -> [..., m] (batch axes broadcast)."""
    x1, x2 = operand(x1, "vecmat"), operand(x2, "vecmat")
    if x1.ndim < 1 or x2.ndim < 2:
        raise ValueError(f"vecmat: needs a vector and a matrix, got {short(x1)} and "
                         f"{short(x2)}")
    return core.matmul(sh.expand_dims(x1, x1.ndim - 1), x2)[..., 0, :]


def astype(x, dtype, /, *, copy=False, device=None):
    x = operand(x, "astype")
    return ew.convert_element_type(x, dtypes.canonicalize(dtype))


def copy(a, order=None):
    """Arrays are immutable: the same values, as an Array."""
    return operand(a, "copy")


# --- dtype predicates and scalar type names ---------------------------------------------------
dtype = np.dtype
bool = dtypes.bool_
single, double, float_ = dtypes.float32, dtypes.float64, dtypes.float64
int_, uint = dtypes.int64, dtypes.uint64
number, floating, integer, inexact, generic = (np.number, np.floating, np.integer,
                                                np.inexact, np.generic)
signedinteger, unsignedinteger = np.signedinteger, np.unsignedinteger

_KINDS = {
    "bool": lambda d: d == np.bool_,
    "signed integer": lambda d: d.kind == "i",
    "unsigned integer": lambda d: d.kind == "u",
    "integral": lambda d: d.kind in "iu",
    "real floating": dtypes.is_float,
    "complex floating": lambda d: d.kind == "c",
    "numeric": lambda d: d.kind in "iuc" or dtypes.is_float(d),
}


def _as_dtype(d, op):
    try:
        return np.dtype(d)
    except TypeError:
        raise TypeError(f"{op}: expected a dtype, got {d!r}") from None


def isdtype(dtype, kind):
    """Array API: is `dtype` of `kind` (a dtype, a kind name, or a tuple of those)."""
    d = _as_dtype(dtype, "isdtype")
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, str):
            if k not in _KINDS:
                raise ValueError(f"isdtype: unrecognized kind {k!r}; expected one of "
                                 f"{sorted(_KINDS)}")
            if _KINDS[k](d):
                return True
        elif d == _as_dtype(k, "isdtype"):
            return True
    return False


def issubdtype(arg1, arg2):
    """np.issubdtype, with bfloat16 a floating type (as in JAX)."""
    def abstract(a):
        return isinstance(a, type) and issubclass(a, np.generic) and a in (
            np.generic, np.number, np.inexact, np.floating, np.integer, np.signedinteger,
            np.unsignedinteger, np.complexfloating, np.flexible, np.character)
    if not abstract(arg1) and np.dtype(arg1) == dtypes.bfloat16:
        if abstract(arg2):
            return arg2 in (np.generic, np.number, np.inexact, np.floating)
        return np.dtype(arg2) == dtypes.bfloat16
    if not abstract(arg2) and np.dtype(arg2) == dtypes.bfloat16:
        return not abstract(arg1) and np.dtype(arg1) == dtypes.bfloat16
    return np.issubdtype(arg1, arg2)


def isscalar(element):
    """True for Python / NumPy scalars and 0-d arrays (jnp.isscalar)."""
    if np.isscalar(element):
        return True
    if isinstance(element, (np.ndarray, Array, Tracer)):
        return element.ndim == 0
    return False


def iscomplexobj(x):
    """True for complex arrays (c64, c128) and complex Python / NumPy inputs."""
    if x is None:
        return False
    d = getattr(x, "dtype", None)
    if d is None:
        if isinstance(x, (list, tuple)):
            return builtins.any(iscomplexobj(e) for e in x)  # ragged lists too
        return isinstance(x, complex)
    return np.dtype(d).kind == "c"


def broadcast_shapes(*shapes) -> tuple[int, ...]:
    """The shape that arrays of the given shapes broadcast to (np.broadcast_shapes)."""
    shapes = [static_shape(s, "broadcast_shapes") for s in shapes]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"broadcast_shapes: shapes {', '.join(map(str, shapes))} do not "
                         "broadcast together") from None


def isrealobj(x):
    return not iscomplexobj(x)


# --- creation -------------------------------------------------------------------------------
def _float_result(dtype, *xs):
    """The result dtype of a float-valued creation function (JAX: inexact result_type)."""
    if dtype is not None:
        return dtypes.canonicalize(dtype)
    d = shx.result_type(*xs, 1.0)
    return d if dtypes.is_float(d) else dtypes.float32


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """base ** linspace(start, stop); computed in float64, then cast (as jnp: integer
    dtypes truncate)."""
    d = _float_result(None, start, stop, base)
    lin = core.linspace(start, stop, num, endpoint=endpoint, dtype=dtypes.float64, axis=axis)
    out = mth.power(ew.convert_element_type(operand(base, "logspace"), dtypes.float64), lin)
    return ew.convert_element_type(out, d if dtype is None else dtypes.canonicalize(dtype))


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """A geometric sequence from start to stop (with start's sign, as jnp.geomspace), in
    float64 with exact endpoints (as NumPy). Integer dtypes truncate once float64 rounding
    noise is dropped, so exact integer sequences stay exact (geomspace(1, 8, 4) = 1, 2, 4, 8).
    """
    d = _float_result(dtype, start, stop)
    start, stop = (ew.convert_element_type(operand(v, "geomspace"), dtypes.float64)
                   for v in (start, stop))
    start, stop = shx.broadcast_arrays(start, stop)
    sign = ew.sign(start)
    lin = core.linspace(ew.log(ew.div(start, sign)), ew.log(ew.div(stop, sign)), num,
                        endpoint=endpoint, dtype=dtypes.float64)
    out = ew.mul(ew.exp(lin), sign)
    n = out.shape[0]
    if n:
        last = stop if endpoint and n > 1 else None
        parts = [sh.expand_dims(start, 0), sh.slice_in_dim(out, 1, n - (last is not None))]
        out = sh.concatenate(parts + ([sh.expand_dims(last, 0)] if last is not None else []),
                             0)
    # endpoints of different signs, or a zero one, have no geometric sequence: NaN (as JAX)
    bad = sh.broadcast_in_dim(ew.le(ew.mul(start, stop), 0.0), out.shape,
                              tuple(range(1, out.ndim)))
    out = ew.select(bad, ew.add(ew.zeros_like(out), math.nan), out)
    if not dtypes.is_float(d):
        out = ew.mul(out, 1.0 + 1e-14)   # toward larger magnitude: trunc(1.9999999999999996)
    if out.ndim > 1:
        out = sh.moveaxis(out, 0, normalize_axis(axis, out.ndim, "geomspace"))
    return ew.convert_element_type(out, d)


def tri(N, M=None, k=0, dtype=None):
    """Ones at and below diagonal k of an N x M matrix."""
    N = static_int(N, "tri", "N")
    M = N if M is None else static_int(M, "tri", "M")
    if N < 0 or M < 0:
        raise ValueError(f"tri: N and M must be non-negative, got {N}, {M}")
    rows = sh.iota(dtypes.int32, (N, M), 0)
    cols = sh.iota(dtypes.int32, (N, M), 1)
    mask = ew.le(ew.sub(cols, rows), static_int(k, "tri", "k"))
    return ew.convert_element_type(mask, dtypes.float32 if dtype is None
                                   else dtypes.canonicalize(dtype))


def _index_arrays(idx):
    return tuple(core.asarray(np.asarray(i, np.int32)) for i in idx)


def _tri_indices(op, np_fn, n, k, m):
    n, k = static_int(n, op, "n"), static_int(k, op, "k")
    m = None if m is None else static_int(m, op, "m")
    if n < 0 or (m is not None and m < 0):
        raise ValueError(f"{op}: n and m must be non-negative, got {n}, {m}")
    return _index_arrays(np_fn(n, k, m))


def tril_indices(n, k=0, m=None):
    return _tri_indices("tril_indices", np.tril_indices, n, k, m)


def triu_indices(n, k=0, m=None):
    return _tri_indices("triu_indices", np.triu_indices, n, k, m)


def _matrix_shape(arr, op):
    a = operand(arr, op)
    if a.ndim != 2:
        raise ValueError(f"{op}: input must be 2-D, got {short(a)}")
    return a.shape


def tril_indices_from(arr, k=0):
    n, m = _matrix_shape(arr, "tril_indices_from")
    return tril_indices(n, k, m)


def triu_indices_from(arr, k=0):
    n, m = _matrix_shape(arr, "triu_indices_from")
    return triu_indices(n, k, m)


def diag_indices(n, ndim=2):
    n, ndim = static_int(n, "diag_indices", "n"), static_int(ndim, "diag_indices", "ndim")
    if n < 0 or ndim < 0:
        raise ValueError(f"diag_indices: n and ndim must be non-negative, got {n}, {ndim}")
    return (core.arange(n),) * ndim


def diag_indices_from(arr):
    a = operand(arr, "diag_indices_from")
    if a.ndim < 2 or len(set(a.shape)) != 1:
        raise ValueError(f"diag_indices_from: input must be at least 2-D with all "
                         f"dimensions equal, got {short(a)}")
    return diag_indices(a.shape[0], a.ndim)


def indices(dimensions, dtype=None, sparse=False):
    """The index grids of an array of shape `dimensions` (stacked, or open with sparse)."""
    dims = tuple(int(d) for d in dimensions)
    d = dtypes.int32 if dtype is None else dtypes.canonicalize(dtype)
    n = len(dims)
    if sparse:
        return tuple(sh.iota(d, tuple(s if j == i else 1 for j, s in enumerate(dims)), i)
                     for i in range(n))
    if n == 0:
        return sh.full((0,), 0, d)
    return sh.stack([sh.iota(d, dims, i) for i in range(n)], 0)


def ix_(*args):
    """Open-mesh index arrays from 1-D integer (or concrete boolean) sequences."""
    out = []
    for i, a in enumerate(args):
        a = operand(a, "ix_")
        if a.ndim != 1:
            raise ValueError(f"ix_: arguments must be 1-D, got {short(a)}")
        if a.dtype == dtypes.bool_:
            (a,) = nonzero(a)
        shape = [1] * len(args)
        shape[i] = a.shape[0]
        out.append(sh.reshape(a, tuple(shape)))
    return tuple(out)


def fromfunction(function, shape, *, dtype=None, **kwargs):
    """function(*index grids), called (as in JAX) under vmap over each axis on scalar
    indices, so outputs that ignore the indices are broadcast to `shape`."""
    shape = tuple(int(s) for s in shape)
    d = dtypes.float32 if dtype is None else dtypes.canonicalize(dtype)
    f = functools.partial(function, **kwargs) if kwargs else function
    for i in range(len(shape)):
        in_axes = tuple(0 if i == j else None for j in range(len(shape)))
        f = vmap(f, in_axes=in_axes[::-1])
    return f(*(core.arange(s, dtype=d) for s in shape))


def diagflat(v, k=0):
    return diag(core.ravel(v), k)


def vander(x, N=None, increasing=False):
    """Columns x**0 .. x**(N-1) (reversed unless increasing), built by products so every
    derivative is exact at 0."""
    x = operand(x, "vander")
    if x.ndim != 1:
        raise ValueError(f"vander: x must be 1-D, got {short(x)}")
    N = x.shape[0] if N is None else static_int(N, "vander", "N")
    if N < 0:
        raise ValueError(f"vander: N must be non-negative, got {N}")
    cols = [ew.ones_like(x), x][:N]
    for _ in range(N - 2):
        cols.append(ew.mul(cols[-1], x))
    if not cols:
        return sh.full((x.shape[0], 0), 0, x.dtype)
    out = sh.stack(cols if increasing else cols[::-1], 1)
    return out


# --- index tricks: mgrid, ogrid, r_, c_, s_, index_exp -----------------------------------------
def _static_number(v, op):
    if isinstance(v, (Array, Tracer)):
        v = _concrete(v)
        if v is None:
            raise TypeError(f"{op}: slice bounds must be static numbers")
    return v


def _grid_1d(s: slice, op):
    start = _static_number(s.start, op) or 0
    stop = _static_number(s.stop, op)
    step = _static_number(s.step, op) or 1
    if stop is None:
        raise ValueError(f"{op}: slices need a stop value")
    if isinstance(step, complex) or np.iscomplexobj(step):
        return core.linspace(start, stop, int(builtins.abs(step)))
    return core.arange(start, stop, step)


class _Grid:
    """mgrid (dense) / ogrid (sparse): a meshgrid, indexing='ij', of slice ranges."""

    def __init__(self, sparse: builtins.bool, op: str):
        self.sparse, self.op = sparse, op

    def __getitem__(self, key):
        if isinstance(key, slice):
            return _grid_1d(key, self.op)
        grids = [_grid_1d(k, self.op) for k in key]
        if not grids:
            return [] if self.sparse else core.arange(0)
        d = shx.result_type(*grids)
        grids = [ew.convert_element_type(g, d) for g in grids]
        out = shx.meshgrid(*grids, indexing="ij", sparse=self.sparse)
        return list(out) if self.sparse else sh.stack(list(out), 0)


mgrid = _Grid(False, "mgrid")
ogrid = _Grid(True, "ogrid")


class _AxisConcat:
    """r_ / c_: concatenate slices (as aranges), arrays and scalars along an axis, with
    NumPy's leading string directive ('r', 'c', or 'axis,ndmin,trans1d')."""

    def __init__(self, axis, ndmin, trans1d, op):
        self.params, self.op = (axis, ndmin, trans1d, -1), op

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        params = list(self.params)
        if items and isinstance(items[0], str):
            directive, items = items[0], items[1:]
            if directive in ("r", "c"):
                params[-1] = 0 if directive == "r" else 1
            else:
                vec = directive.split(",")
                if len(vec) > 3:
                    raise ValueError(f"{self.op}: too many directives in {directive!r}")
                try:
                    params = [int(v) for v in vec] + params[len(vec):]
                except ValueError:
                    raise ValueError(f"{self.op}: could not understand directive "
                                     f"{directive!r}") from None
        axis, ndmin, trans1d, matrix = params
        out = []
        for item in items:
            if isinstance(item, slice):
                x, item_ndim = _grid_1d(item, self.op), 0
            elif isinstance(item, str):
                raise ValueError(f"{self.op}: a string directive must come first")
            else:
                x = operand(item, self.op)
                item_ndim = x.ndim
            if x.ndim < ndmin:
                x = sh.reshape(x, (1,) * (ndmin - x.ndim) + tuple(x.shape))
            if trans1d != -1 and ndmin - item_ndim > 0:
                shift = ndmin - builtins.abs(ndmin + trans1d + 1) % ndmin
                perm = tuple(range(ndmin))
                x = sh.transpose(x, perm[shift:] + perm[:shift])
            out.append(x)
        if not out:
            return core.zeros((0,))
        d, w = _promoted(out)
        out = [ew.convert_element_type(x, d, w) for x in out]
        res = sh.concatenate(out, axis)
        if matrix != -1 and res.ndim == 1:
            res = sh.expand_dims(res, matrix)
        return res

    def __len__(self):
        return 0


def _promoted(xs):
    return _result_dtype(*xs)


r_ = _AxisConcat(0, 1, -1, "r_")
c_ = _AxisConcat(-1, 2, 0, "c_")
s_, index_exp = np.s_, np.index_exp


def fill_diagonal(a, val, wrap=False, inplace=False):
    """a with its main diagonal set to val (repeated cyclically), as a new array; NumPy's
    `wrap` for tall matrices is honoured. inplace=True is refused (arrays are immutable)."""
    if inplace:
        raise ValueError("fill_diagonal: arrays are immutable; use inplace=False and the "
                         "returned array")
    a = operand(a, "fill_diagonal")
    if a.ndim < 2:
        raise ValueError(f"fill_diagonal: array must be at least 2-D, got {short(a)}")
    if a.ndim > 2 and len(set(a.shape)) != 1:
        raise ValueError(f"fill_diagonal: all dimensions must be equal, got {short(a)}")
    if a.ndim == 2:
        step = a.shape[1] + 1
        end = a.size if wrap else a.shape[1] * a.shape[1]
    else:
        step, end = 1 + int(np.cumprod(a.shape[:-1]).sum()), a.size
    pos = np.arange(0, builtins.min(end, a.size), step, dtype=np.int32)
    if pos.size == 0:
        return a
    v = core.ravel(ew.convert_element_type(operand(val, "fill_diagonal"), a.dtype))
    if v.shape[0] == 0:
        return a
    v = shx.tile(v, -(-pos.size // v.shape[0]))[:pos.size]
    flat = core.ravel(a).at[core.asarray(pos)].set(v)
    return sh.reshape(flat, a.shape)


# --- math -----------------------------------------------------------------------------------
def float_power(x, y):
    """x ** y in a float dtype (JAX: promoted to inexact, not forced to float64)."""
    x, y = mth._float_pair(x, y, "float_power")
    return ew.pow(x, y)


def logaddexp2(x1, x2):
    """log2(2**x1 + 2**x2), stably and smooth to every order (see _math.log_add_exp)."""
    x, y = mth._float_pair(x1, x2, "logaddexp2")
    return mth.log_add_exp(x, y, math.log(2.0))


def _pow2(e):
    """2 ** e for an integer-valued float e, as two factors (no intermediate overflow)."""
    h = ew.floor(ew.mul(e, 0.5))
    return ew.exp2(h), ew.exp2(ew.sub(e, h))


def ldexp(x1, x2):
    """x1 * 2**x2 for integer x2 (JAX raises for a float x2)."""
    x2 = operand(x2, "ldexp")
    if not (dtypes.is_int(x2.dtype) or dtypes.is_bool(x2.dtype)):
        raise ValueError(f"ldexp: x2 must be integer, got {short(x2)}")
    x1 = float_operand(x1, "ldexp")
    e = ew.convert_element_type(x2, x1.dtype)
    p, q = _pow2(e)
    return ew.mul(ew.mul(x1, p), q)


def frexp(x):
    """(mantissa, exponent): x = mantissa * 2**exponent, 0.5 <= |mantissa| < 1 (int32
    exponent; 0, inf and nan give (x, 0))."""
    x = float_operand(x, "frexp")
    ax = ew.abs(x)
    ok = ew.logical_and(ew.is_finite(x), ew.gt(ax, 0))
    safe = ew.select(ok, ax, ew.ones_like(ax))
    if x.dtype in dtypes.LOW_FLOATS:   # exponents beyond their range
        safe = ew.convert_element_type(safe, dtypes.float32)
    e = ew.add(ew.floor(mth.log2(safe)), 1.0)
    p, q = _pow2(ew.neg(e))
    m = ew.mul(ew.mul(safe, p), q)
    for _ in range(2):  # log2 may be off by one next to powers of two
        hi, lo = ew.ge(m, 1.0), ew.lt(m, 0.5)
        m = ew.select(hi, ew.mul(m, 0.5), ew.select(lo, ew.mul(m, 2.0), m))
        e = ew.select(hi, ew.add(e, 1.0), ew.select(lo, ew.sub(e, 1.0), e))
    m = ew.convert_element_type(m, x.dtype)
    m = ew.select(ok, ew.select(ew.lt(x, 0), ew.neg(m), m), x)
    e = ew.select(ok, e, ew.zeros_like(e))
    return m, ew.convert_element_type(e, dtypes.int32)


def modf(x):
    """(fractional, integral) parts; JAX's x - trunc(x) (so modf(inf) = (nan, inf))."""
    x = float_operand(x, "modf")
    whole = ew.trunc(x)
    return ew.sub(x, whole), whole


def divmod(x1, x2):
    return mth.floor_divide(x1, x2), mth.remainder(x1, x2)


def _int_pair(x1, x2, op):
    x1, x2 = promote(op, x1, x2)
    if not (dtypes.is_int(x1.dtype) or dtypes.is_bool(x1.dtype)):
        raise ValueError(f"{op}: arguments must be integers, got {short(x1)} and {short(x2)}")
    return x1, x2


def gcd(x1, x2):
    """Greatest common divisor (Euclid's algorithm in a while_loop; jit / vmap friendly)."""
    x1, x2 = _int_pair(x1, x2, "gcd")
    a, b = ew.abs(x1), ew.abs(x2)
    shape = np.broadcast_shapes(a.shape, b.shape)
    a, b = sh.broadcast_to(a, shape), sh.broadcast_to(b, shape)

    def body(ab):
        a, b = ab
        nz = ew.ne(b, 0)
        r = ew.rem(a, ew.select(nz, b, ew.ones_like(b)))
        return ew.select(nz, b, a), ew.select(nz, r, ew.zeros_like(b))
    return while_loop(lambda ab: core.any(ew.ne(ab[1], 0)), body, (a, b))[0]


def lcm(x1, x2):
    x1, x2 = _int_pair(x1, x2, "lcm")
    d = gcd(x1, x2)
    zero = ew.eq(d, 0)
    q = mth.floor_divide(x2, ew.select(zero, ew.ones_like(d), d))
    return ew.select(zero, ew.zeros_like(d), ew.abs(ew.mul(x1, q)))


def spacing(x):
    """Distance to the next representable number away from zero (JAX's rules: float16
    steps toward +inf; a zero step gives the smallest subnormal)."""
    x = float_operand(x, "spacing")
    inf = ew.mul(ew.ones_like(x), math.inf)
    if x.dtype == dtypes.float16:
        return ew.sub(ew.nextafter(x, inf), x)
    out = ew.sub(ew.nextafter(x, mth.copysign(inf, x)), x)
    tiny = mth.copysign(ew.mul(ew.ones_like(x), float(dtypes.finfo(x.dtype).smallest_subnormal)),
                        x)
    return ew.select(ew.eq(out, 0), tiny, out)


def _i0_impl(x):
    return ew.mul(bessel_i0e(x), ew.exp(ew.abs(x)))


@functools.cache
def _i0_fn():
    f = custom_jvp(_i0_impl)

    @f.defjvp
    def _i0_jvp(primals, tangents):   # d I0 = I1 dx
        (x,), (t,) = primals, tangents
        return f(x), ew.mul(t, ew.mul(bessel_i1e(x), ew.exp(ew.abs(x))))
    return f


def i0(x):
    """Modified Bessel function of the first kind, order 0 (exp(|x|) lax.bessel_i0e(x),
    Cephes' Chebyshev series); its derivative is I1."""
    x = float_operand(x, "i0")
    if x.dtype in dtypes.LOW_FLOATS:   # the series needs float32's range
        return ew.convert_element_type(_i0_fn()(ew.convert_element_type(x, dtypes.float32)),
                                       x.dtype)
    return _i0_fn()(x)


def unwrap(p, discont=None, axis=-1, period=2 * math.pi):
    """Add multiples of `period` where consecutive values jump by more than `discont`."""
    p = operand(p, "unwrap")
    ax = normalize_axis(axis, p.ndim, "unwrap", p, strict=True)
    p, period = promote("unwrap", p, period)
    if p.shape[ax] == 0:
        return p
    integral = not dtypes.is_float(p.dtype)
    interval = mth.floor_divide(period, 2) if integral else ew.div(period, 2.0)
    discont = interval if discont is None else discont
    dd = shx.diff(p, axis=ax)
    ddmod = ew.sub(mth.remainder(ew.add(dd, interval), period), interval)
    ddmod = ew.select(ew.logical_and(ew.eq(ddmod, ew.neg(interval)), ew.gt(dd, 0)),
                      sh.broadcast_to(interval, ddmod.shape), ddmod)
    correct = ew.sub(ddmod, dd)
    correct = ew.select(ew.lt(ew.abs(dd), discont), ew.zeros_like(correct), correct)
    n = p.shape[ax]
    rest = ew.add(sh.slice_in_dim(p, 1, n, axis=ax), cumsum(correct, axis=ax))
    return sh.concatenate([sh.slice_in_dim(p, 0, 1, axis=ax), rest], ax)


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The trapezoidal rule along axis, with sample points x or spacing dx."""
    y = float_operand(y, "trapezoid")
    ax = normalize_axis(axis, y.ndim, "trapezoid", y)
    if x is None:
        d = dx
    else:
        y, x = mth._float_pair(y, x, "trapezoid")
        d = shx.diff(x) if x.ndim == 1 else sh.moveaxis(shx.diff(x, axis=ax), ax, -1)
    y = sh.moveaxis(y, ax, -1)
    n = y.shape[-1]
    mid = ew.add(sh.slice_in_dim(y, 1, n, axis=y.ndim - 1),
                 sh.slice_in_dim(y, 0, builtins.max(n - 1, 0), axis=y.ndim - 1))
    return ew.mul(core.sum(ew.mul(d, mid), axis=-1), 0.5)


def _gradient_axis(f, h, ax):
    n = f.shape[ax]

    def sl(lo, hi, v=f):
        return sh.slice_in_dim(v, lo, hi, axis=ax)
    upper = ew.sub(sl(1, 2), sl(0, 1))
    lower = ew.sub(sl(n - 1, n), sl(n - 2, n - 1))
    if h.ndim == 0:
        inner = ew.div(ew.mul(ew.sub(sl(2, n), sl(0, n - 2)), 0.5), h)
        return sh.concatenate([ew.div(upper, h), inner, ew.div(lower, h)], ax)
    if h.ndim != 1 or h.shape[0] != n:
        raise ValueError(f"gradient: spacing {short(h)} must be a scalar or 1-D of length "
                         f"{n} (axis {ax} of {short(f)})")
    h = sh.reshape(h, tuple(n if i == ax else 1 for i in range(f.ndim)))
    upper = ew.div(upper, ew.sub(sl(1, 2, h), sl(0, 1, h)))
    lower = ew.div(lower, ew.sub(sl(n - 1, n, h), sl(n - 2, n - 1, h)))
    dx1, dx2 = ew.sub(sl(1, n - 1, h), sl(0, n - 2, h)), ew.sub(sl(2, n, h), sl(1, n - 1, h))
    a = ew.div(ew.neg(dx2), ew.mul(dx1, ew.add(dx1, dx2)))
    b = ew.div(ew.sub(dx2, dx1), ew.mul(dx1, dx2))
    c = ew.div(dx1, ew.mul(dx2, ew.add(dx1, dx2)))
    inner = ew.add(ew.add(ew.mul(a, sl(0, n - 2)), ew.mul(b, sl(1, n - 1))),
                   ew.mul(c, sl(2, n)))
    return sh.concatenate([upper, inner, lower], ax)


def gradient(f, *varargs, axis=None, edge_order=None):
    """np.gradient: second-order central differences inside, first-order at the edges;
    spacing per axis is a scalar or 1-D coordinates. One axis gives an array, several a
    list. edge_order=2 is not supported (as in JAX)."""
    if edge_order not in (None, 1):
        raise NotImplementedError("gradient: edge_order=2 is not supported (as in jnp)")
    f = float_operand(f, "gradient")
    axes = tuple(range(f.ndim)) if axis is None else (
        (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis))
    axes = tuple(normalize_axis(a, f.ndim, "gradient", f) for a in axes)
    if not axes:
        return []
    if builtins.min(f.shape[a] for a in axes) < 2:
        raise ValueError(f"gradient: each axis needs at least 2 samples, got {short(f)}")
    if not varargs:
        spacing = [1.0] * len(axes)
    elif len(varargs) == 1:
        spacing = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacing = list(varargs)
    else:
        raise TypeError(f"gradient: give 0, 1 or {len(axes)} spacings, got {len(varargs)}")
    out = []
    for a, h in zip(axes, spacing):
        h = ew.convert_element_type(operand(h, "gradient"), f.dtype)
        out.append(_gradient_axis(f, h, a))
    return out[0] if len(out) == 1 else out


def rollaxis(a, axis, start=0):
    """np.rollaxis: move `axis` to before position `start`."""
    a = operand(a, "rollaxis")
    n = a.ndim
    ax = normalize_axis(axis, n, "rollaxis", a)
    if not -n <= start <= n:
        raise ValueError(f"rollaxis: start {start} is out of range for {short(a)}")
    start = start + n if start < 0 else start
    if ax < start:
        start -= 1
    return a if ax == start else sh.moveaxis(a, ax, start)


def resize(a, new_shape):
    """a's elements repeated cyclically into new_shape (zeros for an empty a)."""
    a = operand(a, "resize")
    shape = (int(new_shape),) if isinstance(new_shape, (int, np.integer)) else \
        tuple(int(s) for s in new_shape)
    if builtins.any(s < 0 for s in shape):
        raise ValueError(f"resize: negative dimensions in {shape}")
    size = math.prod(shape)
    if a.size == 0 or size == 0:
        return sh.full(shape, 0, a.dtype)
    flat = shx.tile(core.ravel(a), -(-size // a.size))
    return sh.reshape(sh.slice_in_dim(flat, 0, size), shape)


def trim_zeros(filt, trim="fb"):
    """filt (1-D) without its leading ('f') and / or trailing ('b') zeros; the cut
    depends on the values, so filt must be concrete (not traced under jit or vmap)."""
    x = operand(filt, "trim_zeros")
    if x.ndim != 1:
        raise ValueError(f"trim_zeros: filt must be 1-D, got {short(x)}")
    v = _concrete(x)
    if v is None:
        raise ConcretizationError(f"trim_zeros: the length of the result depends on the "
                                  f"values of the traced {short(x)}; call it outside jit")
    nz = np.flatnonzero(v)
    trim = trim.lower()
    lo = (int(nz[0]) if nz.size else v.size) if "f" in trim else 0
    hi = (int(nz[-1]) + 1 if nz.size else 0) if "b" in trim else v.size
    return sh.slice_in_dim(x, lo, builtins.max(lo, hi))
