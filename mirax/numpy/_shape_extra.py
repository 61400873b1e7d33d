"""mirax.numpy shape manipulation, comparisons and statistics beyond _core.py.

Everything here is a composition of mirax ops (slices, rev, concatenate, broadcast_in_dim,
reshape, elementwise math, reductions), so it is differentiable, batchable and jittable
through those primitives' rules. Static arguments (sections, repeats, shifts, pad widths)
must be concrete Python values; NumPy only ever touches those static index lists.
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from mirax.core import dtypes
from mirax.core.array import Array
from mirax.core.trace import Tracer
from mirax.core.errors import ShapeError
from mirax.ops import elementwise as ew
from mirax.ops import shape as sh
from mirax.ops.sort import sort
from mirax.ops.common import broadcast_shapes as _broadcast_operands
from mirax.ops.common import (
    cast, normalize_axes, normalize_axis, operand, promote, result_dtype,
    short, static_int)
from mirax.numpy._core import (all as _all, matmul, max as _max, max as amax, mean,
                               min as _min, min as amin, prod as _prod, sum as _sum)
from mirax.numpy._math import round as around

__all__ = [
    "split", "array_split", "hsplit", "vsplit", "dsplit", "tile", "repeat", "flip", "fliplr",
    "flipud", "roll", "rot90", "pad", "kron", "diff", "ediff1d", "cross", "meshgrid",
    "vstack", "hstack", "column_stack", "dstack", "row_stack", "atleast_3d",
    "broadcast_arrays", "broadcast_shapes", "result_type", "can_cast", "isclose", "allclose",
    "array_equal", "array_equiv", "count_nonzero", "nansum", "nanmean", "nanmax", "nanmin",
    "nanprod", "nanvar", "nanstd", "average", "ptp", "median", "quantile", "percentile",
    "cov", "corrcoef", "append",
]


# --- helpers ----------------------------------------------------------------------------
def _static_ints(v, op: str, what: str) -> list[int]:
    """A concrete int or sequence of ints (a concrete mx.Array is fine, a tracer is not)."""
    if isinstance(v, Tracer):
        static_int(v, op, what)  # raises ConcretizationError naming the op
    if isinstance(v, Array):
        v = np.asarray(v).tolist()
    if isinstance(v, (int, np.integer)):
        return [int(v)]
    return [static_int(x, op, what) for x in v]


def take_static(x, idx, axis: int):
    """x[..., idx, ...] along `axis` for a static index list, as slices/rev/broadcasts.

    Runs of consecutive (+1), reversed (-1) or repeated (0) indices become one op each."""
    x = operand(x, "take_static")
    idx = [int(i) for i in idx]
    if not idx:
        return sh.slice_in_dim(x, 0, 0, axis=axis)
    pieces, i, n = [], 0, len(idx)
    while i < n:
        j = i + 1
        step = idx[j] - idx[i] if j < n and abs(idx[j] - idx[i]) <= 1 else None
        if step is not None:
            while j < n and idx[j] - idx[j - 1] == step:
                j += 1
        else:
            step = 1
        lo, hi = builtins.min(idx[i], idx[j - 1]), builtins.max(idx[i], idx[j - 1])
        if step == 0:
            one = sh.slice_in_dim(x, idx[i], idx[i] + 1, axis=axis)
            shape = list(x.shape)
            shape[axis] = j - i
            piece = sh.broadcast_in_dim(one, tuple(shape), tuple(range(x.ndim)))
        else:
            piece = sh.slice_in_dim(x, lo, hi + 1, axis=axis)
            if step < 0:
                piece = sh.rev(piece, (axis,))
        pieces.append(piece)
        i = j
    return sh.concatenate(pieces, axis) if len(pieces) > 1 else pieces[0]


# --- split --------------------------------------------------------------------------------
def _split_bounds(n, indices_or_sections, op, x, even):
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError(f"{op}: number of sections must be positive, got {k}")
        if even and n % k:
            raise ValueError(f"{op}: an axis of size {n} of {short(x)} does not split into {k} "
                             "equal sections (use array_split)")
        q, r = divmod(n, k)
        sizes = [q + 1] * r + [q] * (k - r)
        return list(np.cumsum([0] + sizes))
    cuts = _static_ints(indices_or_sections, op, "indices")
    bounds = [0]
    for c in cuts:
        bounds.append(builtins.slice(c).indices(n)[1])
    bounds.append(n)
    return bounds


def _split(ary, indices_or_sections, axis, op, even):
    x = operand(ary, op)
    ax = normalize_axis(axis, x.ndim, op, x)
    b = _split_bounds(x.shape[ax], indices_or_sections, op, x, even)
    return [sh.slice_in_dim(x, int(s), int(builtins.max(s, e)), axis=ax)
            for s, e in zip(b[:-1], b[1:])]


def split(ary, indices_or_sections, axis=0):
    return _split(ary, indices_or_sections, axis, "split", True)


def array_split(ary, indices_or_sections, axis=0):
    return _split(ary, indices_or_sections, axis, "array_split", False)


def hsplit(ary, indices_or_sections):
    x = operand(ary, "hsplit")
    return split(x, indices_or_sections, 0 if x.ndim == 1 else 1)


def vsplit(ary, indices_or_sections):
    return split(ary, indices_or_sections, 0)


def dsplit(ary, indices_or_sections):
    return split(ary, indices_or_sections, 2)


# --- tile / repeat ------------------------------------------------------------------------
def tile(A, reps):
    x = operand(A, "tile")
    reps = _static_ints(reps, "tile", "reps")
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: reps must be non-negative, got {tuple(reps)}")
    nd = builtins.max(len(reps), x.ndim)
    reps = [1] * (nd - len(reps)) + reps
    x = sh.reshape(x, (1,) * (nd - x.ndim) + tuple(x.shape))
    # broadcast to (r0, d0, r1, d1, ...) then merge each pair
    shape = tuple(v for r, d in zip(reps, x.shape) for v in (r, d))
    out = sh.broadcast_in_dim(x, shape, tuple(range(1, 2 * nd, 2)))
    return sh.reshape(out, tuple(r * d for r, d in zip(reps, x.shape)))


def repeat(a, repeats, axis=None, total_repeat_length=None):
    x = operand(a, "repeat")
    if axis is None:
        x, axis = sh.reshape(x, (-1,)), 0
    ax = normalize_axis(axis, x.ndim, "repeat", x)
    n = x.shape[ax]
    reps = _static_ints(repeats, "repeat", "repeats")
    if any(r < 0 for r in reps):
        raise ValueError("repeat: repeats must be non-negative")
    if len(reps) == 1:
        r = reps[0]
        shape = x.shape[:ax + 1] + (r,) + x.shape[ax + 1:]
        out = sh.broadcast_in_dim(x, shape, tuple(i for i in range(x.ndim + 1)
                                                  if i != ax + 1))
        out = sh.reshape(out, x.shape[:ax] + (n * r,) + x.shape[ax + 1:])
    else:
        if len(reps) != n:
            raise ShapeError(f"repeat: {len(reps)} repeats do not match axis {ax} of "
                             f"{short(x)}")
        out = take_static(x, np.repeat(np.arange(n), reps), ax)
    if total_repeat_length is not None and out.shape[ax] != total_repeat_length:
        raise ValueError(f"repeat: total_repeat_length={total_repeat_length} but the "
                         f"repeats give {out.shape[ax]}")
    return out


# --- flip / roll / rot90 ------------------------------------------------------------------
def flip(m, axis=None):
    x = operand(m, "flip")
    return sh.rev(x, normalize_axes(axis, x.ndim, "flip", x))


def fliplr(m):
    return flip(m, 1)


def flipud(m):
    return flip(m, 0)


def roll(a, shift, axis=None):
    x = operand(a, "roll")
    if axis is None:
        return sh.reshape(roll(sh.reshape(x, (-1,)), shift, 0), x.shape)
    shifts = _static_ints(shift, "roll", "shift")
    axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    if len(axes) == 1 and len(shifts) > 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError(f"roll: {len(shifts)} shifts for {len(axes)} axes")
    for s, ax in zip(shifts, axes):
        ax = normalize_axis(ax, x.ndim, "roll", x)
        n = x.shape[ax]
        if n == 0 or s % n == 0:
            continue
        s %= n
        x = sh.concatenate([sh.slice_in_dim(x, n - s, n, axis=ax),
                            sh.slice_in_dim(x, 0, n - s, axis=ax)], ax)
    return x


def rot90(m, k=1, axes=(0, 1)):
    x = operand(m, "rot90")
    a0, a1 = (normalize_axis(a, x.ndim, "rot90", x) for a in axes)
    if a0 == a1:
        raise ValueError("rot90: axes must be different")
    k %= 4
    if k == 0:
        return x
    if k == 2:
        return sh.rev(x, (a0, a1))
    perm = list(range(x.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    return sh.transpose(sh.rev(x, (a1,)), perm) if k == 1 else \
        sh.rev(sh.transpose(x, perm), (a1,))


# --- pad ----------------------------------------------------------------------------------
def _pad_widths(pad_width, ndim, op="pad"):
    w = np.asarray(pad_width.tolist() if isinstance(pad_width, Array) else pad_width)
    if w.dtype.kind not in "iu" and w.size:
        raise TypeError(f"{op}: pad_width must be integers, got {pad_width!r}")
    try:
        w = np.broadcast_to(w.astype(int), (ndim, 2))
    except ValueError:
        raise ValueError(f"{op}: pad_width {pad_width!r} does not fit an array of rank "
                         f"{ndim}") from None
    if (w < 0).any():
        raise ValueError(f"{op}: pad_width must be non-negative, got {pad_width!r}")
    return [(int(lo), int(hi)) for lo, hi in w]


_INDEX_MODES = ("edge", "reflect", "symmetric", "wrap")
_STAT_MODES = ("maximum", "minimum", "mean", "median")


def _padded_axes(x, widths, mode):
    """(axis, lo, hi, length) of each axis that gets padding, in order; an empty axis has
    no values to pad from."""
    for ax, (lo, hi) in enumerate(widths):
        n = x.shape[ax]
        if not lo and not hi:
            continue
        if n == 0:
            raise ValueError(f"pad: cannot pad an empty axis {ax} of {short(x)} in mode "
                             f"{mode!r}")
        yield ax, lo, hi, n


def _pad_computed(x, widths, mode, kwargs):
    """pad modes whose values are computed from the array, one axis after the other as
    NumPy does (corners come from the already padded axes): a statistic of the first /
    last `stat_length` values, or a linear ramp from `end_values` to the edge value."""
    stat = {"maximum": amax, "minimum": amin, "mean": mean, "median": median}.get(mode)
    key = "stat_length" if stat is not None else "end_values"
    default = None if stat is not None else 0
    extra = np.broadcast_to(np.asarray(kwargs.get(key, default), dtype=object), (x.ndim, 2))
    unknown = set(kwargs) - {key}
    if unknown:
        raise TypeError(f"pad: mode {mode!r} takes no {', '.join(sorted(unknown))}")
    for ax, lo, hi, n in _padded_axes(x, widths, mode):
        parts = []
        for side, width in ((0, lo), (1, hi)):
            if not width:
                parts.append(None)
                continue
            if stat is not None:
                k = n if extra[ax, side] is None else builtins.min(int(extra[ax, side]), n)
                if k <= 0:
                    raise ValueError(f"pad: stat_length must be positive, got {k}")
                part = sh.slice_in_dim(x, 0, k, axis=ax) if side == 0 else \
                    sh.slice_in_dim(x, n - k, n, axis=ax)
                v = stat(part, axis=ax, keepdims=True)
                if mode in ("mean", "median") and not dtypes.is_float(x.dtype):
                    v = around(v)   # NumPy rounds integer means and medians
                v = ew.convert_element_type(v, x.dtype)
                shape = list(x.shape)
                shape[ax] = width
                parts.append(sh.broadcast_to(v, tuple(shape)))
            else:   # linear_ramp: end + i * (edge - end) / width, i = 0 .. width-1
                edge = sh.slice_in_dim(x, 0, 1, axis=ax) if side == 0 else \
                    sh.slice_in_dim(x, n - 1, n, axis=ax)
                t = np.arange(width, dtype=np.float64)
                t = t if side == 0 else t[::-1]
                ft = x.dtype if dtypes.is_float(x.dtype) else np.float64  # as np.linspace
                t = np.reshape(t, [width if a == ax else 1 for a in range(x.ndim)]).astype(ft)
                e = ew.convert_element_type(edge, ft)
                end = float(extra[ax, side])
                ramp = ew.add(ew.mul(Array(t), ew.div(ew.sub(e, end), float(width))), end)
                parts.append(ew.convert_element_type(ramp, x.dtype))
        x = sh.concatenate([p for p in (parts[0], x, parts[1]) if p is not None], ax)
    return x


def pad(array, pad_width, mode="constant", constant_values=0, **kwargs):
    x = operand(array, "pad")
    widths = _pad_widths(pad_width, x.ndim)
    if mode == "constant":
        cv = constant_values
        if isinstance(cv, (bool, int, float)) or (hasattr(cv, "shape") and not np.shape(cv)):
            v = cast(cv, x.dtype, False, "pad") if not isinstance(cv, (Array, Tracer)) else \
                ew.convert_element_type(cv, x.dtype)
            return sh.pad(x, v, tuple((lo, hi, 0) for lo, hi in widths))
        cvs = np.broadcast_to(np.asarray(cv, dtype=object), (x.ndim, 2))
        for ax, (lo, hi) in enumerate(widths):
            for side, amount in ((0, lo), (1, hi)):
                cfg = [(0, 0, 0)] * x.ndim
                cfg[ax] = (amount, 0, 0) if side == 0 else (0, amount, 0)
                v = cast(cvs[ax, side].item() if hasattr(cvs[ax, side], "item")
                         else cvs[ax, side], x.dtype, False, "pad")
                x = sh.pad(x, v, tuple(cfg))
        return x
    if mode in _STAT_MODES or mode == "linear_ramp":
        return _pad_computed(x, widths, mode, kwargs)
    if mode not in _INDEX_MODES:
        raise ValueError(f"pad: mode {mode!r} is not one of constant, "
                         f"{', '.join(_INDEX_MODES + _STAT_MODES)}, linear_ramp")
    for ax, lo, hi, n in _padded_axes(x, widths, mode):
        idx = np.pad(np.arange(n), (lo, hi), mode=mode)  # static indices only
        x = take_static(x, idx, ax)
    return x


# --- products -----------------------------------------------------------------------------
def kron(a, b):
    a, b = promote("kron", operand(a, "kron"), operand(b, "kron"))
    nd = builtins.max(a.ndim, b.ndim)
    a = sh.reshape(a, (1,) * (nd - a.ndim) + tuple(a.shape))
    b = sh.reshape(b, (1,) * (nd - b.ndim) + tuple(b.shape))
    a2 = sh.reshape(a, tuple(v for d in a.shape for v in (d, 1)))
    b2 = sh.reshape(b, tuple(v for d in b.shape for v in (1, d)))
    return sh.reshape(ew.mul(a2, b2), tuple(p * q for p, q in zip(a.shape, b.shape)))


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    a, b = promote("cross", operand(a, "cross"), operand(b, "cross"))
    if axis is not None:
        axisa = axisb = axisc = axis
    a = sh.moveaxis(a, normalize_axis(axisa, a.ndim, "cross", a), -1)
    b = sh.moveaxis(b, normalize_axis(axisb, b.ndim, "cross", b), -1)
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise ValueError(f"cross: vectors must have 2 or 3 components, got {short(a)} and "
                         f"{short(b)}")

    def comp(v, i):
        if i >= v.shape[-1]:
            return ew.zeros_like(sh.index_in_dim(v, 0, v.ndim - 1))
        return sh.index_in_dim(v, i, v.ndim - 1)
    a0, a1, a2 = (comp(a, i) for i in range(3))
    b0, b1, b2 = (comp(b, i) for i in range(3))
    z = ew.sub(ew.mul(a0, b1), ew.mul(a1, b0))
    if a.shape[-1] == 2 and b.shape[-1] == 2:
        return z
    out = sh.stack(list(_bcast(ew.sub(ew.mul(a1, b2), ew.mul(a2, b1)),
                               ew.sub(ew.mul(a2, b0), ew.mul(a0, b2)), z)), -1)
    return sh.moveaxis(out, -1, normalize_axis(axisc, out.ndim, "cross", out))


def _bcast(*xs):
    shape = _broadcast_operands("broadcast_arrays", *xs)
    return [sh.broadcast_to(x, shape) for x in xs]


# --- differences --------------------------------------------------------------------------
def diff(a, n=1, axis=-1, prepend=None, append=None):
    x = operand(a, "diff")
    if x.ndim == 0:
        raise ValueError("diff: requires an input of at least one dimension")
    ax = normalize_axis(axis, x.ndim, "diff", x)
    parts = []
    for extra in (prepend, x, append):
        if extra is None:
            continue
        e = operand(extra, "diff")
        if e.ndim == 0:
            shape = list(x.shape)
            shape[ax] = 1
            e = sh.broadcast_to(e, tuple(shape))
        parts.append(e)
    if len(parts) > 1:
        x = sh.concatenate(parts, ax)
    for _ in range(int(n)):
        m = x.shape[ax]
        hi = sh.slice_in_dim(x, 1, builtins.max(m, 1), axis=ax)
        lo = sh.slice_in_dim(x, 0, builtins.max(m - 1, 0), axis=ax)
        x = ew.ne(hi, lo) if x.dtype == dtypes.bool_ else ew.sub(hi, lo)
    return x


def ediff1d(ary, to_end=None, to_begin=None):
    x = diff(sh.reshape(operand(ary, "ediff1d"), (-1,)))
    parts = [sh.reshape(operand(v, "ediff1d"), (-1,)) for v in (to_begin,) if v is not None]
    parts.append(x)
    parts += [sh.reshape(operand(v, "ediff1d"), (-1,)) for v in (to_end,) if v is not None]
    return sh.concatenate(parts, 0)


def append(arr, values, axis=None):
    a, v = operand(arr, "append"), operand(values, "append")
    if axis is None:
        return sh.concatenate([sh.reshape(a, (-1,)), sh.reshape(v, (-1,))], 0)
    return sh.concatenate([a, v], axis)


# --- stacking -----------------------------------------------------------------------------
def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    xs = [sh.reshape(operand(x, "meshgrid"), (-1,)) for x in xi]
    n = len(xs)
    shape = [x.shape[0] for x in xs]
    if indexing == "xy" and n > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        d = i
        if indexing == "xy" and n > 1 and i < 2:
            d = 1 - i
        s = [1] * n
        s[d] = x.shape[0]
        out.append(sh.reshape(x, tuple(s)) if sparse else
                   sh.broadcast_in_dim(x, tuple(shape), (d,)))
    return out


def atleast_3d(*arys):
    outs = []
    for a in arys:
        x = operand(a, "atleast_3d")
        if x.ndim == 0:
            x = sh.reshape(x, (1, 1, 1))
        elif x.ndim == 1:
            x = sh.reshape(x, (1, x.shape[0], 1))
        elif x.ndim == 2:
            x = sh.reshape(x, tuple(x.shape) + (1,))
        outs.append(x)
    return outs[0] if len(outs) == 1 else outs


def _at_least(x, k, op):
    x = operand(x, op)
    return sh.reshape(x, (1,) * (k - x.ndim) + tuple(x.shape)) if x.ndim < k else x


def vstack(tup):
    return sh.concatenate([_at_least(x, 2, "vstack") for x in tup], 0)


row_stack = vstack


def hstack(tup):
    xs = [_at_least(x, 1, "hstack") for x in tup]
    return sh.concatenate(xs, 0 if xs and xs[0].ndim == 1 else 1)


def dstack(tup):
    return sh.concatenate([atleast_3d(x) for x in tup], 2)


def column_stack(tup):
    xs = []
    for x in tup:
        x = operand(x, "column_stack")
        xs.append(sh.reshape(x, (-1, 1)) if x.ndim < 2 else x)
    return sh.concatenate(xs, 1)


def broadcast_shapes(*shapes):
    """The shape that arrays of these shapes broadcast to (NumPy's rule)."""
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*(
            (s,) if isinstance(s, int) else tuple(s) for s in shapes)))
    except ValueError:
        raise ValueError(f"broadcast_shapes: shapes {list(shapes)} do not broadcast") from None


