"""eig: eigenvalues and right eigenvectors of general (non-symmetric) square matrices, always
complex (as JAX): w (..., n), v (..., n, n) with unit-norm columns (NumPy's LAPACK geev).

Derivatives, first order, of the eigenvalues (eigvals): with S = V^-1 dA V, dw = diag(S);
the transpose in JAX's convention is wbar -> V^-T diag(wbar) V^T (a real input takes the
real part). Eigenvector derivatives are not implemented (JAX refuses them by default too):
eig's jvp and vjp raise NotImplementedError, and since eigvals' rules use V, derivatives of
eigvals beyond the first raise as well (as in JAX).
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


def _eigvals_tangent(v, t):
    """dw = diag(V^-1 dA V)."""
    return _diag(_mm(inv(v), _mm(_complex(t), v)))


@eig_p.def_jvp
def _eig_jvp(primals, tangents):
    (a,), (t,) = primals, tangents
    w, v = eig_p.bind(a)
    if t is None:
        return [w, v], [None, None]
    raise NotImplementedError(_NO_EIGVEC)


@eig_p.def_vjp
def _eig_vjp(cts, out, a):
    raise NotImplementedError(_NO_EIGVEC)


# as JAX (whose eig needs enable_eigvec_derivs=True for them)
_NO_EIGVEC = ("eig: derivatives of non-symmetric eigenvectors are not implemented; for the "
              "eigenvalues use mnp.linalg.eigvals, for Hermitian matrices eigh")


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
    return w, None if t is None else _eigvals_tangent(v, t)


@eigvals_p.def_vjp
def _eigvals_vjp(ct, w, a):
    # the transpose of t -> diag(V^-1 t V): ct -> V^-T diag(ct) V^T (real part for real a)
    _, v = eig_p.bind(a)
    abar = _mm(_mm(_T(inv(v)), _diag_embed(ct)), _T(v))
    if not dtypes.is_complex(aval_of(a).dtype):
        abar = ew.real(abar)
    return [ew.convert_element_type(abar, aval_of(a).dtype)]


eigvals_p.def_vmap(_vmap_front(eigvals_p))
