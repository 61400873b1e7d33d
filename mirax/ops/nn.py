"""Neural-network ops: fused composites (softmax family, cross-entropy, norms, gelu, silu,
softplus, attention) and the simple activations.

Where it sits: user code (mirax.nn.functional, mirax.scipy.special) calls these wrappers;
each composite is declared with ops/composite.py and is a primitive in the Graph IR, which a
backend runs as a fused kernel or the compiler inlines (compiler/decompose.py).

Each composite is one block: its body in basic primitives (the definition), then the fused
NumPy kernels for the forward and backward passes (impl == body, tested), then the
wrapper. Axes are kept negative in params so that a vmap rule may prepend batch axes.
See ops/composite.py for how the pieces become rules. The graph ops (index_select,
index_add, segment_*) live in ops/graph_ops.py and the straight-through estimators in
ops/quant.py; both are re-exported here so `mirax.ops.nn.<name>` keeps working.
"""
from __future__ import annotations

import math

import numpy as np

from mirax.core import dtypes
from mirax.core.errors import ShapeError
from mirax.ops import special_impl
from mirax.ops.common import (float_operand, normalize_axes, normalize_axis, operand, promote,
                              short, static_float, static_int)
from mirax.ops.composite import batch_front, cast_like, composite, in_float32, quiet_np
from mirax.ops.elementwise import (
    abs, add, convert_element_type, div, eq, erf, exp, expm1, ge, gt, is_finite, log, log1p,
    le, logistic, lt, max, mul, neg, rsqrt, select, sub, tanh, zeros_like)
from mirax.ops.reduction import reduce_max, reduce_sum
from mirax.ops.shape import broadcast_in_dim, iota, reshape
from mirax.ops import elementwise as elementwise_ops
from mirax.ops import shape as shape_ops
from mirax.core.array import Array
from mirax.ops import dot as dot_ops

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715


def _pos(axes, ndim):
    return tuple(sorted(a % ndim for a in axes))


def _back(y, shape, axes):
    """A value reduced over `axes` broadcast back to `shape`."""
    return broadcast_in_dim(y, tuple(shape), tuple(i for i in range(len(shape))
                                                   if i not in axes))


def _safe_max(x, axes):
    """max over axes, with 0 where it is not finite (a row of -inf), so x - m is no NaN."""
    m = reduce_max(x, axes)
    return select(is_finite(m), m, zeros_like(m))


def _np_safe_max(x, axes):
    if x.size == 0:  # no entries: nothing to shift (np.max would raise)
        return np.zeros([1 if i in axes or i - x.ndim in axes else d
                         for i, d in enumerate(x.shape)], x.dtype)
    m = np.max(x, axis=axes, keepdims=True)
    return np.where(np.isfinite(m), m, 0).astype(x.dtype)


def _neg_axes(axis, x, op):
    return tuple(a - x.ndim for a in normalize_axes(axis, x.ndim, op, x))



# --- softmax ------------------------------------------------------------------------------
def _softmax_body(x, *, axes):
    ax = _pos(axes, x.ndim)
    e = exp(sub(x, _back(_safe_max(x, ax), x.shape, ax)))
    return div(e, _back(reduce_sum(e, ax), x.shape, ax))


@quiet_np
@in_float32
def _softmax_impl(x, *, axes):
    e = np.exp(x - _np_safe_max(x, axes))
    return cast_like(e / e.sum(axis=axes, keepdims=True), x)


@quiet_np
@in_float32
def _softmax_bwd_impl(ct, y, x, *, wrt, nout, axes):
    return [cast_like(y * (ct - np.sum(ct * y, axis=axes, keepdims=True)), x)]  # y (g - <g, y>)


softmax_p = composite("softmax", _softmax_body, impl=_softmax_impl,
                      bwd_impl=_softmax_bwd_impl, vmap=batch_front, bwd_vmap=batch_front)


def softmax(x, axis=-1):
    x = float_operand(x, "softmax")
    return softmax_p.bind(x, axes=_neg_axes(axis, x, "softmax"))


