"""More of jax.lax, as compositions of mirax ops (no new primitives).

Everything here is written with the op wrappers of mirax.ops, so grad, vmap and jit go
through the existing rules. Where mirax's conventions differ from JAX's (ties of max/min
split the derivative evenly), mirax's conventions hold.
"""
from __future__ import annotations

import builtins
import enum
import itertools
import math

import numpy as np

from mirax.core import dtypes, tree
from mirax.ops import elementwise as ew
from mirax.ops.common import float_operand, normalize_axis, promote, short, static_int
from mirax.ops.common import operand as _arr
from mirax.ops.conv import conv_general_dilated
from mirax.ops.cumulative import cummax, cummin, cumprod, cumsum, linear_recurrence
from mirax.ops.dot import dot_general
from mirax.ops.indexing import dynamic_index_in_dim, dynamic_update_index_in_dim
from mirax.ops.reduction import reduce_max, reduce_min, reduce_sum
from mirax.ops.shape import (
    broadcast_in_dim, concatenate, full, iota, pad, reshape, rev, slice, slice_in_dim, squeeze,
    stack, transpose)
from mirax.ops import sort as _sort
from mirax.transforms.custom import custom_jvp, stop_gradient

__all__ = [
    "Precision", "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "top_k", "sort",
    "sort_key_val", "clamp", "integer_pow", "exp2", "square", "tile", "broadcast",
    "broadcasted_iota", "broadcast_to_rank", "collapse", "index_in_dim", "dynamic_index_in_dim",
    "dynamic_update_index_in_dim", "full_like", "batch_matmul", "dot", "select_n",
    "optimization_barrier", "reduce_precision", "population_count", "clz", "shift_left",
    "shift_right_logical", "shift_right_arithmetic", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_not", "bitcast_convert_type", "padtype_to_pads", "reduce_window",
    "associative_scan", "conv", "conv_with_general_padding", "conv_transpose",
    "conv_dimension_numbers", "ConvDimensionNumbers", "zeta", "polygamma", "igamma",
    "igammac", "betainc", "bessel_i0e", "bessel_i1e", "reduce", "reduce_and", "reduce_or",
    "reduce_xor", "split", "zeros_like_array", "approx_max_k", "approx_min_k",
]


