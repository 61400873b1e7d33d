"""mirax.numpy complex helpers: imag, angle, iscomplex, isreal, real_if_close (real, conj
and iscomplexobj sit beside the other elementwise functions). The primitives (real_p,
imag_p, conj_p, complex_p) and their derivative rules are in ops/elementwise.py."""
from __future__ import annotations

import numpy as np

from mirax.core import dtypes
from mirax.ops import elementwise as ew
from mirax.ops.common import operand

__all__ = ["imag", "angle", "iscomplex", "isreal", "real_if_close"]


def imag(x):
    return ew.imag(x)


def angle(z, deg=False):
    """The argument of z: atan2(imag, real) (0 or pi for real inputs, as NumPy)."""
    z = operand(z, "angle")
    if not dtypes.is_inexact(z.dtype):
        z = ew.convert_element_type(z, dtypes.float32)
    out = ew.atan2(ew.imag(z), ew.real(z))
    return ew.mul(out, 180.0 / np.pi) if deg else out


def iscomplex(x):
    """Elementwise: the imaginary part is nonzero (False everywhere for real inputs)."""
    x = operand(x, "iscomplex")
    return ew.ne(ew.imag(x), 0)


def isreal(x):
    """Elementwise: the imaginary part is zero (True everywhere for real inputs)."""
    x = operand(x, "isreal")
    return ew.eq(ew.imag(x), 0)


def real_if_close(x, tol=100):
    """The real part if every imaginary part is within tol machine epsilons of 0 (a value
    test: not traceable under jit, as in JAX)."""
    x = operand(x, "real_if_close")
    if not dtypes.is_complex(x.dtype):
        return x
    eps = float(dtypes.finfo(dtypes.real_dtype(x.dtype)).eps)
    lim = tol * eps if tol > 1 else tol
    return ew.real(x) if bool(np.all(np.abs(np.asarray(ew.imag(x))) < lim)) else x
