"""jax.lax's window ops, associative_scan and convolution helpers, as compositions of
mirax ops: reduce_window (one strided slice per window offset), associative_scan (JAX's
odd/even recursion), conv / conv_with_general_padding / conv_transpose (through
conv_general_dilated) and conv_dimension_numbers.
"""
from __future__ import annotations

import collections
import builtins
import itertools
import math

import numpy as np

from mirax.core import dtypes, tree
from mirax.core.errors import ShapeError
from mirax.ops import elementwise as ew
from mirax.ops.common import normalize_axis, short
from mirax.ops.common import operand as _arr
from mirax.ops import conv as _conv
from mirax.ops.reduction import reduce_max, reduce_min, reduce_prod, reduce_sum
from mirax.ops.shape import (
    broadcast_in_dim, concatenate, full, iota, pad, reshape, rev, slice, slice_in_dim, stack,
    transpose)

__all__ = ["padtype_to_pads", "reduce_window", "associative_scan", "conv_general_dilated",
           "conv_general_permutations", "conv_general_dilated_patches", "conv",
           "conv_with_general_padding", "conv_transpose", "conv_dimension_numbers",
           "ConvDimensionNumbers"]


# --- windows -------------------------------------------------------------------------------
def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    """'SAME' / 'SAME_LOWER' / 'VALID' as (lo, hi) pairs (JAX's rule)."""
    if not isinstance(padding, str):
        raise TypeError(f"padding must be 'SAME', 'SAME_LOWER' or 'VALID', got {padding!r}")
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


# The computations reduce / reduce_window recognise as monoids with a reduction primitive.
# mirax.numpy (one floor up) adds its add / multiply / maximum / minimum when it loads.
MONOIDS = {ew.add: "add", ew.mul: "mul", ew.max: "max", ew.min: "min"}


def _monoid(computation, dtype):
    """('add' | 'mul' | 'max' | 'min', its identity in dtype) when computation is that op
    and has a reduction primitive for dtype, else (None, None)."""
    kind = MONOIDS.get(computation)
    if kind is None or dtype == np.bool_:
        return None, None
    if kind in ("add", "mul"):
        return kind, {"add": 0, "mul": 1}[kind]
    lo, hi = (-np.inf, np.inf) if dtypes.is_float(dtype) else \
        (np.iinfo(dtype).min, np.iinfo(dtype).max)
    return kind, lo if kind == "max" else hi


REDUCERS = {"add": reduce_sum, "mul": reduce_prod, "max": reduce_max, "min": reduce_min}


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
    if init.ndim:
        raise ValueError(f"{op}: init_value must be a scalar, got {short(init)}")
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
        acc = REDUCERS[kind](stack(list(windows(xp)), 0), (0,))
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
    axis = normalize_axis(axis, leaves[0].ndim, "associative_scan", leaves[0], strict=True)
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
class ConvDimensionNumbers(collections.namedtuple("ConvDimensionNumbers",
                                                   ("lhs_spec", "rhs_spec", "out_spec"))):
    """(lhs_spec, rhs_spec, out_spec): each the positions of (batch/out-feature,
    feature/in-feature, spatial...) dims, a namedtuple as jax.lax.ConvDimensionNumbers."""
    __slots__ = ()

    def __new__(cls, lhs_spec, rhs_spec, out_spec):
        return super().__new__(cls, tuple(lhs_spec), tuple(rhs_spec), tuple(out_spec))


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers):
    """Layout strings (or None: NC..., OI..., NC...) as a ConvDimensionNumbers; spatial dims
    are ordered as in the rhs spec (JAX's rule)."""
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    nd = len(lhs_shape)
    if len(rhs_shape) != nd:
        raise ShapeError(f"conv_dimension_numbers: ranks {len(lhs_shape)} and {len(rhs_shape)} "
                        "differ")
    if dimension_numbers is None:
        spec = (0, 1) + tuple(range(2, nd))
        return ConvDimensionNumbers(spec, spec, spec)
    if not all(len(spec) == nd for spec in dimension_numbers):
        raise TypeError(f"conv_dimension_numbers: specs {dimension_numbers} do not fit rank "
                        f"{nd}")
    return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))


