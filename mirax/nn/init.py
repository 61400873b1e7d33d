"""mirax.nn.init: parameter initializers in JAX's style (jax.nn.initializers).

Each initializer is a function `init(key, shape, dtype=float32) -> Array`; the parametrized
ones (`normal(stddev)`, `glorot_uniform()`, `variance_scaling(...)`) are factories returning
such a function, exactly as in JAX: `w = mx.nn.init.glorot_uniform()(key, (784, 256))`.
With mirax.random's JAX-identical bits, the same key gives JAX's numbers.
"""
from __future__ import annotations

import math

import numpy as np

import mirax.numpy as mnp
from mirax import random
from mirax.core import dtypes

__all__ = [
    "constant", "glorot_normal", "glorot_uniform", "he_normal", "he_uniform", "lecun_normal",
    "lecun_uniform", "normal", "ones", "truncated_normal", "uniform", "variance_scaling",
    "xavier_normal", "xavier_uniform", "zeros",
]

_F32 = dtypes.float32


def _shape(shape) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)


def zeros(key, shape, dtype=_F32):
    """All zeros (the key is ignored)."""
    return mnp.zeros(_shape(shape), dtype)


def ones(key, shape, dtype=_F32):
    """All ones (the key is ignored)."""
    return mnp.ones(_shape(shape), dtype)


def constant(value, dtype=_F32):
    def init(key, shape, dtype=dtype):
        return mnp.full(_shape(shape), value, dtype)
    return init


def normal(stddev=1e-2, dtype=_F32):
    """N(0, stddev^2) entries."""
    def init(key, shape, dtype=dtype):
        return random.normal(key, _shape(shape), dtype) * mnp.asarray(stddev, dtype)
    return init


def uniform(scale=1e-2, dtype=_F32):
    """U[0, scale) entries."""
    def init(key, shape, dtype=dtype):
        return random.uniform(key, _shape(shape), dtype, 0.0, scale)
    return init


def truncated_normal(stddev=1e-2, dtype=_F32, lower=-2.0, upper=2.0):
    def init(key, shape, dtype=dtype):
        return random.truncated_normal(key, lower, upper, _shape(shape), dtype) * stddev
    return init


def _fans(shape, in_axis, out_axis):
    if len(shape) < 1:
        raise ValueError(f"variance_scaling: shape {shape} needs at least one axis")
    if len(shape) == 1:
        return shape[0], shape[0]
    in_axis, out_axis = in_axis % len(shape), out_axis % len(shape)
    receptive = math.prod(d for i, d in enumerate(shape) if i not in (in_axis, out_axis))
    return shape[in_axis] * receptive, shape[out_axis] * receptive


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, dtype=_F32):
    """Entries with variance scale / fan, fan = fan_in, fan_out or their mean (`mode`), drawn
    from a 'truncated_normal' (cut at 2 std), 'normal' or 'uniform' distribution."""
    if mode not in ("fan_in", "fan_out", "fan_avg"):
        raise ValueError(f"variance_scaling: invalid mode {mode!r}")
    if distribution not in ("truncated_normal", "normal", "uniform"):
        raise ValueError(f"variance_scaling: invalid distribution {distribution!r}")

    def init(key, shape, dtype=dtype):
        shape = _shape(shape)
        fan_in, fan_out = _fans(shape, in_axis, out_axis)
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[mode]
        variance = scale / max(fan, 1)
        if distribution == "truncated_normal":
            # the std of a unit normal truncated to [-2, 2]
            std = math.sqrt(variance) / 0.87962566103423978
            return random.truncated_normal(key, -2.0, 2.0, shape, dtype) * mnp.asarray(std, dtype)
        if distribution == "normal":
            return random.normal(key, shape, dtype) * mnp.asarray(math.sqrt(variance), dtype)
        lim = math.sqrt(3 * variance)
        return random.uniform(key, shape, dtype, -1.0, 1.0) * mnp.asarray(lim, dtype)
    return init


def glorot_uniform(in_axis=-2, out_axis=-1, dtype=_F32):
    """Glorot/Xavier uniform: U(-a, a), a = sqrt(6 / (fan_in + fan_out))."""
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis, dtype)


def glorot_normal(in_axis=-2, out_axis=-1, dtype=_F32):
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis, dtype)


def he_normal(in_axis=-2, out_axis=-1, dtype=_F32):
    """He/Kaiming normal: truncated normal with variance 2 / fan_in."""
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis, dtype)


def he_uniform(in_axis=-2, out_axis=-1, dtype=_F32):
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis, dtype)


def lecun_normal(in_axis=-2, out_axis=-1, dtype=_F32):
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis, dtype)


def lecun_uniform(in_axis=-2, out_axis=-1, dtype=_F32):
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis, dtype)


xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
