"""Linear-algebra primitives on stacks of matrices (..., m, n): cholesky, triangular_solve,
solve, inv, det, slogdet, qr, eigh (ascending eigenvalues), svd (reduced, or with
full_matrices: values only for non-square inputs, as in JAX).

Every primitive is batched over its leading dims, so each vmap rule just moves the batch
dim to the front. Binary primitives take operands with equal batch dims (mirax.numpy.linalg
broadcasts first). Derivatives are the standard matrix-calculus formulas, written with
primitives (dot_general, triangular_solve, ...) so they differentiate again.

NOTE: where a formula divides by a gap (eigh: 1/(w_j - w_i); svd: 1/(s_j^2 - s_i^2)) the
diagonal and exact ties are masked to 0 with a select (a strong zero): derivatives of
gauge-invariant functions stay finite; eigenvector derivatives at a degenerate spectrum are
not defined and are not meaningful here either.
"""
from __future__ import annotations

import numpy as np

from mirax.core import dtypes
from mirax.core.avals import ShapedArray
from mirax.core.primitive import Primitive
from mirax.core.trace import aval_of
from mirax.core.errors import DTypeError
from mirax.ops import elementwise as ew
from mirax.ops import shape as sh
from mirax.ops.common import batch_size, float_operand, promote, short
from mirax.ops.dot import dot_general
from mirax.ops.reduction import reduce_sum


# --- helpers (all on mirax ops, so rules stay differentiable) ------------------------------
def _T(x):
    """Swap the last two axes."""
    nd = aval_of(x).ndim
    return sh.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _H(x):
    """The conjugate transpose of the last two axes (_T for real x)."""
    return ew.conj(_T(x))


def _mm(a, b):
    """Batched matmul of (..., m, k) and (..., k, n) with equal batch dims; exact float32
    on every device ("highest"), as JAX's linalg rules make their products: derivatives of
    factorizations lose too much at TF32."""
    nb = aval_of(a).ndim - 2
    batch = tuple(range(nb))
    return dot_general(a, b, (((nb + 1,), (nb,)), (batch, batch)), precision="highest")


def _eye(n, dtype):
    i = sh.iota(dtypes.int32, (n, n), 0)
    j = sh.iota(dtypes.int32, (n, n), 1)
    return ew.convert_element_type(ew.eq(i, j), dtype)


def _band_mask(shape, lo):
    """Bool (m, n) mask of entries with j - i >= lo."""
    m, n = shape[-2:]
    i = sh.iota(dtypes.int32, (m, n), 0)
    j = sh.iota(dtypes.int32, (m, n), 1)
    return ew.ge(ew.sub(j, i), lo)


def _tril(x, k=0):
    """Entries with j <= i + k kept, others 0."""
    keep = ew.logical_not(_band_mask(aval_of(x).shape, k + 1))
    return ew.select(sh.broadcast_to(keep, aval_of(x).shape), x, ew.zeros_like(x))


def _triu(x, k=0):
    keep = _band_mask(aval_of(x).shape, k)
    return ew.select(sh.broadcast_to(keep, aval_of(x).shape), x, ew.zeros_like(x))


def _diag(x):
    """The diagonal (..., n) of a stack of square matrices."""
    a = aval_of(x)
    return reduce_sum(ew.mul(x, _eye(a.shape[-1], a.dtype)), (a.ndim - 1,))


def _diag_embed(v):
    """A stack of diagonal matrices with diagonals v (..., n)."""
    a = aval_of(v)
    return ew.mul(sh.expand_dims(v, a.ndim - 1), _eye(a.shape[-1], a.dtype))


def _sym(x):
    """The symmetric (Hermitian, for complex x) part."""
    return ew.mul(ew.add(x, ew.conj(_T(x))), 0.5)




def _row(v):
    """v (..., n) as (..., 1, n), to scale columns."""
    return sh.expand_dims(v, aval_of(v).ndim - 1)


