"""More of jax.lax, as compositions of mirax ops (no new primitives).

Everything here is written with the op wrappers of mirax.ops, so grad, vmap and jit go
through the existing rules. Where mirax's conventions differ from JAX's (ties of max/min
split the derivative evenly), mirax's conventions hold.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from mirax.core import dtypes, tree
from mirax.core.errors import ShapeError
from mirax.ops import elementwise as ew
from mirax.ops.common import (
    float_operand, normalize_axis, power_by_squaring, promote, short, static_int, static_shape)
from mirax.ops.common import operand as _arr
from mirax.ops.cumulative import cummax, cummin, cumprod, cumsum, linear_recurrence
from mirax.ops import dot as _dot
from mirax.ops.dot import Precision  # noqa: F401  (lax's name)
from mirax.ops.indexing import dynamic_index_in_dim, dynamic_update_index_in_dim
from mirax.ops.shape import (
    broadcast_in_dim, concatenate, full, iota, moveaxis, pad, reshape, slice_in_dim, squeeze,
    transpose)
from mirax.ops import sort as _sort
from mirax.ops.elementwise import stop_gradient
from mirax.transforms.custom import custom_jvp
from mirax.lax import _special, _windows
from mirax.lax._special import *  # noqa: F401,F403
from mirax.lax._windows import *  # noqa: F401,F403
from mirax.lax._windows import REDUCERS, _is_value, _monoid
from mirax.ops.indexing import gather
from mirax.transforms.jvp import jvp

__all__ = [
    "Precision", "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "top_k", "sort",
    "sort_key_val", "clamp", "integer_pow", "exp2", "square", "tile", "broadcast",
    "broadcasted_iota", "broadcast_to_rank", "collapse", "index_in_dim", "dynamic_index_in_dim",
    "dynamic_update_index_in_dim", "full_like", "batch_matmul", "dot", "dot_general", "select_n",
    "optimization_barrier", "reduce_precision", "population_count", "clz", "shift_left",
    "shift_right_logical", "shift_right_arithmetic", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_not", "bitcast_convert_type", "reduce", "reduce_and", "reduce_or",
    "reduce_xor", "split", "zeros_like_array", "approx_max_k", "approx_min_k",
    "broadcast_shapes", "index_take", "mulhi", "with_sharding_constraint", "igamma_grad_a",
] + _windows.__all__ + _special.__all__


# --- cumulative, sorting -------------------------------------------------------------------
def _prev(y, axis, reverse, fill):
    """y one step earlier in scan order (fill at the first position)."""
    cfg = [(0, 0, 0)] * y.ndim
    cfg[axis] = (-1, 1, 0) if reverse else (1, -1, 0)
    return pad(y, fill, tuple(cfg))


def cumlogsumexp(operand, axis=0, reverse=False):
    """log(cumsum(exp(x))) without overflow: the running sum is rescaled by the running max
    m as s_i = s_{i-1} exp(m_{i-1} - m_i) + exp(x_i - m_i), a linear recurrence."""
    x = float_operand(operand, "cumlogsumexp")
    if x.ndim == 0:
        return x
    axis = normalize_axis(axis, x.ndim, "cumlogsumexp", x)
    m = stop_gradient(cummax(x, axis, reverse))
    m = ew.select(ew.is_finite(m), m, ew.zeros_like(m))  # all -inf so far (or inf, nan)
    a = ew.exp(ew.sub(_prev(m, axis, reverse, -np.inf), m))
    s = linear_recurrence(a, ew.exp(ew.sub(x, m)), axis, reverse)
    return ew.add(ew.log(s), m)


def top_k(operand, k):
    """The k largest entries along the last axis, descending, and their indices (ties: the
    lower index first)."""
    x = _arr(operand, "top_k")
    k = static_int(k, "top_k", "k")
    if x.ndim == 0 or not 0 <= k <= x.shape[-1]:
        raise ValueError(f"top_k: k={k} does not fit {short(x)} (last axis)")
    idx = iota(dtypes.int32, tuple(x.shape), x.ndim - 1)
    vals, ids = _sort.sort([x, idx], axis=-1, descending=True)
    return slice_in_dim(vals, 0, k, axis=x.ndim - 1), slice_in_dim(ids, 0, k, axis=x.ndim - 1)


def sort(operand, dimension=-1, is_stable=True, num_keys=1):
    """lax.sort: one array (returns an array) or a sequence (returns a tuple), sorted by the
    first num_keys operands; always stable."""
    if isinstance(operand, (list, tuple)):
        return tuple(_sort.sort(list(operand), dimension, num_keys=num_keys))
    return _sort.sort(operand, dimension)


def sort_key_val(keys, values, dimension=-1, is_stable=True):
    return tuple(_sort.sort([keys, values], dimension, num_keys=1))


# --- elementwise ---------------------------------------------------------------------------
def clamp(min, x, max):  # noqa: A002 (lax's names)
    """min(max(x, lo), hi). NOTE: at a tie the derivative splits evenly (mirax's max/min
    convention); JAX gives it to neither side."""
    return ew.min(ew.max(x, min), max)


def integer_pow(x, y):
    """x ** y for a static Python int y, by repeated squaring (exact, smooth at x = 0)."""
    x = _arr(x, "integer_pow")
    y = static_int(y, "integer_pow", "y")
    if y == 0:
        return ew.ones_like(x)
    acc = power_by_squaring(x, abs(y), ew.mul)
    if y < 0:
        if not dtypes.is_float(x.dtype):
            raise TypeError(f"integer_pow: negative power {y} of an integer array {short(x)}")
        acc = ew.reciprocal(acc)
    return acc


def exp2(x):
    return ew.exp2(x)


def square(x):
    x = _arr(x, "square")
    return ew.mul(x, x)


def _float_format(dtype):
    """(exponent bits, mantissa bits) of a float dtype."""
    fi = dtypes.finfo(dtype)
    return int(round(math.log2(int(fi.maxexp)))) + 1, int(fi.nmant)


def _round_to_format(x, exponent_bits, mantissa_bits):
    dtype = x.dtype
    ebits, mbits = _float_format(dtype)
    if exponent_bits >= ebits and mantissa_bits >= mbits:
        return x
    e_bits, m_bits = builtins.min(exponent_bits, ebits), builtins.min(mantissa_bits, mbits)
    emax = 2 ** (e_bits - 1) - 1
    emin = 1 - emax
    w = ew.convert_element_type(x, dtypes.float64)  # exact for every narrower float
    finite = ew.is_finite(w)
    wf = ew.select(finite, w, ew.zeros_like(w))  # inf and nan pass through unchanged
    aw = ew.abs(wf)
    safe = ew.select(ew.gt(aw, 0.0), aw, ew.ones_like(aw))
    e = ew.floor(ew.div(ew.log(safe), math.log(2.0)))  # then made exact: 2^e <= |x| < 2^(e+1)
    e = ew.sub(e, ew.convert_element_type(ew.lt(safe, ew.exp2(e)), dtypes.float64))
    e = ew.add(e, ew.convert_element_type(ew.ge(safe, ew.exp2(ew.add(e, 1.0))), dtypes.float64))
    e = ew.max(e, float(2 - 2 ** (ebits - 1)))  # the input format's subnormal spacing
    scale = ew.exp2(ew.sub(e, float(m_bits)))
    r = ew.mul(ew.round(ew.div(wf, scale)), scale)  # half to even
    top = (2.0 - 2.0 ** -m_bits) * 2.0 ** emax
    signed_inf = ew.select(ew.lt(wf, 0.0), full(w.shape, -np.inf, w.dtype),
                           full(w.shape, np.inf, w.dtype))
    r = ew.select(ew.gt(ew.abs(r), top), signed_inf, r)
    if e_bits < ebits:  # as XLA: below the smallest normal of the format, a signed zero
        r = ew.select(ew.lt(ew.abs(r), 2.0 ** emin), ew.mul(wf, 0.0), r)
    r = ew.select(finite, r, w)
    return ew.convert_element_type(r, dtype)


_rp = custom_jvp(_round_to_format, nondiff_argnums=(1, 2))


@_rp.defjvp
def _rp_jvp(exponent_bits, mantissa_bits, primals, tangents):
    (x,), (t,) = primals, tangents
    return (_round_to_format(x, exponent_bits, mantissa_bits),
            _round_to_format(t, exponent_bits, mantissa_bits))


def reduce_precision(operand, exponent_bits, mantissa_bits):
    """Round a float array to the format with these exponent and mantissa bits (half to
    even; overflow to inf), keeping its dtype. The tangent is rounded the same way (JAX)."""
    x = float_operand(operand, "reduce_precision")
    e = static_int(exponent_bits, "reduce_precision", "exponent_bits")
    m = static_int(mantissa_bits, "reduce_precision", "mantissa_bits")
    if e < 1 or m < 0:
        raise ValueError(f"reduce_precision: exponent_bits={e} and mantissa_bits={m} must be "
                         "at least 1 and 0")
    return _rp(x, e, m)


# --- shapes --------------------------------------------------------------------------------
def tile(operand, reps):
    x = _arr(operand, "tile")
    reps = tuple(int(r) for r in reps)
    if len(reps) != x.ndim:
        raise ValueError(f"tile: {len(reps)} reps for {short(x)}")
    shape = tuple(v for r, n in zip(reps, x.shape) for v in (r, n))
    y = broadcast_in_dim(x, shape, tuple(range(1, 2 * x.ndim, 2)))
    return reshape(y, tuple(r * n for r, n in zip(reps, x.shape)))


def broadcast(operand, sizes):
    """Prepend the dimensions `sizes`."""
    x = _arr(operand, "broadcast")
    sizes = tuple(int(s) for s in sizes)
    return broadcast_in_dim(x, sizes + tuple(x.shape), tuple(range(len(sizes), len(sizes)
                                                                    + x.ndim)))


def broadcasted_iota(dtype, shape, dimension):
    shape = tuple(int(s) for s in shape)
    return iota(dtype, shape, normalize_axis(dimension, len(shape), "broadcasted_iota"))


def broadcast_to_rank(x, rank):
    x = _arr(x, "broadcast_to_rank")
    if x.ndim > rank:
        raise ValueError(f"broadcast_to_rank: {short(x)} has rank above {rank}")
    return broadcast(x, (1,) * (rank - x.ndim))


def collapse(operand, start_dimension, stop_dimension=None):
    """Merge dimensions [start, stop) into one."""
    x = _arr(operand, "collapse")

    def dim(d, what):  # as JAX: a negative d counts from ndim (so -1 is the last axis)
        d = static_int(d, "collapse", what)
        d += x.ndim if d < 0 else 0
        if not 0 <= d <= x.ndim:
            raise ValueError(f"collapse: {what} {d} is out of range for {short(x)}")
        return d
    lo = dim(start_dimension, "start_dimension")
    hi = x.ndim if stop_dimension is None else dim(stop_dimension, "stop_dimension")
    if lo > hi:
        raise ValueError(f"collapse: start {lo} after stop {hi} for {short(x)}")
    shape = tuple(x.shape)
    return reshape(x, shape[:lo] + (math.prod(shape[lo:hi]),) + shape[hi:])


def index_in_dim(operand, index, axis=0, keepdims=True):
    x = _arr(operand, "index_in_dim")
    axis = normalize_axis(axis, x.ndim, "index_in_dim", x, strict=True)
    n = x.shape[axis]
    i = int(index) + (n if int(index) < 0 else 0)
    if not 0 <= i < n:
        raise IndexError(f"index_in_dim: index {index} is out of bounds for axis {axis} of "
                         f"{short(x)}")
    out = slice_in_dim(x, i, i + 1, axis=axis)
    return out if keepdims else squeeze(out, axis)


def full_like(x, fill_value, dtype=None, shape=None):
    x = _arr(x, "full_like")
    return full(x.shape if shape is None else shape, fill_value,
                x.dtype if dtype is None else dtype)


# --- products ------------------------------------------------------------------------------
def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """mirax.ops.dot.dot_general. precision: None (the default_matmul_precision knob), a
    Precision, "default"/"high"/"highest", or a pair (lhs, rhs) (the higher applies)."""
    return _dot.dot_general(lhs, rhs, dimension_numbers, preferred_element_type, precision)


def dot(lhs, rhs, precision=None, preferred_element_type=None):
    """Vector/matrix products: contract lhs's last axis with rhs's first."""
    a, b = _arr(lhs, "dot"), _arr(rhs, "dot")
    if not (1 <= a.ndim <= 2 and 1 <= b.ndim <= 2) or a.shape[-1] != b.shape[0]:
        raise ShapeError(f"dot: incompatible shapes {short(a)} and {short(b)}")
    return _dot.dot_general(a, b, (((a.ndim - 1,), (0,)), ((), ())), preferred_element_type,
                            precision, op="dot")


def batch_matmul(lhs, rhs, precision=None):
    a, b = _arr(lhs, "batch_matmul"), _arr(rhs, "batch_matmul")
    if a.ndim < 2 or a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2] or \
            a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"batch_matmul: incompatible shapes {short(a)} and {short(b)}")
    batch = tuple(range(a.ndim - 2))
    return _dot.dot_general(a, b, (((a.ndim - 1,), (a.ndim - 2,)), (batch, batch)),
                            precision=precision, op="batch_matmul")


# --- selection, barriers -------------------------------------------------------------------
def select_n(which, *cases):
    """cases[which]: which is bool (two cases) or an integer array (out-of-range: any)."""
    if not cases:
        raise ValueError("select_n: need at least one case")
    which = _arr(which, "select_n")
    if len(cases) == 1:
        return _arr(cases[0], "select_n")
    if which.dtype == np.bool_:
        if len(cases) != 2:
            raise ValueError(f"select_n: a bool selector picks one of 2 cases, got "
                             f"{len(cases)}")
        return ew.select(which, cases[1], cases[0])
    out = cases[0]
    for i, c in enumerate(cases[1:], 1):
        out = ew.select(ew.eq(which, i), c, out)
    return out


def optimization_barrier(operand):
    """Identity on values (a pytree); mirax's passes do not move ops across it anyway."""
    for v in tree.leaves(operand):  # each leaf must be an array (returned as is)
        _arr(v, "optimization_barrier")
    return operand