def conv_general_permutations(dimension_numbers):
    """The (lhs, rhs, out) permutations to NC... / OI... / NC... of layout strings; spatial
    dims in the order of the rhs spec."""
    lhs, rhs, out = dimension_numbers
    if sorted(lhs) != sorted(out) or {"N", "C"} - set(lhs) or {"O", "I"} - set(rhs) or \
            sorted(set(lhs) - {"N", "C"}) != sorted(set(rhs) - {"O", "I"}):
        raise TypeError(f"conv_general_permutations: inconsistent layouts {dimension_numbers}")

    def perm(spec, first, second):
        spatial = sorted((i for i, c in enumerate(spec) if c not in (first, second)),
                         key=lambda i: rhs.index(spec[i]))
        return (spec.index(first), spec.index(second)) + tuple(spatial)
    return perm(lhs, "N", "C"), perm(rhs, "O", "I"), perm(out, "N", "C")


def _conv_nc(lhs, rhs, dn, strides, padding, lhs_dilation, rhs_dilation, fgc, bgc, pref, op,
             precision=None):
    """conv_general_dilated through NC.../OI... layouts given a ConvDimensionNumbers."""
    lhs, rhs = _arr(lhs, op), _arr(rhs, op)
    dn = conv_dimension_numbers(lhs.shape, rhs.shape, dn)
    x, w = transpose(lhs, dn.lhs_spec), transpose(rhs, dn.rhs_spec)
    out = _conv.conv_general_dilated(x, w, strides, padding, lhs_dilation, rhs_dilation,
                               feature_group_count=fgc, batch_group_count=bgc,
                               precision=precision, preferred_element_type=pref)
    return transpose(out, tuple(np.argsort(dn.out_spec)))


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None):
    """mirax.ops.conv.conv_general_dilated, also taking a ConvDimensionNumbers (as made by
    conv_dimension_numbers) for dimension_numbers."""
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return _conv_nc(lhs, rhs, dimension_numbers, window_strides, padding, lhs_dilation,
                        rhs_dilation, feature_group_count, batch_group_count,
                        preferred_element_type, "conv_general_dilated", precision)
    return _conv.conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation,
                                      rhs_dilation, dimension_numbers, feature_group_count,
                                      batch_group_count, precision, preferred_element_type)


def conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation=None,
                                 rhs_dilation=None, dimension_numbers=None, precision=None,
                                 preferred_element_type=None):
    """The patches a convolution with this filter shape sees, as output features (input
    channel major, then filter position): a grouped convolution with one-hot kernels."""
    op = "conv_general_dilated_patches"
    x = _arr(lhs, op)
    filter_shape = tuple(int(f) for f in filter_shape)
    dn = conv_dimension_numbers(x.shape, (1, 1) + filter_shape, dimension_numbers)
    c, size = x.shape[dn.lhs_spec[1]], math.prod(filter_shape)
    eye = ew.convert_element_type(
        ew.eq(iota(np.int32, (size, size), 0), iota(np.int32, (size, size), 1)), x.dtype)
    rhs = reshape(broadcast_in_dim(eye, (c, size, size), (1, 2)), (c * size, 1) + filter_shape)
    canonical = ConvDimensionNumbers(dn.lhs_spec, tuple(range(x.ndim)), dn.out_spec)
    return _conv_nc(x, rhs, canonical, window_strides, padding, lhs_dilation, rhs_dilation, c, 1,
                    preferred_element_type, op, precision)


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """conv_general_dilated with NC.../OI... layouts and no dilation."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                precision=precision,
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
                    preferred_element_type, op, precision)