def broadcast_arrays(*args):
    xs = [operand(a, "broadcast_arrays") for a in args]
    return _bcast(*xs) if xs else []


# --- dtypes -------------------------------------------------------------------------------
def _dtype_like(x):
    """(dtype, weak) for an array, Python scalar, or dtype specifier."""
    if isinstance(x, (Array, Tracer, bool, int, float, np.ndarray, np.generic)):
        return result_dtype(x)
    return dtypes.canonicalize(x), False


def result_type(*args):
    if not args:
        raise ValueError("result_type: at least one argument is required")
    d, w = _dtype_like(args[0])
    for x in args[1:]:
        d2, w2 = _dtype_like(x)
        d, w = dtypes.promote_types_weak(d, w, d2, w2)
    return d


_KIND_ORDER = {"b": 0, "u": 1, "i": 1, "f": 2, "V": 2}


def can_cast(from_, to, casting="safe"):
    f = _dtype_like(from_)[0]
    t = dtypes.canonicalize(to)
    if casting in ("no", "equiv"):
        return f == t
    if casting == "unsafe":
        return True
    safe = f == t or dtypes.promote_types(f, t) == t
    if casting == "safe":
        return safe
    if casting == "same_kind":
        kind = (lambda d: 2 if dtypes.is_float(d) else _KIND_ORDER[d.kind])
        return safe or kind(f) <= kind(t)
    raise ValueError(f"can_cast: unknown casting {casting!r}")