def _col(v):
    return sh.expand_dims(v, aval_of(v).ndim)


def _safe_recip_gap(gap):
    """1 / gap, with exact zeros (the diagonal, ties) giving 0 (strong zero)."""
    zero = ew.eq(gap, 0)
    return ew.select(zero, ew.zeros_like(gap), ew.div(1.0, ew.select(zero, ew.ones_like(gap),
                                                                      gap)))


def _matrix_operand(x, op, square=False):
    x = float_operand(x, op)
    if x.ndim < 2:
        raise ValueError(f"{op}: expected a stack of matrices (..., m, n), got {short(x)}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{op}: expected square matrices, got {short(x)}")
    return x


# --- NumPy's LAPACK calls, as JAX behaves: no LinAlgError ---------------------------------
# NumPy raises LinAlgError for a singular solve or an SVD that does not converge (a NaN
# input); JAX returns inf / NaN. A stack that fails (or holds a non-finite entry) is redone
# matrix by matrix: a singular solve by elimination that lets the zero pivot give inf / NaN,
# any other failing or non-finite matrix as NaN outputs.
def _lu_solve(a, b):
    """a^-1 b (a: n x n, b: n x k) by elimination with partial pivoting, never raising."""
    a, b = a.astype(a.dtype, copy=True), b.astype(b.dtype, copy=True)
    n = a.shape[0]
    with np.errstate(all="ignore"):
        for k in range(n):
            p = k + int(np.argmax(np.abs(a[k:, k])))
            if p != k:
                a[[k, p]], b[[k, p]] = a[[p, k]], b[[p, k]]
            f = a[k + 1:, k] / a[k, k]
            a[k + 1:, k:] -= f[:, None] * a[k, k:]
            b[k + 1:] -= f[:, None] * b[k]
        x = np.empty_like(b)
        for k in reversed(range(n)):
            x[k] = (b[k] - a[k, k + 1:] @ x[k + 1:]) / a[k, k]
    return x


def _np_solve(a, b):
    """np.linalg.solve on stacks (..., n, n), (..., n, k) with equal batch dims."""
    if np.isfinite(a).all():
        try:
            return np.linalg.solve(a, b)
        except np.linalg.LinAlgError:
            pass
    out = np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:],
                   np.result_type(a, b))
    for i in np.ndindex(out.shape[:-2]):
        out[i] = _lu_solve(a[i], b[i])
    return out


def _nan_on_failure(fn):
    """fn (a LAPACK call on a stack) with NaN outputs for a matrix that has a non-finite
    entry or that LAPACK rejects, instead of LinAlgError."""
    def impl(a, **params):
        if np.isfinite(a).all():
            try:
                return fn(a, **params)
            except np.linalg.LinAlgError:
                pass
        batch = a.shape[:-2]
        zero = fn(np.zeros_like(a[(0,) * len(batch)] if batch else a), **params)
        single = not isinstance(zero, (list, tuple))
        zero = [zero] if single else list(zero)
        outs = [np.full(batch + np.shape(z), np.nan, np.result_type(z, a)) for z in zero]
        for i in np.ndindex(batch):
            m = a[i]
            if not np.isfinite(m).all():
                continue
            try:
                res = fn(m, **params)
            except np.linalg.LinAlgError:
                continue
            for o, r in zip(outs, [res] if single else res):
                o[i] = r
        return outs[0] if single else outs
    return impl


def _host(fn):
    """A NumPy linalg impl that computes float16/bfloat16 in float32."""
    def impl(*xs, **params):
        dt = xs[0].dtype
        if dt in dtypes.LOW_FLOATS:
            outs = fn(*(np.asarray(x, np.float32) for x in xs), **params)
            if isinstance(outs, (list, tuple)):
                return [np.asarray(o).astype(dt) for o in outs]
            return np.asarray(outs).astype(dt)
        outs = fn(*xs, **params)
        if isinstance(outs, (list, tuple)):
            return [np.asarray(o) for o in outs]
        return np.asarray(outs)
    return impl


