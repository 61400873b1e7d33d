"""mirax.nn functional ops: activations, softmax family, losses, norms, attention,
convolution and pooling, graph ops, straight-through estimators, dropout.

Everything here is a thin public face over mirax/ops/nn.py, graph_ops.py, quant.py and
conv.py, where the primitives and fused composites live with all their rules.
"""
from __future__ import annotations

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

swish, hard_swish = silu, hard_silu   # JAX's other names


def dropout(x, rate, key=None, *, mask=None, deterministic=False):
    """Zero each entry with probability `rate` and scale the rest by 1 / (1 - rate).

    The keep-mask comes from `key` (via mirax.random.bernoulli) or is given explicitly as
    a boolean `mask` (True = keep). `deterministic=True` (or rate 0) returns x."""
    from mirax.ops.common import float_operand, operand, short
    from mirax.ops.elementwise import div, select, zeros_like
    x = float_operand(x, "dropout")
    rate = float(rate)
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"dropout: rate must be in [0, 1], got {rate}")
    if deterministic or rate == 0.0:
        return x
    if mask is None:
        if key is None:
            raise ValueError("dropout: pass a PRNG key (or an explicit boolean mask=)")
        from mirax import random as mrandom
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
    "soft_sign", "log_sigmoid", "mish", "glu", "standardize",
    "softmax", "log_softmax", "logsumexp", "one_hot", "softmax_cross_entropy",
    "layer_norm", "rms_norm", "dropout", "embedding", "dot_product_attention",
    "conv_general_dilated", "conv2d", "max_pool2d", "avg_pool2d",
    "index_select", "index_add", "segment_sum", "segment_max", "segment_mean",
    "segment_softmax", "ste_round", "ste_sign", "fake_quantize",
]
