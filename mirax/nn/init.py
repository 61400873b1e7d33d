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
    "constant", "delta_orthogonal", "glorot_normal", "glorot_uniform", "he_normal",
    "he_uniform", "kaiming_normal", "kaiming_uniform", "lecun_normal", "lecun_uniform",
    "normal", "ones", "orthogonal", "truncated_normal", "uniform", "variance_scaling",
    "xavier_normal", "xavier_uniform", "zeros",
]

_F32 = dtypes.float32


def _shape(shape) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)


def _dtype(dtype):
    return dtypes.canonicalize(_F32 if dtype is None else dtype)


def zeros(key, shape, dtype=_F32):
    """All zeros (the key is ignored)."""
    return mnp.zeros(_shape(shape), dtype)


def ones(key, shape, dtype=_F32):
    """All ones (the key is ignored)."""
    return mnp.ones(_shape(shape), dtype)


def constant(value, dtype=_F32):
    """All entries `value`."""
    def init(key, shape, dtype=dtype):
        return mnp.full(_shape(shape), value, _dtype(dtype))
    return init


def normal(stddev=1e-2, dtype=_F32):
    """N(0, stddev^2) entries."""
    def init(key, shape, dtype=dtype):
        dtype = _dtype(dtype)
        return random.normal(key, _shape(shape), dtype) * mnp.asarray(stddev, dtype)
    return init


def uniform(scale=1e-2, dtype=_F32):
    """U[0, scale) entries."""
    def init(key, shape, dtype=dtype):
        dtype = _dtype(dtype)
        return random.uniform(key, _shape(shape), dtype) * mnp.asarray(scale, dtype)
    return init


def truncated_normal(stddev=1e-2, dtype=_F32, lower=-2.0, upper=2.0):
    """N(0, 1) truncated to (lower, upper), times stddev (no variance correction, as JAX)."""
    def init(key, shape, dtype=dtype):
        dtype = _dtype(dtype)
        x = random.truncated_normal(key, lower, upper, _shape(shape), dtype)
        return x * mnp.asarray(stddev, dtype)
    return init


def _size(shape, axes) -> int:
    if isinstance(axes, (int, np.integer)):
        return shape[axes]
    return math.prod(shape[i] for i in axes)


def _fans(shape, in_axis, out_axis, batch_axis):
    """(fan_in, fan_out): the in/out sizes times the receptive field (the axes that are not
    in, out or batch axes), as jax.nn.initializers computes them."""
    if isinstance(in_axis, (int, np.integer)) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"variance_scaling: cannot compute fans of a {len(shape)}-d shape "
                         f"{shape} with the default in_axis; it must be at least 2-d or "
                         "in_axis given explicitly")
    try:
        ins, outs = _size(shape, in_axis), _size(shape, out_axis)
        batch = _size(shape, batch_axis)
    except IndexError:
        raise ValueError(f"variance_scaling: in_axis={in_axis}, out_axis={out_axis}, "
                         f"batch_axis={batch_axis} are out of range for shape "
                         f"{shape}") from None
    receptive = math.prod(shape) / ins / outs / batch
    return ins * receptive, outs * receptive


_MODES = ("fan_in", "fan_out", "fan_avg", "fan_geo_avg")
_DISTRIBUTIONS = ("truncated_normal", "normal", "uniform")


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(),
                     dtype=_F32):
    """Entries with variance scale / n, n = fan_in, fan_out, their mean ('fan_avg') or
    geometric mean ('fan_geo_avg'), drawn from a 'truncated_normal' (cut at 2 std, then
    rescaled to the variance), 'normal' or 'uniform' distribution."""
    if mode not in _MODES:
        raise ValueError(f"variance_scaling: invalid mode {mode!r}, expected one of {_MODES}")
    if distribution not in _DISTRIBUTIONS:
        raise ValueError(f"variance_scaling: invalid distribution {distribution!r}, expected "
                         f"one of {_DISTRIBUTIONS}")

    def init(key, shape, dtype=dtype):
        shape, dtype = _shape(shape), _dtype(dtype)
        fan_in, fan_out = _fans(shape, in_axis, out_axis, batch_axis)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
             "fan_geo_avg": (fan_in * fan_out) ** 0.5}[mode]
        # NOTE: the variance is rounded to dtype before the sqrt, as JAX does, so the same
        # key gives JAX's numbers bit for bit
        variance = np.array(scale / n, dtype)
        if distribution == "truncated_normal":
            # the std of a unit normal truncated to [-2, 2]
            std = np.sqrt(variance) / np.array(0.87962566103423978, dtype)
            return random.truncated_normal(key, -2.0, 2.0, shape, dtype) * mnp.asarray(std)
        if distribution == "normal":
            return random.normal(key, shape, dtype) * mnp.asarray(np.sqrt(variance))
        lim = np.sqrt(np.array(3, dtype) * variance)
        return random.uniform(key, shape, dtype, -1.0, 1.0) * mnp.asarray(lim)
    return init