# --- comparisons --------------------------------------------------------------------------
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    a, b = promote("isclose", operand(a, "isclose"), operand(b, "isclose"))
    if not dtypes.is_float(a.dtype):
        a = ew.convert_element_type(a, dtypes.float32, a.weak_type)
        b = ew.convert_element_type(b, dtypes.float32, b.weak_type)
    finite = ew.logical_and(ew.is_finite(a), ew.is_finite(b))
    sa, sb = ew.select(finite, a, ew.zeros_like(a)), ew.select(finite, b, ew.zeros_like(b))
    tol = ew.add(atol, ew.mul(rtol, ew.abs(sb)))
    close = ew.select(finite, ew.le(ew.abs(ew.sub(sa, sb)), tol), ew.eq(a, b))
    if equal_nan:
        close = ew.logical_or(close, ew.logical_and(ew.ne(a, a), ew.ne(b, b)))
    return close


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return _all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1, a2, equal_nan=False):
    a, b = operand(a1, "array_equal"), operand(a2, "array_equal")
    if tuple(a.shape) != tuple(b.shape):
        return operand(False)
    eq = ew.eq(*promote("array_equal", a, b))
    if equal_nan and dtypes.is_float(result_dtype(a, b)[0]):
        eq = ew.logical_or(eq, ew.logical_and(ew.ne(a, a), ew.ne(b, b)))
    return _all(eq)