# --- bits ----------------------------------------------------------------------------------
def _int_operand(x, op):
    x = _arr(x, op)
    if not np.issubdtype(x.dtype, np.integer):
        raise TypeError(f"{op}: expected an integer array, got {short(x)}")
    return x


def _unsigned(dtype):
    return np.dtype(f"uint{np.dtype(dtype).itemsize * 8}")


def _signed(dtype):
    return np.dtype(f"int{np.dtype(dtype).itemsize * 8}")


def population_count(x):
    """The number of set bits of each entry (same dtype)."""
    x = _int_operand(x, "population_count")
    u = ew.convert_element_type(x, _unsigned(x.dtype))  # two's complement bits
    bits = np.dtype(x.dtype).itemsize * 8
    one = np.asarray(1, u.dtype)
    count = ew.logical_and(u, one)
    for i in range(1, bits):
        count = ew.add(count, ew.logical_and(ew.shift_right(u, np.asarray(i, u.dtype)), one))
    return ew.convert_element_type(count, x.dtype)


def clz(x):
    """The number of leading zero bits of each entry (same dtype)."""
    x = _int_operand(x, "clz")
    u = ew.convert_element_type(x, _unsigned(x.dtype))
    bits = np.dtype(x.dtype).itemsize * 8
    length = ew.convert_element_type(ew.ne(u, np.asarray(0, u.dtype)), x.dtype)
    for i in range(1, bits):
        nz = ew.ne(ew.shift_right(u, np.asarray(i, u.dtype)), np.asarray(0, u.dtype))
        length = ew.add(length, ew.convert_element_type(nz, x.dtype))
    return ew.sub(np.asarray(bits, x.dtype), length)


