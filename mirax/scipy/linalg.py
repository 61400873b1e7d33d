"""mirax.scipy.linalg: jax.scipy.linalg's names on mirax's linear-algebra primitives
(mirax/ops/linalg.py, mirax/ops/lu.py) and mirax.numpy, so every function differentiates.

scipy conventions: cholesky / cho_factor return the upper factor unless lower=True;
lu returns (p, l, u) with a = p @ l @ u; lu_factor's pivots are LAPACK's 0-based row
interchanges; the overwrite_* / check_finite arguments are accepted and ignored (as JAX).
Functions take stacks of matrices (leading batch dims) like JAX.
"""
from __future__ import annotations

from math import comb

import numpy as np

import mirax.numpy as mnp
from mirax.ops import linalg as la
from mirax.ops.lu import lu as _lu_prim
from mirax.scipy.stats._common import promote_args_inexact
from mirax.transforms.jvp import jvp

__all__ = ["cholesky", "cho_factor", "cho_solve", "solve_triangular", "lu", "lu_factor",
           "lu_solve", "expm", "expm_frechet", "block_diag", "eigh", "svd", "qr", "inv", "det",
           "solve", "polar", "toeplitz", "hankel", "circulant", "companion", "hilbert", "pascal",
           "invpascal", "invhilbert", "helmert", "hadamard", "leslie", "fiedler",
           "fiedler_companion", "convolution_matrix"]


def _matrices(a, op):
    (a,) = promote_args_inexact(op, a)
    if a.ndim < 2:
        raise ValueError(f"{op}: expected a (stack of) matrices, got shape {a.shape}")
    return a


def _square(a, op):
    a = _matrices(a, op)
    if a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{op}: expected square matrices (..., n, n), got shape {a.shape}")
    return a


def _mT(x):
    return mnp.swapaxes(x, -1, -2)


def _solve_batched(solve, a, b, op):
    """Apply `solve(a, b2)` for b a vector (n,) or matrices (..., n, k), broadcasting batch
    dims of a (..., n, n) and b."""
    a, b = promote_args_inexact(op, a, b)
    n = a.shape[-1]
    vector = b.ndim == 1
    b2 = b[:, None] if vector else b
    if b2.shape[-2] != n:
        raise ValueError(f"{op}: b of shape {b.shape} does not fit a of shape {a.shape}")
    batch = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b2.shape[:-2]))
    a_b = mnp.broadcast_to(a, tuple(batch) + tuple(a.shape[-2:]))
    b_b = mnp.broadcast_to(b2, tuple(batch) + tuple(b2.shape[-2:]))
    x = solve(a_b, b_b)
    return x[..., 0] if vector else x


# --- Cholesky ---------------------------------------------------------------------------------
def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """The Cholesky factor: upper U with a = U^T U (default, as scipy) or lower L."""
    a = _square(a, "cholesky")
    lo = la.cholesky(a, symmetrize_input=False)
    return lo if lower else _mT(lo)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """x with a x = b from cho_factor(a)."""
    c, lower = c_and_lower

    def solve(c, b):
        if lower:   # L L^T x = b
            y = la.triangular_solve(c, b, left_side=True, lower=True)
            return la.triangular_solve(c, y, left_side=True, lower=True, transpose_a=True)
        y = la.triangular_solve(c, b, left_side=True, lower=False, transpose_a=True)
        return la.triangular_solve(c, y, left_side=True, lower=False)
    return _solve_batched(solve, c, b, "cho_solve")


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     debug=None, check_finite=True):
    """x with op(a) x = b, op = identity (trans 0 / 'N'), transpose (1 / 'T') or conjugate
    transpose (2 / 'C'); only the lower or upper triangle of a is read."""
    if trans in (0, "N"):
        transpose = False
    elif trans in (1, "T", 2, "C"):
        transpose = True
    else:
        raise ValueError(f"solve_triangular: invalid trans {trans!r}; expected 0, 1, 2, 'N', "
                         "'T' or 'C'")
    return _solve_batched(
        lambda a, b: la.triangular_solve(a, b, left_side=True, lower=lower,
                                         transpose_a=transpose, unit_diagonal=unit_diagonal),
        a, b, "solve_triangular")