# --- log_softmax --------------------------------------------------------------------------
def _log_softmax_body(x, *, axes):
    ax = _pos(axes, x.ndim)
    shifted = sub(x, _back(_safe_max(x, ax), x.shape, ax))
    return sub(shifted, _back(log(reduce_sum(exp(shifted), ax)), x.shape, ax))


@quiet_np
@in_float32
def _log_softmax_impl(x, *, axes):
    s = x - _np_safe_max(x, axes)
    return cast_like(s - np.log(np.sum(np.exp(s), axis=axes, keepdims=True)), x)


@quiet_np
@in_float32
def _log_softmax_bwd_impl(ct, y, x, *, wrt, nout, axes):
    return [cast_like(ct - np.exp(y) * np.sum(ct, axis=axes, keepdims=True), x)]  # g - p sum(g)


log_softmax_p = composite("log_softmax", _log_softmax_body, impl=_log_softmax_impl,
                          bwd_impl=_log_softmax_bwd_impl, vmap=batch_front,
                          bwd_vmap=batch_front)


def log_softmax(x, axis=-1):
    x = float_operand(x, "log_softmax")
    return log_softmax_p.bind(x, axes=_neg_axes(axis, x, "log_softmax"))


# --- logsumexp ----------------------------------------------------------------------------
def _logsumexp_body(x, *, axes, keepdims):
    ax = _pos(axes, x.ndim)
    m = _safe_max(x, ax)
    out = add(log(reduce_sum(exp(sub(x, _back(m, x.shape, ax))), ax)), m)
    return reshape(out, _kept_shape(x.shape, ax)) if keepdims else out


def _kept_shape(shape, axes):
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


@quiet_np
@in_float32
def _logsumexp_impl(x, *, axes, keepdims):
    m = _np_safe_max(x, axes)
    out = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    return cast_like(out if keepdims else np.squeeze(out, axis=axes), x)


@quiet_np
@in_float32
def _logsumexp_bwd_impl(ct, out, x, *, wrt, nout, axes, keepdims):
    ax = _pos(axes, x.ndim)
    shape = _kept_shape(x.shape, ax)
    ct = np.reshape(ct, shape)
    # g softmax(x), as exp(x - max) / sum: exp(x - out) would lose the digits of out
    # (|x| = 1e6 in float32 leaves x - out with an absolute error of 0.06); an all -inf
    # slice (sum 0) has gradient 0
    e = np.exp(x - _np_safe_max(x, axes))
    s = np.sum(e, axis=axes, keepdims=True)
    return [cast_like(ct * (e / np.where(s == 0, 1, s)), x)]


logsumexp_p = composite("logsumexp", _logsumexp_body, impl=_logsumexp_impl,
                        bwd_impl=_logsumexp_bwd_impl, vmap=batch_front, bwd_vmap=batch_front)


def logsumexp(x, axis=None, keepdims=False, *, b=None, return_sign=False):
    """log(sum(b * exp(x))) over axis, stably. With return_sign, b may be negative and the
    result is (log|sum|, sign(sum)) (scipy / jax.nn)."""
    x = float_operand(x, "logsumexp")
    b = None if b is None else float_operand(b, "logsumexp")
    if return_sign:
        return _logsumexp_signed(x, _pos(_neg_axes(axis, x, "logsumexp"), x.ndim), b,
                                 keepdims)
    if b is not None:
        x = add(x, log(b))  # log(b e^x) = x + log b; b = 0 gives -inf (a zero term)
    if x.ndim == 0:
        return x
    return logsumexp_p.bind(x, axes=_neg_axes(axis, x, "logsumexp"), keepdims=bool(keepdims))


def _logsumexp_signed(x, axes, b, keepdims):
    m = elementwise_ops.stop_gradient(_safe_max(x, axes))     # all -inf: the sum is 0, its log -inf
    e = exp(sub(x, _back(m, x.shape, axes)))
    total = reduce_sum(e if b is None else mul(e, b), axes)
    out, sgn = add(log(abs(total)), m), elementwise_ops.sign(total)
    if keepdims:
        kept = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
        out, sgn = reshape(out, kept), reshape(sgn, kept)
    return out, sgn