def _shift_args(x, y, op):
    x, y = promote(op, _int_operand(x, op), _int_operand(y, op))
    bits = np.dtype(x.dtype).itemsize * 8
    inside = ew.logical_and(ew.ge(y, 0), ew.lt(y, bits))  # JAX: other shifts fill
    return x, ew.select(inside, y, full(y.shape, bits - 1, y.dtype)), inside


def shift_left(x, y):
    x, y, inside = _shift_args(x, y, "shift_left")
    return ew.select(inside, ew.shift_left(x, y), ew.zeros_like(x))


def shift_right_arithmetic(x, y):
    x, y, _ = _shift_args(x, y, "shift_right_arithmetic")  # bits - 1 fills with the sign
    s = ew.convert_element_type(x, _signed(x.dtype))
    out = ew.shift_right(s, ew.convert_element_type(y, s.dtype))
    return ew.convert_element_type(out, x.dtype)


def shift_right_logical(x, y):
    x, y, inside = _shift_args(x, y, "shift_right_logical")
    u = ew.convert_element_type(x, _unsigned(x.dtype))
    out = ew.shift_right(u, ew.convert_element_type(y, u.dtype))
    return ew.select(inside, ew.convert_element_type(out, x.dtype), ew.zeros_like(x))


def _bitwise_operands(x, y, op):
    x, y = promote(op, _arr(x, op), _arr(y, op))
    if dtypes.is_float(x.dtype):
        raise TypeError(f"{op}: expected integer or bool operands, got {short(x)}, {short(y)}")
    return x, y