class Precision(enum.Enum):
    """Matmul/conv precision. Accepted everywhere and ignored: mirax computes in the operands'
    dtype (float32 products are float32, never tf32/bf16 passes)."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value):
        names = {"default": 0, "bfloat16": 0, "fastest": 0, "high": 1, "tensorfloat32": 1,
                 "highest": 2, "float32": 2}
        if isinstance(value, str) and value.lower() in names:
            return cls(names[value.lower()])
        return None


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
    acc, base, n = None, x, abs(y)
    while n:
        if n & 1:
            acc = base if acc is None else ew.mul(acc, base)
        n >>= 1
        if n:
            base = ew.mul(base, base)
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
    lo = normalize_axis(start_dimension, x.ndim + 1, "collapse", x)
    hi = x.ndim if stop_dimension is None else \
        normalize_axis(stop_dimension, x.ndim + 1, "collapse", x)
    if lo > hi:
        raise ValueError(f"collapse: start {lo} after stop {hi} for {short(x)}")
    shape = tuple(x.shape)
    return reshape(x, shape[:lo] + (math.prod(shape[lo:hi]),) + shape[hi:])


def index_in_dim(operand, index, axis=0, keepdims=True):
    x = _arr(operand, "index_in_dim")
    axis = normalize_axis(axis, x.ndim, "index_in_dim", x)
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
def dot(lhs, rhs, precision=None, preferred_element_type=None):
    """Vector/matrix products: contract lhs's last axis with rhs's first."""
    a, b = _arr(lhs, "dot"), _arr(rhs, "dot")
    if not (1 <= a.ndim <= 2 and 1 <= b.ndim <= 2) or a.shape[-1] != b.shape[0]:
        raise TypeError(f"dot: incompatible shapes {short(a)} and {short(b)}")
    return dot_general(a, b, (((a.ndim - 1,), (0,)), ((), ())), preferred_element_type)


def batch_matmul(lhs, rhs, precision=None):
    a, b = _arr(lhs, "batch_matmul"), _arr(rhs, "batch_matmul")
    if a.ndim < 2 or a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2] or \
            a.shape[-1] != b.shape[-2]:
        raise ValueError(f"batch_matmul: incompatible shapes {short(a)} and {short(b)}")
    batch = tuple(range(a.ndim - 2))
    return dot_general(a, b, (((a.ndim - 1,), (a.ndim - 2,)), (batch, batch)))


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


# --- windows -------------------------------------------------------------------------------
def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    """'SAME' / 'SAME_LOWER' / 'VALID' as (lo, hi) pairs (JAX's rule)."""
    mode = padding.upper()
    if mode == "VALID":
        return [(0, 0)] * len(in_shape)
    if mode not in ("SAME", "SAME_LOWER"):
        raise ValueError(f"padding must be 'SAME', 'SAME_LOWER' or 'VALID', got {padding!r}")
    pads = []
    for n, w, s in zip(in_shape, window_shape, window_strides):
        total = builtins.max((-(-n // s) - 1) * s + w - n, 0)
        lo, hi = total // 2, total - total // 2
        pads.append((lo, hi) if mode == "SAME" else (hi, lo))
    return pads


def _monoid(computation, dtype):
    """('add' | 'max' | 'min', its identity in dtype) when computation is that op."""
    import mirax.numpy as mnp
    kind = {ew.add: "add", mnp.add: "add", ew.max: "max", mnp.maximum: "max", ew.min: "min",
            mnp.minimum: "min"}.get(computation)
    if kind is None or kind == "add" or dtype == np.bool_:
        return kind, {"add": 0, "max": False, "min": True, None: None}[kind]
    lo, hi = (-np.inf, np.inf) if dtypes.is_float(dtype) else \
        (np.iinfo(dtype).min, np.iinfo(dtype).max)
    return kind, lo if kind == "max" else hi


def _is_value(v, ref):
    try:
        return ref is not None and float(v) == float(ref)
    except (TypeError, ValueError):  # a traced init value
        return False


def reduce_window(operand, init_value, computation, window_dimensions, window_strides,
                  padding, base_dilation=None, window_dilation=None):
    """lax.reduce_window on one array: one strided slice of the padded (and base-dilated)
    array per window offset, combined with `computation` (stacked and reduced for
    add/max/min). As XLA: padding and dilation holes are skipped, init_value enters once."""
    op = "reduce_window"
    x = _arr(operand, op)
    nd = x.ndim
    wd = tuple(int(w) for w in window_dimensions)
    ws = tuple(int(s) for s in window_strides)
    bd = (1,) * nd if base_dilation is None else tuple(int(d) for d in base_dilation)
    wdil = (1,) * nd if window_dilation is None else tuple(int(d) for d in window_dilation)
    if not len(wd) == len(ws) == len(bd) == len(wdil) == nd or \
            builtins.min(wd + ws + bd + wdil, default=1) < 1:
        raise ValueError(f"{op}: window {wd}, strides {ws}, base_dilation {bd}, "
                         f"window_dilation {wdil} do not fit {short(x)}")
    eff = tuple((w - 1) * d + 1 for w, d in zip(wd, wdil))
    pads = padtype_to_pads(x.shape, eff, ws, padding) if isinstance(padding, str) \
        else [tuple(int(v) for v in p) for p in padding]
    if len(pads) != nd:
        raise ValueError(f"{op}: {len(pads)} padding pairs for {short(x)}")
    init = ew.convert_element_type(_arr(init_value, op), x.dtype)
    kind, identity = _monoid(computation, x.dtype)
    cfg = tuple((lo, hi, d - 1) for (lo, hi), d in zip(pads, bd))
    holes = any(v for c in cfg for v in c)
    xp = pad(x, identity if kind else init, cfg)
    out = tuple(builtins.max((n - e) // s + 1, 0) for n, e, s in zip(xp.shape, eff, ws))
    if 0 in out:
        return full(out, 0, x.dtype)

    def windows(a):
        for offs in itertools.product(*(range(w) for w in wd)):
            start = tuple(o * d for o, d in zip(offs, wdil))
            yield slice(a, start, tuple(b + (o - 1) * s + 1 for b, o, s in
                                        zip(start, out, ws)), ws)
    if kind is not None:
        reduce = {"add": reduce_sum, "max": reduce_max, "min": reduce_min}[kind]
        acc = reduce(stack(list(windows(xp)), 0), (0,))
        return acc if _is_value(init_value, identity) else computation(acc, init)
    acc = broadcast_in_dim(init, out, ())
    masks = windows(pad(full(x.shape, True, np.bool_), False, cfg)) if holes else None
    for p in windows(xp):
        nxt = _arr(computation(acc, p), op)
        acc = ew.select(next(masks), nxt, acc) if holes else nxt
    return acc


# --- associative_scan ----------------------------------------------------------------------
def _interleave(a, b, axis):
    """a[0], b[0], a[1], b[1], ... along axis (a is as long as b or one longer)."""
    na, nb = a.shape[axis], b.shape[axis]
    cfg_a, cfg_b = [(0, 0, 0)] * a.ndim, [(0, 0, 0)] * b.ndim
    cfg_a[axis] = (0, 1 if na == nb else 0, 1)
    cfg_b[axis] = (1, 0 if na == nb else 1, 1)
    combine = ew.logical_or if a.dtype == np.bool_ else ew.add
    return combine(pad(a, np.zeros((), a.dtype), tuple(cfg_a)),
                   pad(b, np.zeros((), b.dtype), tuple(cfg_b)))


def associative_scan(fn, elems, reverse=False, axis=0):
    """Inclusive scan with an associative fn over a pytree of arrays along axis, by the
    odd/even recursion (log depth; JAX's algorithm)."""
    leaves, treedef = tree.flatten(elems)
    leaves = [_arr(v, "associative_scan") for v in leaves]
    if not leaves:
        return elems
    axis = normalize_axis(axis, leaves[0].ndim, "associative_scan", leaves[0])
    n = leaves[0].shape[axis]
    if any(v.ndim <= axis or v.shape[axis] != n for v in leaves):
        raise ValueError("associative_scan: leaves disagree on the scanned axis: "
                         + ", ".join(short(v) for v in leaves))
    if reverse:
        leaves = [rev(v, (axis,)) for v in leaves]

    def combine(a, b):
        out = fn(tree.unflatten(treedef, a), tree.unflatten(treedef, b))
        return [_arr(v, "associative_scan") for v in tree.leaves(out)]

    def sl(v, start, stop=None, stride=1):
        return slice_in_dim(v, start, v.shape[axis] if stop is None else stop, stride, axis)

    def scan(xs):
        m = xs[0].shape[axis]
        if m < 2:
            return xs
        odd = scan(combine([sl(v, 0, m - 1, 2) for v in xs], [sl(v, 1, None, 2) for v in xs]))
        if m % 2 == 0:
            even = combine([sl(v, 0, v.shape[axis] - 1) for v in odd],
                           [sl(v, 2, None, 2) for v in xs])
        else:
            even = combine(odd, [sl(v, 2, None, 2) for v in xs])
        even = [concatenate([sl(v, 0, 1), e], axis) for v, e in zip(xs, even)]
        return [_interleave(e, o, axis) for e, o in zip(even, odd)]

    out = scan(leaves)
    if reverse:
        out = [rev(v, (axis,)) for v in out]
    return tree.unflatten(treedef, out)


# --- convolutions --------------------------------------------------------------------------
class ConvDimensionNumbers(tuple):
    """(lhs_spec, rhs_spec, out_spec): each the positions of (batch/out-feature,
    feature/in-feature, spatial...) dims, as jax.lax.ConvDimensionNumbers."""
    __slots__ = ()

    def __new__(cls, lhs_spec, rhs_spec, out_spec):
        return super().__new__(cls, (tuple(lhs_spec), tuple(rhs_spec), tuple(out_spec)))

    lhs_spec = property(lambda self: self[0])
    rhs_spec = property(lambda self: self[1])
    out_spec = property(lambda self: self[2])

    def __repr__(self):
        return (f"ConvDimensionNumbers(lhs_spec={self[0]}, rhs_spec={self[1]}, "
                f"out_spec={self[2]})")


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers):
    """Layout strings (or None: NC..., OI..., NC...) as a ConvDimensionNumbers; spatial dims
    are ordered as in the rhs spec (JAX's rule)."""
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    nd = len(lhs_shape)
    if len(rhs_shape) != nd:
        raise TypeError(f"conv_dimension_numbers: ranks {len(lhs_shape)} and {len(rhs_shape)} "
                        "differ")
    if dimension_numbers is None:
        spec = (0, 1) + tuple(range(2, nd))
        return ConvDimensionNumbers(spec, spec, spec)
    lhs, rhs, out = dimension_numbers
    if not len(lhs) == len(rhs) == len(out) == nd:
        raise TypeError(f"conv_dimension_numbers: specs {dimension_numbers} do not fit rank "
                        f"{nd}")

    def perm(spec, first, second):
        spatial = sorted((i for i, c in enumerate(spec) if c not in (first, second)),
                         key=lambda i: rhs.index(spec[i]))
        return (spec.index(first), spec.index(second)) + tuple(spatial)
    return ConvDimensionNumbers(perm(lhs, "N", "C"), perm(rhs, "O", "I"), perm(out, "N", "C"))


def _conv_nc(lhs, rhs, dn, strides, padding, lhs_dilation, rhs_dilation, fgc, bgc, pref, op):
    """conv_general_dilated through NC.../OI... layouts given a ConvDimensionNumbers."""
    lhs, rhs = _arr(lhs, op), _arr(rhs, op)
    dn = conv_dimension_numbers(lhs.shape, rhs.shape, dn)
    x, w = transpose(lhs, dn.lhs_spec), transpose(rhs, dn.rhs_spec)
    out = conv_general_dilated(x, w, strides, padding, lhs_dilation, rhs_dilation,
                               feature_group_count=fgc, batch_group_count=bgc,
                               preferred_element_type=pref)
    return transpose(out, tuple(np.argsort(dn.out_spec)))


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """conv_general_dilated with NC.../OI... layouts and no dilation."""
    return conv_general_dilated(lhs, rhs, window_strides, padding,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                preferred_element_type=preferred_element_type)


def _conv_transpose_padding(k, s, padding):
    if padding == "SAME":
        pad_len = k + s - 2
        lo = k - 1 if s > k - 1 else -(-pad_len // 2)
    elif padding == "VALID":
        pad_len = k + s - 2 + builtins.max(k - s, 0)
        lo = k - 1
    else:
        raise ValueError(f"conv_transpose: padding must be 'SAME', 'VALID' or pairs, got "
                         f"{padding!r}")
    return lo, pad_len - lo


_TF_LAYOUTS = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
               5: ("NHWDC", "HWDIO", "NHWDC")}


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None):
    """The gradient-of-conv style transposed convolution (jax.lax.conv_transpose): a
    convolution of the stride-dilated lhs. Layouts default to TensorFlow's (NHWC, HWIO)."""
    op = "conv_transpose"
    lhs, rhs = _arr(lhs, op), _arr(rhs, op)
    nd = lhs.ndim
    if rhs.ndim != nd or nd not in _TF_LAYOUTS:
        raise ValueError(f"{op}: {short(lhs)} and {short(rhs)} need equal ranks 2 to 5")
    if dimension_numbers is None:
        dimension_numbers = _TF_LAYOUTS[nd]
    dn = conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers)
    k_sp = [rhs.shape[i] for i in dn.rhs_spec[2:]]
    rd = (1,) * (nd - 2) if rhs_dilation is None else tuple(int(r) for r in rhs_dilation)
    strides = tuple(int(s) for s in strides)
    if isinstance(padding, str):
        pads = [_conv_transpose_padding((k - 1) * r + 1, s, padding.upper())
                for k, r, s in zip(k_sp, rd, strides)]
    else:
        pads = [tuple(int(v) for v in p) for p in padding]
    if transpose_kernel:  # flip the spatial dims and swap the in/out feature axes
        rhs = rev(rhs, tuple(dn.rhs_spec[2:]))
        perm = list(range(nd))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = dn.rhs_spec[1], dn.rhs_spec[0]
        rhs = transpose(rhs, tuple(perm))
    return _conv_nc(lhs, rhs, dn, (1,) * (nd - 2), pads, strides, rd, 1, 1,
                    preferred_element_type, op)


# --- special functions ---------------------------------------------------------------------
# Fixed-length series and continued fractions written with mirax ops (so every derivative,
# in every argument, is the derivative of the approximation); the same algorithms as the
# NumPy references of mirax/ops/special_impl.py and Cephes.
_B2J = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
        43867 / 798, -174611 / 330)  # Bernoulli numbers B_2 ... B_20


def _floats(op, *xs):
    xs = promote(op, *(float_operand(x, op) for x in xs))
    shape = np.broadcast_shapes(*(x.shape for x in xs))
    return [ew.broadcast_to(x, shape) for x in xs]


def _const(like, v):
    return full(like.shape, v, like.dtype)


def _is_int(x):
    return ew.eq(ew.floor(x), x)


def zeta(x, q):
    """Hurwitz zeta sum_k (q + k)^-x: 16 direct terms and the Euler-Maclaurin tail. NaN for
    x < 1 and for q <= 0 with x not an integer; inf at the poles (x = 1, q a non-positive
    integer)."""
    s, a = _floats("zeta", x, q)
    n = 16
    total = ew.zeros_like(a)
    for k in range(n):
        total = ew.add(total, ew.pow(ew.add(a, float(k)), ew.neg(s)))
    qn = ew.add(a, float(n))
    s_safe = ew.select(ew.eq(s, 1.0), ew.add(s, 1.0), s)  # the pole is set below
    tail = ew.add(ew.div(ew.pow(qn, ew.sub(1.0, s_safe)), ew.sub(s_safe, 1.0)),
                  ew.mul(0.5, ew.pow(qn, ew.neg(s))))
    rising, fact = s, 2.0
    for j in range(1, 9):
        term = ew.mul(rising, ew.pow(qn, ew.sub(float(1 - 2 * j), s)))
        tail = ew.add(tail, ew.mul(_B2J[j - 1] / fact, term))
        rising = ew.mul(rising, ew.mul(ew.add(s, 2.0 * j - 1), ew.add(s, 2.0 * j)))
        fact *= (2 * j + 1) * (2 * j + 2)
    out = ew.add(total, tail)
    nonpos = ew.le(a, 0.0)
    out = ew.select(ew.logical_and(nonpos, _is_int(a)), _const(out, np.inf), out)
    out = ew.select(ew.logical_and(nonpos, ew.logical_not(_is_int(s))),
                    _const(out, np.nan), out)
    out = ew.select(ew.eq(s, 1.0), _const(out, np.inf), out)
    return ew.select(ew.lt(s, 1.0), _const(out, np.nan), out)


def polygamma(m, x):
    """The m-th derivative of digamma: (-1)^(m+1) m! zeta(m + 1, x) for m >= 1; m = 0 is
    digamma. m is a non-negative integer (array or scalar)."""
    m, x = _floats("polygamma", m, x)
    m_pos = ew.select(ew.gt(m, 0.0), m, ew.ones_like(m))  # keeps zeta off its pole at m = 0
    sign = ew.sub(1.0, ew.mul(2.0, ew.rem(ew.add(m_pos, 1.0), 2.0)))  # (-1)^(m+1)
    out = ew.mul(ew.mul(sign, ew.exp(ew.lgamma(ew.add(m_pos, 1.0)))),
                 zeta(ew.add(m_pos, 1.0), x))
    out = ew.select(ew.eq(m, 0.0), ew.digamma(x), out)
    return ew.select(ew.logical_and(ew.ge(m, 0.0), _is_int(m)), out, _const(out, np.nan))


_GAMMA_TERMS = 200  # series / continued-fraction steps: float64-exact for a up to ~500


def _igamma_parts(a, x):
    """(P, Q, use_cf): the series for P where x <= max(1, a), else the Lentz continued
    fraction for Q (Numerical Recipes gser / gcf), each fed harmless inputs elsewhere."""
    use_cf = ew.logical_and(ew.gt(x, 1.0), ew.gt(x, a))
    ok = ew.logical_and(ew.logical_and(ew.gt(a, 0.0), ew.gt(x, 0.0)),
                        ew.logical_and(ew.is_finite(a), ew.is_finite(x)))
    xs = ew.select(ew.logical_and(ok, ew.logical_not(use_cf)), x, _const(x, 0.5))
    as_ = ew.select(ok, a, ew.ones_like(a))
    term = ew.reciprocal(as_)
    total = term
    for n in range(1, _GAMMA_TERMS):
        term = ew.mul(term, ew.div(xs, ew.add(as_, float(n))))
        total = ew.add(total, term)
    pref_s = ew.exp(ew.sub(ew.sub(ew.mul(as_, ew.log(xs)), xs), ew.lgamma(as_)))
    p = ew.mul(pref_s, total)
    xc = ew.select(ew.logical_and(ok, use_cf), x, ew.add(as_, 2.0))
    tiny = 1e-30
    b = ew.sub(ew.add(xc, 1.0), as_)
    c = _const(b, 1.0 / tiny)
    d = ew.reciprocal(b)
    h = d
    for i in range(1, _GAMMA_TERMS):
        an = ew.mul(-float(i), ew.sub(float(i), as_))
        b = ew.add(b, 2.0)
        d = _guard_tiny(ew.add(ew.mul(an, d), b), tiny)
        c = _guard_tiny(ew.add(b, ew.div(an, c)), tiny)
        d = ew.reciprocal(d)
        h = ew.mul(h, ew.mul(d, c))
    pref_c = ew.exp(ew.sub(ew.sub(ew.mul(as_, ew.log(xc)), xc), ew.lgamma(as_)))
    q = ew.mul(pref_c, h)
    return p, q, use_cf


def _guard_tiny(v, tiny):
    return ew.select(ew.lt(ew.abs(v), tiny), _const(v, tiny), v)


def _igamma_edges(out, a, x, at_zero):
    """x = 0 or a = inf give at_zero; x = inf its complement; a <= 0, x < 0, NaN: NaN."""
    out = ew.select(ew.eq(x, 0.0), _const(out, at_zero), out)
    out = ew.select(ew.eq(x, np.inf), _const(out, 1.0 - at_zero), out)
    out = ew.select(ew.eq(a, np.inf), _const(out, at_zero), out)
    bad = ew.logical_or(ew.logical_or(ew.le(a, 0.0), ew.lt(x, 0.0)),
                        ew.logical_not(ew.logical_and(ew.eq(a, a), ew.eq(x, x))))
    return ew.select(bad, _const(out, np.nan), out)


def igamma(a, x):
    """The regularized lower incomplete gamma function P(a, x)."""
    a, x = _floats("igamma", a, x)
    p, q, use_cf = _igamma_parts(a, x)
    return _igamma_edges(ew.select(use_cf, ew.sub(1.0, q), p), a, x, 0.0)


def igammac(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    a, x = _floats("igammac", a, x)
    p, q, use_cf = _igamma_parts(a, x)
    return _igamma_edges(ew.select(use_cf, q, ew.sub(1.0, p)), a, x, 1.0)


_BETA_TERMS = 100  # float64-exact for a, b up to ~1e3


def _betacf(a, b, x):
    """The continued fraction of I_x(a, b) (Numerical Recipes betacf, modified Lentz)."""
    tiny = 1e-30
    qab, qap, qam = ew.add(a, b), ew.add(a, 1.0), ew.sub(a, 1.0)
    c = ew.ones_like(x)
    d = ew.reciprocal(_guard_tiny(ew.sub(1.0, ew.div(ew.mul(qab, x), qap)), tiny))
    h = d
    for m in range(1, _BETA_TERMS):
        m2 = 2.0 * m
        for aa in (ew.div(ew.mul(ew.mul(float(m), ew.sub(b, float(m))), x),
                          ew.mul(ew.add(qam, m2), ew.add(a, m2))),
                   ew.div(ew.neg(ew.mul(ew.mul(ew.add(a, float(m)), ew.add(qab, float(m))), x)),
                          ew.mul(ew.add(a, m2), ew.add(qap, m2)))):
            d = ew.reciprocal(_guard_tiny(ew.add(1.0, ew.mul(aa, d)), tiny))
            c = _guard_tiny(ew.add(1.0, ew.div(aa, c)), tiny)
            h = ew.mul(h, ew.mul(d, c))
    return h


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b), by the continued fraction on
    the side of x where it converges (x < (a + 1) / (a + b + 2), else 1 - I_{1-x}(b, a))."""
    a, b, x = _floats("betainc", a, b, x)
    inside = ew.logical_and(ew.gt(x, 0.0), ew.lt(x, 1.0))
    ok = ew.logical_and(ew.logical_and(ew.gt(a, 0.0), ew.gt(b, 0.0)), inside)
    a_, b_ = ew.select(ok, a, ew.ones_like(a)), ew.select(ok, b, ew.ones_like(b))
    xs = ew.select(ok, x, _const(x, 0.5))
    log_bt = ew.add(ew.sub(ew.sub(ew.lgamma(ew.add(a_, b_)), ew.lgamma(a_)), ew.lgamma(b_)),
                    ew.add(ew.mul(a_, ew.log(xs)), ew.mul(b_, ew.log1p(ew.neg(xs)))))
    bt = ew.exp(log_bt)
    direct = ew.lt(xs, ew.div(ew.add(a_, 1.0), ew.add(ew.add(a_, b_), 2.0)))
    x1 = ew.select(direct, xs, _const(xs, 0.25))  # each branch gets its convergent side
    x2 = ew.select(direct, _const(xs, 0.75), xs)
    lo = ew.div(ew.mul(bt, _betacf(a_, b_, x1)), a_)
    hi = ew.sub(1.0, ew.div(ew.mul(bt, _betacf(b_, a_, ew.sub(1.0, x2))), b_))
    out = ew.select(direct, lo, hi)
    out = ew.select(ew.eq(x, 0.0), ew.zeros_like(out), out)
    out = ew.select(ew.eq(x, 1.0), ew.ones_like(out), out)
    bad = ew.logical_or(ew.logical_or(ew.le(a, 0.0), ew.le(b, 0.0)),
                        ew.logical_or(ew.lt(x, 0.0), ew.gt(x, 1.0)))
    return ew.select(ew.logical_or(bad, ew.ne(x, x)), _const(out, np.nan), out)


_BESSEL_SERIES_MAX = 20.0


def _bessel_scaled(x, order):
    """exp(-|x|) I_order(x): power series for |x| <= 20 (45 terms), Hankel's asymptotic
    series above (32 terms); as special_impl's reference. I_1 is written x * (even part)
    so its derivative at 0 is right."""
    op = f"bessel_i{order}e"
    x = float_operand(x, op)
    a = ew.abs(x)
    small = ew.le(a, _BESSEL_SERIES_MAX)
    xs = ew.select(small, x, ew.zeros_like(x))
    q = ew.mul(0.25, ew.mul(xs, xs))
    term, total = ew.ones_like(q), ew.ones_like(q)
    for k in range(1, 46):
        term = ew.mul(term, ew.mul(q, 1.0 / (k * (k + order))))
        total = ew.add(total, term)
    series = ew.mul(ew.exp(ew.neg(ew.abs(xs))), total)
    if order == 1:
        series = ew.mul(series, ew.mul(0.5, xs))
    al = ew.select(small, _const(a, 2 * _BESSEL_SERIES_MAX), a)
    mu = 4.0 * order * order
    term, total = ew.ones_like(al), ew.ones_like(al)
    for k in range(1, 33):
        term = ew.mul(term, ew.div(-(mu - (2 * k - 1) ** 2) / (8.0 * k), al))
        total = ew.add(total, term)
    asym = ew.mul(total, ew.rsqrt(ew.mul(2.0 * np.pi, al)))
    if order == 1:
        asym = ew.mul(ew.sign(x), asym)
    out = ew.select(small, series, asym)
    return ew.select(ew.is_finite(x), out, ew.select(ew.ne(x, x), x, ew.zeros_like(x)))


def bessel_i0e(x):
    """exp(-|x|) I_0(x)."""
    return _bessel_scaled(x, 0)


def bessel_i1e(x):
    """exp(-|x|) I_1(x)."""
    return _bessel_scaled(x, 1)


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
    if kind is None and len(xs) == 1 and computation in (ew.mul, _np_multiply()):
        kind, identity = "mul", 1
    if kind is not None:
        red = {"add": reduce_sum, "max": reduce_max, "min": reduce_min,
               "mul": _reduce_prod}[kind](xs[0], dims)
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


def _np_multiply():
    import mirax.numpy as mnp
    return mnp.multiply


def _reduce_prod(x, axes):
    from mirax.ops.reduction import reduce_prod
    return reduce_prod(x, axes)


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
    axis = normalize_axis(axis, x.ndim, "split", x)
    sizes = [int(s) for s in sizes]
    if sum(sizes) != x.shape[axis] or builtins.min(sizes, default=0) < 0:
        raise ValueError(f"split: sizes {sizes} do not add up to axis {axis} of {short(x)}")
    starts = np.cumsum([0] + sizes)
    return [slice_in_dim(x, int(a), int(b), axis=axis) for a, b in zip(starts[:-1], starts[1:])]


def zeros_like_array(x):
    return ew.zeros_like(_arr(x, "zeros_like_array"))


def _approx_k(name, operand, k, reduction_dimension, largest):
    x = _arr(operand, name)
    d = normalize_axis(reduction_dimension, x.ndim, name, x)
    xm = ew.moveaxis(x, d, x.ndim - 1)
    vals, idx = top_k(xm if largest else ew.neg(xm), k)
    vals = vals if largest else ew.neg(vals)
    return ew.moveaxis(vals, x.ndim - 1, d), ew.moveaxis(idx, x.ndim - 1, d)


def approx_max_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True):
    """The exact top k (recall 1) along reduction_dimension: (values, indices)."""
    return _approx_k("approx_max_k", operand, k, reduction_dimension, True)


def approx_min_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True):
    """The exact k smallest along reduction_dimension: (values, indices)."""
    return _approx_k("approx_min_k", operand, k, reduction_dimension, False)