def _preset(name: str, scale: float, mode: str, distribution: str, what: str):
    def make(in_axis=-2, out_axis=-1, batch_axis=(), dtype=_F32):
        return variance_scaling(scale, mode, distribution, in_axis, out_axis, batch_axis, dtype)
    make.__name__ = make.__qualname__ = name
    make.__doc__ = (f"{what}: variance_scaling({scale}, {mode!r}, {distribution!r}, in_axis, "
                    "out_axis, batch_axis, dtype).")
    return make


glorot_uniform = _preset("glorot_uniform", 1.0, "fan_avg", "uniform",
                         "Glorot/Xavier uniform, U(-a, a) with a = sqrt(6 / (fan_in + fan_out))")
glorot_normal = _preset("glorot_normal", 1.0, "fan_avg", "truncated_normal",
                        "Glorot/Xavier normal, variance 2 / (fan_in + fan_out)")
he_uniform = _preset("he_uniform", 2.0, "fan_in", "uniform", "He/Kaiming uniform")
he_normal = _preset("he_normal", 2.0, "fan_in", "truncated_normal",
                    "He/Kaiming normal, variance 2 / fan_in")
lecun_uniform = _preset("lecun_uniform", 1.0, "fan_in", "uniform", "LeCun uniform")
lecun_normal = _preset("lecun_normal", 1.0, "fan_in", "truncated_normal",
                       "LeCun normal, variance 1 / fan_in")
xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal


def orthogonal(scale=1.0, column_axis=-1, dtype=_F32):
    """Uniformly distributed (Haar) orthogonal matrices, times scale: the shape is flattened
    to (rows, shape[column_axis]) and the smaller side is orthonormal."""
    def init(key, shape, dtype=dtype):
        shape, dtype = _shape(shape), _dtype(dtype)
        if len(shape) < 2:
            raise ValueError(f"orthogonal: the initializer needs at least a 2-d shape, got "
                             f"{shape}")
        if 0 in shape:
            return mnp.zeros(shape, dtype)
        n_cols = shape[column_axis]
        n_rows = math.prod(shape) // n_cols
        q = random.orthogonal(key, n_rows, (), dtype, n_cols)
        rest = tuple(np.delete(np.array(shape), column_axis % len(shape)))
        q = mnp.moveaxis(mnp.reshape(q, rest + (n_cols,)), -1, column_axis)
        return mnp.asarray(scale, dtype) * q
    return init


def delta_orthogonal(scale=1.0, column_axis=-1, dtype=_F32):
    """Delta-orthogonal convolution kernels (arXiv:1806.05393): zeros except an orthogonal
    matrix over the last two axes at the centre of the 1-3 spatial axes."""
    def init(key, shape, dtype=dtype):
        shape, dtype = _shape(shape), _dtype(dtype)
        if len(shape) not in (3, 4, 5):
            raise ValueError(f"delta_orthogonal: the shape must be 3-d, 4-d or 5-d, got "
                             f"{shape}")
        if shape[-1] < shape[-2]:
            raise ValueError(f"delta_orthogonal: fan_in {shape[-2]} must be <= fan_out "
                             f"{shape[-1]} (shape {shape})")
        ortho = orthogonal(scale, column_axis, dtype)(key, shape[-2:])
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        return mnp.zeros(shape, dtype).at[centre].set(ortho)
    return init