def bitwise_and(x, y):
    return ew.logical_and(*_bitwise_operands(x, y, "bitwise_and"))


def bitwise_or(x, y):
    return ew.logical_or(*_bitwise_operands(x, y, "bitwise_or"))


def bitwise_xor(x, y):
    return ew.logical_xor(*_bitwise_operands(x, y, "bitwise_xor"))


def bitwise_not(x):
    x = _arr(x, "bitwise_not")
    if dtypes.is_float(x.dtype):
        raise TypeError(f"bitwise_not: expected an integer or bool operand, got {short(x)}")
    return ew.logical_not(x)


def bitcast_convert_type(operand, new_dtype):
    """Same-width integer reinterpretation (int32 <-> uint32, ...); float bit casts are not
    supported (no mirax op reads a float's bits)."""
    x = _arr(operand, "bitcast_convert_type")
    new = np.dtype(dtypes.canonicalize(new_dtype))
    ints = np.issubdtype(x.dtype, np.integer) and np.issubdtype(new, np.integer)
    if x.dtype == new:
        return x
    if not ints or new.itemsize != x.dtype.itemsize:
        raise NotImplementedError(f"bitcast_convert_type: {short(x)} to {new.name}: only "
                                  "same-width integer types are supported")
    return ew.convert_element_type(x, new)  # wraps modulo 2**bits: the same bits