# --- one_hot ------------------------------------------------------------------------------
def one_hot(labels, num_classes, dtype=dtypes.float32, *, axis=-1):
    """one_hot(labels [...], C) -> [..., C] (the class axis at `axis` of the result);
    labels out of [0, C) give a zero row."""
    labels = operand(labels, "one_hot")
    if not dtypes.is_int(labels.dtype):
        raise TypeError(f"one_hot: labels must be integers, got {short(labels)}")
    axis = normalize_axis(axis, labels.ndim + 1, "one_hot")
    shape = list(labels.shape)
    shape.insert(axis, static_int(num_classes, "one_hot", "num_classes"))
    if shape[axis] < 0:
        raise ValueError(f"one_hot: num_classes must be non-negative, got {num_classes}")
    hit = eq(broadcast_in_dim(labels, tuple(shape),
                              tuple(d for d in range(len(shape)) if d != axis)),
             iota(labels.dtype, tuple(shape), axis))
    return convert_element_type(hit, dtype)


# --- softmax_cross_entropy ----------------------------------------------------------------
def _sce_body(logits, labels):
    lse = _logsumexp_body(logits, axes=(-1,), keepdims=False)
    hot = one_hot(labels, logits.shape[-1], logits.dtype)
    loss = sub(lse, reduce_sum(mul(hot, logits), (logits.ndim - 1,)))
    # a label outside [0, C) (an all-zero one_hot row) gives a NaN loss, as JAX's
    # take_along_axis fill; the term depends on labels only, so d loss stays softmax - hot
    missing = eq(reduce_sum(hot, (logits.ndim - 1,)), 0)
    return add(loss, select(missing, add(zeros_like(loss), math.nan), zeros_like(loss)))


@quiet_np
@in_float32
def _sce_impl(logits, labels):
    lse = _logsumexp_impl(logits, axes=(-1,), keepdims=False)
    c = logits.shape[-1]
    ok = (labels >= 0) & (labels < c)
    picked = np.take_along_axis(logits, np.where(ok, labels, 0)[..., None], -1)[..., 0]
    return cast_like(lse - np.where(ok, picked, np.nan), logits)


@quiet_np
@in_float32
def _sce_bwd_impl(ct, out, logits, labels, *, wrt, nout):
    # d loss / d logits = softmax(logits) - one_hot(labels), row-major [N, C]
    hot = labels[..., None] == np.arange(logits.shape[-1])
    return [cast_like((_softmax_impl(logits, axes=(-1,)) - hot) * ct[..., None], logits)]


softmax_cross_entropy_p = composite(
    "softmax_cross_entropy", _sce_body, impl=_sce_impl, bwd_impl=_sce_bwd_impl,
    vmap=batch_front, bwd_vmap=batch_front)


def softmax_cross_entropy(logits, labels):
    """Per-example losses [N] of logits [N, C] and integer labels [N] (leading dims may be
    any shape [..., C] with labels [...])."""
    logits = float_operand(logits, "softmax_cross_entropy")
    labels = operand(labels, "softmax_cross_entropy")
    if not dtypes.is_int(labels.dtype):
        raise TypeError(f"softmax_cross_entropy: labels must be integers, got {short(labels)}")
    if logits.ndim < 1 or tuple(labels.shape) != tuple(logits.shape[:-1]):
        raise ShapeError(f"softmax_cross_entropy: logits {short(logits)} and labels "
                         f"{short(labels)} do not match (want logits [N, C], labels [N])")
    return softmax_cross_entropy_p.bind(logits, labels)


# --- layer_norm ---------------------------------------------------------------------------
def split_affine(args, has_weight, has_bias):
    x, rest = args[0], list(args[1:])
    w = rest.pop(0) if has_weight else None
    b = rest.pop(0) if has_bias else None
    return x, w, b


def _layer_norm_body(*args, eps, has_weight, has_bias):
    x, w, b = split_affine(args, has_weight, has_bias)
    ax, d = (x.ndim - 1,), x.shape[-1]
    xc = sub(x, _back(div(reduce_sum(x, ax), d), x.shape, ax))
    inv = rsqrt(add(div(reduce_sum(mul(xc, xc), ax), d), eps))
    y = mul(xc, _back(inv, x.shape, ax))
    y = mul(y, w) if w is not None else y
    return add(y, b) if b is not None else y