def array_equiv(a1, a2):
    a, b = operand(a1, "array_equiv"), operand(a2, "array_equiv")
    try:
        _broadcast_operands("array_equiv", a, b)
    except ValueError:
        return operand(False)
    return _all(ew.eq(*promote("array_equiv", a, b)))


# --- statistics ---------------------------------------------------------------------------
def count_nonzero(a, axis=None, keepdims=False):
    x = operand(a, "count_nonzero")
    return _sum(ew.ne(x, ew.zeros_like(x)) if x.dtype != dtypes.bool_ else x, axis=axis,
                dtype=dtypes.int32, keepdims=keepdims)


def _nan_to(x, value):
    x = operand(x, "nan")
    if not dtypes.is_float(x.dtype):
        return x
    return ew.select(ew.ne(x, x), ew.add(ew.zeros_like(x), value), x)


def nansum(a, axis=None, dtype=None, keepdims=False):
    return _sum(_nan_to(a, 0.0), axis=axis, dtype=dtype, keepdims=keepdims)


def nanprod(a, axis=None, dtype=None, keepdims=False):
    return _prod(_nan_to(a, 1.0), axis=axis, dtype=dtype, keepdims=keepdims)


def nanmean(a, axis=None, dtype=None, keepdims=False):
    x = operand(a, "nanmean")
    if not dtypes.is_float(x.dtype):
        return mean(x, axis=axis, dtype=dtype, keepdims=keepdims)
    s = nansum(x, axis=axis, dtype=dtype, keepdims=keepdims)
    n = count_nonzero(ew.eq(x, x), axis=axis, keepdims=keepdims)
    return ew.div(s, ew.convert_element_type(n, s.dtype))


