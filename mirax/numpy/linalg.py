"""mirax.numpy.linalg: NumPy's linalg names on the primitives of mirax/ops/linalg.py.

Functions accept stacks of matrices and broadcast batch dims like NumPy. norm follows the
derivative convention of API.md: its gradient at x = 0 is 0 (safe sqrt with a strong-zero
select), never NaN.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mirax.core import dtypes
from mirax.core.array import Array
from mirax.core.errors import ShapeError
from mirax.ops import elementwise as ew
from mirax.ops import linalg as la
from mirax.ops import reduction as red
from mirax.ops import shape as sh
from mirax.ops.common import (
    float_operand, normalize_axes, power_by_squaring, promote, short)
from mirax.numpy._core import matmul as mm
from mirax.ops.common import operand
from mirax.numpy._indexing import trace as tr, diagonal as dg
from mirax.numpy import cross as cr, tensordot as td

__all__ = ["norm", "inv", "solve", "det", "slogdet", "cholesky", "qr", "svd", "eigh",
           "eigvalsh", "matrix_power", "pinv", "matrix_rank", "svdvals", "matmul",
           "matrix_transpose", "vector_norm", "matrix_norm", "trace", "diagonal", "outer",
           "cross", "vecdot", "tensordot", "multi_dot", "cond", "lstsq", "tensorinv",
           "tensorsolve"]


class SlogdetResult(NamedTuple):
    sign: Array
    logabsdet: Array


class EighResult(NamedTuple):
    eigenvalues: Array
    eigenvectors: Array


class QRResult(NamedTuple):
    Q: Array
    R: Array


class SVDResult(NamedTuple):
    U: Array
    S: Array
    Vh: Array


def _batch_broadcast(a, b, op):
    """a (..., m, m) and b (..., m, n) with their batch dims broadcast together."""
    batch = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])) \
        if a.ndim > 2 or b.ndim > 2 else ()
    try:
        return (sh.broadcast_to(a, tuple(batch) + tuple(a.shape[-2:])),
                sh.broadcast_to(b, tuple(batch) + tuple(b.shape[-2:])))
    except ValueError:
        raise ShapeError(f"{op}: batch dims of {short(a)} and {short(b)} do not broadcast") \
            from None


# --- solvers and factorizations ------------------------------------------------------------
def inv(a):
    return la.inv(a)


def solve(a, b):
    """x with a @ x = b; b may be (..., m) (a vector) or (..., m, n)."""
    a, b = promote("solve", float_operand(a, "solve"), float_operand(b, "solve"))
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"solve: a must be square matrices (..., m, m), got {short(a)}")
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])
    if vector:
        b = sh.expand_dims(b, b.ndim)
    if b.shape[-2] != a.shape[-1]:
        raise ShapeError(f"solve: shapes {short(a)} and {short(b)} do not fit a @ x = b")
    a, b = _batch_broadcast(a, b, "solve")
    x = la.solve(a, b)
    return sh.squeeze(x, x.ndim - 1) if vector else x


def det(a):
    return la.det(a)


def slogdet(a):
    sign, logabsdet = la.slogdet(a)
    return SlogdetResult(sign, logabsdet)


def cholesky(a, upper=False):
    lo = la.cholesky(a)
    return la._T(lo) if upper else lo


def qr(a, mode="reduced"):
    if mode == "raw":
        raise NotImplementedError("qr: mode='raw' (Householder reflectors) is not supported; "
                                  "use 'reduced', 'complete' or 'r'")
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr: mode must be 'reduced', 'complete', 'r' or 'raw', got {mode!r}")
    q, r = la.qr(a, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """As jnp.linalg.svd (full_matrices=True by default; its derivatives for non-square
    inputs raise, as in JAX: pass full_matrices=False, or compute_uv=False for s alone)."""
    a = float_operand(a, "svd")
    u, s, vt = la.svd(a, full_matrices=full_matrices and compute_uv)
    return SVDResult(u, s, vt) if compute_uv else s


def svdvals(a):
    return la.svd(a)[1]


def eigh(a, UPLO="L", symmetrize_input=True):  # noqa: N803 (NumPy's name)
    a = float_operand(a, "eigh")
    if UPLO not in ("L", "U"):
        raise ValueError(f"eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    if UPLO == "U" and not symmetrize_input:
        a = la._T(a)
    w, v = la.eigh(a, symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eigvalsh(a, UPLO="L"):  # noqa: N803
    return eigh(a, UPLO).eigenvalues


def matmul(a, b):
    return mm(a, b)


def matrix_power(a, n):
    """a @ a @ ... (n times) by repeated squaring; negative n inverts first."""
    a, n = operand(a, "matrix_power"), int(n)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"matrix_power: expected square matrices, got {short(a)}")
    if n == 0:
        return sh.broadcast_to(la._eye(a.shape[-1], a.dtype), tuple(a.shape))
    if n < 0:
        a, n = la.inv(a), -n
    return power_by_squaring(a, n, la._mm)


def pinv(a, rtol=None):
    """Moore-Penrose pseudo-inverse via the SVD (singular values <= rtol * max cut)."""
    a = float_operand(a, "pinv")
    u, s, vt = la.svd(a)
    if rtol is None:
        rtol = 10 * max(a.shape[-2:]) * float(np.finfo(a.dtype).eps)
    cut = ew.mul(red.reduce_max(s, (s.ndim - 1,)), rtol)
    keep = ew.gt(s, sh.expand_dims(cut, cut.ndim))
    s_inv = ew.select(keep, ew.div(1.0, ew.select(keep, s, ew.ones_like(s))), ew.zeros_like(s))
    return la._mm(la._T(vt), ew.mul(la._col(s_inv), la._T(u)))


def matrix_rank(a, tol=None):
    a = float_operand(a, "matrix_rank")
    if a.ndim < 2:
        return ew.convert_element_type(red.reduce_max(ew.ne(a, 0), None), dtypes.int32)
    s = la.svd(a)[1]
    if tol is None:
        smax = red.reduce_max(s, (s.ndim - 1,))
        tol = ew.mul(smax, max(a.shape[-2:]) * float(np.finfo(a.dtype).eps))
    tol = sh.broadcast_to(ew.convert_element_type(tol, s.dtype), tuple(s.shape[:-1]))
    big = ew.convert_element_type(ew.gt(s, sh.expand_dims(tol, tol.ndim)), dtypes.int32)
    return red.reduce_sum(big, (big.ndim - 1,))


# --- norm ---------------------------------------------------------------------------------
def _safe_sqrt(s):
    """sqrt(s) whose derivative at s = 0 is 0 (strong-zero select around the sqrt)."""
    zero = ew.eq(s, 0)
    return ew.select(zero, ew.zeros_like(s), ew.sqrt(ew.select(zero, ew.ones_like(s), s)))


def _keep(out, shape, axes):
    return sh.reshape(out, tuple(1 if i in axes else d for i, d in enumerate(shape)))


def _vector_norm(x, ord, axes):
    ax = ew.abs(x)
    if ord is None or ord == 2:
        return _safe_sqrt(red.reduce_sum(ew.mul(x, x), axes))
    if ord == 1:
        return red.reduce_sum(ax, axes)
    if ord == np.inf:
        return red.reduce_max(ax, axes)
    if ord == -np.inf:
        return red.reduce_min(ax, axes)
    if ord == 0:
        return red.reduce_sum(ew.convert_element_type(ew.ne(x, 0), x.dtype), axes)
    if isinstance(ord, str):
        raise ValueError(f"norm: invalid ord {ord!r} for a vector norm")
    # general p: (sum |x|^p)^(1/p); the outer power is guarded like the sqrt (0 at 0)
    s = red.reduce_sum(ew.pow(ax, float(ord)), axes)
    zero = ew.eq(s, 0)
    return ew.select(zero, ew.zeros_like(s),
                     ew.pow(ew.select(zero, ew.ones_like(s), s), 1.0 / float(ord)))


def _matrix_norm(x, ord, axes):
    r, c = axes
    if ord in (None, "fro"):
        return _safe_sqrt(red.reduce_sum(ew.mul(x, x), axes))
    if ord in (1, -1):  # max/min absolute column sum
        sums = red.reduce_sum(ew.abs(x), (r,))
        return (red.reduce_max if ord == 1 else red.reduce_min)(sums, (c - (c > r),))
    if ord in (np.inf, -np.inf):  # max/min absolute row sum
        sums = red.reduce_sum(ew.abs(x), (c,))
        return (red.reduce_max if ord == np.inf else red.reduce_min)(sums, (r - (r > c),))
    if ord in ("nuc", 2, -2):
        xm = sh.transpose(x, [i for i in range(x.ndim) if i not in (r, c)] + [r, c])
        s = la.svd(xm)[1]
        last = (s.ndim - 1,)
        if ord == "nuc":
            return red.reduce_sum(s, last)
        return (red.reduce_max if ord == 2 else red.reduce_min)(s, last)
    raise ValueError(f"norm: invalid ord {ord!r} for a matrix norm")


def norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002 (NumPy's name)
    """Vector or matrix norm (NumPy semantics); gradient 0 at x = 0."""
    x = float_operand(x, "norm")
    if axis is None:
        if ord is None:
            axes = tuple(range(x.ndim))
            out = _safe_sqrt(red.reduce_sum(ew.mul(x, x), axes))
            return _keep(out, x.shape, axes) if keepdims else out
        if x.ndim not in (1, 2):
            raise ValueError(f"norm: ord={ord!r} needs a 1-d or 2-d input or an axis, got "
                             f"{short(x)}")
        axis = tuple(range(x.ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (int(axis),)
    axes = tuple(normalize_axes(a, x.ndim, "norm", x)[0] for a in axis)
    if len(set(axes)) != len(axes):
        raise ValueError(f"norm: repeated axis in {axis}")
    if len(axes) == 1:
        out = _vector_norm(x, ord, axes)
    elif len(axes) == 2:
        out = _matrix_norm(x, ord, axes)
    else:
        raise ValueError(f"norm: axis must name 1 or 2 axes, got {axis}")
    return _keep(out, x.shape, tuple(sorted(axes))) if keepdims else out


# --- the array-API names of jnp.linalg -----------------------------------------------------
def _matrices(x, op):
    x = float_operand(x, op)
    if x.ndim < 2:
        raise ValueError(f"{op}: expected matrices (..., m, n), got {short(x)}")
    return x


def matrix_transpose(x):
    return la._T(_matrices(x, "matrix_transpose"))


def vector_norm(x, axis=None, keepdims=False, ord=2):  # noqa: A002
    """The vector norm over `axis` (None: all of x, flattened)."""
    x = float_operand(x, "vector_norm")
    if axis is None:
        out = _vector_norm(x, ord, tuple(range(x.ndim)))
        return _keep(out, x.shape, tuple(range(x.ndim))) if keepdims else out
    return norm(x, ord=ord, axis=axis, keepdims=keepdims)


def matrix_norm(x, keepdims=False, ord="fro"):  # noqa: A002
    """The matrix norm of each (..., m, n) matrix."""
    x = _matrices(x, "matrix_norm")
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def trace(x, offset=0, dtype=None):
    return tr(_matrices(x, "trace"), offset, -2, -1, dtype)


def diagonal(x, offset=0):
    return dg(_matrices(x, "diagonal"), offset, -2, -1)


def outer(x1, x2):
    x1, x2 = promote("outer", float_operand(x1, "outer"), float_operand(x2, "outer"))
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"outer: expected two vectors, got {short(x1)} and {short(x2)}")
    return ew.mul(la._col(x1), la._row(x2))


def cross(x1, x2, axis=-1):
    x1, x2 = float_operand(x1, "cross"), float_operand(x2, "cross")
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(f"cross: vectors of 3 along axis {axis}, got {short(x1)} and "
                         f"{short(x2)}")
    return cr(x1, x2, axis=axis)


def vecdot(x1, x2, axis=-1):
    x1, x2 = promote("vecdot", float_operand(x1, "vecdot"), float_operand(x2, "vecdot"))
    prod = ew.mul(x1, x2)
    return red.reduce_sum(prod, (normalize_axes(axis, prod.ndim, "vecdot", prod)[0],))


def tensordot(x1, x2, axes=2):
    return td(x1, x2, axes)


def multi_dot(arrays):
    """arrays[0] @ arrays[1] @ ... in the cheapest order (NumPy's dynamic programme over
    the chain's shapes); the first may be a vector (a row), the last a vector (a column)."""
    xs = [float_operand(a, "multi_dot") for a in arrays]
    if len(xs) < 2:
        raise ValueError(f"multi_dot: expected at least 2 arrays, got {len(xs)}")
    first, last = xs[0].ndim == 1, xs[-1].ndim == 1
    if first:
        xs[0] = la._row(xs[0])
    if last:
        xs[-1] = la._col(xs[-1])
    if any(x.ndim != 2 for x in xs):
        raise ValueError("multi_dot: expected 2-d arrays (the first and last may be 1-d), "
                         f"got {', '.join(short(x) for x in xs)}")
    dims = [xs[0].shape[0]] + [x.shape[1] for x in xs]
    for a, b in zip(xs, xs[1:]):
        if a.shape[1] != b.shape[0]:
            raise ValueError(f"multi_dot: {short(a)} @ {short(b)} do not fit")
    n = len(xs)
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j], split[i][j] = min(
                (cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1], k)
                for k in range(i, j))

    def chain(i, j):
        if i == j:
            return xs[i]
        k = split[i][j]
        return la._mm(chain(i, k), chain(k + 1, j))
    out = chain(0, n - 1)
    if first:
        out = sh.squeeze(out, 0)
    if last:
        out = sh.squeeze(out, out.ndim - 1)
    return out


