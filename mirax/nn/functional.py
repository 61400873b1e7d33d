"""mirax.nn functional ops: activations, softmax family, losses, norms, attention,
convolution and pooling, graph ops, straight-through estimators, dropout.

Everything here is a thin public face over mirax/ops/nn.py, graph_ops.py, quant.py and
conv.py, where the primitives and fused composites live with all their rules.
"""
from __future__ import annotations

import math

import numpy as np

from mirax.ops import elementwise as ew
from mirax.ops.common import float_operand, normalize_axes, operand, promote
from mirax.ops.conv import avg_pool2d, conv2d, conv_general_dilated, max_pool2d
from mirax.ops.graph_ops import (
    embedding, index_add, index_select, segment_max, segment_mean, segment_softmax,
    segment_sum)
from mirax.ops.nn import (
    celu, dot_product_attention, elu, gelu, glu, hard_sigmoid, hard_silu, hard_tanh,
    layer_norm, leaky_relu, log_sigmoid, log_softmax, logsumexp, mish, one_hot, relu, relu6,
    rms_norm, selu, sigmoid, silu, softmax, softmax_cross_entropy, softplus, soft_sign,
    standardize)
from mirax.ops.quant import fake_quantize, ste_round, ste_sign
from mirax.ops.elementwise import tanh
from mirax.ops.reduction import reduce_sum
from mirax.ops.shape import broadcast_to, full, reshape
from mirax.ops.common import short
from mirax.ops.elementwise import div, select, zeros_like
from mirax import random as mrandom

swish, hard_swish = silu, hard_silu   # JAX's other names


def identity(x):
    """x unchanged (as an mx.Array)."""
    return operand(x, "identity")


def squareplus(x, b=4):
    """(x + ew.sqrt(x^2 + b)) / 2, a smooth relu (arXiv:2112.11687)."""
    x, b = promote("squareplus", x, b)
    return ew.div(ew.add(x, ew.sqrt(ew.add(ew.mul(x, x), b))), 2.0)


def sparse_plus(x):
    """0 for x <= -1, (x + 1)^2 / 4 for -1 < x < 1, x for x >= 1 (softplus's sparse twin)."""
    x = float_operand(x, "sparse_plus")
    xp1 = ew.add(x, 1.0)
    inner = ew.select(ew.ge(x, 1.0), x, ew.div(ew.mul(xp1, xp1), 4.0))
    return ew.select(ew.le(x, -1.0), ew.zeros_like(x), inner)


def sparse_sigmoid(x):
    """clip(x + 1, 0, 2) / 2: the derivative of sparse_plus (ties at the kinks split evenly,
    as jax.nn's clip does)."""
    x = float_operand(x, "sparse_sigmoid")
    return ew.mul(0.5, ew.min(ew.max(ew.add(x, 1.0), 0.0), 2.0))


def log1mexp(x):
    """ew.log(1 - ew.exp(-x)) for x >= 0, stably: ew.log(-ew.expm1(-x)) below log 2, else
    ew.log1p(-ew.exp(-x)) (Maechler's note); d/dx = 1 / ew.expm1(x)."""
    x = float_operand(x, "log1mexp")
    small = ew.log(ew.neg(ew.expm1(ew.neg(x))))
    return ew.select(ew.lt(x, float(np.log(2.0))), small, ew.log1p(ew.neg(ew.exp(ew.neg(x)))))


def logmeanexp(x, axis=None, where=None, keepdims=False):
    """ew.log(mean(ew.exp(x))) over axis = logsumexp - ew.log(count), over the entries where `where`
    is True when given."""
    x = float_operand(x, "logmeanexp")
    axes = normalize_axes(axis, x.ndim, "logmeanexp", x)
    if where is None:
        count = float(math.prod(x.shape[a] for a in axes))
        return ew.sub(logsumexp(x, axis=axes, keepdims=keepdims), np.log(count).astype(x.dtype))
    mask = broadcast_to(operand(where, "logmeanexp"), tuple(x.shape))
    masked = ew.select(mask, x, full(tuple(x.shape), -np.inf, x.dtype))
    lse = logsumexp(masked, axis=axes, keepdims=keepdims)
    count = reduce_sum(ew.convert_element_type(mask, x.dtype), axes)
    if keepdims:
        count = reshape(count, tuple(lse.shape))
    return ew.sub(lse, ew.log(count))


def dropout(x, rate, key=None, *, mask=None, deterministic=False):
    """Zero each entry with probability `rate` and scale the rest by 1 / (1 - rate).

    The keep-mask comes from `key` (via mirax.random.bernoulli) or is given explicitly as
    a boolean `mask` (True = keep). `deterministic=True` (or rate 0) returns x."""
    x = float_operand(x, "dropout")
    rate = float(rate)
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"dropout: rate must be in [0, 1], got {rate}")
    if deterministic or rate == 0.0:
        return x
    if mask is None:
        if key is None:
            raise ValueError("dropout: pass a PRNG key (or an explicit boolean mask=)")
        mask = mrandom.bernoulli(key, 1.0 - rate, tuple(x.shape))
    mask = operand(mask, "dropout")
    if tuple(mask.shape) != tuple(x.shape) or str(mask.dtype) != "bool":
        raise ValueError(f"dropout: mask {short(mask)} must be bool with the shape of "
                         f"{short(x)}")
    if rate == 1.0:
        return zeros_like(x)
    return select(mask, div(x, 1.0 - rate), zeros_like(x))


__all__ = [
    "relu", "gelu", "silu", "sigmoid", "tanh", "softplus", "leaky_relu", "elu",
    "celu", "selu", "relu6", "hard_tanh", "hard_sigmoid", "hard_silu", "hard_swish", "swish",
    "soft_sign", "log_sigmoid", "mish", "glu", "standardize", "identity", "squareplus",
    "sparse_plus", "sparse_sigmoid", "log1mexp", "logmeanexp",
    "softmax", "log_softmax", "logsumexp", "one_hot", "softmax_cross_entropy",
    "layer_norm", "rms_norm", "dropout", "embedding", "dot_product_attention",
    "conv_general_dilated", "conv2d", "max_pool2d", "avg_pool2d",
    "index_select", "index_add", "segment_sum", "segment_max", "segment_mean",
    "segment_softmax", "ste_round", "ste_sign", "fake_quantize",
]