def nanvar(a, axis=None, dtype=None, ddof=0, keepdims=False):
    x = operand(a, "nanvar")
    m = nanmean(x, axis=axis, dtype=dtype, keepdims=True)
    c = ew.sub(ew.convert_element_type(x, m.dtype, x.weak_type), m)
    present = ew.eq(x, x)   # skip the input's NaNs only: inf - inf is still NaN (NumPy)
    s = _sum(ew.mul(c, c), axis=axis, keepdims=keepdims, where=present)
    n = count_nonzero(present, axis=axis, keepdims=keepdims)
    return ew.div(s, ew.convert_element_type(ew.max(ew.sub(n, ddof), 0), s.dtype))


def nanstd(a, axis=None, dtype=None, ddof=0, keepdims=False):
    return ew.sqrt(nanvar(a, axis, dtype, ddof, keepdims))


def _nan_extreme(a, axis, keepdims, fill, fn, op):
    x = operand(a, op)
    if not dtypes.is_float(x.dtype):
        return fn(x, axis=axis, keepdims=keepdims)
    out = fn(_nan_to(x, fill), axis=axis, keepdims=keepdims)
    allnan = _all(ew.ne(x, x), axis=axis, keepdims=keepdims)
    return ew.select(allnan, ew.add(ew.zeros_like(out), math.nan), out)