def _vmap_front(p):
    """vmap rule for a primitive batched over leading dims: batch dim to the front."""
    def vmap(args, dims, **params):
        size = batch_size(args, dims)
        xs = [sh.broadcast_to(a, (size,) + tuple(aval_of(a).shape)) if d is None
              else sh.moveaxis(a, d, 0) if d != 0 else a for a, d in zip(args, dims)]
        out = p.bind(*xs, **params)
        return out, ([0] * len(out) if p.multiple_results else 0)
    return vmap


def _square_abstract_eval(name):
    def rule(a, **params):
        if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
            raise ValueError(f"{name}: expected square matrices (..., n, n), got {short(a)}")
        if not dtypes.is_inexact(a.dtype):
            raise TypeError(f"{name}: expected a float or complex array, got {short(a)}")
        return ShapedArray(a.shape, a.dtype)
    return rule


# --- cholesky -----------------------------------------------------------------------------
cholesky_p = Primitive("cholesky")


def cholesky(a, symmetrize_input=True):
    """Lower Cholesky factor L (a = L L^T); NaN where a is not positive definite."""
    a = _matrix_operand(a, "cholesky", square=True)
    return cholesky_p.bind(_sym(a) if symmetrize_input else a)


cholesky_p.def_abstract_eval(_square_abstract_eval("cholesky"))


@cholesky_p.def_impl
@_host
def _cholesky_impl(a):
    try:
        return np.linalg.cholesky(a)
    except np.linalg.LinAlgError:  # as JAX: NaN factors where a is not positive definite
        flat = a.reshape((-1,) + a.shape[-2:])
        out = np.full_like(flat, np.nan)
        for i, m in enumerate(flat):
            try:
                out[i] = np.linalg.cholesky(m)
            except np.linalg.LinAlgError:
                pass
        return out.reshape(a.shape)


def _phi(x):
    """Lower triangle with the diagonal halved."""
    return ew.sub(_tril(x), ew.mul(_diag_embed(_diag(x)), 0.5))


@cholesky_p.def_jvp
def _cholesky_jvp(primals, tangents):
    # dL = L phi(L^-1 dA L^-T) for the symmetric part of dA
    # (complex: dL = L phi(L^-1 dA L^-H))
    (a,), (t,) = primals, tangents
    lo = cholesky_p.bind(a)
    if t is None:
        return lo, None
    y = triangular_solve(lo, _sym(t), left_side=True, lower=True)
    x = triangular_solve(ew.conj(lo), y, left_side=False, lower=True, transpose_a=True)
    return lo, _mm(lo, _phi(x))


@cholesky_p.def_vjp
def _cholesky_vjp(ct, lo, a):
    # abar = sym(L^-T phi(L^T Lbar) L^-1); complex: conj of that with ^H, at conj(Lbar)
    p = _phi(_mm(_H(lo), ew.conj(ct)))
    z = triangular_solve(ew.conj(lo), p, left_side=True, lower=True, transpose_a=True)
    s = triangular_solve(lo, z, left_side=False, lower=True)
    return [ew.conj(_sym(s))]


cholesky_p.def_vmap(_vmap_front(cholesky_p))


# --- triangular_solve ---------------------------------------------------------------------
# left_side: solve op(a) x = b; else x op(a) = b; op(a) = a^T if transpose_a. Only the
# `lower` (or upper) triangle of a is read; unit_diagonal takes its diagonal as ones.
triangular_solve_p = Primitive("triangular_solve")


def triangular_solve(a, b, left_side=False, lower=False, transpose_a=False,
                     unit_diagonal=False):
    a, b = promote("triangular_solve", _matrix_operand(a, "triangular_solve", square=True),
                   _matrix_operand(b, "triangular_solve"))
    return triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower),
                                   transpose_a=bool(transpose_a),
                                   unit_diagonal=bool(unit_diagonal))