# --- generic reductions, split, approximate top-k ------------------------------------------
def _halving_fold(fn, xs, axis):
    """Combine the entries of each array in xs along axis pairwise (log depth): fn takes and
    returns lists of arrays."""
    n = xs[0].shape[axis]
    while n > 1:
        h = n // 2
        out = fn([slice_in_dim(v, 0, h, axis=axis) for v in xs],
                 [slice_in_dim(v, h, 2 * h, axis=axis) for v in xs])
        if n % 2:
            out = [concatenate([o, slice_in_dim(v, 2 * h, n, axis=axis)], axis)
                   for o, v in zip(out, xs)]
        xs, n = out, h + n % 2
    return [squeeze(v, axis) for v in xs]


def reduce(operands, init_values, computation, dimensions):
    """lax.reduce: combine the entries along `dimensions` with computation (associative and
    commutative, as JAX requires) and the init values. add/mul/max/min on one array use the
    reduction primitives; anything else folds pairwise (log depth). Pytrees work too."""
    op = "reduce"
    leaves, treedef = tree.flatten(operands)
    inits = tree.leaves(init_values)
    if not leaves or len(inits) != len(leaves):
        raise ValueError(f"{op}: {len(leaves)} operands and {len(inits)} init values")
    xs = [_arr(v, op) for v in leaves]
    dims = tuple(sorted({normalize_axis(d, xs[0].ndim, op, xs[0]) for d in dimensions}))
    inits = [ew.convert_element_type(_arr(i, op), x.dtype) for i, x in zip(inits, xs)]
    kind, identity = _monoid(computation, xs[0].dtype) if len(xs) == 1 else (None, None)
    if kind is not None:
        red = REDUCERS[kind](xs[0], dims)
        if not _is_value(tree.leaves(init_values)[0], identity):
            red = computation(red, inits[0])
        return tree.unflatten(treedef, [red])
    if dims:
        keep = [d for d in range(xs[0].ndim) if d not in dims]
        xs = [collapse(transpose(x, tuple(dims) + tuple(keep)), 0, len(dims)) for x in xs]

    def combine(a, b):
        out = computation(tree.unflatten(treedef, a), tree.unflatten(treedef, b))
        return [_arr(v, op) for v in tree.leaves(out)]
    if dims and xs[0].shape[0] == 0:
        out = [broadcast_in_dim(i, tuple(x.shape[1:]), ()) for i, x in zip(inits, xs)]
        return tree.unflatten(treedef, out)
    red = _halving_fold(combine, xs, 0) if dims else xs
    out = combine([broadcast_in_dim(i, tuple(r.shape), ()) for i, r in zip(inits, red)], red)
    return tree.unflatten(treedef, out)


def _bit_reduce(name, combine, operand, axes):
    x = _arr(operand, name)
    if dtypes.is_float(x.dtype):
        raise TypeError(f"{name}: expected a bool or integer array, got {short(x)}")
    axes = tuple(sorted({normalize_axis(a, x.ndim, name, x) for a in axes}))
    if not axes:
        return x
    keep = [d for d in range(x.ndim) if d not in axes]
    x = collapse(transpose(x, axes + tuple(keep)), 0, len(axes))
    if x.shape[0] == 0:
        return full(tuple(x.shape[1:]), -1 if name == "reduce_and" else 0, x.dtype)
    return _halving_fold(lambda a, b: [combine(a[0], b[0])], [x], 0)[0]