def _np_layer_norm(x, eps):
    xc = x - x.mean(-1, keepdims=True)
    inv = 1.0 / np.sqrt((xc * xc).mean(-1, keepdims=True) + eps)
    return xc * inv, inv


@in_float32
def _layer_norm_impl(*args, eps, has_weight, has_bias):
    x, w, b = split_affine(args, has_weight, has_bias)
    y, _ = _np_layer_norm(x, eps)
    y = y * w if w is not None else y
    return cast_like(y + b if b is not None else y, x)


@in_float32
def _layer_norm_bwd_impl(ct, out, *args, wrt, nout, eps, has_weight, has_bias):
    x, w, b = split_affine(args, has_weight, has_bias)
    xhat, inv = _np_layer_norm(x, eps)
    g = ct * w if w is not None else ct
    # dx = inv (g - mean(g) - xhat mean(g xhat))
    dx = inv * (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True))
    rows = tuple(range(x.ndim - 1))
    grads = [cast_like(dx, x)]
    if w is not None:
        grads.append(cast_like(np.sum(ct * xhat, axis=rows), w))
    if b is not None:
        grads.append(cast_like(np.sum(ct, axis=rows), b))
    return [grads[i] for i in wrt]


layer_norm_p = composite("layer_norm", _layer_norm_body, impl=_layer_norm_impl,
                         bwd_impl=_layer_norm_bwd_impl,
                         vmap=lambda p: batch_front(p, row_args={0}))


def _affine_args(op, x, weight, bias=None):
    d = x.shape[-1] if x.ndim else None
    args = [x]
    for name, v in (("weight", weight), ("bias", bias)):
        if v is None:
            continue
        v = operand(v, op)
        if tuple(v.shape) != (d,):
            raise ValueError(f"{op}: {name} {short(v)} must have shape [{d}] to match the "
                             f"last axis of {short(x)}")
        args.append(v)
    return promote(op, *args)


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    x = float_operand(x, "layer_norm")
    if x.ndim == 0:
        raise ValueError(f"layer_norm: needs at least one axis, got {short(x)}")
    args = _affine_args("layer_norm", x, weight, bias)
    return layer_norm_p.bind(*args, eps=float(eps), has_weight=weight is not None,
                             has_bias=bias is not None)


# --- rms_norm -----------------------------------------------------------------------------
def _rms_norm_body(*args, eps, has_weight):
    x, w, _ = split_affine(args, has_weight, False)
    ax = (x.ndim - 1,)
    inv = rsqrt(add(div(reduce_sum(mul(x, x), ax), x.shape[-1]), eps))
    y = mul(x, _back(inv, x.shape, ax))
    return mul(y, w) if w is not None else y


@in_float32
def _rms_norm_impl(*args, eps, has_weight):
    x, w, _ = split_affine(args, has_weight, False)
    y = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    return cast_like(y * w if w is not None else y, x)


@in_float32
def _rms_norm_bwd_impl(ct, out, *args, wrt, nout, eps, has_weight):
    x, w, _ = split_affine(args, has_weight, False)
    inv = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    g = ct * w if w is not None else ct
    # dx = inv (g - x inv^2 mean(g x))
    grads = [cast_like(inv * (g - x * inv * inv * (g * x).mean(-1, keepdims=True)), x)]
    if w is not None:
        grads.append(cast_like(np.sum(ct * x * inv, axis=tuple(range(x.ndim - 1))), w))
    return [grads[i] for i in wrt]


rms_norm_p = composite("rms_norm", _rms_norm_body, impl=_rms_norm_impl,
                       bwd_impl=_rms_norm_bwd_impl, vmap=lambda p: batch_front(p, row_args={0}))


def rms_norm(x, weight=None, eps=1e-6):
    x = float_operand(x, "rms_norm")
    if x.ndim == 0:
        raise ValueError(f"rms_norm: needs at least one axis, got {short(x)}")
    args = _affine_args("rms_norm", x, weight)
    return rms_norm_p.bind(*args, eps=float(eps), has_weight=weight is not None)