@triangular_solve_p.def_abstract_eval
def _triangular_solve_abstract_eval(a, b, *, left_side, lower, transpose_a, unit_diagonal):
    m = a.shape[-1]
    k = b.shape[-2] if left_side else b.shape[-1]
    if a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2] or k != m:
        side = "(..., m, n)" if left_side else "(..., n, m)"
        raise ValueError(f"triangular_solve: b {short(b)} must be {side} with the batch dims "
                         f"of a {short(a)}")
    if a.dtype != b.dtype:
        raise DTypeError(f"triangular_solve: dtypes differ: {short(a)} and {short(b)}")
    return ShapedArray(b.shape, b.dtype)


@triangular_solve_p.def_impl
@_host
def _triangular_solve_impl(a, b, *, left_side, lower, transpose_a, unit_diagonal):
    m = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        m = m.copy()
        idx = np.arange(a.shape[-1])
        m[..., idx, idx] = 1
    if transpose_a:
        m = np.swapaxes(m, -1, -2)
    if left_side:
        return _np_solve(m, b)
    return np.swapaxes(_np_solve(np.swapaxes(m, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)


def _tri_mask(x, lower, unit_diagonal):
    x = _tril(x) if lower else _triu(x)
    if unit_diagonal:
        x = ew.sub(x, _diag_embed(_diag(x)))
    return x


@triangular_solve_p.def_jvp
def _triangular_solve_jvp(primals, tangents, **params):
    (a, b), (ta, tb) = primals, tangents
    x = triangular_solve_p.bind(a, b, **params)
    rhs = None if tb is None else tb
    if ta is not None:  # d(op(A)^-1 b) = -op(A)^-1 op(dA) x (left), -x op(dA) op(A)^-1 (right)
        da = _tri_mask(ta, params["lower"], params["unit_diagonal"])
        da = _T(da) if params["transpose_a"] else da
        term = ew.neg(_mm(da, x) if params["left_side"] else _mm(x, da))
        rhs = term if rhs is None else ew.add(rhs, term)
    return x, None if rhs is None else triangular_solve_p.bind(a, rhs, **params)


@triangular_solve_p.def_vjp
def _triangular_solve_vjp(ct, x, a, b, *, left_side, lower, transpose_a, unit_diagonal):
    ct_b = triangular_solve_p.bind(a, ct, left_side=left_side, lower=lower,
                                   transpose_a=not transpose_a, unit_diagonal=unit_diagonal)
    g = ew.neg(_mm(ct_b, _T(x)) if left_side else _mm(_T(x), ct_b))  # wrt op(A)
    g = _T(g) if transpose_a else g
    return [_tri_mask(g, lower, unit_diagonal), ct_b]


triangular_solve_p.def_vmap(_vmap_front(triangular_solve_p))


# --- solve --------------------------------------------------------------------------------
solve_p = Primitive("solve")


def solve(a, b):
    """x with a x = b for a (..., m, m), b (..., m, n) of equal batch dims."""
    a, b = promote("solve", _matrix_operand(a, "solve", square=True),
                   _matrix_operand(b, "solve"))
    return solve_p.bind(a, b)


@solve_p.def_abstract_eval
def _solve_abstract_eval(a, b):
    if a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2] or b.shape[-2] != a.shape[-1]:
        raise ValueError(f"solve: b {short(b)} must be (..., m, n) with the batch dims of "
                         f"a {short(a)}")
    if a.dtype != b.dtype:
        raise DTypeError(f"solve: dtypes differ: {short(a)} and {short(b)}")
    return ShapedArray(b.shape, b.dtype)


solve_p.def_impl(_host(_np_solve))


@solve_p.def_jvp
def _solve_jvp(primals, tangents):
    # dx = A^-1 (db - dA x)
    (a, b), (ta, tb) = primals, tangents
    x = solve_p.bind(a, b)
    rhs = tb
    if ta is not None:
        term = ew.neg(_mm(ta, x))
        rhs = term if rhs is None else ew.add(rhs, term)
    return x, None if rhs is None else solve_p.bind(a, rhs)


@solve_p.def_vjp
def _solve_vjp(ct, x, a, b):
    ct_b = solve_p.bind(_T(a), ct)
    return [ew.neg(_mm(ct_b, _T(x))), ct_b]


solve_p.def_vmap(_vmap_front(solve_p))


# --- inv ----------------------------------------------------------------------------------
inv_p = Primitive("inv")


def inv(a):
    return inv_p.bind(_matrix_operand(a, "inv", square=True))


inv_p.def_abstract_eval(_square_abstract_eval("inv"))
inv_p.def_impl(_host(lambda a: _np_solve(a, np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype),
                                                              a.shape))))


