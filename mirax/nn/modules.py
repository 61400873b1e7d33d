"""mirax.nn modules: equinox-style layers that are pytrees.

A `Module` subclass is turned into a dataclass and registered as a pytree node when it is
defined: array fields are the leaves, fields made with `static_field()` (sizes, activation
functions, flags) are static aux data, part of the tree structure. So a model is just a value:
pass it to `mx.jit`, `mx.grad`, `mx.vmap`, `mx.optim`, `mx.io.save` like any pytree.

    key1, key2 = mx.random.split(mx.random.key(0))
    model = mx.nn.MLP(2, 1, width_size=32, depth=2, key=key1)
    grads = mx.grad(lambda m: mnp.mean(m(x) ** 2))(model)   # grads is an MLP too

Modules are immutable by convention (rebuilt, never mutated, after construction); `__call__`
is the forward pass. Constructors take the PRNG `key` as a keyword argument.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import mirax.numpy as mnp
from mirax import random
from mirax.core import tree
from mirax.nn import functional as F

__all__ = ["Conv2d", "Dropout", "Embedding", "Lambda", "LayerNorm", "Linear", "MLP", "Module",
           "MultiHeadAttention", "RMSNorm", "Sequential", "static_field"]


def static_field(**kwargs) -> Any:
    """A dataclass field kept in the tree structure (aux data) rather than as a leaf."""
    metadata = dict(kwargs.pop("metadata", {}), static=True)
    return dataclasses.field(metadata=metadata, **kwargs)


class Module:
    """Base class: subclasses become dataclasses registered as pytree nodes."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        has_init = "__init__" in cls.__dict__
        dataclasses.dataclass(cls, init=not has_init, repr=False, eq=False)
        tree.register_dataclass(cls)

    def __repr__(self) -> str:
        parts = []
        for f in dataclasses.fields(self):
            v = getattr(self, f.name, None)
            shown = (f"{v.dtype}{list(v.shape)}" if hasattr(v, "shape") and hasattr(v, "dtype")
                     else getattr(v, "__name__", None) or repr(v))
            parts.append(f"{f.name}={shown}")
        return f"{type(self).__name__}({', '.join(parts)})"


def _uniform(key, shape, lim, dtype):
    return random.uniform(key, shape, dtype, -lim, lim)


# --- layers --------------------------------------------------------------------------------
class Linear(Module):
    """y = x @ weight.T + bias, weight [out, in] (PyTorch / equinox layout), both initialized
    U(-1/sqrt(in), 1/sqrt(in)). Works on any leading batch dimensions."""
    weight: Any
    bias: Any
    in_features: int = static_field()
    out_features: int = static_field()

    def __init__(self, in_features: int, out_features: int, use_bias: bool = True, *, key,
                 dtype=mnp.float32):
        wkey, bkey = random.split(key)
        lim = 1.0 / max(in_features, 1) ** 0.5
        self.weight = _uniform(wkey, (out_features, in_features), lim, dtype)
        self.bias = _uniform(bkey, (out_features,), lim, dtype) if use_bias else None
        self.in_features, self.out_features = in_features, out_features

    def __call__(self, x):
        y = mnp.matmul(x, self.weight.T)
        return y if self.bias is None else y + self.bias


class Embedding(Module):
    """A lookup table [num_embeddings, dim] with N(0, 1) entries; __call__(ids) = table[ids]."""
    weight: Any

    def __init__(self, num_embeddings: int, embedding_dim: int, *, key, dtype=mnp.float32):
        self.weight = random.normal(key, (num_embeddings, embedding_dim), dtype)

    def __call__(self, ids):
        return F.embedding(self.weight, ids)


class LayerNorm(Module):
    """Layer normalization over the last axis, with a learned scale (ones) and shift (zeros)."""
    weight: Any
    bias: Any
    eps: float = static_field()

    def __init__(self, dim: int, eps: float = 1e-5, use_weight: bool = True,
                 use_bias: bool = True, dtype=mnp.float32):
        self.weight = mnp.ones((dim,), dtype) if use_weight else None
        self.bias = mnp.zeros((dim,), dtype) if use_bias else None
        self.eps = eps

    def __call__(self, x):
        return F.layer_norm(x, self.weight, self.bias, eps=self.eps)


class RMSNorm(Module):
    """x / rms(x) * weight over the last axis (weight initialized to ones)."""
    weight: Any
    eps: float = static_field()

    def __init__(self, dim: int, eps: float = 1e-6, use_weight: bool = True,
                 dtype=mnp.float32):
        self.weight = mnp.ones((dim,), dtype) if use_weight else None
        self.eps = eps

    def __call__(self, x):
        return F.rms_norm(x, self.weight, eps=self.eps)


class Lambda(Module):
    """Wraps a parameter-free function (an activation, a reshape) as a layer."""
    fn: Callable = static_field()

    def __call__(self, x, *, key=None):
        return self.fn(x)


class Dropout(Module):
    """Zeroes entries with probability `rate` when called with a key; identity when
    `inference` is set (on the module or in the call) or rate is 0."""
    rate: float = static_field(default=0.5)
    inference: bool = static_field(default=False)

    def __call__(self, x, *, key=None, inference: bool | None = None):
        inference = self.inference if inference is None else inference
        if inference or self.rate == 0.0:
            return x
        if key is None:
            raise ValueError("Dropout: pass key= when training (or inference=True)")
        return F.dropout(x, self.rate, key)


