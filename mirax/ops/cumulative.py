"""Cumulative (scan) primitives along one axis: cumsum, cumprod, cummax, cummin.

`reverse=True` scans from the end. cumsum is linear (its adjoint is the reverse cumsum).
cumprod's rules never divide by x: they solve the linear recurrence h_i = a_i h_{i-1} + b_i
with a log-depth (Hillis-Steele) scan of mul/add/pad, exact when x has zeros and
differentiable again. cummax/cummin give the tangent of the entry that attains the running
extreme, split evenly among tied entries (the max/min convention of API.md).
"""
from __future__ import annotations

import numpy as np

from mirax.core import dtypes
from mirax.core.avals import ShapedArray
from mirax.core.primitive import Primitive
from mirax.core.trace import aval_of
from mirax.ops import sort as sort_ops
from mirax.ops.common import normalize_axis, operand
from mirax.ops import elementwise as elementwise_ops
from mirax.ops import shape as shape_ops


def _wrap(p, x, axis, reverse):
    x = operand(x, p.name)
    if x.ndim == 0:
        return x
    axis = normalize_axis(axis, x.ndim, p.name, x)
    return p.bind(x, axis=axis, reverse=bool(reverse))


def _impl(np_fn):
    def impl(x, *, axis, reverse):
        if x.shape[axis] == 0:
            return np.asarray(x).copy()
        acc = np.float32 if x.dtype in dtypes.LOW_FLOATS else x.dtype
        xs = np.flip(x, axis) if reverse else x
        out = np.asarray(np_fn(xs.astype(acc, copy=False), axis)).astype(x.dtype)
        return np.flip(out, axis) if reverse else out
    return impl


def _vmap(p):
    def vmap(args, dims, *, axis, reverse):
        (x,), (d,) = args, dims
        return p.bind(x, axis=axis + (axis >= d), reverse=reverse), d
    return vmap


def _abstract_eval(x, *, axis, reverse):
    return ShapedArray(x.shape, x.dtype)


def _prev(y, axis, reverse, fill):
    """The previous entry in scan order (fill where there is none)."""
    return _prev_by(y, axis, reverse, 1, fill)


def _next(y, axis, reverse, fill):
    """The next entry in scan order (fill where there is none)."""
    return _prev_by(y, axis, not reverse, 1, fill)


def linear_recurrence(a, b, axis, reverse=False):
    """h with h_i = a_i h_{i-1} + b_i (h_{-1} = 0), scanning along axis (from the end if
    reverse). Log-depth: pairs (A, B) compose as B_i += A_i B_{i-d}, A_i *= A_{i-d}."""
    n = aval_of(b).shape[axis]
    d = 1
    while d < n:
        sb, sa = _prev_by(b, axis, reverse, d, 0), _prev_by(a, axis, reverse, d, 1)
        b = elementwise_ops.add(b, elementwise_ops.mul(a, sb))
        if 2 * d < n:
            a = elementwise_ops.mul(a, sa)
        d *= 2
    return b


def _prev_by(y, axis, reverse, d, fill):
    """y[i - d] at i in scan order (fill where i - d falls off)."""
    nd = aval_of(y).ndim
    step = (-d, d, 0) if reverse else (d, -d, 0)
    return shape_ops.pad(y, fill, tuple(step if i == axis else (0, 0, 0) for i in range(nd)))


# --- cumsum -------------------------------------------------------------------------------
cumsum_p = Primitive("cumsum", keeps_weak=True)


def cumsum(x, axis=0, reverse=False):
    return _wrap(cumsum_p, x, axis, reverse)


cumsum_p.def_abstract_eval(_abstract_eval)
cumsum_p.def_impl(_impl(lambda x, axis: np.cumsum(x, axis=axis, dtype=x.dtype)))
cumsum_p.def_transpose(  # the adjoint of a prefix sum is the suffix sum
    lambda ct, x, *, axis, reverse: [cumsum_p.bind(ct, axis=axis, reverse=not reverse)])
cumsum_p.def_vmap(_vmap(cumsum_p))


# --- cumprod ------------------------------------------------------------------------------
cumprod_p = Primitive("cumprod", keeps_weak=True)


def cumprod(x, axis=0, reverse=False):
    return _wrap(cumprod_p, x, axis, reverse)


cumprod_p.def_abstract_eval(_abstract_eval)
cumprod_p.def_impl(_impl(lambda x, axis: np.cumprod(x, axis=axis, dtype=x.dtype)))