@inv_p.def_jvp
def _inv_jvp(primals, tangents):
    (a,), (t,) = primals, tangents
    y = inv_p.bind(a)
    return y, None if t is None else ew.neg(_mm(_mm(y, t), y))  # d inv = -Y dA Y


@inv_p.def_vjp
def _inv_vjp(ct, y, a):
    yt = _T(y)
    return [ew.neg(_mm(_mm(yt, ct), yt))]


inv_p.def_vmap(_vmap_front(inv_p))


# --- det / slogdet ------------------------------------------------------------------------
det_p = Primitive("det")


def det(a):
    return det_p.bind(_matrix_operand(a, "det", square=True))


@det_p.def_abstract_eval
def _det_abstract_eval(a):
    _square_abstract_eval("det")(a)
    return ShapedArray(a.shape[:-2], a.dtype)


det_p.def_impl(_host(_nan_on_failure(np.linalg.det)))


def _inv_t_contract(a, t):
    """tr(A^-1 dA) for a stack: sum(A^-T * dA) over the matrix axes."""
    nd = aval_of(a).ndim
    return reduce_sum(ew.mul(_T(inv(a)), t), (nd - 2, nd - 1))


@det_p.def_jvp
def _det_jvp(primals, tangents):
    # d det = det tr(A^-1 dA)  (NOTE: NaN at singular A)
    (a,), (t,) = primals, tangents
    d = det_p.bind(a)
    return d, None if t is None else ew.mul(d, _inv_t_contract(a, t))


@det_p.def_vjp
def _det_vjp(ct, d, a):
    return [ew.mul(_col(_col(ew.mul(ct, d))), _T(inv(a)))]


det_p.def_vmap(_vmap_front(det_p))

slogdet_p = Primitive("slogdet", multiple_results=True)


def slogdet(a):
    """[sign, log|det|] of a stack of square matrices."""
    return slogdet_p.bind(_matrix_operand(a, "slogdet", square=True))


@slogdet_p.def_abstract_eval
def _slogdet_abstract_eval(a):
    _square_abstract_eval("slogdet")(a)
    return [ShapedArray(a.shape[:-2], a.dtype),
            ShapedArray(a.shape[:-2], dtypes.real_dtype(a.dtype))]


slogdet_p.def_impl(_host(_nan_on_failure(lambda a: list(np.linalg.slogdet(a)))))


@slogdet_p.def_jvp
def _slogdet_jvp(primals, tangents):
    # d logabsdet = Re tr(A^-1 dA); complex: d sign = sign i Im tr(A^-1 dA) (0 for real)
    (a,), (t,) = primals, tangents
    out = slogdet_p.bind(a)
    if t is None:
        return out, [None, None]
    tr = _inv_t_contract(a, t)
    if not dtypes.is_complex(aval_of(a).dtype):
        return out, [None, tr]
    return out, [ew.mul(out[0], ew.complex(ew.zeros_like(ew.real(tr)), ew.imag(tr))),
                 ew.real(tr)]


