"""Shape arithmetic of convolutions and windows, as jax.lax exposes it (what
jax.example_libraries.stax and similar layer libraries call to size their parameters).

Pure Python on shape tuples: no arrays, no graph nodes. Each function follows the JAX
function of the same name, including its conventions (canonical NC.../OI... order for
conv_shape_tuple; layout strings or a ConvDimensionNumbers for the general forms).
"""
from __future__ import annotations

import builtins

import numpy as np

from mirax.lax._windows import (
    ConvDimensionNumbers, _conv_transpose_padding, conv_general_permutations, padtype_to_pads)

__all__ = ["conv_shape_tuple", "conv_general_shape_tuple", "conv_transpose_shape_tuple",
           "reduce_window_shape_tuple"]


def _stride_dim(d: int, window: int, stride: int) -> int:
    """Output length of a strided window over d positions (0 when the window does not fit)."""
    return 0 if d < window else (d - window) // stride + 1


def _dilate(shape, dilation) -> tuple[int, ...]:
    return tuple(0 if d == 0 else 1 + r * (d - 1) for d, r in zip(shape, dilation))


def _perms(dimension_numbers):
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return tuple(dimension_numbers)
    return conv_general_permutations(dimension_numbers)


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count=1):
    """Output shape of a convolution with lhs (N, C, ...), rhs (O, I, ...) in canonical
    order; pads is 'SAME' / 'VALID' / ... or (lo, hi) pairs."""
    lhs_shape, rhs_shape = tuple(int(d) for d in lhs_shape), tuple(int(d) for d in rhs_shape)
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise TypeError(f"conv_shape_tuple: expected {len(lhs_shape) - 2} explicit pads for "
                        f"lhs shape {lhs_shape}, got {len(pads)}")
    padded = [d + int(lo) + int(hi) for d, (lo, hi) in zip(lhs_shape[2:], pads)]
    if builtins.any(p < 0 for p in padded):
        raise ValueError(f"conv_shape_tuple: negative padding {list(pads)} is larger than "
                         f"the spatial dims {lhs_shape[2:]}")
    space = tuple(_stride_dim(p, k, int(s)) for p, k, s in zip(padded, rhs_shape[2:], strides))
    if batch_group_count > 1:
        if lhs_shape[0] % batch_group_count:
            raise ValueError(f"conv_shape_tuple: batch {lhs_shape[0]} is not a multiple of "
                             f"batch_group_count={batch_group_count}")
        return (lhs_shape[0] // batch_group_count, rhs_shape[0]) + space
    return (lhs_shape[0], rhs_shape[0]) + space


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                             dimension_numbers):
    """conv_shape_tuple for arbitrary layouts (e.g. ('NHWC', 'HWIO', 'NHWC'))."""
    lhs_perm, rhs_perm, out_perm = _perms(dimension_numbers)
    lhs_t = tuple(int(lhs_shape[i]) for i in lhs_perm)
    rhs_t = tuple(int(rhs_shape[i]) for i in rhs_perm)
    out_t = conv_shape_tuple(lhs_t, rhs_t, window_strides, padding)
    return tuple(int(out_t[i]) for i in np.argsort(out_perm))


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                               dimension_numbers):
    """Output shape of lax.conv_transpose in the given layouts."""
    lhs_perm, rhs_perm, out_perm = _perms(dimension_numbers)
    lhs_t = tuple(int(lhs_shape[i]) for i in lhs_perm)
    rhs_t = tuple(int(rhs_shape[i]) for i in rhs_perm)
    if isinstance(padding, str):
        padding = [_conv_transpose_padding(k, int(s), padding.upper())
                   for k, s in zip(rhs_t[2:], window_strides)]
    totals = [int(np.sum(p)) for p in padding]
    space = tuple((i - 1) * int(s) - k + 2 + p
                  for i, k, s, p in zip(lhs_t[2:], rhs_t[2:], window_strides, totals))
    out_t = (lhs_t[0], rhs_t[0]) + space
    return tuple(int(out_t[i]) for i in np.argsort(out_perm))


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None):
    """Output shape of lax.reduce_window with explicit (lo, hi) padding pairs."""
    operand_shape = tuple(int(d) for d in operand_shape)
    window_dimensions = tuple(int(d) for d in window_dimensions)
    if base_dilation is not None:
        operand_shape = _dilate(operand_shape, base_dilation)
    if window_dilation is not None:
        window_dimensions = _dilate(window_dimensions, window_dilation)
    padded = [d + int(lo) + int(hi) for d, (lo, hi) in zip(operand_shape, padding)]
    return tuple(_stride_dim(p, w, int(s))
                 for p, w, s in zip(padded, window_dimensions, window_strides))
