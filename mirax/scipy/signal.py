"""mirax.scipy.signal: jax.scipy.signal's convolutions (N-d convolve / correlate, the 2-d
forms, fftconvolve, detrend), written as JAX writes them: one lax.conv_general_dilated of
the flipped kernel, padded for the mode; differentiable in both inputs.

`method` is accepted and ignored as far as values go ('fft' and 'direct' give the same
numbers); fftconvolve is computed directly too (mirax has no complex FFT on this path).
"""
from __future__ import annotations

import numpy as np

import mirax.numpy as mnp
from mirax import lax
from mirax.scipy.stats._common import promote_args_inexact

__all__ = ["convolve", "correlate", "convolve2d", "correlate2d", "fftconvolve", "detrend"]

_MODES = ("full", "same", "valid")


def _convolve_nd(in1, in2, mode, precision=None, op="convolve"):
    if mode not in _MODES:
        raise ValueError(f"{op}: mode must be one of {list(_MODES)}, got {mode!r}")
    in1, in2 = promote_args_inexact(op, in1, in2)
    if in1.ndim != in2.ndim:
        raise ValueError(f"{op}: in1 and in2 must have the same number of dimensions, got "
                         f"shapes {in1.shape} and {in2.shape}")
    if in1.size == 0 or in2.size == 0:
        raise ValueError(f"{op}: zero-size arrays are not supported, got shapes {in1.shape} "
                         f"and {in2.shape}")
    no_swap = all(s1 >= s2 for s1, s2 in zip(in1.shape, in2.shape))
    swap = all(s1 <= s2 for s1, s2 in zip(in1.shape, in2.shape))
    if not (no_swap or swap):
        raise ValueError(f"{op}: one input must be smaller than the other in every dimension, "
                         f"got shapes {in1.shape} and {in2.shape}")
    shape_o = tuple(in2.shape)
    if swap:
        in1, in2 = in2, in1
    shape = tuple(in2.shape)
    kernel = mnp.flip(in2)
    if mode == "valid":
        padding = [(0, 0)] * len(shape)
    elif mode == "same":
        padding = [(s - 1 - (so - 1) // 2, s - so + (so - 1) // 2)
                   for s, so in zip(shape, shape_o)]
    else:
        padding = [(s - 1, s - 1) for s in shape]
    out = lax.conv_general_dilated(in1[None, None], kernel[None, None], (1,) * len(shape),
                                   padding, precision=precision)
    return out[0, 0]


def convolve(in1, in2, mode="full", method="auto", precision=None):
    """The N-d convolution of in1 and in2 (scipy.signal.convolve)."""
    if method not in ("auto", "direct", "fft"):
        raise ValueError(f"convolve: method must be 'auto', 'fft' or 'direct', got {method!r}")
    return _convolve_nd(in1, in2, mode, precision, "convolve")


def correlate(in1, in2, mode="full", method="auto", precision=None):
    """The N-d cross-correlation: convolve(in1, flip(in2))."""
    if method not in ("auto", "direct", "fft"):
        raise ValueError(f"correlate: method must be 'auto', 'fft' or 'direct', got "
                         f"{method!r}")
    return _convolve_nd(in1, mnp.flip(mnp.asarray(in2)), mode, precision, "correlate")


def _check_2d(in1, in2, boundary, fillvalue, op):
    if boundary != "fill" or fillvalue != 0:
        raise NotImplementedError(f"{op}: only boundary='fill', fillvalue=0 is supported "
                                  "(as JAX)")
    if np.ndim(in1) != 2 or np.ndim(in2) != 2:
        raise ValueError(f"{op}: only 2-dimensional inputs are supported, got shapes "
                         f"{np.shape(in1)} and {np.shape(in2)}")


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    _check_2d(in1, in2, boundary, fillvalue, "convolve2d")
    return _convolve_nd(in1, in2, mode, precision, "convolve2d")


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """scipy.signal.correlate2d, with its conventions for which input slides (JAX's
    arrangement of flips)."""
    _check_2d(in1, in2, boundary, fillvalue, "correlate2d")
    in1, in2 = mnp.asarray(in1), mnp.asarray(in2)
    swap = all(s1 <= s2 for s1, s2 in zip(in1.shape, in2.shape))
    same_shape = tuple(in1.shape) == tuple(in2.shape)
    op = "correlate2d"
    if mode == "same" or (mode == "valid" and not (swap and not same_shape)) or \
            (mode == "full" and not swap):
        return mnp.flip(_convolve_nd(mnp.flip(in1), in2, mode, precision, op))
    return _convolve_nd(mnp.flip(in2), in1, mode, precision, op)


def fftconvolve(in1, in2, mode="full", axes=None):
    """convolve's values (scipy computes them by FFT); with `axes`, the other axes are
    batch axes of equal length, convolved one slice at a time."""
    in1, in2 = promote_args_inexact("fftconvolve", in1, in2)
    if in1.ndim != in2.ndim:
        raise ValueError(f"fftconvolve: in1 and in2 should have the same dimensionality, got "
                         f"shapes {in1.shape} and {in2.shape}")
    if mode not in _MODES:
        raise ValueError(f"fftconvolve: mode must be one of {list(_MODES)}, got {mode!r}")
    if axes is None:
        return _convolve_nd(in1, in2, mode, None, "fftconvolve")
    axes = (axes,) if isinstance(axes, int) else tuple(axes)
    axes = tuple(a % in1.ndim for a in axes)
    mapped = [i for i in range(in1.ndim) if i not in axes]
    if any(in1.shape[i] != in2.shape[i] for i in mapped):
        raise ValueError(f"fftconvolve: mapped axes must have the same shape; got "
                         f"{in1.shape} and {in2.shape} with axes={axes}")
    # move the batch axes to the front, convolve each slice (static loop), move back
    order = mapped + list(axes)
    x, k = mnp.transpose(in1, order), mnp.transpose(in2, order)
    nb = len(mapped)
    batch = tuple(x.shape[:nb])
    xs = mnp.reshape(x, (-1,) + tuple(x.shape[nb:]))
    ks = mnp.reshape(k, (-1,) + tuple(k.shape[nb:]))
    outs = [_convolve_nd(xs[i], ks[i], mode, None, "fftconvolve") for i in range(xs.shape[0])]
    out = mnp.reshape(mnp.stack(outs), batch + tuple(outs[0].shape))
    return mnp.transpose(out, tuple(np.argsort(order)))


def detrend(data, axis=-1, type="linear", bp=0, overwrite_data=None):  # noqa: A002
    """data minus its mean ('constant') or its least-squares line on each piece between the
    breakpoints bp ('linear')."""
    if overwrite_data is not None:
        raise NotImplementedError("detrend: overwrite_data is not supported")
    if type not in ("constant", "linear"):
        raise ValueError(f"detrend: type must be 'linear' or 'constant', got {type!r}")
    (x,) = promote_args_inexact("detrend", data)
    if type == "constant":
        return x - mnp.mean(x, axis=axis, keepdims=True)
    n = x.shape[axis]
    bps = np.sort(np.unique(np.r_[0, bp, n]))
    if bps[0] < 0 or bps[-1] > n:
        raise ValueError("detrend: breakpoints must be non-negative and at most the length of "
                         "the data along axis")
    x = mnp.moveaxis(x, axis, 0)
    shape = tuple(x.shape)
    x = mnp.reshape(x, (n, -1))
    pieces = []
    for lo, hi in zip(bps[:-1], bps[1:]):
        npts = int(hi - lo)
        design = np.stack([np.ones(npts), np.arange(1, npts + 1) / npts], axis=1)
        design = mnp.asarray(design.astype(np.dtype(x.dtype)))
        seg = x[int(lo):int(hi)]
        # least squares through the normal equations of the 2-column design
        coef = mnp.linalg.solve(mnp.matmul(design.T, design), mnp.matmul(design.T, seg))
        pieces.append(seg - mnp.matmul(design, coef))
    out = mnp.concatenate(pieces, axis=0)
    return mnp.moveaxis(mnp.reshape(out, shape), 0, axis)