@slogdet_p.def_vjp
def _slogdet_vjp(cts, out, a):
    # the transpose of the jvp: abar = (ct_logdet - i Re(i sign ct_sign)) A^-T
    coef = cts[1]
    if dtypes.is_complex(aval_of(a).dtype):
        i_sign = ew.mul(out[0], 1j)
        coef = ew.sub(coef, ew.mul(ew.real(ew.mul(i_sign, cts[0])), 1j))
    return [ew.mul(_col(_col(coef)), _T(inv(a)))]


slogdet_p.def_vmap(_vmap_front(slogdet_p))


# --- qr -------------------------------------------------------------------------------------
qr_p = Primitive("qr", multiple_results=True)


def qr(a, full_matrices: bool = False):
    """QR: q (..., m, k), r (..., k, n) with k = min(m, n) (reduced), or k = m
    (full_matrices: NumPy's mode='complete')."""
    a = _matrix_operand(a, "qr")
    m, n = aval_of(a).shape[-2:]
    return qr_p.bind(a, full_matrices=bool(full_matrices) and m > n)


@qr_p.def_abstract_eval
def _qr_abstract_eval(a, full_matrices=False):
    m, n = a.shape[-2:]
    k = m if full_matrices else min(m, n)
    return [ShapedArray(a.shape[:-2] + (m, k), a.dtype), ShapedArray(a.shape[:-2] + (k, n),
                                                                      a.dtype)]


qr_p.def_impl(_host(_nan_on_failure(lambda a, full_matrices=False: list(
    np.linalg.qr(a, mode="complete" if full_matrices else "reduced")))))


def _qr_check_tall(a, full_matrices=False):
    m, n = aval_of(a).shape[-2:]
    if m < n:
        raise NotImplementedError(f"qr: derivatives need m >= n, got {short(aval_of(a))}")
    _full_matrices_check("qr", a, full_matrices)


def _full_matrices_check(name, a, full_matrices):
    if full_matrices:  # (only set for non-square inputs)
        raise NotImplementedError(
            f"{name}: derivatives of the full_matrices / complete form of non-square "
            f"{short(aval_of(a))} are not implemented (nor in JAX); the reduced form has them")


@qr_p.def_jvp
def _qr_jvp(primals, tangents, full_matrices=False):
    # X = dA R^-1, C = Q^H X, Om = tril(C,-1) - tril(C,-1)^H (+ i Im diag(C) for complex):
    # dQ = Q (Om - C) + X, dR = (C - Om) R
    (a,), (t,) = primals, tangents
    q, r = qr_p.bind(a, full_matrices=full_matrices)
    if t is None:
        return [q, r], [None, None]
    _qr_check_tall(a, full_matrices)
    x = triangular_solve(r, t, left_side=False, lower=False)
    c = _mm(_H(q), x)
    low = _tril(c, -1)
    om = _qr_imag_diag(ew.sub(low, _H(low)), c)
    dq = ew.add(_mm(q, ew.sub(om, c)), x)
    dr = _mm(ew.sub(c, om), r)
    return [q, r], [dq, dr]


@qr_p.def_vjp
def _qr_vjp(cts, out, a, full_matrices=False):
    # the adjoint of the jvp: M = Rbar R^T - Q^T Qbar, N = M - tril(M - M^T, -1),
    # abar = (Qbar + Q N) R^-T; complex: ^H, N -= i Im diag(M), conj of that at conj(cts)
    _qr_check_tall(a, full_matrices)
    (ct_q, ct_r), (q, r) = cts, out
    ct_q, ct_r = ew.conj(ct_q), ew.conj(ct_r)
    m = ew.sub(_mm(ct_r, _H(r)), _mm(_H(q), ct_q))
    n = ew.sub(m, _qr_imag_diag(_tril(ew.sub(m, _H(m)), -1), m))
    g = ew.add(ct_q, _mm(q, n))
    return [ew.conj(triangular_solve(ew.conj(r), g, left_side=False, lower=False,
                                     transpose_a=True))]


