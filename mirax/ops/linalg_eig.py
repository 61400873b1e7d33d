"""eig: eigenvalues and right eigenvectors of general (non-symmetric) square matrices, always
complex (as JAX): w (..., n), v (..., n, n) with unit-norm columns (NumPy's LAPACK geev).

Derivatives, first order, of the eigenvalues only (eigvals, and the w tangent of eig): with
S = V^-1 dA V, dw = diag(S); the transpose in JAX's convention is wbar -> V^-T diag(wbar)
V^T (a real input takes the real part). The eigenvector derivative (which depends on the
normalization) is not implemented: eig's vjp raises NotImplementedError and its v tangent is
NaN; since eigvals' rules use V, derivatives of eigvals beyond the first are not available.
"""
from __future__ import annotations

import numpy as np

from mirax.core import dtypes
from mirax.core.avals import ShapedArray
from mirax.core.primitive import Primitive
from mirax.core.trace import aval_of
from mirax.ops import elementwise as ew
from mirax.ops.linalg import (_T, _diag, _diag_embed, _matrix_operand, _mm, _vmap_front, inv,
                              _square_abstract_eval)

# --- eig ------------------------------------------------------------------------------------
eig_p = Primitive("eig", multiple_results=True)


def eig(a):
    """[w, v]: eigenvalues (..., n) and eigenvectors as columns (..., n, n), complex."""
    return eig_p.bind(_matrix_operand(a, "eig", square=True))


@eig_p.def_abstract_eval
def _eig_abstract_eval(a):
    _square_abstract_eval("eig")(a)
    c = dtypes.complex_dtype(a.dtype)
    return [ShapedArray(a.shape[:-1], c), ShapedArray(a.shape, c)]


@eig_p.def_impl
def _eig_impl(a):
    c = dtypes.complex_dtype(a.dtype)
    w, v = np.linalg.eig(np.asarray(a, np.float32) if a.dtype.itemsize < 4 else a)
    return [np.asarray(w).astype(c), np.asarray(v).astype(c)]


def _complex(x):
    a = aval_of(x)
    return x if dtypes.is_complex(a.dtype) else ew.convert_element_type(
        x, dtypes.complex_dtype(a.dtype))


def _eigvals_tangent(a, v, t):
    """dw = diag(V^-1 dA V)."""
    return _diag(_mm(inv(v), _mm(_complex(t), v)))


@eig_p.def_jvp
def _eig_jvp(primals, tangents):
    (a,), (t,) = primals, tangents
    w, v = eig_p.bind(a)
    if t is None:
        return [w, v], [None, None]
    # NOTE: the eigenvector tangent is not implemented; NaNs mark it (never a silent zero)
    return [w, v], [_eigvals_tangent(a, v, t), ew.mul(v, float("nan"))]


@eig_p.def_vjp
def _eig_vjp(cts, out, a):
    raise NotImplementedError("eig: reverse-mode derivatives of the eigenvectors are not "
                              "implemented; for eigenvalues use mnp.linalg.eigvals")


eig_p.def_vmap(_vmap_front(eig_p))


# --- eigvals --------------------------------------------------------------------------------
eigvals_p = Primitive("eigvals")


def eigvals(a):
    """Eigenvalues (..., n) of general square matrices, complex."""
    return eigvals_p.bind(_matrix_operand(a, "eigvals", square=True))


@eigvals_p.def_abstract_eval
def _eigvals_abstract_eval(a):
    return _eig_abstract_eval(a)[0]


eigvals_p.def_impl(lambda a: _eig_impl(a)[0])


@eigvals_p.def_jvp
def _eigvals_jvp(primals, tangents):
    (a,), (t,) = primals, tangents
    w, v = eig_p.bind(a)
    return w, None if t is None else _eigvals_tangent(a, v, t)


@eigvals_p.def_vjp
def _eigvals_vjp(ct, w, a):
    # the transpose of t -> diag(V^-1 t V): ct -> V^-T diag(ct) V^T (real part for real a)
    _, v = eig_p.bind(a)
    abar = _mm(_mm(_T(inv(v)), _diag_embed(ct)), _T(v))
    if not dtypes.is_complex(aval_of(a).dtype):
        abar = ew.real(abar)
    return [ew.convert_element_type(abar, aval_of(a).dtype)]


eigvals_p.def_vmap(_vmap_front(eigvals_p))