def nanmax(a, axis=None, keepdims=False):
    return _nan_extreme(a, axis, keepdims, -math.inf, _max, "nanmax")


def nanmin(a, axis=None, keepdims=False):
    return _nan_extreme(a, axis, keepdims, math.inf, _min, "nanmin")


def average(a, axis=None, weights=None, returned=False, keepdims=False):
    x = operand(a, "average")
    if weights is None:
        avg = mean(x, axis=axis, keepdims=keepdims)
        axes = normalize_axes(axis, x.ndim, "average", x)
        count = ew.add(ew.zeros_like(avg), float(np.prod([x.shape[i] for i in axes])))
        return (avg, count) if returned else avg
    w = operand(weights, "average")
    if tuple(w.shape) != tuple(x.shape):
        if axis is None or w.ndim != 1:
            raise ShapeError(f"average: weights {short(w)} must have the shape of {short(x)} "
                             "or be 1-d along `axis`")
        ax = normalize_axis(axis, x.ndim, "average", x)
        if w.shape[0] != x.shape[ax]:
            raise ShapeError(f"average: weights {short(w)} do not match axis {ax} of "
                             f"{short(x)}")
        w = sh.broadcast_in_dim(w, tuple(x.shape), (ax,))
    d = dtypes.promote_types(result_dtype(x, w)[0], dtypes.float32) \
        if not dtypes.is_float(result_dtype(x, w)[0]) else result_dtype(x, w)[0]
    x, w = ew.convert_element_type(x, d), ew.convert_element_type(w, d)
    wsum = _sum(w, axis=axis, keepdims=keepdims)
    avg = ew.div(_sum(ew.mul(x, w), axis=axis, keepdims=keepdims), wsum)
    return (avg, wsum) if returned else avg


