"""The LU factorization with partial pivoting (JAX's lax.linalg.lu): for a (..., m, n),
[lu, pivots, permutation] with a[..., permutation, :] = L @ U, L unit lower triangular
(m, k) and U upper triangular (k, n), k = min(m, n), both packed in `lu`; pivots are
LAPACK's row interchanges (row i swapped with pivots[i], in order).

Derivatives (square matrices): with P the permutation, W = L^-1 P dA U^-1,
dL = L tril(W, -1) and dU = triu(W) U, packed as d lu = dL + dU; the vjp is its adjoint.
The integer outputs are piecewise constant (no tangent).
"""
from __future__ import annotations

import numpy as np

from mirax.core import dtypes
from mirax.core.avals import ShapedArray
from mirax.core.primitive import Primitive
from mirax.core.trace import aval_of
from mirax.ops import elementwise as ew
from mirax.ops.common import short
from mirax.ops.linalg import (
    _T, _eye, _matrix_operand, _mm, _tril, _triu, _vmap_front, triangular_solve)
from mirax.ops.shape import expand_dims, iota

__all__ = ["lu", "lu_p"]

# --- lu -------------------------------------------------------------------------------------
lu_p = Primitive("lu", multiple_results=True)


def lu(a):
    """[lu, pivots, permutation] of a stack of matrices (..., m, n)."""
    return lu_p.bind(_matrix_operand(a, "lu"))


@lu_p.def_abstract_eval
def _lu_abstract_eval(a):
    if a.ndim < 2 or not dtypes.is_float(a.dtype):
        raise TypeError(f"lu: expected a stack of float matrices (..., m, n), got {short(a)}")
    m, n = a.shape[-2:]
    batch = tuple(a.shape[:-2])
    return [ShapedArray(a.shape, a.dtype), ShapedArray(batch + (min(m, n),), dtypes.int32),
            ShapedArray(batch + (m,), dtypes.int32)]


def _lu_host(a):
    """Doolittle elimination with partial pivoting, vectorized over the batch."""
    m, n = a.shape[-2:]
    k = min(m, n)
    work = np.array(a, copy=True).reshape((-1, m, n))
    b = work.shape[0]
    rows = np.arange(b)
    piv = np.zeros((b, k), np.int32)
    perm = np.tile(np.arange(m, dtype=np.int32), (b, 1))
    for j in range(k):
        p = j + np.argmax(np.abs(work[:, j:, j]), axis=1)
        piv[:, j] = p
        work[rows, j], work[rows, p] = work[rows, p], work[rows, j].copy()
        perm[rows, j], perm[rows, p] = perm[rows, p], perm[rows, j].copy()
        d = work[:, j, j]
        nz = d != 0   # a zero pivot means a zero column below it: leave it (as LAPACK)
        fac = np.where(nz[:, None], work[:, j + 1:, j] / np.where(nz, d, 1)[:, None], 0)
        work[:, j + 1:, j] = fac
        work[:, j + 1:, j + 1:] -= fac[:, :, None] * work[:, j, None, j + 1:]
    batch = a.shape[:-2]
    return [work.reshape(a.shape), piv.reshape(batch + (k,)), perm.reshape(batch + (m,))]


@lu_p.def_impl
def _lu_impl(a):
    if a.dtype in dtypes.LOW_FLOATS:
        packed, piv, perm = _lu_host(np.asarray(a, np.float32))
        return [packed.astype(a.dtype), piv, perm]
    return _lu_host(a)


def _perm_matrix(perm, dtype):
    """One-hot P (..., m, m) with P[i, perm[i]] = 1, so P @ x = x[perm]."""
    m = aval_of(perm).shape[-1]
    cols = iota(dtypes.int32, (m,), 0)
    return ew.convert_element_type(ew.eq(expand_dims(perm, aval_of(perm).ndim), cols), dtype)


def _factors(packed):
    n = aval_of(packed).shape[-1]
    lo = ew.add(_tril(packed, -1), _eye(n, aval_of(packed).dtype))
    return lo, _triu(packed)


def _check_square(a, op):
    m, n = aval_of(a).shape[-2:]
    if m != n:
        raise NotImplementedError(f"{op}: derivatives of the LU factorization of non-square "
                                  f"{short(aval_of(a))} are not implemented")


@lu_p.def_jvp
def _lu_jvp(primals, tangents):
    (a,), (t,) = primals, tangents
    packed, piv, perm = lu_p.bind(a)
    if t is None:
        return [packed, piv, perm], [None, None, None]
    _check_square(a, "lu")
    lo, up = _factors(packed)
    x = _mm(_perm_matrix(perm, aval_of(a).dtype), t)
    w = triangular_solve(lo, x, left_side=True, lower=True, unit_diagonal=True)
    w = triangular_solve(up, w, left_side=False, lower=False)
    d_packed = ew.add(_mm(lo, _tril(w, -1)), _mm(_triu(w), up))
    return [packed, piv, perm], [d_packed, None, None]


@lu_p.def_vjp
def _lu_vjp(cts, out, a):
    # <C, L tril(W,-1) + triu(W) U> = <tril(L^T C, -1) + triu(C U^T), W>, W = L^-1 P dA U^-1
    _check_square(a, "lu")
    ct, (packed, _, perm) = cts[0], out
    if ct is None:
        return [ew.zeros_like(a)]
    lo, up = _factors(packed)
    w_bar = ew.add(_tril(_mm(_T(lo), ct), -1), _triu(_mm(ct, _T(up))))
    x_bar = triangular_solve(up, w_bar, left_side=False, lower=False, transpose_a=True)
    x_bar = triangular_solve(lo, x_bar, left_side=True, lower=True, transpose_a=True,
                             unit_diagonal=True)
    return [_mm(_T(_perm_matrix(perm, aval_of(a).dtype)), x_bar)]


lu_p.def_vmap(_vmap_front(lu_p))