def _qr_imag_diag(x, c):
    """x + i Im diag(c) (as a diagonal matrix) for complex c; x for real."""
    if not dtypes.is_complex(aval_of(c).dtype):
        return x
    return ew.add(x, _diag_embed(ew.complex(ew.zeros_like(ew.imag(_diag(c))),
                                            ew.imag(_diag(c)))))


qr_p.def_vmap(_vmap_front(qr_p))


# --- eigh ---------------------------------------------------------------------------------
eigh_p = Primitive("eigh", multiple_results=True)


def eigh(a, symmetrize_input=True):
    """[w, v]: eigenvalues ascending (..., n), eigenvectors as columns (..., n, n)."""
    a = _matrix_operand(a, "eigh", square=True)
    return eigh_p.bind(_sym(a) if symmetrize_input else a)


@eigh_p.def_abstract_eval
def _eigh_abstract_eval(a):
    _square_abstract_eval("eigh")(a)
    return [ShapedArray(a.shape[:-1], dtypes.real_dtype(a.dtype)), ShapedArray(a.shape, a.dtype)]


eigh_p.def_impl(_host(_nan_on_failure(lambda a: list(np.linalg.eigh(a, UPLO="L")))))


def _eigh_gaps(w):
    """F_ij = 1 / (w_j - w_i), 0 on the diagonal and at ties."""
    return _safe_recip_gap(ew.sub(_row(w), _col(w)))


@eigh_p.def_jvp
def _eigh_jvp(primals, tangents):
    # with S = V^H sym(dA) V: dw = Re diag(S), dV = V (F * S)
    (a,), (t,) = primals, tangents
    w, v = eigh_p.bind(a)
    if t is None:
        return [w, v], [None, None]
    s = _mm(_mm(_H(v), _sym(t)), v)
    return [w, v], [ew.real(_diag(s)), _mm(v, ew.mul(_eigh_gaps(w), s))]


@eigh_p.def_vjp
def _eigh_vjp(cts, out, a):
    # abar = sym(V (diag(wbar) + F * (V^T Vbar)) V^T); complex: conj of that with ^H, at
    # conj(Vbar) (wbar is real)
    (ct_w, ct_v), (w, v) = cts, out
    inner = ew.add(_diag_embed(ct_w), ew.mul(_eigh_gaps(w), _mm(_H(v), ew.conj(ct_v))))
    return [ew.conj(_sym(_mm(_mm(v, inner), _H(v))))]


eigh_p.def_vmap(_vmap_front(eigh_p))


# --- svd ------------------------------------------------------------------------------------
svd_p = Primitive("svd", multiple_results=True)


def svd(a, full_matrices: bool = False):
    """SVD [u (..., m, k), s (..., k) descending, vt (..., k, n)], k = min(m, n); with
    full_matrices u is (..., m, m) and vt (..., n, n)."""
    a = _matrix_operand(a, "svd")
    m, n = aval_of(a).shape[-2:]
    return svd_p.bind(a, full_matrices=bool(full_matrices) and m != n)


@svd_p.def_abstract_eval
def _svd_abstract_eval(a, full_matrices=False):
    m, n = a.shape[-2:]
    k, b = min(m, n), a.shape[:-2]
    return [ShapedArray(b + (m, m if full_matrices else k), a.dtype),
            ShapedArray(b + (k,), dtypes.real_dtype(a.dtype)),
            ShapedArray(b + (n if full_matrices else k, n), a.dtype)]


svd_p.def_impl(_host(_nan_on_failure(lambda a, full_matrices=False: list(
    np.linalg.svd(a, full_matrices=full_matrices)))))


def _svd_gaps(s):
    """F_ij = 1 / (s_j^2 - s_i^2), 0 on the diagonal and at ties."""
    s2 = ew.mul(s, s)
    return _safe_recip_gap(ew.sub(_row(s2), _col(s2)))