def ptp(a, axis=None, keepdims=False):
    return ew.sub(_max(a, axis=axis, keepdims=keepdims), _min(a, axis=axis, keepdims=keepdims))


def quantile(a, q, axis=None, method="linear", keepdims=False, interpolation=None):
    """Quantiles by sorting and interpolating between static positions (q is static)."""
    method = interpolation or method
    x = operand(a, "quantile")
    if not dtypes.is_float(x.dtype):
        x = ew.convert_element_type(x, dtypes.float32)
    if axis is None:
        src, ax = sh.reshape(x, (-1,)), 0
    elif isinstance(axis, (tuple, list)):  # several axes: moved last and merged into one
        axes = normalize_axes(axis, x.ndim, "quantile", x)
        kept = [i for i in range(x.ndim) if i not in axes]
        src = sh.reshape(sh.transpose(x, kept + list(axes)),
                         tuple(x.shape[i] for i in kept) + (-1,))
        ax = len(kept)
        out = quantile(src, q, ax, method)
        if keepdims:
            qdims = np.ndim(q) if not isinstance(q, Array) else q.ndim
            shape = tuple(out.shape[:qdims]) + tuple(
                1 if i in axes else d for i, d in enumerate(x.shape))
            out = sh.reshape(out, shape)
        return out
    else:
        src, ax = x, normalize_axis(axis, x.ndim, "quantile", x)
    qs = np.asarray(np.asarray(q).tolist() if isinstance(q, Array) else q, dtype=np.float64)
    if isinstance(q, Tracer):
        static_int(q, "quantile", "q")
    if (qs < 0).any() or (qs > 1).any():
        raise ValueError("quantile: q must be in [0, 1]")
    n = src.shape[ax]
    s = sort(src, ax)
    last = sh.index_in_dim(s, n - 1, ax, keepdims=True) if n else None
    outs = []
    for qi in qs.reshape(-1).tolist():
        pos = qi * (n - 1)
        lo, hi = int(math.floor(pos)), int(math.ceil(pos))
        frac = pos - lo
        if method == "lower" or (method == "nearest" and frac < 0.5) or (
                method == "nearest" and frac == 0.5 and lo % 2 == 0):
            hi, frac = lo, 0.0
        elif method in ("higher", "nearest"):
            lo, frac = hi, 0.0
        elif method == "midpoint":
            frac = 0.5 if hi != lo else 0.0
        elif method != "linear":
            raise ValueError(f"quantile: unknown method {method!r}")
        vlo = sh.index_in_dim(s, lo, ax, keepdims=True)
        v = vlo if hi == lo or frac == 0 else ew.add(
            vlo, ew.mul(ew.sub(sh.index_in_dim(s, hi, ax, keepdims=True), vlo), frac))
        if last is not None:   # NaN sorts last: any NaN in the slice makes it NaN (NumPy)
            v = ew.select(ew.ne(last, last), last, v)
        if keepdims and axis is None:
            v = sh.reshape(v, (1,) * x.ndim)
        elif not keepdims:
            v = sh.squeeze(v, ax)
        outs.append(v)
    if qs.ndim == 0:
        return outs[0]
    return sh.reshape(sh.stack(outs, 0), qs.shape + tuple(outs[0].shape))


