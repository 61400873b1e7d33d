"""The FFT primitive (lax.fft): one primitive, four kinds, over the trailing axes.

`fft(x, fft_type, fft_lengths)` transforms the last len(fft_lengths) axes of x with NumPy's
conventions for the unnormalized direction: FFT and RFFT are sums, IFFT and IRFFT divide by
the number of points ("backward" normalization). mirax.numpy.fft builds n=/s=/axes=/norm= on
top (crop or zero-pad, move axes to the end, scale).

Every kind is linear, so each has a transpose (its jvp is itself). Transposes follow JAX's
convention for complex numbers (plain transposition, no conjugation; a real-to-complex
embedding transposes to the real part):
- FFT: the DFT matrix is symmetric, so FFT^T = FFT; likewise IFFT^T = IFFT.
- RFFT = keep the first n//2+1 bins of FFT(x + 0i): RFFT^T(ct) = Re FFT(zero-pad(ct)).
- IRFFT (last axis): x_j = Re sum_k c_jk y_k with c_jk = w_k e^{2 pi i jk/n} / n, where
  w = 1 at bin 0 (and at n/2 for even n) and 2 elsewhere (the Hermitian extension); the
  transpose of y -> Re(c y) is ct -> c ct, so IRFFT^T(ct) = conj(RFFT(ct)) w / n; the other
  axes go through IFFT.
The transposes are written with mirax ops, so derivatives of any order work.
"""
from __future__ import annotations

import enum

import numpy as np

from mirax.core import dtypes
from mirax.core.avals import ShapedArray
from mirax.core.primitive import Primitive
from mirax.core.trace import aval_of
from mirax.ops import elementwise as ew
from mirax.ops import shape as sh
from mirax.ops.common import operand, short

FFT_TYPES = ("fft", "ifft", "rfft", "irfft")


class FftType(enum.IntEnum):
    """lax.fft's transform kinds (JAX's names and values); strings work too."""
    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3

# --- fft -----------------------------------------------------------------------------------
fft_p = Primitive("fft")


def fft(x, fft_type: str, fft_lengths):
    """lax.fft: the `fft_type` transform of the last len(fft_lengths) axes of x (lengths of
    the real signal for rfft/irfft). Inputs are cast as JAX does: fft/ifft/irfft take complex
    (real inputs become complex), rfft takes real (f16/bf16/ints become f32)."""
    fft_type = _fft_type(fft_type)
    x = operand(x, "fft")
    lengths = tuple(int(n) for n in fft_lengths)
    if fft_type == "rfft":
        if dtypes.is_complex(x.dtype):
            raise TypeError(f"fft: rfft takes a real array, got {short(x)}")
        if x.dtype != dtypes.float64:
            x = ew.convert_element_type(x, dtypes.float32)
    elif not dtypes.is_complex(x.dtype):
        x = ew.convert_element_type(x, dtypes.complex_dtype(x.dtype))
    return fft_p.bind(x, fft_type=fft_type, fft_lengths=lengths)


def _fft_type(t) -> str:
    name = str(getattr(t, "name", t)).lower()
    if name not in FFT_TYPES:
        raise ValueError(f"fft: fft_type must be one of {FFT_TYPES}, got {t!r}")
    return name


@fft_p.def_abstract_eval
def _fft_abstract_eval(x, *, fft_type, fft_lengths):
    k = len(fft_lengths)
    if not 1 <= k <= 3 or x.ndim < k:
        raise ValueError(f"fft: {k} fft_lengths for an operand {short(x)}; expected 1 to 3 "
                         "lengths and at least as many axes")
    lead, tail = x.shape[:x.ndim - k], tuple(x.shape[x.ndim - k:])
    if fft_type == "irfft":
        want = tuple(fft_lengths[:-1]) + (fft_lengths[-1] // 2 + 1,)
        if tail != want:
            raise ValueError(f"fft: irfft of lengths {fft_lengths} expects trailing axes "
                             f"{want}, got {short(x)}")
        return ShapedArray(lead + tuple(fft_lengths), dtypes.real_dtype(x.dtype))
    if tail != tuple(fft_lengths):
        raise ValueError(f"fft: {fft_type} of lengths {fft_lengths} expects trailing axes "
                         f"{tuple(fft_lengths)}, got {short(x)}")
    if fft_type == "rfft":
        if not dtypes.is_float(x.dtype):
            raise TypeError(f"fft: rfft takes a real array, got {short(x)}")
        out = tail[:-1] + (tail[-1] // 2 + 1,)
        return ShapedArray(lead + out, dtypes.complex_dtype(x.dtype))
    if not dtypes.is_complex(x.dtype):
        raise TypeError(f"fft: {fft_type} takes a complex array, got {short(x)}")
    return ShapedArray(x.shape, x.dtype)


@fft_p.def_impl
def _fft_impl(x, *, fft_type, fft_lengths):
    axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
    if fft_type == "fft":
        out, dt = np.fft.fftn(x, axes=axes), x.dtype
    elif fft_type == "ifft":
        out, dt = np.fft.ifftn(x, axes=axes), x.dtype
    elif fft_type == "rfft":
        out, dt = np.fft.rfftn(x, axes=axes), dtypes.complex_dtype(x.dtype)
    else:
        out, dt = np.fft.irfftn(x, s=fft_lengths, axes=axes), dtypes.real_dtype(x.dtype)
    return np.asarray(out).astype(dt, copy=False)


@fft_p.def_transpose
def _fft_transpose(ct, x, *, fft_type, fft_lengths):
    if fft_type in ("fft", "ifft"):
        return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]
    if fft_type == "rfft":
        n = fft_lengths[-1]
        full = sh.pad(ct, 0, [(0, 0, 0)] * (ct.ndim - 1) + [(0, n - ct.shape[-1], 0)])
        return [ew.real(fft_p.bind(full, fft_type="fft", fft_lengths=fft_lengths))]
    return [_irfft_transpose(ct, fft_lengths)]


def _irfft_transpose(ct, fft_lengths):
    n, k = fft_lengths[-1], len(fft_lengths)
    m = n // 2 + 1
    w = np.full(m, 2.0 / n)
    w[0] = 1.0 / n
    if n % 2 == 0:
        w[-1] = 1.0 / n
    t = ew.conj(fft_p.bind(ct, fft_type="rfft", fft_lengths=(n,)))
    t = ew.mul(t, operand(w.astype(dtypes.real_dtype(aval_of(ct).dtype))))
    if k > 1:  # the other axes: IFFT^T = IFFT, with them moved to the end
        t = sh.moveaxis(t, -1, -k)
        t = fft_p.bind(t, fft_type="ifft", fft_lengths=tuple(fft_lengths[:-1]))
        t = sh.moveaxis(t, -k, -1)
    return t


@fft_p.def_vmap
def _fft_vmap(args, dims, **params):
    (x,), (d,) = args, dims
    if d != 0:
        x = sh.moveaxis(x, d, 0)
    return fft_p.bind(x, **params), 0