# --- LU -------------------------------------------------------------------------------------------
def _unpack_lu(packed):
    m, n = packed.shape[-2:]
    k = min(m, n)
    lo = mnp.tril(packed, -1)[..., :, :k] + mnp.eye(m, k, dtype=packed.dtype)
    return lo, mnp.triu(packed)[..., :k, :]


def lu(a, permute_l=False, overwrite_a=False, check_finite=True):
    """(p, l, u) with a = p @ l @ u (or (p @ l, u) with permute_l)."""
    a = _matrices(a, "lu")
    packed, _, perm = _lu_prim(a)
    m = a.shape[-2]
    p = (perm[..., None, :] == mnp.arange(m, dtype=perm.dtype)[:, None]).astype(a.dtype)
    lo, up = _unpack_lu(packed)
    if permute_l:
        return mnp.matmul(p, lo), up
    return p, lo, up


def lu_factor(a, overwrite_a=False, check_finite=True):
    """(lu, piv): L and U packed in one matrix, piv the 0-based row interchanges."""
    a = _matrices(a, "lu_factor")
    packed, piv, _ = _lu_prim(a)
    return packed, piv


def _pivots_to_permutation(piv, m):
    """The row permutation that the interchanges piv (..., k) apply to arange(m), with
    selects (so piv may be traced): step i swaps entries i and piv[i]."""
    piv = mnp.asarray(piv).astype(mnp.int32)
    pos = mnp.arange(m, dtype=mnp.int32)
    perm = mnp.broadcast_to(pos, tuple(piv.shape[:-1]) + (m,))
    for i in range(piv.shape[-1]):
        p = piv[..., i:i + 1]
        at_p = mnp.take_along_axis(perm, p, axis=-1)
        at_i = perm[..., i:i + 1]
        perm = mnp.where(pos == i, at_p, mnp.where(pos == p, at_i, perm))
    return perm


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """x with a x = b (trans 0), a^T x = b (1) or a^H x = b (2), from lu_factor(a)."""
    packed, piv = lu_and_piv
    if trans not in (0, 1, 2):
        raise ValueError(f"lu_solve: trans must be 0, 1 or 2, got {trans!r}")
    (packed,) = promote_args_inexact("lu_solve", packed)
    m = packed.shape[-1]
    perm = _pivots_to_permutation(piv, m)
    p = (perm[..., :, None] == mnp.arange(m)).astype(packed.dtype)   # p @ x = x[perm]

    def solve(packed, b):
        pb = mnp.broadcast_to(p, tuple(packed.shape[:-2]) + (m, m))
        if trans == 0:    # P a = L U: x = U^-1 L^-1 P b
            y = la.triangular_solve(packed, mnp.matmul(pb, b), left_side=True, lower=True,
                                    unit_diagonal=True)
            return la.triangular_solve(packed, y, left_side=True, lower=False)
        # a^T = U^T L^T P: x = P^T L^-T U^-T b
        y = la.triangular_solve(packed, b, left_side=True, lower=False, transpose_a=True)
        y = la.triangular_solve(packed, y, left_side=True, lower=True, transpose_a=True,
                                unit_diagonal=True)
        return mnp.matmul(_mT(pb), y)
    return _solve_batched(solve, packed, b, "lu_solve")


# --- solvers, inverses, decompositions -------------------------------------------------------
def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, debug=False,
          check_finite=True, assume_a="gen"):
    """x with a x = b; assume_a 'pos' solves through a Cholesky factor of a (read from the
    `lower` triangle), 'gen' / 'sym' / 'her' by LU (as JAX)."""
    if assume_a not in ("gen", "sym", "her", "pos"):
        raise ValueError(f"solve: assume_a must be one of 'gen', 'sym', 'her', 'pos'; got "
                         f"{assume_a!r}")
    if assume_a != "pos":
        return mnp.linalg.solve(a, b)
    a = _square(a, "solve")
    full = mnp.tril(a) + _mT(mnp.tril(a, -1)) if lower else mnp.triu(a) + _mT(mnp.triu(a, 1))
    return cho_solve((la.cholesky(full, symmetrize_input=False), True), b)


