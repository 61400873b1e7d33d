"""Big unfused elementwise ops and reductions of a CPU plan, split over the thread pool.

lower.py asks `elementwise(u, node)` (after loops.compile_single, which takes big
arithmetic ops where numba's native threads are ready) / `reduction(node)` for a kernel
when a node's value is big (MIN_SIZE elements or more) and its dtypes are plain floats;
None leaves the node to the one-thread NumPy call. The split is threads.py's: parts of
GRAIN (GRAIN_CHEAP) elements (rows of the leading axis, whole rows per part), the same at
every thread count.
- elementwise: each part computes its slice of the output; values are bitwise those of the
  whole-array call (a ufunc computes every element on its own).
- reductions keeping axis 0: each part reduces its rows; bitwise equal as well.
- matrix products: a grid of blocks on numba's native threads, one single-threaded BLAS
  call a block (knob cpu_gemm "native"), whole on BLAS's own threads ("blas"), or one part
  per thread on the pool (rows, columns or matrices of a stack), each one BLAS call on one
  BLAS thread ("pool"); "auto", the default, picks by the thread count (threads.py says
  why).
- reductions over axis 0 (and maybe others): each part's partial is reduced like the whole
  array, the partials combined in part order: equal to NumPy's call up to rounding (the
  summation is cut at the part boundaries), and the same at every thread count.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from mirax.backends.cpu import loops
from mirax.backends.cpu.threads import GEMM_FLOPS_PER_THREAD, blas, n_threads, native, parts, \
    pool
from mirax.core import config

# Elements per part: a part should take ~50 us or more (waking a thread and the Python
# around a part cost ~10-20 us): an exp or tanh on 64k floats does, an add needs 256k.
GRAIN = 1 << 16              # transcendental functions
GRAIN_CHEAP = 1 << 18        # arithmetic, comparisons, reductions
MIN_SIZE = 2 * GRAIN         # at least two parts, else the op stays on the calling thread
_COSTLY = {"exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "tanh", "sin", "cos",
           "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "arcsinh", "arccosh",
           "arctanh", "power", "arctan2", "cbrt", "logaddexp", "true_divide", "sqrt"}
MIN_ROWS = 32        # a product is split into parts of at least this many rows (or columns)
# Products are cut into blocks of at least NATIVE_GEMM_FLOPS on numba's native threads: one
# compiled call, each block one call of the BLAS library's gemm (no GIL, no pool).
NATIVE_GEMM_FLOPS = 1 << 21
# From NATIVE_GEMM_THREADS threads on, a product under NATIVE_GEMM_MANY_FLOPS runs whole
# instead, on BLAS's own threads, one a SMALL_GEMM_FLOPS (one thread below that). On the
# 16-core Xeon, each product alone with BLAS at one thread a block (one-off scripts, ms,
# one thread / the best grid of 2 to 16 blocks): 64 x 256 x 384 (W3's, 12.6 MFLOP) 0.142 /
# 0.19; 128 x 256 x 256 (17 MFLOP) 0.122 / 0.087; 64 x 512 x 512 (34 MFLOP) 0.26 / 0.34;
# 128 x 784 x 512 (103 MFLOP) 0.83 / 1.01; 256 x 512 x 512 (134 MFLOP) 1.32 / 0.27; 128 x
# 784 x 1024 2.24 / 0.42 (OpenBLAS's own 16 threads: 0.05-0.06 for W3's, but they spin
# after each call). Every block's BLAS call takes the library's buffer lock
# (blas_memory_alloc), on which short concurrent calls queue: two threads running 64 x 256
# x 96 products were no faster than one there (2-core machines gain 1.5-2x). In the suite,
# each setting in its own process (`python benchmarks/suite.py --threads 0 --no-torch
# --no-eager --only W7`, two rounds), W7's 33.5 MFLOP products made jacfwd 0.38-0.40 ms in
# blocks and 0.40-0.46 whole, so they keep the blocks; a bound of 134 MFLOP (the 34-103
# MFLOP products whole) tied in the VAE's epoch (84-94 ms either way, `python
# benchmarks/training.py --threads 0 --only vae`).
NATIVE_GEMM_MANY_FLOPS = 1 << 25
# Those products ran on one thread while OpenBLAS's threads spun 0.1 s after each call;
# with the spin shortened (threads.Blas.set_spin) its threads pay for them: on the 16-core
# Xeon W3 (64 x 256 x 384 products, 6 threads each) took 1.52-1.82 ms against 2.02-3.02
# on one thread, and 9.3 / 3.2 at 1 MFLOP a thread (12 threads; `python
# benchmarks/suite.py --threads 0 --no-torch --no-eager --only W1,W3,W5,W7`, two A/Bs of
# two rounds, each setting in its own process; W1, W5 and W7 within their noise).
SMALL_GEMM_FLOPS = 1 << 21
# cpu_gemm "auto": the native grid from this many threads, BLAS's own threads below.
# Measured (each mode in its own process, `MIRAX_CPU_GEMM=... python benchmarks/suite.py
# --threads 0 --no-eager --no-torch`, ms): on 2 cores BLAS's threads are faster (W1 9.8
# against 14.5, W5 62 against 72: a block's single-threaded call packs its operands
# alone, where BLAS's threads share them); on the 16-core Xeon the grid is (W5 16.6-16.9
# against 23-50, W1 2.7-3.2 against 3.2-3.6, W3 1.8-1.9 against 1.9-2.2: BLAS's threads
# spin after each call and take the cores from the kernels that follow; JAX's own step
# in the same process took 43 ms against 12-13). 4 and 8 threads were not measured.
NATIVE_GEMM_THREADS = 8
# C's block (row part i, column part j) = A[rows i] B[:, columns j], for part p = i tn + j
# of a tm x tn grid (row and column edges in `rows` / `cols`; run_parts passes p as the
# part's start, its stop unused); a, b C- or F-contiguous (trans 111 or 112: row-major, as
# BLAS reads them, or their transposes), c C-contiguous
_GEMM_GRID = """
def kernel(a, b, c, ta, tb, lda, ldb, n, k, rows, cols, tn, p, _):
    one, zero = _np.DTYPE(1), _np.DTYPE(0)
    r0, r1 = rows[p // tn], rows[p // tn + 1]
    c0, c1 = cols[p % tn], cols[p % tn + 1]
    _gemm(ta, tb, r1 - r0, c1 - c0, k, one, a[r0:r1], lda, b[:, c0:c1], ldb, zero,
          c[r0:r1, c0:c1], n)
    return 0
"""
_GEMM_GRID_WRAP = """

@_parts
def kernel_parts(a, b, c, ta, tb, lda, ldb, n, k, rows, cols, tn, starts, stops, p0, p1):
    for p in _nb.prange(p0, p1):
        kernel(a, b, c, ta, tb, lda, ldb, n, k, rows, cols, tn, starts[p], stops[p])
    return 0
"""

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_REDUCE = {"reduce_sum": np.add, "reduce_max": np.maximum, "reduce_min": np.minimum}


def _rows_split(shape, grain: int = GRAIN_CHEAP) -> tuple[int, int] | None:
    """(rows per part, number of rows) splitting `shape` along axis 0, or None when axis 0
    is too short to give two parts."""
    if not shape:
        return None
    row = math.prod(shape[1:])
    step = max(1, grain // max(row, 1))
    return (step, shape[0]) if shape[0] >= 2 * step else None


def elementwise(u, node):
    """A parallel kernel for the ufunc node (called as `k(*ins)` or `k(*ins, out=buf)`),
    or None when it is too small or its operands do not split along axis 0."""
    o = node.outputs[0].aval
    shape, dt = tuple(o.shape), np.dtype(o.dtype)
    if math.prod(shape) < MIN_SIZE or len(node.outputs) != 1:
        return None
    ins = [v.aval for v in node.inputs]
    if any(np.dtype(a.dtype) not in _FLOATS or np.dtype(a.dtype) != np.dtype(ins[0].dtype)
           for a in ins) or (dt != np.dtype(ins[0].dtype) and dt != np.dtype(np.bool_)):
        return None
    split = _rows_split(shape, GRAIN if u.__name__ in _COSTLY else GRAIN_CHEAP)
    if split is None:
        return None
    step, n = split
    nd = len(shape)
    # operands with the output's axis 0 are sliced; the others broadcast whole
    sliced = []
    for a in ins:
        if len(a.shape) > nd:
            return None
        sliced.append(len(a.shape) == nd and a.shape[0] == shape[0] and shape[0] != 1)
    ps = parts(n, step)

    def run(*xs, out=None):
        if out is None:
            out = np.empty(shape, dt)

        def part(i):
            s, e = ps[i]
            u(*(x[s:e] if c else x for x, c in zip(xs, sliced)), out=out[s:e])
        pool.map(part, len(ps))
        return out
    return run


def reduction(node):
    """A parallel kernel for a reduce_sum / max / min node over a big float array, or
    None. Split along axis 0: where it is kept each part writes its own rows (in NumPy's
    own order: bitwise equal), else each part's partial is combined in part order."""
    u = _REDUCE.get(node.prim.name)
    if u is None:
        return None
    x = node.inputs[0].aval
    shape, dt = tuple(x.shape), np.dtype(x.dtype)
    size = math.prod(shape)
    if dt not in _FLOATS or size < MIN_SIZE:
        return None
    axes = tuple(sorted(node.params["axes"]))
    if not axes:
        return None
    out_shape = tuple(node.outputs[0].aval.shape)
    split = _rows_split(shape)
    if split is None:
        return None
    if 0 not in axes:   # rows kept: each part reduces its own rows, in NumPy's order
        ps = parts(split[1], split[0])

        def rows(x):
            out = np.empty(out_shape, dt)

            def part(i):
                s, e = ps[i]
                u.reduce(x[s:e], axis=axes, out=out[s:e])
            pool.map(part, len(ps))
            return out
        return rows
    # NOTE: not split along a kept inner axis: NumPy reduces a column slice of rows
    # element by element (20 ms against 0.3 ms for the sum over rows of f32[1024,1024])
    ps = parts(split[1], split[0])

    def partials(x):
        ys = pool.map(lambda i: u.reduce(x[ps[i][0]:ps[i][1]], axis=axes), len(ps))
        acc = ys[0]
        for y in ys[1:]:    # in part order: the same sum at every thread count
            acc = u(acc, y)
        return np.asarray(acc, dt).reshape(out_shape)
    return partials


# --- matrix products -----------------------------------------------------------------------
def _split(extent: int, t: int) -> list[tuple[int, int]]:
    """`extent` cut into t near-equal ranges on multiples of 16 (BLAS kernel tiles)."""
    step = -(-extent // t)
    step = -(-step // 16) * 16
    return parts(extent, step)


def matmul(x, y):
    """x @ y (2-d) on up to n_threads() threads, by the knob cpu_gemm: cut into a grid of
    blocks on numba's native threads, one single-threaded BLAS call a block, as many blocks
    as the product has NATIVE_GEMM_FLOPS ("native": _native_matmul); whole on BLAS's own
    threads, as many as it has GEMM_FLOPS_PER_THREAD ("blas", and "native" where there
    are no native threads); or the output's rows or columns split over the pool, one
    single-threaded BLAS call a part ("pool"). "auto" (the default) is "native" from
    NATIVE_GEMM_THREADS threads, "blas" below; there a product under
    NATIVE_GEMM_MANY_FLOPS runs whole on BLAS's threads, one a SMALL_GEMM_FLOPS. Products
    too small for BLAS's threads take the native grid in every mode; products too small
    for two blocks run on the calling thread. Each output element is the same BLAS dot
    product as in the whole call on one thread (OpenBLAS blocks K alike for every M and N),
    but for blocks so small that OpenBLAS takes its small-matrix kernels, which round
    differently. Every part packs its own rows of x and columns of y: the operand a split
    shares is copied into each part's packed buffers."""
    m, k = x.shape
    n = y.shape[1]
    threads, flops = n_threads(), 2 * m * k * n
    t = min(threads, flops // GEMM_FLOPS_PER_THREAD)
    gemm = config.get("cpu_gemm")
    if gemm == "auto":
        gemm = "native" if threads >= NATIVE_GEMM_THREADS else "blas"
    whole = threads >= NATIVE_GEMM_THREADS and flops < NATIVE_GEMM_MANY_FLOPS   # no grid
    if gemm == "native" and whole:
        t = min(threads, flops // SMALL_GEMM_FLOPS)   # (on BLAS's threads instead)
    if t > 1 and gemm == "pool":
        return _pool_matmul(x, y, t)
    if (gemm == "native" or t <= 1) and not whole:
        out = _native_matmul(x, y, threads)
        if out is not None:
            return out
    return blas.call(t, np.matmul, x, y) if t > 1 else np.matmul(x, y)


def _pool_matmul(x, y, t: int):
    """x @ y with its rows (or columns) split into t parts on the pool. Of the MLP
    products of benchmarks/training.py on 2 cores, 128 x 1024 x 1024 took 2.47 ms split by
    rows (slower than one thread, 2.18) and 1.61 ms by columns, as OpenBLAS's own 2
    threads."""
    (m, n), dt = (x.shape[0], y.shape[1]), np.result_type(x, y)
    if m >= MIN_ROWS * t and (m > n or n < MIN_ROWS * t):
        ps = _split(m, t)
        out = np.empty((m, n), dt)
        pool.map(lambda i: np.matmul(x[ps[i][0]:ps[i][1]], y, out=out[ps[i][0]:ps[i][1]]),
                 len(ps))
        return out
    if n >= MIN_ROWS * t:
        ps = _split(n, t)
        out = np.empty((m, n), dt)
        pool.map(lambda i: np.matmul(x, y[:, ps[i][0]:ps[i][1]],
                                     out=out[:, ps[i][0]:ps[i][1]]), len(ps))
        return out
    return np.matmul(x, y)


def _stored(a):
    """(a as BLAS reads it, its trans flag, its leading dimension)."""
    if a.flags.c_contiguous:
        return a, 111, max(1, a.shape[1])
    if a.flags.f_contiguous:
        return a, 112, max(1, a.shape[0])
    a = np.ascontiguousarray(a)
    return a, 111, max(1, a.shape[1])


@functools.lru_cache(maxsize=1024)
def _grid(m: int, n: int, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The row and column edges (block i spans edges[i]:edges[i + 1]) of an m x n product
    cut into at most t blocks of at least MIN_ROWS rows and columns (on multiples of 16),
    and the blocks' indices (run_parts' starts; its stops unused): as many blocks as
    allowed, and of those grids the one whose blocks pack the least (each block packs its
    rows of the left operand and its columns of the right one: tn m + tm n elements a row
    of K). Cached: a plan asks for every product on every call (the search took 76 us for
    16 threads)."""
    best = None
    for tm in range(1, max(1, min(t, m // MIN_ROWS)) + 1):
        tn = max(1, min(t // tm, n // MIN_ROWS))
        rows, cols = _split(m, tm), _split(n, tn)
        key = (len(rows) * len(cols), -(len(cols) * m + len(rows) * n))
        if best is None or key > best[0]:
            best = key, rows, cols
    rows, cols = best[1], best[2]
    edges = [np.array([s for s, _ in ps] + [ps[-1][1]], np.int64) for ps in (rows, cols)]
    blocks = np.arange(len(rows) * len(cols), dtype=np.int64)
    for e in (*edges, blocks):
        e.flags.writeable = False   # (shared by every call of this shape)
    return edges[0], edges[1], blocks


def _native_matmul(x, y, threads: int):
    """x @ y in a grid of blocks on native threads (_GEMM_GRID), as many as the product
    has NATIVE_GEMM_FLOPS and the `threads` allow, or None where it does not pay (fewer
    than two blocks) or does not apply (dtypes, numba, the library's gemm). (From
    NATIVE_GEMM_THREADS threads, `matmul` keeps products under NATIVE_GEMM_MANY_FLOPS
    off the grid.)"""
    m, k = x.shape
    n = y.shape[1]
    t = min(threads, 2 * m * k * n // NATIVE_GEMM_FLOPS)
    dt = np.result_type(x, y)
    if t <= 1 or k == 0 or dt not in _FLOATS or x.dtype != dt or y.dtype != dt or \
            not native.ready() or not loops.available():
        return None
    rows, cols, blocks = _grid(m, n, t)
    src = _gemm_grid_source(dt)
    if len(blocks) < 2 or src is None:
        return None
    (a, ta, lda), (b, tb, ldb) = _stored(x), _stored(y)
    out = np.empty((m, n), dt)
    loops.run_gemm_parts(src, (a, b, out, ta, tb, lda, ldb, n, k, rows, cols, len(cols) - 1),
                         blocks, blocks, t)
    return out


@functools.cache
def _gemm_grid_source(dt):
    gemm = loops.gemm_source(dt)
    return None if gemm is None else \
        _GEMM_GRID.replace("DTYPE", dt.name) + gemm + _GEMM_GRID_WRAP


def matmul_stack(x, y):
    """x @ y for stacks (b, m, k) @ (b, k, n): the stack split over the threads when it has
    a product per thread (attention heads), else each product split (matmul)."""
    b, m, k = x.shape
    n = y.shape[2]
    t = min(n_threads(), (2 * b * m * k * n) // GEMM_FLOPS_PER_THREAD)
    if t <= 1:
        return np.matmul(x, y)
    out = np.empty((b, m, n), np.result_type(x, y))
    if b >= t:
        ps = parts(b, -(-b // t))
        pool.map(lambda i: np.matmul(x[ps[i][0]:ps[i][1]], y[ps[i][0]:ps[i][1]],
                                     out=out[ps[i][0]:ps[i][1]]), len(ps))
    else:
        for i in range(b):
            out[i] = matmul(x[i], y[i])
    return out