def percentile(a, q, axis=None, method="linear", keepdims=False, interpolation=None):
    qs = np.asarray(np.asarray(q).tolist() if isinstance(q, Array) else q, np.float64) / 100.0
    return quantile(a, qs if qs.ndim else float(qs), axis, method, keepdims, interpolation)


def median(a, axis=None, keepdims=False):
    return quantile(a, 0.5, axis=axis, keepdims=keepdims)


def cov(m, y=None, rowvar=True, bias=False, ddof=None):
    x = operand(m, "cov")
    if x.ndim > 2:
        raise ValueError(f"cov: m must be at most 2-d, got {short(x)}")
    x = sh.reshape(x, (1, -1)) if x.ndim < 2 else x
    if not rowvar and x.shape[0] != 1:
        x = sh.transpose(x, (1, 0))
    if y is not None:
        yy = operand(y, "cov")
        yy = sh.reshape(yy, (1, -1)) if yy.ndim < 2 else yy
        if not rowvar and yy.shape[0] != 1:
            yy = sh.transpose(yy, (1, 0))
        x = sh.concatenate([x, yy], 0)
    if not dtypes.is_float(x.dtype):
        x = ew.convert_element_type(x, dtypes.float32)
    ddof = (0 if bias else 1) if ddof is None else ddof
    n = x.shape[1]
    c = ew.sub(x, mean(x, axis=1, keepdims=True))
    out = ew.div(matmul(c, sh.transpose(c, (1, 0))), float(builtins.max(n - ddof, 0)))
    return sh.reshape(out, ()) if out.shape == (1, 1) else out


def corrcoef(x, y=None, rowvar=True):
    c = cov(x, y, rowvar)
    if c.ndim == 0:
        return ew.div(c, c)
    n = c.shape[0]
    d = ew.sqrt(sh.slice_in_dim(sh.reshape(c, (n * n,)), 0, n * n, n + 1))
    out = ew.div(ew.div(c, sh.reshape(d, (-1, 1))), sh.reshape(d, (1, -1)))
    return ew.max(ew.min(out, 1.0), -1.0)