def inv(a, overwrite_a=False, check_finite=True):
    return la.inv(_square(a, "inv"))


def det(a, overwrite_a=False, check_finite=True):
    return la.det(_square(a, "det"))


def eigh(a, b=None, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         turbo=True, eigvals=None, type=1, check_finite=True):  # noqa: A002 (scipy's name)
    """(w, v) of a symmetric matrix read from its `lower` (or upper) triangle; w ascending."""
    if b is not None:
        raise NotImplementedError("eigh: only the b=None case is implemented (as JAX)")
    if type != 1 or eigvals is not None:
        raise NotImplementedError("eigh: only type=1 and eigvals=None are implemented (as JAX)")
    a = _square(a, "eigh")
    full = mnp.tril(a) + _mT(mnp.tril(a, -1)) if lower else mnp.triu(a) + _mT(mnp.triu(a, 1))
    w, v = la.eigh(full, symmetrize_input=False)
    return w if eigvals_only else (w, v)


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    return mnp.linalg.svd(_matrices(a, "svd"), full_matrices=full_matrices,
                          compute_uv=compute_uv)


def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """mode 'full' (q square), 'economic' (reduced), 'r' (only the full r, as a 1-tuple)."""
    if pivoting:
        raise NotImplementedError("qr: pivoting=True is not implemented")
    if mode not in ("full", "economic", "r"):
        raise ValueError(f"qr: mode must be 'full', 'economic' or 'r'; got {mode!r}")
    a = _matrices(a, "qr")
    q, r = mnp.linalg.qr(a, mode="reduced" if mode == "economic" else "complete")
    return (r,) if mode == "r" else (q, r)


def polar(a, side="right", *, method="qdwh", eps=None, max_iterations=None):
    """(u, p) with a = u p (side 'right', p (n, n)) or a = p u ('left', p (m, m)), u with
    orthonormal columns and p positive semidefinite; computed from the SVD whatever the
    `method` (scipy's algorithm)."""
    if side not in ("right", "left"):
        raise ValueError(f"polar: side must be 'right' or 'left', got {side!r}")
    a = _matrices(a, "polar")
    w, s, vh = mnp.linalg.svd(a, full_matrices=False)
    u = mnp.matmul(w, vh)
    if side == "right":
        p = mnp.matmul(_mT(vh) * s[..., None, :], vh)
    else:
        p = mnp.matmul(w * s[..., None, :], _mT(w))
    return u, p


# --- expm -----------------------------------------------------------------------------------
_PADE = {
    3: (120.0, 60.0, 12.0, 1.0),
    5: (30240.0, 15120.0, 3360.0, 420.0, 30.0, 1.0),
    7: (17297280.0, 8648640.0, 1995840.0, 277200.0, 25200.0, 1512.0, 56.0, 1.0),
    9: (17643225600.0, 8821612800.0, 2075673600.0, 302702400.0, 30270240.0, 2162160.0,
        110880.0, 3960.0, 90.0, 1.0),
    13: (6.476475253248e+16, 3.238237626624e+16, 7771770303897600.0, 1187353796428800.0,
         129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
         40840800.0, 960960.0, 16380.0, 182.0, 1.0),
}
# (degrees, the 1-norm bounds between them, the largest norm the last degree takes):
# Higham (2005) as scipy and JAX use them
_EXPM_PLAN = {np.dtype(np.float64): ((3, 5, 7, 9, 13), (0.01495585217958292, 0.253939833006323,
                                                        0.9504178996162932, 2.097847961257068),
                                     5.371920351148152),
              np.dtype(np.float32): ((3, 5, 7), (0.4258730016922831, 1.880152677804762),
                                     3.92572478313866)}


