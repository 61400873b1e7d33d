"""mirax.numpy.fft: NumPy's fft names on the fft primitive (mirax/ops/fft.py).

Each function crops or zero-pads the transformed axes to n= / s=, moves them to the end,
applies the primitive and moves them back, then scales for norm= ("backward": 1/n on the
inverse, "ortho": 1/sqrt(n) both ways, "forward": 1/n on the forward transform). Results
are complex64 for float32 (and integer) inputs and complex128 for float64, as in JAX.
hfft/ihfft are irfft/rfft of the conjugate with the normalization direction swapped, as
NumPy defines them.
"""
from __future__ import annotations

import math

import numpy as np

from mirax.core import dtypes
from mirax.ops import elementwise as ew
from mirax.ops import shape as sh
from mirax.ops.common import normalize_axis, operand, short
from mirax.numpy._shape_extra import roll
from mirax.ops.fft import fft as _fft_prim

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2",
           "irfft2", "rfftn", "irfftn", "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift",
           "ifftshift"]

_NORMS = (None, "backward", "ortho", "forward")


def _check_norm(norm, op):
    if norm not in _NORMS:
        raise ValueError(f"{op}: norm must be one of 'backward', 'ortho', 'forward', got "
                         f"{norm!r}")


def _scale(x, norm, n, inverse, op):
    """The norm= factor on top of the primitive's backward normalization."""
    _check_norm(norm, op)
    if norm in (None, "backward") or n == 0:
        return x
    if norm == "ortho":
        f = math.sqrt(n) if inverse else 1.0 / math.sqrt(n)
    else:  # forward
        f = float(n) if inverse else 1.0 / n
    return ew.mul(x, f)


def _resize(x, axis, n):
    """Crop or zero-pad axis to length n (NumPy's n= / s=)."""
    m = x.shape[axis]
    if n == m:
        return x
    if n < m:
        return sh.slice_in_dim(x, 0, n, axis=axis)
    cfg = [(0, 0, 0)] * x.ndim
    cfg[axis] = (0, n - m, 0)
    return sh.pad(x, 0, cfg)


def _axes_and_sizes(x, s, axes, op, real_inverse=False):
    """Normalized axes and lengths for an n-dimensional transform, with NumPy's defaults:
    s alone picks the last len(s) axes; neither picks all axes."""
    if axes is None:
        axes = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
    elif isinstance(axes, (int, np.integer)):
        axes = (axes,)
    axes = tuple(normalize_axis(a, x.ndim, op, x) for a in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op}: repeated axis in {axes}")
    if s is None:
        s = [x.shape[a] for a in axes]
        if real_inverse and axes:
            s[-1] = 2 * (x.shape[axes[-1]] - 1)
    else:
        if isinstance(s, (int, np.integer)):
            s = (s,)
        if len(s) != len(axes):
            raise ValueError(f"{op}: s {tuple(s)} and axes {axes} differ in length")
    s = tuple(int(n) for n in s)
    if any(n < 1 for n in s):
        raise ValueError(f"{op}: invalid number of data points {s} for {short(x)}")
    return axes, s


def _apply(x, kind, axes, s, op):
    """The primitive over `axes` (cropped/padded to s), in chunks of at most 3 axes."""
    if not axes:
        return x
    for ax, n in zip(axes, s):
        m = n // 2 + 1 if kind == "irfft" and ax == axes[-1] else n
        x = _resize(x, ax, m)
    k = len(axes)
    if k > 3:  # the primitive takes up to 3 axes: the leading ones first (complex kinds)
        first = "fft" if kind in ("fft", "rfft") else "ifft"
        if kind == "rfft":
            x = _apply(x, "rfft", axes[-3:], s[-3:], op)
            return _apply(x, first, axes[:-3], s[:-3], op)
        if kind == "irfft":
            x = _apply(x, "ifft", axes[:-3], s[:-3], op)
            return _apply(x, "irfft", axes[-3:], s[-3:], op)
        x = _apply(x, kind, axes[-3:], s[-3:], op)
        return _apply(x, kind, axes[:-3], s[:-3], op)
    dst = tuple(range(x.ndim - k, x.ndim))
    x = _moveaxes(x, axes, dst)
    out = _fft_prim(x, kind, s)
    return _moveaxes(out, dst, axes)


def _moveaxes(x, src, dst):
    if tuple(src) == tuple(dst):
        return x
    order = [a for a in range(x.ndim) if a not in src]
    perm = [0] * x.ndim
    for d, a in zip(dst, src):
        perm[d] = a
    rest = iter(order)
    for i in range(x.ndim):
        if i not in dst:
            perm[i] = next(rest)
    return sh.transpose(x, perm)