def cond(x, p=None):
    """The condition number: s_max / s_min for p None or 2 (s_min / s_max for -2), else
    norm(x, p) * norm(inv(x), p)."""
    x = _matrices(x, "cond")
    if p in (None, 2, -2):
        s = la.svd(x)[1]
        last = (s.ndim - 1,)
        hi, lo = red.reduce_max(s, last), red.reduce_min(s, last)
        return ew.div(hi, lo) if p != -2 else ew.div(lo, hi)
    return ew.mul(norm(x, ord=p, axis=(-2, -1)), norm(la.inv(x), ord=p, axis=(-2, -1)))


class LstsqResult(NamedTuple):
    x: Array
    residuals: Array
    rank: Array
    s: Array


def lstsq(a, b, rcond=None, *, numpy_resid=False):
    """Least squares via the SVD, as jnp.linalg.lstsq: (x, residuals, rank, s) with
    singular values <= rcond * s_max cut (default rcond: eps * max(m, n)); residuals
    are the squared norms of b - a x per column ((1,) for a vector b; numpy_resid=True:
    empty where NumPy's are, rank < n or m <= n, which needs a concrete rank)."""
    a, b = promote("lstsq", float_operand(a, "lstsq"), float_operand(b, "lstsq"))
    if a.ndim != 2 or b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise ValueError(f"lstsq: expected a (m, n) and b (m,) or (m, k), got {short(a)} "
                         f"and {short(b)}")
    vector = b.ndim == 1
    if vector:
        b = la._col(b)
    m, n = a.shape
    if rcond is None:
        rcond = float(np.finfo(a.dtype).eps) * max(m, n)
    u, s, vt = la.svd(a)
    cut = ew.mul(red.reduce_max(s, (0,)), float(rcond)) if s.shape[0] else s
    keep = ew.gt(s, cut)
    s_inv = ew.select(keep, ew.div(1.0, ew.select(keep, s, ew.ones_like(s))),
                      ew.zeros_like(s))
    x = la._mm(la._T(vt), ew.mul(la._col(s_inv), la._mm(la._T(u), b)))
    rank = red.reduce_sum(ew.convert_element_type(keep, dtypes.int32), (0,))
    r = ew.sub(b, la._mm(a, x))
    resid = red.reduce_sum(ew.mul(r, r), (0,))  # (k,); (1,) for a vector b, as JAX
    if numpy_resid and (m <= n or int(rank) < n):
        resid = resid[:0]
    return LstsqResult(sh.squeeze(x, 1) if vector else x, resid, rank, s)