@cumprod_p.def_jvp
def _cumprod_jvp(primals, tangents, *, axis, reverse):
    # dy_i = x_i dy_{i-1} + t_i E_i with E_i = prod_{k<i} x_k (the exclusive cumprod)
    (x,), (t,) = primals, tangents
    out = cumprod_p.bind(x, axis=axis, reverse=reverse)
    if t is None:
        return out, None
    excl = _prev(out, axis, reverse, 1)
    return out, linear_recurrence(x, elementwise_ops.mul(t, excl), axis, reverse)


@cumprod_p.def_vjp
def _cumprod_vjp(ct, out, x, *, axis, reverse):
    # x̄_j = E_j S_j with S_j = sum_{i>=j} ct_i prod_{j<k<=i} x_k, i.e. S_j = ct_j + x_{j+1}
    # S_{j+1}: the same recurrence run the other way.
    if not dtypes.is_inexact(aval_of(x).dtype):
        return [None]
    excl = _prev(out, axis, reverse, 1)
    s = linear_recurrence(_next(x, axis, reverse, 0), ct, axis, not reverse)
    return [elementwise_ops.mul(excl, s)]


cumprod_p.def_vmap(_vmap(cumprod_p))


# --- cummax / cummin ----------------------------------------------------------------------
def _cumextreme(name, np_fn):
    p = Primitive(name, keeps_weak=True)
    p.def_abstract_eval(_abstract_eval)
    p.def_impl(_impl(lambda x, axis: np_fn.accumulate(x, axis=axis)))

    @p.def_jvp
    def jvp(primals, tangents, *, axis, reverse):
        (x,), (t,) = primals, tangents
        out = p.bind(x, axis=axis, reverse=reverse)
        if t is None:
            return out, None
        hit, group, den = _ties(x, out, axis, reverse)
        num = _group_sum(elementwise_ops.mul(t, hit), group, axis, reverse)
        return out, elementwise_ops.div(num, den)

    @p.def_vjp
    def vjp(ct, out, x, *, axis, reverse):
        if not dtypes.is_inexact(aval_of(x).dtype):
            return [None]
        hit, group, den = _ties(x, out, axis, reverse)
        g = _group_sum_transpose(elementwise_ops.div(ct, den), group, axis, reverse)
        return [elementwise_ops.mul(hit, g)]

    p.def_vmap(_vmap(p))
    return p


def _ties(x, out, axis, reverse):
    """hit: 1.0 where x attains its running extreme; group: for each i, the index where the
    current run of equal running extremes starts; den: the number of hits in that run up to
    i (>= 1), so the tangent at i is the mean of t over those hits."""
    a = aval_of(x)
    n = a.shape[axis]
    hit = elementwise_ops.convert_element_type(elementwise_ops.eq(x, out), a.dtype)
    idx = shape_ops.iota(dtypes.int32, a.shape, axis)
    first = elementwise_ops.eq(idx, n - 1 if reverse else 0)
    start = elementwise_ops.logical_or(first, elementwise_ops.ne(out, _prev(out, axis, reverse, 0)))
    if reverse:  # the group start is the largest start index >= i
        last = shape_ops.full(a.shape, n - 1, dtypes.int32)
        group = cummin_p.bind(elementwise_ops.select(start, idx, last), axis=axis, reverse=True)
    else:
        first_i = shape_ops.full(a.shape, 0, dtypes.int32)
        group = cummax_p.bind(elementwise_ops.select(start, idx, first_i), axis=axis, reverse=False)
    return hit, group, _group_sum(hit, group, axis, reverse)


def _group_sum(v, group, axis, reverse):
    """sum of v over the scan positions from group[i] to i."""
    cs = cumsum_p.bind(v, axis=axis, reverse=reverse)
    return elementwise_ops.sub(cs,
                               sort_ops.gather_along_axis(elementwise_ops.sub(cs, v), group, axis))


def _group_sum_transpose(w, group, axis, reverse):
    """The adjoint of _group_sum in v: cumsum^T w - (cumsum - I)^T scatter(w, group)."""
    n = aval_of(w).shape[axis]
    s = sort_ops.scatter_add_along_axis(w, group, axis, n)
    back = cumsum_p.bind(w, axis=axis, reverse=not reverse)
    within = cumsum_p.bind(s, axis=axis, reverse=not reverse)
    return elementwise_ops.add(elementwise_ops.sub(back, within), s)


cummax_p = _cumextreme("cummax", np.maximum)
cummin_p = _cumextreme("cummin", np.minimum)


def cummax(x, axis=0, reverse=False):
    return _wrap(cummax_p, x, axis, reverse)


def cummin(x, axis=0, reverse=False):
    return _wrap(cummin_p, x, axis, reverse)
