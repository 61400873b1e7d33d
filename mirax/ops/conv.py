"""Convolution and pooling: conv_general_dilated (lax semantics, a subset), conv2d,
max_pool2d, avg_pool2d.

The primitive always works in the channels-first layout (lhs N,C,spatial...; rhs
O,I,spatial...; out N,O,spatial...); the wrapper transposes other dimension_numbers in
and out. The NumPy kernel is im2col: a strided window view of the padded input times the
kernel as one (grouped) matmul. Bilinear: the jvp is the sum of two convolutions, the vjp
is two transposed convolutions (the formulas of lax's conv transpose rules). Pooling ops
are composites (ops/composite.py) whose bodies are strided slices, with fused kernels.
"""
from __future__ import annotations

import builtins
import itertools

import numpy as np

from mirax.core import dtypes
from mirax.core.avals import ShapedArray
from mirax.core.primitive import Primitive
from mirax.core.trace import aval_of
from mirax.core.errors import DTypeError, ShapeError
from mirax.ops.common import batch_size, float_operand, promote, short, static_int
from mirax.ops.composite import composite
from mirax.ops.dot import canonical_precision, hide_default_precision
from mirax.ops.elementwise import add, convert_element_type, div
from mirax.ops.reduction import reduce_max, reduce_sum
from mirax.ops.shape import moveaxis, pad, reshape, rev, slice, stack, transpose
from mirax.interpreters.vmap import move_bdim

conv_general_dilated_p = Primitive("conv_general_dilated")
conv_general_dilated_p.format_params = hide_default_precision


def _dilate_shape(n, d):
    return 0 if n == 0 else 1 + d * (n - 1)