# --- gelu ---------------------------------------------------------------------------------
def _gelu_body(x, *, approximate):
    if approximate:  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        u = mul(add(x, mul(mul(mul(x, x), x), _GELU_C)), _SQRT_2_OVER_PI)
        return mul(mul(x, 0.5), add(tanh(u), 1.0))
    return mul(mul(x, 0.5), add(erf(mul(x, 1 / math.sqrt(2.0))), 1.0))  # x Phi(x)


def _gelu_impl(x, *, approximate):
    if approximate:
        return cast_like(0.5 * x * (1 + np.tanh(_SQRT_2_OVER_PI * (x + _GELU_C * x * x * x))), x)
    return cast_like(0.5 * x * (1 + special_impl.erf(x / math.sqrt(2.0))), x)


@quiet_np
def _gelu_bwd_impl(ct, out, x, *, wrt, nout, approximate):
    if approximate:
        t = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_C * x * x * x))
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _SQRT_2_OVER_PI * (1 + 3 * _GELU_C * x * x)
    else:  # Phi(x) + x phi(x), with Phi = out / x (no second erf; Phi(0) = 1/2)
        phi = np.divide(out, x, out=np.full_like(x, 0.5), where=x != 0)
        d = phi + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    return [cast_like(ct * d, x)]


gelu_p = composite("gelu", _gelu_body, impl=_gelu_impl, bwd_impl=_gelu_bwd_impl,
                   vmap=batch_front, bwd_vmap=batch_front)


def gelu(x, approximate=True):
    return gelu_p.bind(float_operand(x, "gelu"), approximate=bool(approximate))


# --- silu ---------------------------------------------------------------------------------
def _silu_body(x):
    return mul(x, logistic(x))


def _np_sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _silu_bwd_impl(ct, out, x, *, wrt, nout):
    s = _np_sigmoid(x)
    return [cast_like(ct * s * (1 + x * (1 - s)), x)]  # d silu = s (1 + x (1 - s))


silu_p = composite(
    "silu", _silu_body, impl=lambda x: cast_like(x * _np_sigmoid(x), x), bwd_impl=_silu_bwd_impl,
    vmap=batch_front, bwd_vmap=batch_front)


def silu(x):
    return silu_p.bind(float_operand(x, "silu"))


# --- softplus -----------------------------------------------------------------------------
def _softplus_body(x):
    # log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow for large |x|
    return add(max(x, zeros_like(x)), log1p(exp(neg(abs(x)))))


softplus_p = composite(
    "softplus", _softplus_body,
    impl=lambda x: cast_like(np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x))), x),
    bwd_impl=lambda ct, out, x, *, wrt, nout: [cast_like(ct * _np_sigmoid(x), x)],  # d = sigmoid
    vmap=batch_front, bwd_vmap=batch_front)


def softplus(x):
    return softplus_p.bind(float_operand(x, "softplus"))


# --- simple activations (plain compositions: their rules are their parts') --------------
def sigmoid(x):
    return logistic(x)


def relu(x):
    x = operand(x, "relu")
    return select(le(x, 0), zeros_like(x), x)  # relu'(0) = 0; NaN stays NaN


def leaky_relu(x, negative_slope=0.01):
    x = float_operand(x, "leaky_relu")
    return select(ge(x, 0), x, mul(x, negative_slope))


def elu(x, alpha=1.0):
    return _elu(float_operand(x, "elu"), alpha, 1.0)


def celu(x, alpha=1.0):
    """x for x > 0, alpha (e^(x/alpha) - 1) otherwise."""
    return _elu(float_operand(x, "celu"), alpha, alpha)


def _elu(x, alpha, width):
    pos = gt(x, 0)
    safe = select(pos, zeros_like(x), x)  # expm1 of the branch not taken stays finite
    return select(pos, x, mul(expm1(safe if width == 1.0 else div(safe, width)), alpha))


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def selu(x):
    return mul(elu(x, _SELU_ALPHA), _SELU_SCALE)


def relu6(x):
    """min(max(x, 0), 6), with derivative 0 at both kinks (as JAX)."""
    x = float_operand(x, "relu6")
    inside = select(le(x, 0), zeros_like(x), x)  # NaN stays NaN
    return select(ge(x, 6.0), add(zeros_like(x), 6.0), inside)