def reduce_and(operand, axes):
    return _bit_reduce("reduce_and", ew.logical_and, operand, axes)


def reduce_or(operand, axes):
    return _bit_reduce("reduce_or", ew.logical_or, operand, axes)


def reduce_xor(operand, axes):
    return _bit_reduce("reduce_xor", ew.logical_xor, operand, axes)


def split(operand, sizes, axis=0):
    """Consecutive pieces of the given sizes along axis (they must add up to its length)."""
    x = _arr(operand, "split")
    axis = normalize_axis(axis, x.ndim, "split", x, strict=True)
    sizes = [static_int(s, "split", "sizes") for s in sizes]
    if sum(sizes) != x.shape[axis] or builtins.min(sizes, default=0) < 0:
        raise ValueError(f"split: sizes {sizes} do not add up to axis {axis} of {short(x)}")
    starts = np.cumsum([0] + sizes)
    return [slice_in_dim(x, int(a), int(b), axis=axis) for a, b in zip(starts[:-1], starts[1:])]


def zeros_like_array(x):
    return ew.zeros_like(_arr(x, "zeros_like_array"))


def _approx_k(name, operand, k, reduction_dimension, largest):
    x = _arr(operand, name)
    d = normalize_axis(reduction_dimension, x.ndim, name, x)
    xm = moveaxis(x, d, x.ndim - 1)
    vals, idx = top_k(xm if largest else ew.neg(xm), k)
    vals = vals if largest else ew.neg(vals)
    return moveaxis(vals, x.ndim - 1, d), moveaxis(idx, x.ndim - 1, d)


def approx_max_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True):
    """The exact top k (recall 1) along reduction_dimension: (values, indices)."""
    return _approx_k("approx_max_k", operand, k, reduction_dimension, True)


def approx_min_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True):
    """The exact k smallest along reduction_dimension: (values, indices)."""
    return _approx_k("approx_min_k", operand, k, reduction_dimension, False)


# --- odds and ends -------------------------------------------------------------------------
def broadcast_shapes(*shapes):
    """The NumPy broadcast of static shapes."""
    try:
        return tuple(int(d) for d in np.broadcast_shapes(
            *(static_shape(s, "broadcast_shapes") for s in shapes)))
    except ValueError:
        raise ShapeError(f"broadcast_shapes: {', '.join(map(str, shapes))} do not broadcast "
                         "together") from None


def index_take(src, idxs, axes):
    """src indexed by one index array per axis in axes (indices wrap modulo the axis
    length): the result is [N] + the remaining axes of src."""
    x = _arr(src, "index_take")
    axes = tuple(normalize_axis(a, x.ndim, "index_take", x) for a in axes)
    idxs = [_arr(i, "index_take") for i in idxs]
    if len(idxs) != len(axes):
        raise ValueError(f"index_take: {len(idxs)} index arrays for axes {axes} of {short(x)}")
    idx = concatenate([ew.rem(ew.add(ew.rem(i, x.shape[a]), x.shape[a]), x.shape[a])
                       [:, None] for i, a in zip(idxs, axes)], 1)
    return gather(x, idx, axes)


def mulhi(x, y):
    """The high half of the double-width product of two integers (8, 16 or 32 bits)."""
    x, y = promote("mulhi", _int_operand(x, "mulhi"), _int_operand(y, "mulhi"))
    bits = np.dtype(x.dtype).itemsize * 8
    if bits > 32:
        raise NotImplementedError(f"mulhi: {short(x)}: 64-bit operands are not supported")
    wide = np.dtype(("uint" if x.dtype.kind == "u" else "int") + "64")
    p = ew.mul(ew.convert_element_type(x, wide), ew.convert_element_type(y, wide))
    return ew.convert_element_type(ew.shift_right(p, np.asarray(bits, wide)), x.dtype)


def with_sharding_constraint(x, shardings):
    """x itself: mirax arrays live whole on one device."""
    for v in tree.leaves(x):
        _arr(v, "with_sharding_constraint")
    return x


def igamma_grad_a(a, x):
    """d igamma(a, x) / da."""
    a, x = _special._floats("igamma_grad_a", a, x)
    return jvp(lambda v: _special.igamma(v, x), (a,), (ew.ones_like(a),))[1]