def _conv_out_shape(lhs_shape, rhs_shape, window_strides, padding, lhs_dilation,
                    rhs_dilation):
    sp = []
    for i, (s, st, (lo, hi), ld, rd) in enumerate(zip(lhs_shape[2:], window_strides, padding,
                                                      lhs_dilation, rhs_dilation)):
        size = _dilate_shape(s, ld) + lo + hi - _dilate_shape(rhs_shape[2 + i], rd)
        sp.append(size // st + 1 if size >= 0 else 0)
    return (lhs_shape[0], rhs_shape[0]) + tuple(sp)


@conv_general_dilated_p.def_abstract_eval
def _conv_abstract_eval(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        feature_group_count, precision="default"):
    g = feature_group_count
    if lhs.ndim != rhs.ndim or lhs.ndim < 3 or lhs.shape[1] != rhs.shape[1] * g or \
            rhs.shape[0] % g or len(window_strides) != lhs.ndim - 2:
        raise ShapeError(f"conv_general_dilated: cannot convolve {short(lhs)} with kernel "
                         f"{short(rhs)} (feature_group_count={g}; want lhs [N,C,...], rhs "
                         f"[O,C/groups,...] with O divisible by groups)")
    if lhs.dtype != rhs.dtype:
        raise DTypeError(f"conv_general_dilated: operands must share a dtype, got "
                        f"{short(lhs)} and {short(rhs)}")
    return ShapedArray(_conv_out_shape(lhs.shape, rhs.shape, window_strides, padding,
                                       lhs_dilation, rhs_dilation), lhs.dtype)


def _np_dilate_pad(x, padding, lhs_dilation, value=0):
    """x [N,C,spatial...] with zeros between spatial entries, then lax-style padding (lo,
    hi may be negative: a crop)."""
    if any(d > 1 for d in lhs_dilation):
        shape = x.shape[:2] + tuple(_dilate_shape(s, d) for s, d in zip(x.shape[2:],
                                                                        lhs_dilation))
        grid = np.zeros(shape, x.dtype)
        grid[(slice_all, slice_all) + tuple(np.s_[::d] for d in lhs_dilation)] = x
        x = grid
    crop = tuple(np.s_[max_(-lo, 0):x.shape[2 + i] - max_(-hi, 0)]
                 for i, (lo, hi) in enumerate(padding))
    x = x[(slice_all, slice_all) + crop]
    widths = [(0, 0), (0, 0)] + [(max_(lo, 0), max_(hi, 0)) for lo, hi in padding]
    if any(a or b for a, b in widths):
        x = np.pad(x, widths, constant_values=value)
    return x


slice_all = np.s_[:]
max_ = builtins.max


@conv_general_dilated_p.def_impl
def _conv_impl(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
               feature_group_count, precision="default"):
    """Exact at every precision (NumPy's GEMM in the operands' dtype). im2col into
    cols [G, Cg, K..., N, out spatial...], copied in as few strided slabs as the shapes
    allow: one per kernel offset (each as big as the output), or, when the output has
    fewer positions than the kernel (a weight gradient), one window per output position;
    then one GEMM per group. (Copying the whole window view in GEMM order ran inner loops
    of the kernel's width, 3, and took most of a small ResNet's step.)"""
    x = _np_dilate_pad(lhs, padding, lhs_dilation)
    n, c = x.shape[:2]
    g, o = feature_group_count, rhs.shape[0]
    kernel = rhs.shape[2:]
    out_sp = tuple((s - _dilate_shape(k, d)) // st + 1 if s >= _dilate_shape(k, d) else 0
                   for s, k, st, d in zip(x.shape[2:], kernel, window_strides, rhs_dilation))
    p, kk = int(np.prod(out_sp)), int(np.prod(kernel))
    acc = np.float32 if lhs.dtype in dtypes.LOW_FLOATS else lhs.dtype
    xg = x.reshape((n, g, c // g) + x.shape[2:]).astype(acc, copy=False)
    w = rhs.reshape(g, o // g, (c // g) * kk).astype(acc, copy=False)
    if kk <= p:   # a slab of the input per kernel offset, [N, G, Cg, out...]
        cols = np.empty((g, c // g) + tuple(kernel) + (n,) + out_sp, acc)
        for off in itertools.product(*(range(k) for k in kernel)):
            sl = tuple(np.s_[i * d:i * d + (m - 1) * st + 1:st] if m else np.s_[0:0]
                       for i, d, m, st in zip(off, rhs_dilation, out_sp, window_strides))
            cols[(slice_all, slice_all) + off] = np.moveaxis(xg[(slice_all,) * 3 + sl], 0, 2)
        out = np.matmul(w, cols.reshape(g, (c // g) * kk, n * p))   # [G, Og, N*P]
        out = np.moveaxis(out.reshape((o, n) + out_sp), 1, 0)
    else:   # fewer output positions (a weight gradient's "kernel" is the output): one
        cols = np.empty((g, n) + out_sp + (c // g,) + tuple(kernel), acc)   # window each
        for pos in itertools.product(*(range(m) for m in out_sp)):
            sl = tuple(np.s_[q * st:q * st + (k - 1) * d + 1:d]
                       for q, k, d, st in zip(pos, kernel, rhs_dilation, window_strides))
            cols[(slice_all, slice_all) + pos] = np.moveaxis(xg[(slice_all,) * 3 + sl], 0, 1)
        out = np.matmul(cols.reshape(g, n * p, (c // g) * kk), w.transpose(0, 2, 1))
        out = out.reshape((g, n) + out_sp + (o // g,))             # -> [N, G, Og, out...]
        out = out.transpose((1, 0, 2 + len(out_sp)) + tuple(range(2, 2 + len(out_sp))))
        out = out.reshape((n, o) + out_sp)
    return np.ascontiguousarray(out).astype(lhs.dtype, copy=False)


def _bind_conv(lhs, rhs, **params):
    return conv_general_dilated_p.bind(lhs, rhs, **params)


@conv_general_dilated_p.def_jvp
def _conv_jvp(primals, tangents, **params):
    (lhs, rhs), (tl, tr) = primals, tangents
    out = _bind_conv(lhs, rhs, **params)
    t = None if tl is None else _bind_conv(tl, rhs, **params)
    if tr is not None:
        tr_out = _bind_conv(lhs, tr, **params)
        t = tr_out if t is None else add(t, tr_out)
    return out, t


@conv_general_dilated_p.def_vjp
def _conv_vjp(ct, out, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
              feature_group_count, precision="default"):
    la, ra = aval_of(lhs), aval_of(rhs)
    nsp, g = la.ndim - 2, feature_group_count
    sp = tuple(range(2, 2 + nsp))
    in_sp, k_sp, out_sp = la.shape[2:], ra.shape[2:], aval_of(ct).shape[2:]
    # d lhs: ct (dilated by the strides) convolved with the flipped kernel, in/out swapped
    # within each group: rhs [G*Og, Cg, K] -> [G*Cg, Og, K]
    o, cg = ra.shape[0], ra.shape[1]
    w = reshape(rhs, (g, o // g, cg) + k_sp)
    w = reshape(transpose(w, (0, 2, 1) + tuple(range(3, 3 + nsp))), (g * cg, o // g) + k_sp)
    pads = []
    for i in range(nsp):
        ld = _dilate_shape(in_sp[i], lhs_dilation[i])
        rd = _dilate_shape(k_sp[i], rhs_dilation[i])
        od = _dilate_shape(out_sp[i], window_strides[i])
        before = rd - padding[i][0] - 1
        pads.append((before, ld + rd - 1 - od - before))
    d_lhs = _bind_conv(ct, rev(w, sp), window_strides=lhs_dilation, padding=tuple(pads),
                       lhs_dilation=window_strides, rhs_dilation=rhs_dilation,
                       feature_group_count=g, precision=precision)
    # d rhs: lhs (channels as batch) convolved with ct (as kernel), groups kept apart:
    # lhs [N, G*Cg, S] -> [Cg, G*N, S]; ct [N, G*Og, P] -> [G*Og, N, P]
    n = la.shape[0]
    x = reshape(lhs, (n, g, cg) + in_sp)
    x = reshape(transpose(x, (2, 1, 0) + tuple(range(3, 3 + nsp))), (cg, g * n) + in_sp)
    k = transpose(ct, (1, 0) + sp)
    pads = []
    for i in range(nsp):
        ld = _dilate_shape(in_sp[i], lhs_dilation[i])
        rd = _dilate_shape(k_sp[i], rhs_dilation[i])
        od = _dilate_shape(out_sp[i], window_strides[i])
        lo = padding[i][0]
        pads.append((lo, (od - ld) + (rd - lo - 1)))
    d_rhs = _bind_conv(x, k, window_strides=rhs_dilation, padding=tuple(pads),
                       lhs_dilation=lhs_dilation, rhs_dilation=window_strides,
                       feature_group_count=g, precision=precision)  # [Cg, G*Og, K]
    d_rhs = transpose(d_rhs, (1, 0) + sp)
    if tuple(d_rhs.shape[2:]) != tuple(k_sp):  # strides that skip the kernel's tail
        d_rhs = slice(d_rhs, (0,) * la.ndim, tuple(d_rhs.shape[:2]) + tuple(k_sp))
    if tuple(d_lhs.shape[2:]) != tuple(in_sp):
        d_lhs = slice(d_lhs, (0,) * la.ndim, tuple(d_lhs.shape[:2]) + tuple(in_sp))
    return [d_lhs, d_rhs]


@conv_general_dilated_p.def_vmap
def _conv_vmap(args, dims, **params):
    (lhs, rhs), (dl, dr) = args, dims
    g = params["feature_group_count"]
    if dr is None:                       # fold the batch into N
        x = moveaxis(lhs, dl, 0)
        b, n = x.shape[:2]
        out = _bind_conv(reshape(x, (b * n,) + tuple(x.shape[2:])), rhs, **params)
        return reshape(out, (b, n) + tuple(out.shape[1:])), 0
    w = moveaxis(rhs, dr, 0)             # [B, O, Cg, K]
    b, o = w.shape[:2]
    k_rest = tuple(w.shape[2:])
    if dl is None:                       # fold the batch into O, group-major
        w = reshape(w, (b, g, o // g) + k_rest)
        w = reshape(moveaxis(w, 0, 1), (g * b * o // g,) + k_rest)
        out = _bind_conv(lhs, w, **params)                 # [N, G*B*Og, ...]
        n, sp = out.shape[0], tuple(out.shape[2:])
        out = reshape(out, (n, g, b, o // g) + sp)
        return reshape(moveaxis(out, 2, 0), (b, n, o) + sp), 0
    x = moveaxis(lhs, dl, 1)             # [N, B, C, S]: both batched, B*G groups
    n = x.shape[0]
    x = reshape(x, (n, b * x.shape[2]) + tuple(x.shape[3:]))
    out = _bind_conv(x, reshape(w, (b * o,) + k_rest),
                     **{**params, "feature_group_count": b * g})
    return reshape(out, (n, b, o) + tuple(out.shape[2:])), 1


def _normalize_padding(padding, lhs_sp, rhs_sp, strides, lhs_dilation, rhs_dilation, op):
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return tuple((0, 0) for _ in lhs_sp)
        if mode == "SAME":
            pads = []
            for s, k, st, ld, rd in zip(lhs_sp, rhs_sp, strides, lhs_dilation, rhs_dilation):
                s = _dilate_shape(s, ld)
                out = -(-s // st)
                total = max_((out - 1) * st + _dilate_shape(k, rd) - s, 0)
                pads.append((total // 2, total - total // 2))
            return tuple(pads)
        raise ValueError(f"{op}: padding must be 'SAME', 'VALID' or (lo, hi) pairs, got "
                         f"{padding!r}")
    pads = tuple((int(lo), int(hi)) for lo, hi in padding)
    if len(pads) != len(lhs_sp):
        raise ValueError(f"{op}: {len(pads)} padding pairs for {len(lhs_sp)} spatial dims")
    return pads


def _layout_perm(spec: str, first: str, second: str):
    """The permutation taking `spec` (e.g. 'NHWC') to first, second, spatial in order."""
    spatial = [i for i, ch in enumerate(spec) if ch not in (first, second)]
    return (spec.index(first), spec.index(second)) + tuple(spatial)


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None):
    """lax.conv_general_dilated. dimension_numbers: None (NCHW, OIHW, NCHW) or a triple of
    layout strings such as ('NHWC', 'HWIO', 'NHWC'). preferred_element_type (a float
    dtype): the dtype the products accumulate in and the result has (bf16 inputs with
    float32: float32 accumulation and output). batch_group_count G (as XLA): the batch
    splits into G groups, the output features into G blocks, block g convolves batch
    group g, and the output batch is N / G; computed as one grouped convolution with the
    batch groups moved into the channels."""
    op = "conv_general_dilated"
    prec = canonical_precision(precision, op)
    lhs, rhs = promote(op, float_operand(lhs, op), float_operand(rhs, op))
    if preferred_element_type is not None:
        pref = dtypes.canonicalize(preferred_element_type)
        if not dtypes.is_float(pref):
            raise TypeError(f"{op}: preferred_element_type must be a float dtype, got "
                            f"{np.dtype(pref).name}")
        lhs, rhs = convert_element_type(lhs, pref), convert_element_type(rhs, pref)
    if dimension_numbers is not None:
        lspec, rspec, ospec = dimension_numbers
        lhs = transpose(lhs, _layout_perm(lspec, "N", "C"))
        rhs = transpose(rhs, _layout_perm(rspec, "O", "I"))
    bgc = int(batch_group_count)
    if bgc != 1:
        lhs, feature_group_count = _batch_groups_as_channels(lhs, rhs, bgc,
                                                             int(feature_group_count), op)
    nsp = lhs.ndim - 2
    strides = (1,) * nsp if window_strides is None else tuple(map(int, window_strides))
    ld = (1,) * nsp if lhs_dilation is None else tuple(map(int, lhs_dilation))
    rd = (1,) * nsp if rhs_dilation is None else tuple(map(int, rhs_dilation))
    if lhs.ndim != rhs.ndim or len(strides) != nsp or len(ld) != nsp or len(rd) != nsp or \
            min(strides + ld + rd + (1,)) < 1:
        raise ValueError(f"{op}: {short(lhs)} and {short(rhs)} with strides {strides}, "
                         f"lhs_dilation {ld}, rhs_dilation {rd} do not fit")
    pads = _normalize_padding(padding, lhs.shape[2:], rhs.shape[2:], strides, ld, rd, op)
    out = conv_general_dilated_p.bind(lhs, rhs, window_strides=strides, padding=pads,
                                      lhs_dilation=ld, rhs_dilation=rd,
                                      feature_group_count=int(feature_group_count),
                                      precision=prec)
    if dimension_numbers is not None:
        out = transpose(out, tuple(np.argsort(_layout_perm(ospec, "N", "C"))))
    return out


def _batch_groups_as_channels(lhs, rhs, g, fgc, op):
    """lhs [N, C, ...] as [N / g, g * C, ...] (batch group j's channels at j * C) and the
    feature group count of the equivalent convolution: g."""
    n, o = lhs.shape[0], rhs.shape[0]
    if g < 1 or fgc != 1 or n % g or o % g:
        raise ValueError(f"{op}: batch_group_count {g} needs feature_group_count 1 and a "
                         f"batch and output-feature count divisible by it, got "
                         f"{short(lhs)}, {short(rhs)}, feature_group_count {fgc}")
    x = reshape(lhs, (g, n // g) + lhs.shape[1:])
    x = moveaxis(x, 0, 1)
    return reshape(x, (n // g, g * lhs.shape[1]) + lhs.shape[2:]), g


def _pair(v, op, what):
    if not hasattr(v, "__iter__") or isinstance(v, str):
        v = static_int(v, op, what)
        return (v, v)
    v = tuple(static_int(a, op, what) for a in v)
    if len(v) != 2:
        raise ValueError(f"{op}: {what} must be an int or a pair, got {v}")
    return v


def conv2d(x, w, stride=1, padding=0, dilation=1, groups=1):
    """PyTorch-style 2-d convolution: x [N,C,H,W], w [O,C/groups,kH,kW] -> [N,O,H',W'];
    padding is an int, a pair, or 'same' / 'valid'."""
    op = "conv2d"
    x, w = float_operand(x, op), float_operand(w, op)
    if x.ndim != 4 or w.ndim != 4:
        raise ShapeError(f"conv2d: want x [N,C,H,W] and w [O,C/groups,kH,kW], got "
                         f"{short(x)} and {short(w)}")
    if not isinstance(padding, str):
        padding = tuple((p, p) for p in _pair(padding, op, "padding"))
    return conv_general_dilated(x, w, _pair(stride, op, "stride"), padding,
                                rhs_dilation=_pair(dilation, op, "dilation"),
                                feature_group_count=groups)


# --- pooling --------------------------------------------------------------------------------
# Bodies: pad, then one strided slice per kernel offset, stacked and reduced. Fused
# kernels: one strided window view.
def _pool_slices(x, kernel, stride, padding, value):
    x = pad(x, value, ((0, 0, 0), (0, 0, 0)) + tuple((p, p, 0) for p in padding))
    n, c, h, w = x.shape
    oh, ow = (h - kernel[0]) // stride[0] + 1, (w - kernel[1]) // stride[1] + 1
    parts = [slice(x, (0, 0, i, j), (n, c, i + (oh - 1) * stride[0] + 1,
                                     j + (ow - 1) * stride[1] + 1), (1, 1) + stride)
             for i in range(kernel[0]) for j in range(kernel[1])]
    return stack(parts, 2)  # [N, C, kH*kW, oH, oW]


def _fold_n(prim):
    """vmap of a pool (or its backward op) on [N, C, H, W]: fold the batch axis into N."""
    def rule(args, dims, **params):
        size = batch_size(args, dims)
        moved = []
        for a, d in zip(args, dims):
            a = move_bdim(a, d, 0, size)
            moved.append(reshape(a, (-1,) + tuple(a.shape[2:])))
        out = prim.bind(*moved, **params)
        outs = out if prim.multiple_results else [out]
        outs = [reshape(o, (size, -1) + tuple(o.shape[1:])) for o in outs]
        return (outs, [0] * len(outs)) if prim.multiple_results else (outs[0], 0)
    return rule


def _max_pool_body(x, *, kernel, stride, padding):
    return reduce_max(_pool_slices(x, kernel, stride, padding, -np.inf), (2,))


def _np_offsets(x, kernel, stride, padding, value):
    """The padded x and, per kernel offset, its strided [N,C,oH,oW] view (no copies)."""
    xp = _np_dilate_pad(x, tuple((p, p) for p in padding), (1, 1), value)
    oh = (xp.shape[2] - kernel[0]) // stride[0] + 1
    ow = (xp.shape[3] - kernel[1]) // stride[1] + 1
    return xp, [(i, j, xp[:, :, i:i + (oh - 1) * stride[0] + 1:stride[0],
                          j:j + (ow - 1) * stride[1] + 1:stride[1]])
                for i in range(kernel[0]) for j in range(kernel[1])]


def _max_pool_impl(x, *, kernel, stride, padding):
    _, views = _np_offsets(x, kernel, stride, padding, -np.inf)
    out = views[0][2].copy()
    for _, _, v in views[1:]:
        np.maximum(out, v, out=out)
    return out


def _max_pool_bwd_impl(ct, out, x, *, wrt, nout, kernel, stride, padding):
    # the cotangent is shared evenly among the window entries attaining the max
    _, views = _np_offsets(x, kernel, stride, padding, -np.inf)
    count = np.zeros(out.shape, x.dtype)
    for _, _, v in views:
        count += v == out
    share = ct / count
    return [_np_fold([(i, j, (v == out) * share) for i, j, v in views], x.shape, stride,
                     padding)]


def _np_fold(parts, shape, stride, padding):
    """The adjoint of the offset views: add each offset's [N,C,oH,oW] part back in place."""
    n, c, h, w = shape
    ph, pw = padding
    grad = None
    for i, j, part in parts:
        if grad is None:
            grad = np.zeros((n, c, h + 2 * ph, w + 2 * pw), part.dtype)
        oh, ow = part.shape[2:]
        grad[:, :, i:i + (oh - 1) * stride[0] + 1:stride[0],
             j:j + (ow - 1) * stride[1] + 1:stride[1]] += part
    return grad[:, :, ph:ph + h, pw:pw + w]


max_pool2d_p = composite("max_pool2d", _max_pool_body, impl=_max_pool_impl,
                         bwd_impl=_max_pool_bwd_impl, vmap=_fold_n, bwd_vmap=_fold_n)


def _avg_pool_body(x, *, kernel, stride, padding):
    return div(reduce_sum(_pool_slices(x, kernel, stride, padding, 0.0), (2,)),
               float(kernel[0] * kernel[1]))


def _avg_pool_impl(x, *, kernel, stride, padding):
    _, views = _np_offsets(x, kernel, stride, padding, 0)
    out = views[0][2].copy()
    for _, _, v in views[1:]:
        out += v
    return (out / (kernel[0] * kernel[1])).astype(x.dtype, copy=False)


def _avg_pool_bwd_impl(ct, out, x, *, wrt, nout, kernel, stride, padding):
    share = (ct / (kernel[0] * kernel[1])).astype(x.dtype, copy=False)
    parts = [(i, j, share) for i in range(kernel[0]) for j in range(kernel[1])]
    return [_np_fold(parts, x.shape, stride, padding)]


avg_pool2d_p = composite("avg_pool2d", _avg_pool_body, impl=_avg_pool_impl,
                         bwd_impl=_avg_pool_bwd_impl, vmap=_fold_n, bwd_vmap=_fold_n)


def _pool_params(x, kernel_size, stride, padding, op):
    x = float_operand(x, op)
    if x.ndim != 4:
        raise ValueError(f"{op}: want x [N,C,H,W], got {short(x)}")
    kernel = _pair(kernel_size, op, "kernel_size")
    stride = kernel if stride is None else _pair(stride, op, "stride")
    padding = _pair(padding, op, "padding")
    if min(kernel) < 1 or min(stride) < 1 or min(padding) < 0:
        raise ValueError(f"{op}: kernel_size and stride must be positive and padding "
                         f"non-negative, got kernel {kernel}, stride {stride}, padding {padding}")
    if any(2 * p > k for p, k in zip(padding, kernel)):
        raise ValueError(f"{op}: padding {padding} must be at most half the kernel {kernel}")
    if any(h + 2 * p < k for h, p, k in zip(x.shape[2:], padding, kernel)):
        raise ValueError(f"{op}: kernel {kernel} is larger than the padded input {short(x)}")
    return x, dict(kernel=kernel, stride=stride, padding=padding)


def max_pool2d(x, kernel_size, stride=None, padding=0):
    """Max over kernel_size windows of x [N,C,H,W] (padding counts as -inf; stride
    defaults to kernel_size, as PyTorch). Ties share the gradient evenly."""
    x, params = _pool_params(x, kernel_size, stride, padding, "max_pool2d")
    return max_pool2d_p.bind(x, **params)


def avg_pool2d(x, kernel_size, stride=None, padding=0):
    """Mean over kernel_size windows of x [N,C,H,W] (zero padding counted, as PyTorch's
    count_include_pad=True)."""
    x, params = _pool_params(x, kernel_size, stride, padding, "avg_pool2d")
    return avg_pool2d_p.bind(x, **params)


__all__ = ["conv_general_dilated", "conv2d", "max_pool2d", "avg_pool2d"]