def _pade(a, degree, eye):
    """(U, V): the odd and even parts of the degree-`degree` Pade numerator at a."""
    b = _PADE[degree]
    a2 = mnp.matmul(a, a)
    if degree == 13:
        a4 = mnp.matmul(a2, a2)
        a6 = mnp.matmul(a4, a2)
        u = mnp.matmul(a, mnp.matmul(a6, b[13] * a6 + b[11] * a4 + b[9] * a2)
                       + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
        v = (mnp.matmul(a6, b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4
             + b[2] * a2 + b[0] * eye)
        return u, v
    powers = [eye, a2]
    for _ in range(2, degree // 2 + 1):
        powers.append(mnp.matmul(powers[-1], a2))
    odd = sum(b[2 * i + 1] * p for i, p in enumerate(powers))
    even = sum(b[2 * i] * p for i, p in enumerate(powers))
    return mnp.matmul(a, odd), even


def expm(A, *, upper_triangular=False, max_squarings=16):  # noqa: N803 (scipy's name)
    """The matrix exponential by scaling and squaring with a Pade approximant (the degree
    picked by the 1-norm, as scipy / JAX); NaN when more than max_squarings squarings would
    be needed. Every candidate approximant is computed and the right one selected, so the
    function is branch-free (it batches, jits and differentiates as one expression)."""
    a = _square(A, "expm")
    if a.dtype not in _EXPM_PLAN:
        raise TypeError(f"expm: expected float32 or float64 matrices, got {a.dtype}")
    degrees, bounds, maxnorm = _EXPM_PLAN[a.dtype]
    norm1 = mnp.max(mnp.sum(mnp.abs(a), axis=-2), axis=-1)
    n_sq = mnp.maximum(0.0, mnp.floor(mnp.log2(norm1 / maxnorm)))
    n_sq = mnp.where(mnp.isfinite(n_sq), n_sq, 0.0)
    scaled = a / (2.0 ** n_sq)[..., None, None]
    eye = mnp.eye(a.shape[-1], dtype=a.dtype)
    idx = mnp.zeros(norm1.shape, dtype=mnp.int32)
    for bound in bounds:
        idx = idx + (norm1 > bound).astype(mnp.int32)
    p = q = None
    for k, degree in enumerate(degrees):
        u, v = _pade(scaled, degree, eye)
        pick = (idx == k)[..., None, None]
        p = u + v if p is None else mnp.where(pick, u + v, p)
        q = v - u if q is None else mnp.where(pick, v - u, q)
    r = solve_triangular(q, p) if upper_triangular else mnp.linalg.solve(q, p)
    for i in range(max_squarings):
        take = (i < n_sq)[..., None, None]
        live = mnp.where(take, r, 0.0)   # squarings not taken square zeros (no overflow)
        r = mnp.where(take, mnp.matmul(live, live), r)
    return mnp.where((n_sq > max_squarings)[..., None, None], mnp.nan, r)


def expm_frechet(A, E, *, method=None, compute_expm=True):  # noqa: N803
    """The Frechet derivative of expm at A in direction E (a jvp), with expm(A) first when
    compute_expm."""
    a, e = promote_args_inexact("expm_frechet", A, E)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2] or tuple(a.shape) != tuple(e.shape):
        raise ValueError(f"expm_frechet: A and E must be square matrices of one shape, got "
                         f"{a.shape} and {e.shape}")
    value, deriv = jvp(expm, (a,), (e,))
    return (value, deriv) if compute_expm else deriv


# --- constructions ------------------------------------------------------------------------------
def block_diag(*arrs):
    """The block-diagonal matrix of the given scalars, vectors (rows) and matrices."""
    if not arrs:
        return mnp.zeros((1, 0))
    mats = [mnp.atleast_2d(mnp.asarray(a)) for a in arrs]
    bad = [i for i, m in enumerate(mats) if m.ndim > 2]
    if bad:
        raise ValueError(f"block_diag: arguments must have at most 2 dimensions, got shape "
                         f"{mats[bad[0]].shape} at argument {bad[0]}")
    dt = mnp.result_type(*mats)
    total = sum(m.shape[1] for m in mats)
    rows, col = [], 0
    for m in mats:
        rows.append(mnp.pad(m.astype(dt), ((0, 0), (col, total - col - m.shape[1]))))
        col += m.shape[1]
    return mnp.concatenate(rows, axis=0)


def toeplitz(c, r=None):
    """The Toeplitz matrix with first column c and first row r (r = conj(c) by default; r[0]
    is ignored)."""
    c = mnp.ravel(mnp.asarray(c))
    r = mnp.conj(c) if r is None else mnp.ravel(mnp.asarray(r))
    vals = mnp.concatenate([c[::-1], r[1:]])           # vals[len(c) - 1 - i + j]
    i = np.arange(c.shape[0])[:, None]
    j = np.arange(r.shape[0])[None, :]
    return vals[c.shape[0] - 1 - i + j]


def hankel(c, r=None):
    """The Hankel matrix with first column c and last row r (zeros by default)."""
    c = mnp.ravel(mnp.asarray(c))
    r = mnp.zeros_like(c) if r is None else mnp.ravel(mnp.asarray(r))
    vals = mnp.concatenate([c, r[1:]])
    i = np.arange(c.shape[0])[:, None]
    j = np.arange(r.shape[0])[None, :]
    return vals[i + j]


def circulant(c):
    """The circulant matrix with first column c."""
    c = mnp.ravel(mnp.asarray(c))
    n = c.shape[0]
    return c[(np.arange(n)[:, None] - np.arange(n)[None, :]) % n]


def companion(a):
    """The companion matrix of the polynomial with coefficients a (highest first)."""
    (a,) = promote_args_inexact("companion", a)
    a = mnp.ravel(a)
    if a.shape[0] < 2:
        raise ValueError(f"companion: a needs at least 2 coefficients, got shape {a.shape}")
    n = a.shape[0] - 1
    first = -a[1:] / a[0]
    below = mnp.eye(n - 1, n, dtype=a.dtype)
    return mnp.concatenate([first[None, :], below], axis=0)


def hilbert(n):
    i = np.arange(n, dtype=np.float32)
    return mnp.asarray(1.0 / (i[:, None] + i[None, :] + 1.0))


def _static(m, dtype=None):
    """A constant matrix built on the host (n is static), as a float32 array by default."""
    return mnp.asarray(np.asarray(m).astype(dtype or np.float32))


def pascal(n, kind=None):
    """The n x n Pascal matrix: 'symmetric' (default), 'lower' or 'upper'."""
    kind = kind or "symmetric"
    if kind not in ("symmetric", "lower", "upper"):
        raise ValueError(f"pascal: kind must be 'symmetric', 'lower' or 'upper', got {kind!r}")
    i = np.arange(n)
    lower = np.array([[comb(int(r), int(c)) if c <= r else 0 for c in i] for r in i], float)
    m = {"lower": lower, "upper": lower.T, "symmetric": lower @ lower.T}[kind]
    return _static(m)


def invpascal(n, kind=None):
    """The inverse of pascal(n, kind)."""
    kind = kind or "symmetric"
    if kind not in ("symmetric", "lower", "upper"):
        raise ValueError(f"invpascal: kind must be 'symmetric', 'lower' or 'upper', got "
                         f"{kind!r}")
    i = np.arange(n)
    lower = np.array([[(-1) ** int(r - c) * comb(int(r), int(c)) if c <= r else 0 for c in i]
                      for r in i], float)
    m = {"lower": lower, "upper": lower.T, "symmetric": lower.T @ lower}[kind]
    return _static(m)


def invhilbert(n):
    """The exact inverse of hilbert(n) (as floats)."""
    m = np.array([[(-1) ** (i + j) * (i + j + 1) * comb(n + i, n - j - 1) * comb(n + j, n - i - 1)
                   * comb(i + j, i) ** 2 for j in range(n)] for i in range(n)], float)
    return _static(m)


def helmert(n, full=False):
    """The Helmert matrix (n - 1 x n, or n x n with full=True)."""
    h = np.tril(np.ones((n, n)), -1) - np.diag(np.arange(n))
    d = np.arange(n) * np.arange(1, n + 1)
    h[0] = 1.0
    d[0] = n
    m = h / np.sqrt(d)[:, None]
    return _static(m if full else m[1:])


def hadamard(n, dtype=int):
    """The Sylvester Hadamard matrix of order n (a power of two)."""
    if n < 1 or n & (n - 1):
        raise ValueError(f"hadamard: n must be a positive power of 2, got {n}")
    m = np.array([[1]])
    while m.shape[0] < n:
        m = np.block([[m, m], [m, -m]])
    dt = np.int32 if dtype is int else np.dtype(dtype)
    return _static(m, dt)


def leslie(f, s):
    """The Leslie matrix of fecundities f (n,) and survival rates s (n - 1,)."""
    f, s = promote_args_inexact("leslie", f, s)
    if f.ndim != 1 or s.ndim != 1 or s.shape[0] != f.shape[0] - 1:
        raise ValueError(f"leslie: f must be (n,) and s (n - 1,), got {f.shape} and {s.shape}")
    below = mnp.concatenate([mnp.diag(s), mnp.zeros((s.shape[0], 1), dtype=s.dtype)], axis=1)
    return mnp.concatenate([f[None, :], below], axis=0)


def fiedler(a):
    """The symmetric Fiedler matrix |a_i - a_j|."""
    (a,) = promote_args_inexact("fiedler", a)
    a = mnp.ravel(a)
    return mnp.abs(a[:, None] - a[None, :])


def fiedler_companion(a):
    """The Fiedler companion matrix of the polynomial with coefficients a (highest first):
    scipy's pentadiagonal layout of -a[1:] / a[0] and ones."""
    (a,) = promote_args_inexact("fiedler_companion", a)
    a = mnp.ravel(a)
    if a.shape[0] < 2:
        raise ValueError(f"fiedler_companion: a needs at least 2 coefficients, got {a.shape}")
    a = a / a[0]
    n = a.shape[0] - 1
    if n == 1:
        return -a[1:].reshape(1, 1)
    c = mnp.zeros((n, n), dtype=a.dtype)
    c = c.at[np.arange(3, n, 2), np.arange(1, n - 2, 2)].set(1.0)
    c = c.at[np.arange(2, n, 2), np.arange(1, n - 1, 2)].set(-a[3::2])
    c = c.at[np.arange(0, n - 2, 2), np.arange(2, n, 2)].set(1.0)
    c = c.at[np.arange(0, n - 1, 2), np.arange(1, n, 2)].set(-a[2::2])
    c = c.at[0, 0].set(-a[1])
    return c.at[1, 0].set(1.0)


def convolution_matrix(a, n, mode="full"):
    """The matrix A with A @ v = convolve(a, v, mode) for v of length n."""
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"convolution_matrix: mode must be 'full', 'same' or 'valid', got "
                         f"{mode!r}")
    a = mnp.ravel(mnp.asarray(a))
    m = a.shape[0]
    if n <= 0 or m == 0:
        raise ValueError("convolution_matrix: n and len(a) must be positive")
    rows = m + n - 1
    # full[i, j] = a[i - j] where 0 <= i - j < m
    idx = np.arange(rows)[:, None] - np.arange(n)[None, :]
    inside = (idx >= 0) & (idx < m)
    full = mnp.where(inside, mnp.concatenate([a, mnp.zeros((1,), a.dtype)])[
        np.where(inside, idx, m)], 0)
    if mode == "full":
        return full
    out_len = max(m, n) if mode == "same" else max(m, n) - min(m, n) + 1
    start = (rows - out_len) // 2
    return full[start:start + out_len]