class Sequential(Module):
    """Layers applied in order; plain functions become `Lambda` layers. A `key` given to the
    call is split among the layers (Dropout uses it)."""
    layers: tuple

    def __init__(self, layers: Sequence):
        self.layers = tuple(lay if isinstance(lay, Module) else Lambda(lay) for lay in layers)

    def __call__(self, x, *, key=None):
        keys = [None] * len(self.layers) if key is None else list(random.split(key,
                                                                               len(self.layers)))
        for layer, k in zip(self.layers, keys):
            x = layer(x, key=k) if isinstance(layer, (Dropout, Lambda, Sequential)) else layer(x)
        return x

    def __getitem__(self, i):
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)


class MLP(Module):
    """depth hidden layers of width_size: Linear -> activation, ..., Linear -> final_activation."""
    layers: tuple
    activation: Callable = static_field()
    final_activation: Callable = static_field()

    def __init__(self, in_size: int, out_size: int, width_size: int, depth: int,
                 activation: Callable = F.relu, final_activation: Callable | None = None, *,
                 key, dtype=mnp.float32):
        sizes = [in_size] + [width_size] * depth + [out_size]
        keys = random.split(key, len(sizes) - 1)
        self.layers = tuple(Linear(a, b, key=keys[i], dtype=dtype)
                            for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])))
        self.activation = activation
        self.final_activation = final_activation if final_activation is not None else _identity

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = self.activation(layer(x))
        return self.final_activation(self.layers[-1](x))


def _identity(x):
    return x


class Conv2d(Module):
    """2-d convolution, NCHW input, OIHW weight (U(-1/sqrt(fan_in), 1/sqrt(fan_in)) init);
    an unbatched CHW input gives a CHW output."""
    weight: Any
    bias: Any
    stride: Any = static_field()
    padding: Any = static_field()
    dilation: Any = static_field()
    groups: int = static_field()

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, use_bias: bool = True, *, key,
                 dtype=mnp.float32):
        kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2d: channels {in_channels} -> {out_channels} are not "
                             f"divisible by groups={groups}")
        wkey, bkey = random.split(key)
        lim = 1.0 / (in_channels // groups * kh * kw) ** 0.5
        self.weight = _uniform(wkey, (out_channels, in_channels // groups, kh, kw), lim, dtype)
        self.bias = _uniform(bkey, (out_channels,), lim, dtype) if use_bias else None
        self.stride, self.padding, self.dilation = _hashable(stride), _hashable(padding), \
            _hashable(dilation)
        self.groups = groups

    def __call__(self, x):
        unbatched = x.ndim == 3
        if unbatched:
            x = x[None]
        y = F.conv2d(x, self.weight, stride=self.stride, padding=self.padding,
                     dilation=self.dilation, groups=self.groups)
        if self.bias is not None:
            y = y + self.bias[None, :, None, None]
        return y[0] if unbatched else y


def _hashable(v):
    if isinstance(v, list):
        return tuple(_hashable(e) for e in v)
    return v


class MultiHeadAttention(Module):
    """Multi-head attention: q/k/v projections, mx.nn.dot_product_attention, an output
    projection. Inputs [B, T, E] or [T, E]; __call__(q, k=None, v=None, mask=None,
    is_causal=False) with k, v defaulting to q (self-attention)."""
    query_proj: Linear
    key_proj: Linear
    value_proj: Linear
    output_proj: Linear
    num_heads: int = static_field()

    def __init__(self, num_heads: int, embed_dim: int, use_bias: bool = True, *, key,
                 dtype=mnp.float32):
        if embed_dim % num_heads:
            raise ValueError(f"MultiHeadAttention: embed_dim {embed_dim} is not divisible by "
                             f"num_heads {num_heads}")
        kq, kk, kv, ko = random.split(key, 4)
        self.query_proj = Linear(embed_dim, embed_dim, use_bias, key=kq, dtype=dtype)
        self.key_proj = Linear(embed_dim, embed_dim, use_bias, key=kk, dtype=dtype)
        self.value_proj = Linear(embed_dim, embed_dim, use_bias, key=kv, dtype=dtype)
        self.output_proj = Linear(embed_dim, embed_dim, use_bias, key=ko, dtype=dtype)
        self.num_heads = num_heads

    def __call__(self, q, k=None, v=None, *, mask=None, is_causal: bool = False):
        k = q if k is None else k
        v = k if v is None else v
        unbatched = q.ndim == 2
        if unbatched:
            q, k, v = q[None], k[None], v[None]
        h = self.num_heads

        def heads(x):
            b, t, e = x.shape
            return x.reshape(b, t, h, e // h)
        out = F.dot_product_attention(heads(self.query_proj(q)), heads(self.key_proj(k)),
                                      heads(self.value_proj(v)), mask=mask,
                                      is_causal=is_causal)
        b, t = out.shape[:2]
        out = self.output_proj(out.reshape(b, t, -1))
        return out[0] if unbatched else out