def hard_tanh(x):
    """x clipped to [-1, 1] (derivative 0 outside and at the kinks)."""
    x = float_operand(x, "hard_tanh")
    one = add(zeros_like(x), 1.0)
    return select(gt(x, 1.0), one, select(lt(x, -1.0), neg(one), x))


def hard_sigmoid(x):
    return div(relu6(add(float_operand(x, "hard_sigmoid"), 3.0)), 6.0)


def hard_silu(x):
    x = float_operand(x, "hard_silu")
    return mul(x, hard_sigmoid(x))


def soft_sign(x):
    x = float_operand(x, "soft_sign")
    return div(x, add(abs(x), 1.0))


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x), finite for large |x|."""
    return neg(softplus(neg(float_operand(x, "log_sigmoid"))))


def mish(x):
    x = float_operand(x, "mish")
    return mul(x, tanh(softplus(x)))


def glu(x, axis=-1):
    """Gated linear unit: a * sigmoid(b), a and b the two halves of x along axis."""
    x = float_operand(x, "glu")
    ax = normalize_axis(axis, x.ndim, "glu", x)
    n = x.shape[ax]
    if n % 2:
        raise ValueError(f"glu: axis {axis} of {short(x)} must have an even size")
    a = shape_ops.slice_in_dim(x, 0, n // 2, axis=ax)
    b = shape_ops.slice_in_dim(x, n // 2, n, axis=ax)
    return mul(a, logistic(b))


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5):
    """(x - mean) / sqrt(variance + epsilon) over axis (the moments computed if not given)."""
    x = float_operand(x, "standardize")
    axes = _pos(_neg_axes(axis, x, "standardize"), x.ndim)
    n = float(math.prod(x.shape[a] for a in axes))
    if mean is None:
        mean = _back(div(reduce_sum(x, axes), n), x.shape, axes)
    if variance is None:  # E[x^2] - E[x]^2, as jax.nn.standardize
        sq = _back(div(reduce_sum(mul(x, x), axes), n), x.shape, axes)
        variance = sub(sq, mul(mean, mean))
    return mul(sub(x, mean), rsqrt(add(variance, epsilon)))


# --- dot_product_attention ----------------------------------------------------------------
# q [B,T,H,D], k [B,S,H,D], v [B,S,H,Dv]; mask (bool, True = attend) and bias broadcast to
# the scores [B,H,T,S]. Masked scores drop out of the softmax entirely, so a fully masked
# row has probabilities 0: its output is 0 and its gradients are finite.
# The primitive has two outputs: the attention [B,T,H,Dv] and each query row's logsumexp
# over its attended scores [B,H,T] (float32 for 16-bit and float32 operands; +inf for a row
# that attends nothing, so that exp(score - lse) is 0 there). The fused backward kernels
# take P = exp(score - lse) from it instead of recomputing the softmax statistics, as
# FlashAttention does; dot_product_attention returns the first output.
def _attn_split(args, has_mask, has_bias):
    q, k, v, rest = args[0], args[1], args[2], list(args[3:])
    mask = rest.pop(0) if has_mask else None
    bias = rest.pop(0) if has_bias else None
    return q, k, v, mask, bias


def _attn_window_np(t, s, is_causal, window):
    qpos, kpos = np.arange(t)[:, None], np.arange(s)[None, :]
    ok = np.ones((t, s), bool)
    if is_causal:
        ok &= kpos <= qpos
    if window is not None:
        ok &= (qpos - kpos <= window[0]) & (kpos - qpos <= window[1])
    return ok


def _attn_valid(mask, shape, is_causal, window):
    """The bool [B,H,T,S] of scores that attend, or None when all do."""
    valid = None if mask is None else shape_ops.broadcast_to(mask, shape)
    if is_causal or window is not None:
        local = Array(_attn_window_np(shape[2], shape[3], is_causal, window))
        local = broadcast_in_dim(local, shape, (2, 3))
        valid = local if valid is None else elementwise_ops.logical_and(valid, local)
    return valid


def _attn_body(*args, scale, is_causal, window, has_mask, has_bias, precision="default"):
    q, k, v, mask, bias = _attn_split(args, has_mask, has_bias)
    s = mul(dot_ops.dot_general(q, k, (((3,), (3,)), ((0, 2), (0, 2))), precision=precision),
            scale)  # [B,H,T,S]
    if bias is not None:
        s = add(s, bias)
    valid = _attn_valid(mask, s.shape, is_causal, window)
    if valid is None:
        p = _softmax_body(s, axes=(-1,))
    else:
        sm = select(valid, s, float(dtypes.finfo(s.dtype).min))
        e = exp(sub(sm, _back(reduce_max(sm, (3,)), s.shape, (3,))))
        e = select(valid, e, zeros_like(e))
        den = reduce_sum(e, (3,))
        den = select(gt(den, 0), den, add(zeros_like(den), 1.0))
        p = div(e, _back(den, s.shape, (3,)))
    o = dot_ops.dot_general(p, v, (((3,), (1,)), ((0, 1), (0, 2))),
                            precision=precision)  # [B,H,T,Dv]
    return [shape_ops.transpose(o, (0, 2, 1, 3)), _attn_lse(s, valid)]


def _lse_dtype(dtype):
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def _attn_lse(s, valid):
    """The rows' logsumexp of the scores s [B,H,T,S] over the attended keys: [B,H,T]."""
    s = convert_element_type(s, _lse_dtype(s.dtype))
    if valid is not None:
        s = select(valid, s, add(zeros_like(s), -np.inf))
    m = _safe_max(s, (3,))
    den = reduce_sum(exp(sub(s, _back(m, s.shape, (3,)))), (3,))
    some = gt(den, 0)
    lse = add(log(select(some, den, add(zeros_like(den), 1.0))), m)
    return select(some, lse, add(zeros_like(lse), np.inf))