@svd_p.def_jvp
def _svd_jvp(primals, tangents, full_matrices=False):
    # dS = U^H dA V, ds = Re diag(dS); dU = U (F * (dS S + (dS S)^H) + D), dV = V (F * (S dS
    # + (S dS)^H)), D = diag(i Im(dS_kk) / s_k) (complex only: the phase JAX fixes)
    (a,), (t,) = primals, tangents
    u, s, vt = svd_p.bind(a, full_matrices=full_matrices)
    if t is None:
        return [u, s, vt], [None, None, None]
    _full_matrices_check("svd", a, full_matrices)
    m, n = aval_of(a).shape[-2:]
    v, f = _H(vt), _svd_gaps(s)
    ds_mat = _mm(_mm(_H(u), t), v)
    dss = ew.mul(ds_mat, _row(s))                        # dS S
    sds = ew.mul(_col(s), ds_mat)                        # S dS
    du = _mm(u, _svd_phase(ew.mul(f, ew.add(dss, _H(dss))), ds_mat, s))
    dv = _mm(v, ew.mul(f, ew.add(sds, _H(sds))))
    if m > n:  # the part of dA V outside span(U)
        dav = _mm(t, v)
        du = ew.add(du, ew.div(ew.sub(dav, _mm(u, _mm(_H(u), dav))), _row(s)))
    if n > m:
        datu = _mm(_H(t), u)
        dv = ew.add(dv, ew.div(ew.sub(datu, _mm(v, _mm(vt, datu))), _row(s)))
    return [u, s, vt], [du, ew.real(_diag(ds_mat)), _H(dv)]


def _svd_phase(x, ds_mat, s):
    """x + diag(i Im(dS_kk) / s_k) for complex dS (0 where s_k = 0); x for real."""
    if not dtypes.is_complex(aval_of(ds_mat).dtype):
        return x
    zero = ew.eq(s, 0)
    inv_s = ew.select(zero, ew.zeros_like(s), ew.div(1.0, ew.select(zero, ew.ones_like(s), s)))
    im = ew.mul(ew.imag(_diag(ds_mat)), inv_s)
    return ew.add(x, _diag_embed(ew.complex(ew.zeros_like(im), im)))


@svd_p.def_vjp
def _svd_vjp(cts, out, a, full_matrices=False):
    # J = F * (U^T Ubar), K = F * (V^T Vbar);
    # abar = U (diag(sbar) + (J + J^T) S + S (K + K^T)) V^T  (+ the m != n parts);
    # complex: ^H, plus diag(i Im(U^H Ubar)_kk / s_k) in the core, and conj of that at
    # conj(cts) (Vbar = conj(Vtbar)^H = Vtbar^T)
    _full_matrices_check("svd", a, full_matrices)
    (ct_u, ct_s, ct_vt), (u, s, vt) = cts, out
    m, n = aval_of(a).shape[-2:]
    ct_u = ew.conj(ct_u)
    v, ct_v, f = _H(vt), _T(ct_vt), _svd_gaps(s)
    uhu = _mm(_H(u), ct_u)
    j = ew.mul(f, uhu)
    k = ew.mul(f, _mm(vt, ct_v))
    core = ew.add(_diag_embed(ct_s), ew.add(ew.mul(ew.add(j, _H(j)), _row(s)),
                                            ew.mul(_col(s), ew.add(k, _H(k)))))
    core = _svd_phase(core, uhu, s)
    abar = _mm(_mm(u, core), vt)
    if m > n:
        perp = ew.sub(ct_u, _mm(u, uhu))
        abar = ew.add(abar, _mm(ew.div(perp, _row(s)), vt))
    if n > m:
        perp = ew.sub(ct_v, _mm(v, _mm(vt, ct_v)))
        abar = ew.add(abar, _mm(u, _H(ew.div(perp, _row(s)))))
    return [ew.conj(abar)]


svd_p.def_vmap(_vmap_front(svd_p))