def _complex_in(a, op):
    x = operand(a, op)
    if not dtypes.is_complex(x.dtype):
        x = ew.convert_element_type(x, dtypes.complex_dtype(x.dtype))
    return x


def _real_in(a, op):
    x = operand(a, op)
    if dtypes.is_complex(x.dtype):
        raise TypeError(f"{op}: expected a real array, got {short(x)}")
    if x.dtype != dtypes.float64:
        x = ew.convert_element_type(x, dtypes.float32)
    return x


def _one_axis(n, axis):
    return None if n is None else (n,), (axis,)


def _nd(kind, a, s, axes, norm, op):
    inverse = kind in ("ifft", "irfft")
    x = _real_in(a, op) if kind == "rfft" else _complex_in(a, op)
    axes, s = _axes_and_sizes(x, s, axes, op, real_inverse=kind == "irfft")
    out = _apply(x, kind, axes, s, op)
    return _scale(out, norm, math.prod(s), inverse, op)


# --- complex transforms ---------------------------------------------------------------------
def fft(a, n=None, axis=-1, norm=None):
    return _nd("fft", a, *_one_axis(n, axis), norm, "fft")


def ifft(a, n=None, axis=-1, norm=None):
    return _nd("ifft", a, *_one_axis(n, axis), norm, "ifft")


def fft2(a, s=None, axes=(-2, -1), norm=None):
    return _nd("fft", a, s, axes, norm, "fft2")


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    return _nd("ifft", a, s, axes, norm, "ifft2")


def fftn(a, s=None, axes=None, norm=None):
    return _nd("fft", a, s, axes, norm, "fftn")


def ifftn(a, s=None, axes=None, norm=None):
    return _nd("ifft", a, s, axes, norm, "ifftn")


# --- real transforms ------------------------------------------------------------------------
def rfft(a, n=None, axis=-1, norm=None):
    return _nd("rfft", a, *_one_axis(n, axis), norm, "rfft")


def irfft(a, n=None, axis=-1, norm=None):
    return _nd("irfft", a, *_one_axis(n, axis), norm, "irfft")


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    return _nd("rfft", a, s, axes, norm, "rfft2")


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    return _nd("irfft", a, s, axes, norm, "irfft2")


def rfftn(a, s=None, axes=None, norm=None):
    return _nd("rfft", a, s, axes, norm, "rfftn")


def irfftn(a, s=None, axes=None, norm=None):
    return _nd("irfft", a, s, axes, norm, "irfftn")


_SWAP = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


def hfft(a, n=None, axis=-1, norm=None):
    """The FFT of a Hermitian-symmetric signal given by its first half: a real spectrum."""
    _check_norm(norm, "hfft")
    return irfft(ew.conj(_complex_in(a, "hfft")), n, axis, norm=_SWAP[norm])


def ihfft(a, n=None, axis=-1, norm=None):
    """The inverse of hfft: the first half of a Hermitian spectrum of a real signal."""
    _check_norm(norm, "ihfft")
    return ew.conj(rfft(a, n, axis, norm=_SWAP[norm]))


# --- frequencies and shifts -----------------------------------------------------------------
def fftfreq(n, d=1.0, dtype=None):
    """Sample frequencies [0, 1, ..., n/2-1, -n/2, ..., -1] / (d n) (float32 by default)."""
    n = int(n)
    k = np.concatenate([np.arange(0, (n - 1) // 2 + 1), np.arange(-(n // 2), 0)])
    return _freqs(k, n, d, dtype)


def rfftfreq(n, d=1.0, dtype=None):
    """Sample frequencies [0, 1, ..., n/2] / (d n) of rfft (float32 by default)."""
    n = int(n)
    return _freqs(np.arange(0, n // 2 + 1), n, d, dtype)


def _freqs(k, n, d, dtype):
    dt = dtypes.float32 if dtype is None else dtypes.canonicalize(dtype)
    if isinstance(d, (int, float)):
        return operand(np.asarray(k / (d * n), dt))
    return ew.div(operand(np.asarray(k, dt)), ew.mul(operand(d), float(n)))


def fftshift(x, axes=None):
    """Move the zero frequency to the center (roll by n//2 along axes)."""
    return _shift(x, axes, 1, "fftshift")


def ifftshift(x, axes=None):
    """The inverse of fftshift (roll by -(n//2))."""
    return _shift(x, axes, -1, "ifftshift")


def _shift(x, axes, sign, op):
    x = operand(x, op)
    if axes is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axes, (int, np.integer)):
        axes = (axes,)
    axes = tuple(normalize_axis(a, x.ndim, op, x) for a in axes)
    if not axes:
        return x
    return roll(x, tuple(sign * (x.shape[a] // 2) for a in axes), axes)