@quiet_np
def _attn_probs_np(q, k, mask, bias, scale, is_causal, window):
    """(P [B,H,T,S], the rows' logsumexp [B,H,T]) as the body computes them."""
    s = np.matmul(q.transpose(0, 2, 1, 3), k.transpose(0, 2, 3, 1)) * scale
    if bias is not None:
        s = s + bias
    valid = None if mask is None else np.broadcast_to(mask, s.shape)
    if is_causal or window is not None:
        local = _attn_window_np(s.shape[2], s.shape[3], is_causal, window)
        valid = local if valid is None else valid & local
    if valid is None:   # as softmax (a row of -inf scores: NaN, as JAX's)
        m = _np_safe_max(s, (-1,))
        e = np.exp(s - m)
        den = e.sum(-1, keepdims=True)
        p = e / den
    else:
        sm = np.where(valid, s, np.finfo(s.dtype).min)
        m = sm.max(-1, keepdims=True)
        e = np.where(valid, np.exp(sm - m), 0)
        den = e.sum(-1, keepdims=True)
        p = e / np.where(den > 0, den, 1)
    some = den > 0
    ldt = _lse_dtype(s.dtype)
    lse = np.where(some, m.astype(ldt) + np.log(np.where(some, den, 1).astype(ldt)), np.inf)
    return cast_like(p, q), lse[..., 0].astype(ldt)


def _attn_impl(*args, scale, is_causal, window, has_mask, has_bias, precision="default"):
    q, k, v, mask, bias = _attn_split(args, has_mask, has_bias)
    p, lse = _attn_probs_np(q, k, mask, bias, scale, is_causal, window)
    return [cast_like(np.matmul(p, v.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3), q), lse]


def _np_unbroadcast(g, shape):
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, d in enumerate(shape) if d == 1)
    return np.sum(g, axis=axes).reshape(shape) if axes else g