def tensorinv(a, ind=2):
    """b with tensordot(b, a, ind) the identity, as np.linalg.tensorinv."""
    a = float_operand(a, "tensorinv")
    out, inn = tuple(a.shape[:ind]), tuple(a.shape[ind:])
    rows, cols = int(np.prod(out)), int(np.prod(inn))
    if ind <= 0 or rows != cols:
        raise ValueError(f"tensorinv: prod(a.shape[:ind]) must equal prod(a.shape[ind:]), "
                         f"got {short(a)} with ind={ind}")
    return sh.reshape(la.inv(sh.reshape(a, (rows, cols))), inn + out)


def tensorsolve(a, b, axes=None):
    """x with tensordot(a, x, x.ndim) = b, as np.linalg.tensorsolve."""
    a, b = promote("tensorsolve", float_operand(a, "tensorsolve"),
                   float_operand(b, "tensorsolve"))
    if axes is not None:
        axes = [ax % a.ndim for ax in axes]
        a = sh.transpose(a, [i for i in range(a.ndim) if i not in axes] + axes)
    xshape = tuple(a.shape[b.ndim:])
    rows, cols = int(np.prod(a.shape[:b.ndim])), int(np.prod(xshape))
    if tuple(a.shape[:b.ndim]) != tuple(b.shape) or rows != cols:
        raise ValueError(f"tensorsolve: {short(a)} and {short(b)} do not make a square system")
    x = la.solve(sh.reshape(a, (rows, cols)), sh.reshape(b, (rows, 1)))
    return sh.reshape(x, xshape)