def _attn_bwd_impl(ct, ct_lse, out, lse, *args, wrt, nout, scale, is_causal, window,
                   has_mask, has_bias, precision="default"):
    q, k, v, mask, bias = _attn_split(args, has_mask, has_bias)
    p, _ = _attn_probs_np(q, k, mask, bias, scale, is_causal, window)  # [B,H,T,S]
    do = ct.transpose(0, 2, 1, 3)  # [B,H,T,Dv]
    dv = np.matmul(p.transpose(0, 1, 3, 2), do)  # [B,H,S,Dv]
    dp = np.matmul(do, v.transpose(0, 2, 3, 1))  # [B,H,T,S]
    # the softmax backward, and lse's (d lse / d score = P): ds = P (dP - <dP, P> + ct_lse)
    ds = p * (dp - np.sum(dp * p, -1, keepdims=True) + ct_lse[..., None])
    grads = {
        0: np.matmul(ds, k.transpose(0, 2, 1, 3)) * scale,  # [B,H,T,D]
        1: np.matmul(ds.transpose(0, 1, 3, 2), q.transpose(0, 2, 1, 3)) * scale,
        2: dv,
    }
    grads = {i: g.transpose(0, 2, 1, 3) for i, g in grads.items()}
    if bias is not None:
        grads[3 + has_mask] = _np_unbroadcast(ds, bias.shape)
    return [cast_like(grads[i], q) for i in wrt]


dot_product_attention_p = composite("dot_product_attention", _attn_body, impl=_attn_impl,
                                    multiple_results=True, bwd_impl=_attn_bwd_impl)
dot_product_attention_p.format_params = dot_ops.hide_default_precision
dot_product_attention_p.bwd.format_params = dot_ops.hide_default_precision


def _attn_extra(x, shape, op, what, is_mask):
    x = operand(x, op)
    if is_mask and x.dtype != np.bool_:
        raise TypeError(f"{op}: mask must be bool (True = attend), got {short(x)}")
    if x.ndim > 4 or any(a not in (1, b) for a, b in zip(x.shape[::-1], shape[::-1])):
        raise ShapeError(f"{op}: {what} {short(x)} does not broadcast to the scores "
                         f"[B,H,T,S] = {list(shape)}")
    return reshape(x, (1,) * (4 - x.ndim) + tuple(x.shape))


def dot_product_attention(
    q, k, v, mask=None, is_causal=False, bias=None, sliding_window=None, scale=None,
    precision=None
):
    """softmax(q k^T * scale + bias, masked) v over q [B,T,H,D], k [B,S,H,D], v [B,S,H,Dv].

    `sliding_window` w (or (left, right)) lets query t attend keys t-left .. t+right, as
    JAX's local_window_size; with is_causal, right is 0 anyway. `precision` (as for
    matmul) is that of the two products where they are made as products (the composite's
    body); the fused CUDA kernels are at least as exact as asked at every setting."""
    op = "dot_product_attention"
    prec = dot_ops.canonical_precision(precision, op)
    q, k, v = promote(op, float_operand(q, op), float_operand(k, op), float_operand(v, op))
    if (
        not (q.ndim == k.ndim == v.ndim == 4)
        or q.shape[0] != k.shape[0]
        or q.shape[2] != k.shape[2]
        or q.shape[3] != k.shape[3]
        or tuple(k.shape[:3]) != tuple(v.shape[:3])
    ):
        raise ValueError(f"{op}: want q [B,T,H,D], k [B,S,H,D], v [B,S,H,Dv]; got "
                         f"{short(q)}, {short(k)}, {short(v)}")
    shape = (q.shape[0], q.shape[2], q.shape[1], k.shape[1])
    args = [q, k, v]
    if mask is not None:
        args.append(_attn_extra(mask, shape, op, "mask", True))
    if bias is not None:
        args.append(convert_element_type(_attn_extra(bias, shape, op, "bias", False), q.dtype))
    if sliding_window is not None:
        w = sliding_window
        w = (w, w) if np.ndim(w) == 0 else tuple(w)
        sliding_window = tuple(static_int(e, op, "sliding_window") for e in w)
        if len(sliding_window) != 2 or min(sliding_window) < 0:
            raise ValueError(f"{op}: sliding_window must be a non-negative int or a pair "
                             f"(left, right) of them, got {w}")
    scale = 1.0 / math.sqrt(q.shape[3]) if scale is None else static_float(scale, op, "scale")
    out, _ = dot_product_attention_p.bind(*args, scale=scale, is_causal=bool(is_causal),
                                          window=sliding_window, has_mask=mask is not None,
                                          has_bias=bias is not None, precision=prec)
    return out
