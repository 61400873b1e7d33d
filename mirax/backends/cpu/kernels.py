"""CPU kernels the backend claims instead of a primitive's reference impl.

Two kinds, both computing what the reference impl computes:
- `specialize(node)`: a kernel built for one graph node at lowering time, when the static
  shapes let it skip per-call work (dot_general: the transposes, reshapes and sizes are
  worked out once; the BLAS calls are the reference impl's, so results are bitwise equal;
  a contraction of size 1 is an outer product, exact: stacks of them (per-example
  gradients) a compiled loop over the examples in parts (einsums on the pool without
  numba; W2 of benchmarks/suite.py, 128 products of 64 x 128: 0.31 ms as one einsum,
  0.13 as the loop on one thread), else one einsum; fusion: the
  compiled or cache-blocked loops; 2-d convolutions: im2col in cache-sized blocks by a
  compiled loop and a product per block, which the loop itself asks of the BLAS
  library's gemm (loops.gemm_source), equal up to the products' rounding).
- `NATIVE[name]`: a faster kernel for any call (eager too). index_select gathers rows and
  index_add scatters them with compiled loops where numba is present (gathers.py); without
  numba index_add adds each block of rows into the flat output with one 1-d `np.add.at`
  (NumPy's fast path); both accumulate in index order, bitwise equal to the reference. gelu (tanh
  form), silu, softplus and their backwards run as one compiled loop per part in float32
  where numba is present (vecmath.py's tanh, logistic, exp and log1p: within a few ulp
  of NumPy's); gelu without numba in cache-sized blocks of NumPy calls with in-place
  temporaries (equal up to rounding).
  float32 attention without mask or bias is one compiled call over the (batch, head)
  pairs: each pair's products by the BLAS library's gemm, each score row's softmax and
  its backward in one pass (softmax's backward over the last axis too); float32
  layer_norm and its backward run as compiled rows (float64 statistics: within rounding
  of the reference).
  fft runs with scipy.fft where SciPy is installed (its pocketfft keeps float32 /
  complex64 and vectorizes: several times NumPy's speed at large sizes; equal up to
  rounding), else NumPy's, the reference.
  Compiled loops run their parts on numba's native threads where they are ready
  (loops.run_parts), other blocks on the thread pool (threads.py). Big matrix products
  run on BLAS's own threads (or split over the pool), mid-size ones split on native
  threads (parallel.matmul).
Anything outside a kernel's fast case (dtypes, shapes) goes to the reference impl.
"""
from __future__ import annotations

import functools
import math
from typing import Callable

import numpy as np
from mirax.backends.cpu import gathers, loops, norms
from mirax.core.primitive import registry
from mirax.ops.graph_ops import valid_rows
from mirax.ops.nn import split_affine

from mirax.core import dtypes

try:  # optional: a faster FFT than NumPy's (same algorithm family, SIMD, single precision)
    import scipy.fft as _scipy_fft
except ImportError:  # pragma: no cover - SciPy is a test dependency
    _scipy_fft = None

from mirax.backends.cpu import parallel
from mirax.backends.cpu.threads import chain_threads, n_threads, native, parts, pool

BLOCK = 1 << 16   # elements per block of the blocked elementwise kernels (fits L2)
ROWS_BLOCK = 1 << 15  # elements per block of index_add's row scatter
_FAST = (np.dtype(np.float32), np.dtype(np.float64))

NATIVE: dict[str, Callable] = {}


def _native(name):
    def register(fn):
        NATIVE[name] = fn
        return fn
    return register


def impl_of(prim) -> Callable:
    """The function the CPU runs for `prim` (a claimed kernel, else the reference)."""
    return NATIVE.get(prim.name, prim.impl)


# --- primitives whose impl is a ufunc ----------------------------------------------------
# Primitives whose impl checks the dtype first (integer semantics) but is a plain ufunc
# (under the plan's errstate block) on floating-point outputs.
_FLOAT_UFUNCS = {"div": np.true_divide, "pow": np.power}


def ufunc_of(prim, node=None):
    """(ufunc, needs_errstate) when `prim`'s CPU impl is a ufunc, or wraps one only to
    silence floating-point warnings (or, given the `node`, is one for its dtypes); else
    (None, False)."""
    impl = prim.impl
    if isinstance(impl, np.ufunc):
        return impl, False
    u = getattr(impl, "ufunc", None)
    if isinstance(u, np.ufunc):
        return u, True
    u = _FLOAT_UFUNCS.get(prim.name)
    if u is not None and node is not None and len(node.outputs) == 1 and all(
            np.dtype(v.aval.dtype).kind in "fc" for v in (*node.inputs, *node.outputs)):
        return u, True
    return None, False


# --- dot_general, specialized per node ---------------------------------------------------
# outer products of examples b in [s, e): out[b] = x[b] y[b]^T (one multiply an element)
_OUTER = """
def kernel(x, y, out, s, e):
    for b in range(s, e):
        xb, yb, ob = x[b], y[b], out[b]
        for i in range(xb.size):
            xi, oi = xb[i], ob[i]
            for j in range(yb.size):
                oi[j] = xi * yb[j]
    return 0
""" + loops.PARTS_OF_3


def _dot_general(node):
    (lc, rc), (lb, rb) = node.params["dimension_numbers"]
    pref = node.params.get("preferred_element_type")
    la, ra = node.inputs[0].aval, node.inputs[1].aval
    dt = np.dtype(la.dtype)
    if np.dtype(ra.dtype) != dt or dt not in _FAST or (pref is not None and
                                                       np.dtype(pref) != dt):
        return None
    lf = tuple(i for i in range(len(la.shape)) if i not in lc and i not in lb)
    rf = tuple(i for i in range(len(ra.shape)) if i not in rc and i not in rb)
    pa, pb = tuple(lb) + lf + tuple(lc), tuple(rb) + tuple(rc) + rf
    size = (lambda shape, axes: math.prod(shape[a] for a in axes))
    b, m, k, n = size(la.shape, lb), size(la.shape, lf), size(la.shape, lc), size(ra.shape, rf)
    out_shape = tuple(node.outputs[0].aval.shape)
    ta = None if pa == tuple(range(len(pa))) else pa
    tb = None if pb == tuple(range(len(pb))) else pb
    if k == 1:  # outer products (per-example weight grads): exact products, no BLAS calls
        sa, sb = (b, m) if lb else (m,), (b, n) if lb else (n,)
        subs = "bi,bj->bij" if lb else "i,j->ij"
        ps = parts(b, max(1, parallel.GRAIN_CHEAP // (m * n))) if lb else []

        def outer(x, y):
            x = (x if ta is None else x.transpose(ta)).reshape(sa)
            y = (y if tb is None else y.transpose(tb)).reshape(sb)
            if lb and loops.available():   # stacks of examples as compiled loops
                out = np.empty((b, m, n), dt)
                loops.run_parts(_OUTER, (np.ascontiguousarray(x), np.ascontiguousarray(y),
                                         out), *loops.even_bounds(b, out.nbytes),
                                n_threads())
            elif len(ps) < 2:
                return np.einsum(subs, x, y).reshape(out_shape)
            else:                            # ... or einsums on the pool
                out = np.empty((b, m, n), dt)
                pool.map(lambda i: np.einsum(subs, x[ps[i][0]:ps[i][1]],
                                             y[ps[i][0]:ps[i][1]], out=out[ps[i][0]:ps[i][1]]),
                         len(ps))
            return out.reshape(out_shape)
        return outer
    # products on as many threads as their size pays for (parallel.matmul)
    if lb:  # stacked: contiguous stacks so that every matrix goes to BLAS
        sa, sb = (b, m, k), (b, k, n)

        def run(x, y):
            x = np.ascontiguousarray(x if ta is None else x.transpose(ta)).reshape(sa)
            y = np.ascontiguousarray(y if tb is None else y.transpose(tb)).reshape(sb)
            return parallel.matmul_stack(x, y).reshape(out_shape)
        return run
    sa, sb = (m, k), (k, n)
    plain = (ta is None and tb is None and la.shape == sa and ra.shape == sb)
    if plain:
        return parallel.matmul

    def run(x, y):  # 2-d matmul takes transposed views as they are (BLAS trans flags)
        x = (x if ta is None else x.transpose(ta)).reshape(sa)
        y = (y if tb is None else y.transpose(tb)).reshape(sb)
        return parallel.matmul(x, y).reshape(out_shape)
    return run


# --- convolutions: im2col by a compiled loop, a block of rows at a time -----------------------
# Rows r0.. of cols, one per (a, u0, u1); each row holds x[a, h, w, :] for every (v0, v1) at
# (h, w) = u * su + v * sv - lo on the input grid dilated by ld (0 outside it, or between
# its dilated entries). x is channels-last and contiguous: each (v0, v1) copies one run of z.
# Without a dilated input (ld = 1) no division is left in the loop, and the rows' (a, u)
# are counted up (the columns of benchmarks/training.py's ResNet, 16x16x16x16 by 3x3: 0.31
# -> 0.14 ms on one core; its jitted forward conv on 2 cores 0.59-0.70 -> 0.50 ms).
_IM2COL = """
def kernel(x, cols, r0, u0_n, u1_n, v0_n, v1_n, su0, su1, sv0, sv1, lo0, lo1, ld0, ld1):
    h_n, w_n, z_n = x.shape[1], x.shape[2], x.shape[3]
    plain = ld0 == 1 and ld1 == 1   # no dilated input: no divisions
    q = r0
    a, u = q // (u0_n * u1_n), q % (u0_n * u1_n)
    u0, u1 = u // u1_n, u % u1_n
    for r in range(cols.shape[0]):
        row = cols[r]
        for v0 in range(v0_n):
            p0 = u0 * su0 + v0 * sv0 - lo0
            if plain:
                h = p0
                inside = p0 >= 0 and h < h_n
            else:
                h = p0 // ld0
                inside = p0 >= 0 and p0 % ld0 == 0 and h < h_n
            for v1 in range(v1_n):
                o = (v0 * v1_n + v1) * z_n
                p1 = u1 * su1 + v1 * sv1 - lo1
                if plain:
                    w = p1
                    hit = inside and p1 >= 0 and w < w_n
                else:
                    w = p1 // ld1
                    hit = inside and p1 >= 0 and p1 % ld1 == 0 and w < w_n
                if hit:
                    src = x[a, h, w]
                    for z in range(z_n):
                        row[o + z] = src[z]
                else:
                    for z in range(z_n):
                        row[o + z] = 0
        u1 += 1   # the next row's (a, u0, u1)
        if u1 == u1_n:
            u1 = 0
            u0 += 1
            if u0 == u0_n:
                u0 = 0
                a += 1
"""
# Each part of the rows: its columns into a buffer of its own, then one BLAS product of
# them, y[rows] = cols @ w (forward) or y[part] = cols^T @ w[rows] (a weight's gradient):
# the parts on numba's native threads, one BLAS thread each, in one call from Python
_CONV_PARTS = """


@_parts
def kernel_parts(x, w, y, forward, u0_n, u1_n, v0_n, v1_n, su0, su1, sv0, sv1, lo0, lo1,
                 ld0, ld1, starts, stops, p0, p1):
    width, o = v0_n * v1_n * x.shape[3], w.shape[1]
    one, zero = _np.DTYPE(1), _np.DTYPE(0)
    for p in _nb.prange(p0, p1):
        r0, r1 = starts[p], stops[p]
        cols = _np.empty((r1 - r0, width), x.dtype)
        kernel(x, cols, r0, u0_n, u1_n, v0_n, v1_n, su0, su1, sv0, sv1, lo0, lo1, ld0, ld1)
        if forward:   # (row-major, no transposes)
            _gemm(101, 111, 111, r1 - r0, o, width, one, cols.ctypes.data, width,
                  w.ctypes.data, o, zero, y[r0:r1].ctypes.data, o)
        else:         # (row-major, cols transposed)
            _gemm(101, 112, 111, width, o, r1 - r0, one, cols.ctypes.data, width,
                  w[r0:r1].ctypes.data, o, zero, y[p].ctypes.data, o)
    return 0
"""
CONV_BLOCK = 1 << 19   # bytes of columns a block (L2-sized: copied, then multiplied in cache)
CONV_PARTIALS = 1 << 26   # bytes of a weight gradient's per-block products, at most
CONV_DEPTH = 256   # rows a weight gradient's block has at least (its products' depth)
# A thread takes a run of blocks with at least this much of the product's work (and as
# much copying): the small ResNet's 16-channel forward (19 MFLOP) ran its 16 blocks on the
# device's 16 cores in 0.95 ms, on 4 threads 0.50 ms (its training epoch 242 -> 157 ms)
CONV_FLOPS_PER_THREAD = 1 << 22


def _conv(node):
    """2-d conv_general_dilated (one feature group, float32/64; numba present) as blocks
    of im2col rows, each copied by a compiled loop (_IM2COL) into a cache-sized buffer and
    multiplied there by one BLAS call: the blocks in one compiled call on numba's native
    threads, which calls the BLAS library's gemm itself (_CONV_PARTS; without a CBLAS
    symbol to call, NumPy's product of each block on the thread pool). It computes
    out[b, o, P] = sum over c, K of x[b, c, P s + K d] w[o, c, K] (strides s, kernel
    dilation d, on the padded, dilated input) in one of two orientations, as the
    reference impl:
    - the kernel has no more positions than the output (a forward pass, an input's
      gradient): rows (b, P), columns (K, c), times w as [(K, c), o];
    - else (a weight's gradient, whose "kernel" is the output's cotangent): rows (c, K),
      columns (P, b); each block's transpose times its rows of w as [(c, K), o], the
      blocks' products added in block order (blocks of a fixed size: the same values at
      every thread count).
    Either way the product comes out channels-last, and the columns (9x the input for a
    3x3 kernel) never leave the cache. The reference impl copies all its columns with
    NumPy (runs of the image's width) and multiplies channels-first.
    `python benchmarks/conv.py --threads 2` (ms, jitted, 2 cores; before -> after, JAX):
    16x16x16x16 -> 16 forward 1.58 -> 0.69 (0.39), forward + backward 4.13 -> 1.88
    (1.61); 64x16x16x32 -> 32 9.02 -> 3.01 (2.54), 24.0 -> 12.8 (13.8); 32x32x32x64 -> 64
    34.9 -> 17.1 (25.6), 160 -> 63 (144). The gemm called from the compiled blocks on
    native threads (no hand-offs to the pool's Python threads, no GIL): 16x16x16x16 -> 16
    forward 0.19-0.26 -> 0.125 ms, forward + backward 0.63-0.67 -> 0.44; 64x16x16x32 -> 32
    1.3-1.9 -> 1.05-1.1, 4.1-4.2 -> 3.5-3.7 (2 cores, A/B pairs of a jitted conv
    alone); 256 channels unchanged (6.0-6.4, 20)."""
    lhs, rhs, out = node.inputs[0].aval, node.inputs[1].aval, node.outputs[0].aval
    dt = np.dtype(lhs.dtype)
    if dt not in _FAST or np.dtype(rhs.dtype) != dt or len(lhs.shape) != 4 or \
            node.params["feature_group_count"] != 1 or 0 in (*lhs.shape, *rhs.shape,
                                                             *out.shape) or \
            not loops.available():
        return None
    p = node.params
    s, d, ld = p["window_strides"], p["rhs_dilation"], p["lhs_dilation"]
    lo = tuple(pad[0] for pad in p["padding"])
    o, k_sp, out_sp = rhs.shape[0], tuple(rhs.shape[2:]), tuple(out.shape[2:])
    forward = math.prod(k_sp) <= math.prod(out_sp)
    # rows (a, u) by columns (v, z) of x as [a, h, w, z]
    u_sp, v_sp, su, sv = (out_sp, k_sp, s, d) if forward else (k_sp, out_sp, d, s)
    z = lhs.shape[1] if forward else lhs.shape[0]
    rows = (lhs.shape[0] if forward else lhs.shape[1]) * math.prod(u_sp)
    width = math.prod(v_sp) * z
    block = max(1, CONV_BLOCK // (width * dt.itemsize))   # rows
    args = (*u_sp, *v_sp, *su, *sv, *lo, *ld)
    flops = 2 * rows * width * o

    def threads() -> int:
        """The threads the convolution's product pays for (CONV_FLOPS_PER_THREAD each)."""
        return max(1, min(n_threads(), flops // CONV_FLOPS_PER_THREAD))

    gemm = loops.gemm_source(dt)
    src = None if gemm is None else \
        _IM2COL + gemm + _CONV_PARTS.replace("DTYPE", dt.name)

    def on_threads(blocks, x, w, y, forward, product):
        """The product of each block of rows, its columns copied first: in one call on
        native threads, each block's columns in a buffer of its own and one call of the
        BLAS library's gemm (_CONV_PARTS); without that gemm, blocks on the pool, each
        thread a run of blocks in one buffer, `product(i, cols)` one NumPy call each."""
        if src is not None:
            loops.run_gemm_parts(src, (x, w, y, forward, *args), *loops.bounds(blocks),
                                 threads())
            return
        kernel = loops.compiled(_IM2COL)
        t = min(threads(), len(blocks))
        runs = parts(len(blocks), -(-len(blocks) // t))

        def work(j):
            buf = np.empty((blocks[0][1] - blocks[0][0], width), dt)   # the longest
            for i in range(*runs[j]):
                r0, r1 = blocks[i]
                kernel(x, buf[:r1 - r0], r0, *args)
                product(i, buf[:r1 - r0])
        pool.map(work, len(runs))

    if forward:
        def run(x, w):
            wm = np.ascontiguousarray(w.transpose(2, 3, 1, 0).reshape(width, o))
            y = np.empty((rows, o), dt)
            # as many blocks as the threads (or a multiple), each at most `block` rows (each
            # row is its own dot products: the split does not change the values)
            t = threads()
            n = -(-max(t, -(-rows // block)) // t) * t
            blocks = parts(rows, max(-(-rows // n), parallel.MIN_ROWS))
            on_threads(blocks, np.ascontiguousarray(x.transpose(0, 2, 3, 1)), wm, y, True,
                       lambda i, cols: np.matmul(cols, wm, out=y[slice(*blocks[i])]))
            return y.reshape((-1,) + out_sp + (o,)).transpose(0, 3, 1, 2)
        return run

    # blocks of a size fixed by the shapes (the sum over them is the same at any thread
    # count), deep enough for an efficient product and few enough that their products
    # [width, o] fit in CONV_PARTIALS (8x14x14, 256 -> 256 channels, 3x3, forward +
    # backward on one thread: blocks of 59 rows took 98.5 ms against the reference's 78.3;
    # blocks of 256 rows 73.9), and no deeper than that where the partials allow: the
    # small ResNet's 16-channel weight gradient (4,096 rows) in 16 blocks rather than 5 of
    # 910 (L2-sized), whose 3 + 2 on 2 threads took 0.164-0.169 ms a call in the training
    # step's profile, 16 blocks 0.112-0.116
    most = max(1, CONV_PARTIALS // (width * o * dt.itemsize))
    blocks = parts(rows, max(CONV_DEPTH, -(-rows // most)))

    def run_weight_grad(x, w):
        wm = np.ascontiguousarray(w.transpose(1, 2, 3, 0).reshape(rows, o))
        y = np.empty((len(blocks), width, o), dt)
        on_threads(blocks, np.ascontiguousarray(x.transpose(1, 2, 3, 0)), wm, y, False,
                   lambda i, cols: np.matmul(cols.T, wm[slice(*blocks[i])], out=y[i]))
        y = y.sum(0) if len(blocks) > 1 else y[0]
        return y.reshape(out_sp + (z, o)).transpose(2, 3, 0, 1)
    return run_weight_grad


_SPECIALIZE = {"dot_general": _dot_general, "conv_general_dilated": _conv,
               "reduce_sum": parallel.reduction,
               "reduce_max": parallel.reduction, "reduce_min": parallel.reduction}


def mul_sum(mul_node, sum_node) -> Callable | None:
    """reduce_sum(mul(a, b)) over trailing axes as one einsum (row-wise dot products: no
    product array; ~3x faster than multiply-then-sum), or None."""
    a, b = (v.aval for v in mul_node.inputs)
    shape, nd = tuple(mul_node.outputs[0].aval.shape), len(mul_node.outputs[0].aval.shape)
    axes = tuple(sum_node.params["axes"])
    dt = np.dtype(a.dtype)
    if tuple(a.shape) != shape or tuple(b.shape) != shape or np.dtype(b.dtype) != dt or \
            dt not in _FAST or not 0 < nd <= 26 or axes != tuple(range(nd - len(axes), nd)):
        return None
    letters = "abcdefghijklmnopqrstuvwxyz"[:nd]
    subs = f"{letters},{letters}->{letters[:nd - len(axes)]}"
    return lambda x, y: np.asarray(np.einsum(subs, x, y))


def mul_index_add(mul_node, add_node) -> Callable | None:
    """index_add(mul(x, w)) with w one factor a row of x (shape (n, 1, ...)) as one
    compiled loop that scales each row as it adds it (no product array; the same
    multiplications and additions, so bitwise the two ops), or None. The kernel takes
    (x, w, idx)."""
    a, b = (v.aval for v in mul_node.inputs)
    shape = tuple(mul_node.outputs[0].aval.shape)
    if not loops.available() or len(shape) < 2 or np.dtype(a.dtype) != np.dtype(b.dtype) or \
            np.dtype(a.dtype) not in _FAST:
        return None
    col = (shape[0],) + (1,) * (len(shape) - 1)
    swap = tuple(a.shape) == col   # the factors come (w, x)
    if (tuple(b.shape), tuple(a.shape)) != ((shape, col) if swap else (col, shape)):
        return None
    num_rows = add_node.params["num_rows"]

    def run(p, q, idx):
        x, w = (q, p) if swap else (p, q)
        out = gathers.index_add(x, idx, num_rows, w)
        return _index_add(np.multiply(x, w), idx, num_rows=num_rows) if out is None else out
    return run


def specialize(node) -> Callable | None:
    """A kernel for this one node (its params bound), or None."""
    make = _SPECIALIZE.get(node.prim.name)
    return make(node) if make is not None else None


# --- attention ------------------------------------------------------------------------------
# float32 attention without a mask or bias (causal and sliding windows allowed), numba
# present and the BLAS library's gemm callable from compiled code (loops.gemm_source): one
# compiled call over the (batch, head) pairs on numba's native threads, each pair alone:
# its products by the library's gemm reading q, k, v and writing the outputs in place (a
# head's rows are strided by H D: no transposed copies), the softmax of each score row in
# one compiled pass (vecmath's exp) instead of four to eight NumPy passes. A row is its
# [lo, hi) of attended keys; as the reference, a row's max counts as 0 where it is not
# finite. The backward takes P = exp(score - lse) from the forward's logsumexp (`given`):
# one pass a row, no statistics recomputed. The values of a pair do not depend on the
# thread count. Otherwise (masks, biases, float64) the reference impls, the batch split
# over the thread pool. Measured, the compiled rows alone ([8,128,4,64] causal attention
# on one core): forward 6.4 -> 3.6 ms, backward 11.6 -> 7.1 ms; softmax's backward over
# [16,4,64,64] 0.45 -> 0.19 ms. (softmax's forward stays NumPy's: over rows of 64 the
# compiled rows took 1.18 ms against NumPy's 1.01, its four loops a row costing more
# than NumPy's SIMD passes.) The pairs on native threads, the gemm called from the loop,
# against the batch split over the pool (its parts NumPy products and the compiled
# rows): causal [4,512,8,64] on 2 cores, jitted, forward 12.7-13.1 -> 9.6-9.8 ms, forward
# + backward 38-40 -> 30; W5 of benchmarks/suite.py on 16 cores 36.1 -> 29.9 ms (the
# suite's runs just before and after the change).
ATTN_MIN = 1 << 17    # score elements (B H T S) from which the reference's batch is split
ATTN_PART = 1 << 15   # score elements a native thread takes at least
_SOFTMAX_ROWS = """
def kernel(s, p, lse, rows_per_head, causal, window, wl, wr, given):
    inf = _np.float32(_np.inf)
    for r in range(s.shape[0]):
        t = r % rows_per_head
        lo, hi = 0, s.shape[1]
        if causal:
            hi = min(hi, t + 1)
        if window:
            lo, hi = max(lo, t - wl), min(hi, t + wr + 1)
        row, out = s[r], p[r]
        out[:] = 0
        if lo >= hi:
            if not given:
                lse[r] = inf
            continue
        seg, dst = row[lo:hi], out[lo:hi]
        if given:
            l = lse[r]
            for i in range(seg.size):
                dst[i] = _exp32(seg[i] - l)
            continue
        m = seg[0]
        for i in range(seg.size):
            m = max(m, seg[i])
        if not _np.isfinite(m):
            m = _np.float32(0.0)
        for i in range(seg.size):
            dst[i] = _exp32(seg[i] - m)
        total = 0.0   # float64: a long row's sum keeps float32's precision
        for i in range(seg.size):
            total += dst[i]
        inv = _np.float32(1.0 / total)
        for i in range(seg.size):
            dst[i] *= inv
        lse[r] = m + _np.log(total)
"""
# ds = P (dP - <dP, P> + ct_lse) a row (into dp's buffer where ds is dp: each element is
# read before it is written)
_SOFTMAX_ROWS_BWD = """
def kernel(p, dp, ct_lse, ds):
    for r in range(p.shape[0]):
        prow, drow, out = p[r], dp[r], ds[r]
        delta = 0.0   # float64, as the forward's sum
        for i in range(prow.size):
            delta += prow[i] * drow[i]
        c = _np.float32(ct_lse[r] - delta)
        for i in range(prow.size):
            out[i] = prow[i] * (drow[i] + c)
"""
# gemm(order, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc): row-major 101,
# no transpose 111, transpose 112; a head (b, h) of x [B, L, H, D] is x[b, 0, h] with rows
# H D apart
_ATTN_PARTS = """

@_parts
def forward_parts(q, k, v, o, lse, scale, causal, window, wl, wr, starts, stops, p0, p1):
    h_n, t_n, d, s_n, dv = q.shape[2], q.shape[1], q.shape[3], k.shape[1], v.shape[3]
    zero, one = _np.float32(0), _np.float32(1)
    for p in _nb.prange(p0, p1):
        s = _np.empty((t_n, s_n), _np.float32)
        pr = _np.empty((t_n, s_n), _np.float32)
        for bh in range(starts[p], stops[p]):
            b, h = bh // h_n, bh % h_n
            _gemm(101, 111, 112, t_n, s_n, d, scale, q[b, 0, h].ctypes.data, h_n * d,
                  k[b, 0, h].ctypes.data, h_n * d, zero, s.ctypes.data, s_n)
            kernel(s, pr, lse[b, h], t_n, causal, window, wl, wr, False)
            _gemm(101, 111, 111, t_n, dv, s_n, one, pr.ctypes.data, s_n,
                  v[b, 0, h].ctypes.data, h_n * dv, zero, o[b, 0, h].ctypes.data, h_n * dv)
    return 0


@_parts
def backward_parts(ct, ct_lse, lse, q, k, v, dq, dk, dv, scale, causal, window, wl, wr,
                   starts, stops, p0, p1):
    h_n, t_n, d, s_n, e = q.shape[2], q.shape[1], q.shape[3], k.shape[1], v.shape[3]
    zero, one = _np.float32(0), _np.float32(1)
    for p in _nb.prange(p0, p1):
        pr = _np.empty((t_n, s_n), _np.float32)
        ds = _np.empty((t_n, s_n), _np.float32)
        for bh in range(starts[p], stops[p]):
            b, h = bh // h_n, bh % h_n
            qp, kp, cp = q[b, 0, h].ctypes.data, k[b, 0, h].ctypes.data, ct[b, 0, h].ctypes.data
            # P = exp(q k^T scale - lse); dV = P^T dO
            _gemm(101, 111, 112, t_n, s_n, d, scale, qp, h_n * d, kp, h_n * d, zero,
                  ds.ctypes.data, s_n)
            kernel(ds, pr, lse[b, h], t_n, causal, window, wl, wr, True)
            if dv.shape[0]:
                _gemm(101, 112, 111, s_n, e, t_n, one, pr.ctypes.data, s_n, cp, h_n * e, zero,
                      dv[b, 0, h].ctypes.data, h_n * e)
            # dP = dO v^T, then dS in its place; dQ = dS k scale, dK = dS^T q scale
            _gemm(101, 111, 112, t_n, s_n, e, one, cp, h_n * e, v[b, 0, h].ctypes.data,
                  h_n * e, zero, ds.ctypes.data, s_n)
            rows_bwd(pr, ds, ct_lse[b, h], ds)
            if dq.shape[0]:
                _gemm(101, 111, 111, t_n, d, s_n, scale, ds.ctypes.data, s_n, kp, h_n * d,
                      zero, dq[b, 0, h].ctypes.data, h_n * d)
            if dk.shape[0]:
                _gemm(101, 112, 111, s_n, d, t_n, scale, ds.ctypes.data, s_n, qp, h_n * d,
                      zero, dk[b, 0, h].ctypes.data, h_n * d)
    return 0
"""


@functools.cache
def _attn_source():
    """The compiled attention's module source, or None without the BLAS library's gemm."""
    gemm = loops.gemm_source(np.float32)
    if gemm is None:
        return None
    rows_bwd = _SOFTMAX_ROWS_BWD.replace("def kernel(", "def rows_bwd(")
    return (_SOFTMAX_ROWS + '\n\n@_nb.njit(cache=__CACHE__, nogil=True, error_model="numpy")' +
            rows_bwd + gemm + _ATTN_PARTS)


def _attn_pairs(q, k):
    """The parts of the (batch, head) pairs, as run_parts takes them, and the threads."""
    b, t, h, _ = q.shape
    pairs = b * h
    n = max(1, min(n_threads(), pairs, pairs * t * k.shape[1] // ATTN_PART))
    return loops.bounds(parts(pairs, -(-pairs // n))), n


def _attn_native(arrays, has_mask, has_bias):
    """The compiled attention's source where it applies to these operands, else None."""
    if has_mask or has_bias or not all(np.dtype(a.dtype) == np.float32 for a in arrays) or \
            any(0 in a.shape for a in arrays) or not loops.available():
        return None
    return _attn_source()


def _by_batch(impl, lead: int):
    """A kernel running `impl` on parts of the batch (axis 0 of q, argument `lead`) on the
    thread pool: every (batch, head) is computed alone, so the values are bitwise those of
    the whole call. With a bias the whole call (its gradient sums over the batch)."""
    def run(*args, **params):
        q, k = args[lead], args[lead + 1]
        b = q.shape[0]
        t = min(chain_threads(), b)
        if t <= 1 or params["has_bias"] or q.shape[0] * q.shape[1] * q.shape[2] * \
                k.shape[1] < ATTN_MIN:
            return impl(*args, **params)
        ps = parts(b, -(-b // t))
        outs = pool.map(lambda i: impl(*(a[ps[i][0]:ps[i][1]] if np.ndim(a) and
                                         a.shape[0] == b else a for a in args), **params),
                        len(ps), t)
        if isinstance(outs[0], list):
            return [np.concatenate([o[j] for o in outs]) for j in range(len(outs[0]))]
        return np.concatenate(outs)
    return run


_attention_ref = _by_batch(registry["dot_product_attention"].impl, 0)
_attention_bwd_ref = _by_batch(registry["dot_product_attention_bwd"].impl, 2)


def _window(window):
    wl, wr = window if window is not None else (0, 0)
    return window is not None, int(wl), int(wr)


def _attention(q, k, v, *args, scale, is_causal, window, has_mask, has_bias,
               precision="default"):
    src = _attn_native((q, k, v), has_mask, has_bias)
    if src is None:
        return _attention_ref(q, k, v, *args, scale=scale, is_causal=is_causal,
                              window=window, has_mask=has_mask, has_bias=has_bias,
                              precision=precision)
    b, t, h, _ = q.shape
    o = np.empty((b, t, h, v.shape[3]), np.float32)
    lse = np.empty((b, h, t), np.float32)
    (starts, stops), n = _attn_pairs(q, k)
    q, k, v = (np.ascontiguousarray(a) for a in (q, k, v))
    loops.run_gemm_parts(src, (q, k, v, o, lse, np.float32(scale), bool(is_causal),
                               *_window(window)), starts, stops, n, fn="forward_parts")
    return [o, lse]


def _attention_bwd(ct, ct_lse, out, lse, q, k, v, *args, wrt, nout, scale, is_causal,
                   window, has_mask, has_bias, precision="default"):
    src = _attn_native((q, k, v, ct), has_mask, has_bias)
    if src is None:
        return _attention_bwd_ref(ct, ct_lse, out, lse, q, k, v, *args, wrt=wrt, nout=nout,
                                  scale=scale, is_causal=is_causal, window=window,
                                  has_mask=has_mask, has_bias=has_bias, precision=precision)
    none = np.empty((0, 1, 1, 1), np.float32)   # a gradient not asked for
    grads = [np.empty(a.shape, np.float32) if i in wrt else none
             for i, a in enumerate((q, k, v))]
    (starts, stops), n = _attn_pairs(q, k)
    ct, ct_lse, lse, q, k, v = (np.ascontiguousarray(a, np.float32)
                                for a in (ct, ct_lse, lse, q, k, v))
    loops.run_gemm_parts(src, (ct, ct_lse, lse, q, k, v, *grads, np.float32(scale),
                               bool(is_causal), *_window(window)), starts, stops, n,
                         fn="backward_parts")
    return [grads[i] for i in wrt]


NATIVE["dot_product_attention"] = _attention
NATIVE["dot_product_attention_bwd"] = _attention_bwd


# --- row-wise composites: rows split over the thread pool -----------------------------------
ROWS_PART = 1 << 16   # elements per part (whole rows; fixed: values do not depend on threads)


def _row_parts(name: str, lead: int, impl=None):
    """A kernel running `impl` (else the reference impl) of the row-wise composite `name`
    (normalized over the last axis) on parts of its rows on the thread pool: every operand
    of the row operand's shape (argument `lead`) is cut into the same rows, the others
    (weights) pass whole. Row results are bitwise the whole call's; results summed over the
    rows (a weight's gradient) are the parts' sums added in part order."""
    def run(*args, **params):
        fn = impl or registry[name].impl
        x = args[lead]
        axes = params.get("axes", (-1,))
        if x.ndim < 2 or x.size < 2 * ROWS_PART or x.dtype not in _FAST or \
                tuple(axes) not in ((-1,), (x.ndim - 1,)):
            return fn(*args, **params)
        d = x.shape[-1]
        rows = x.size // d
        ps = parts(rows, max(1, ROWS_PART // d))
        if len(ps) < 2:
            return fn(*args, **params)
        flat = [a.reshape(rows, d) if np.shape(a) == x.shape else a for a in args]
        cut = [np.shape(a) == x.shape for a in args]
        if "axes" in params:
            params = {**params, "axes": (1,)}

        def part(i):
            s, e = ps[i]
            return fn(*(a[s:e] if c else a for a, c in zip(flat, cut)), **params)
        outs = pool.map(part, len(ps), chain_threads())
        if not isinstance(outs[0], list):
            return np.concatenate(outs).reshape(x.shape)
        res = []
        for j, y in enumerate(outs[0]):
            if np.ndim(y) == 2 and y.shape[-1] == d and y.shape[0] == ps[0][1]:
                res.append(np.concatenate([o[j] for o in outs]).reshape(x.shape))
            else:
                acc = np.array(y)
                for o in outs[1:]:
                    acc += o[j]
                res.append(acc)
        return res
    return run


def _softmax_bwd(ct, y, x, *, wrt, nout, axes):
    if not (x.size and tuple(axes) in ((-1,), (x.ndim - 1,)) and loops.available() and
            ct.dtype == y.dtype == x.dtype == np.float32 and ct.shape == y.shape == x.shape):
        return registry["softmax_bwd"].impl(ct, y, x, wrt=wrt, nout=nout, axes=axes)
    d = x.shape[-1]
    shape = (x.size // d, d)
    out = np.empty(shape, np.float32)
    loops.compiled(_SOFTMAX_ROWS_BWD)(np.ascontiguousarray(y).reshape(shape),
                                      np.ascontiguousarray(ct).reshape(shape),
                                      np.zeros(shape[0], np.float32), out)
    return [out.reshape(x.shape)]   # y (ct - <ct, y>)


@_native("layer_norm")
def _layer_norm(*args, eps, has_weight, has_bias):
    x, w, b = split_affine(args, has_weight, has_bias)
    y = norms.layer_norm(x, w, b, eps)
    return y if y is not None else _layer_norm_rows(*args, eps=eps, has_weight=has_weight,
                                                    has_bias=has_bias)


@_native("layer_norm_bwd")
def _layer_norm_bwd(ct, out, *args, wrt, nout, eps, has_weight, has_bias):
    x, w, b = split_affine(args, has_weight, has_bias)
    grads = norms.layer_norm_bwd(ct, x, w, b, eps)
    if grads is None:
        return _layer_norm_bwd_rows(ct, out, *args, wrt=wrt, nout=nout, eps=eps,
                                    has_weight=has_weight, has_bias=has_bias)
    return [grads[i] for i in wrt]


_layer_norm_rows = _row_parts("layer_norm", 0)   # (the other dtypes)
_layer_norm_bwd_rows = _row_parts("layer_norm_bwd", 2)
for _name, _lead, _impl in (("rms_norm", 0, None), ("softmax", 0, None),
                            ("log_softmax", 0, None), ("rms_norm_bwd", 2, None),
                            ("softmax_bwd", 2, _softmax_bwd), ("log_softmax_bwd", 2, None)):
    NATIVE.setdefault(_name, _row_parts(_name, _lead, _impl))


# --- index_select / index_add: compiled rows (gathers.py), else blocked flat scatter --------
@_native("index_select")
def _index_select(x, idx):
    out = gathers.index_select(x, idx)
    return registry["index_select"].impl(x, idx) if out is None else out


@_native("index_add")
def _index_add(x, idx, *, num_rows):
    out = gathers.index_add(x, idx, num_rows)
    if out is not None:
        return out
    if x.ndim < 2 or x.dtype not in _FAST or x.size == 0:
        return registry["index_add"].impl(x, idx, num_rows=num_rows)
    # without numba: each block of rows into the flat output with one 1-d np.add.at
    x, idx = valid_rows(x, idx, num_rows)  # out-of-range rows are dropped
    row = math.prod(x.shape[1:])
    out = np.zeros(num_rows * row, x.dtype)
    flat_x = np.ascontiguousarray(x).reshape(-1)
    it = np.int32 if num_rows * row < 2 ** 31 else np.int64
    cols = np.arange(row, dtype=it)
    step = max(1, ROWS_BLOCK // row)
    for s in range(0, len(idx), step):
        i = idx[s:s + step].astype(it, copy=False)
        np.add.at(out, (i[:, None] * it(row) + cols).reshape(-1),
                  flat_x[s * row:(s + len(i)) * row])
    return out.reshape((num_rows,) + x.shape[1:])


# --- activations: compiled loops (gelu's tanh form also blocked NumPy calls) ----------------
_S2PI = math.sqrt(2.0 / math.pi)
_C = 0.044715
# float32 with numba: one loop per part (the parts on numba's native threads where they
# are ready, loops.run_parts), tanh and logistic from vecmath.py (vectorized), every
# thread without the GIL (NumPy calls hold the GIL between calls and stop scaling past a
# few threads). The loop runs over slices of the part, indexed from 0: indexed x[i]
# for i in range(s, e), numba's wrap-around of negative indices kept LLVM from vectorizing
# it (a 1M-element gelu backward took 19 ms on one core against 5.5 ms of blocked NumPy
# calls; over slices 5.3 ms, as the blocked NumPy calls). v is x's element, g ct's.
_LOOP = """
def kernel(x, ct, out, s, e):
    half, one, s2pi, c = _np.float32(0.5), _np.float32(1.0), _np.float32(%r), _np.float32(%r)
    xs, cs, ys = x[s:e], ct[s:e], out[s:e]
    for i in range(xs.size):
        v, g = xs[i], cs[i]
        BODY
    return 0
""" % (_S2PI, _C) + loops.PARTS_OF_3
_BODIES = {
    "gelu": ["t = _tanh32(s2pi * v * (one + c * v * v))", "ys[i] = half * v * (one + t)"],
    "gelu_bwd": ["t = _tanh32(s2pi * v * (one + c * v * v))",
                 "ys[i] = g * (half * (one + t) + half * s2pi * v * "
                 "(one + _np.float32(3.0) * c * v * v) * (one - t * t))"],
    # log(1 + e^v) = max(v, 0) + log1p(e^-|v|); NaN stays NaN (through the log1p)
    "softplus": ["ys[i] = (v if v > _np.float32(0.0) else _np.float32(0.0)) + "
                 "_log1p32(_exp32(-_np.abs(v)))"],
    "softplus_bwd": ["ys[i] = g * _logistic32(v)"],            # d softplus = sigmoid
    "silu": ["ys[i] = v * _logistic32(v)"],
    "silu_bwd": ["t = _logistic32(v)", "ys[i] = g * t * (one + v * (one - t))"],
}
_ACTIVATIONS = {name: _LOOP.replace("BODY", "\n        ".join(body))
                for name, body in _BODIES.items()}


def _elementwise_loop(name: str, x, ct=None):
    """`name`'s loop over float32 x (and ct, of x's shape), or None where it does not
    apply (dtype, shapes, numba)."""
    if x.dtype != np.float32 or x.ndim == 0 or (ct is not None and (
            ct.dtype != x.dtype or ct.shape != x.shape)) or not loops.available():
        return None
    out = np.empty(x.shape, x.dtype)
    xf, cf, of = (np.ascontiguousarray(a).reshape(-1)
                  for a in (x, x if ct is None else ct, out))
    on_native = native.ready()
    ps = parts(xf.size, loops.heavy_part(on_native))
    loops.run_parts(_ACTIVATIONS[name], (xf, cf, of), *loops.bounds(ps), n_threads(),
                    on_native)
    return out


def _blocks(*arrays):
    """Flat contiguous views of `arrays`, and the (start, stop) of each block."""
    flat = [np.ascontiguousarray(a).reshape(-1) for a in arrays]
    n = flat[0].size
    return flat, [(s, min(s + BLOCK, n)) for s in range(0, n, BLOCK)]


@_native("gelu")
def _gelu(x, *, approximate):
    if not approximate or x.dtype not in _FAST or x.ndim == 0:
        return registry["gelu"].impl(x, approximate=approximate)
    if (out := _elementwise_loop("gelu", x)) is not None:
        return out
    out = np.empty(x.shape, x.dtype)
    (xf, of), blocks = _blocks(x, out)

    def block(i):   # blocks run on the thread pool
        s, e = blocks[i]
        with np.errstate(over="ignore", invalid="ignore"):
            # 0.5 x (1 + tanh(sqrt(2/pi) x (1 + c x^2)))
            xs, t = xf[s:e], np.empty(e - s, x.dtype)
            np.multiply(xs, xs, out=t)
            t *= _C
            t += 1
            t *= xs
            t *= _S2PI
            np.tanh(t, out=t)
            t += 1
            np.multiply(xs, t, out=of[s:e])
            of[s:e] *= 0.5
    pool.map(block, len(blocks), chain_threads())
    return out


@_native("gelu_bwd")
def _gelu_bwd(ct, out, x, *, wrt, nout, approximate):
    if not approximate or x.dtype not in _FAST or ct.dtype != x.dtype or x.ndim == 0 or \
            ct.shape != x.shape:
        return registry["gelu_bwd"].impl(ct, out, x, wrt=wrt, nout=nout,
                                         approximate=approximate)
    if (res := _elementwise_loop("gelu_bwd", x, ct)) is not None:
        return [res]
    res = np.empty(x.shape, x.dtype)
    (xf, cf, rf), blocks = _blocks(x, ct, res)

    def block(i):   # blocks run on the thread pool
        s, e = blocks[i]
        with np.errstate(over="ignore", invalid="ignore"):
            # d = 0.5 (1 + t) + 0.5 sqrt(2/pi) x (1 + 3c x^2) (1 - t^2)
            xs = xf[s:e]
            x2, t, w = (np.empty(e - s, x.dtype) for _ in range(3))
            np.multiply(xs, xs, out=x2)
            np.multiply(x2, _C, out=t)
            t += 1
            t *= xs
            t *= _S2PI
            np.tanh(t, out=t)
            x2 *= 3 * _C
            x2 += 1
            x2 *= xs
            x2 *= 0.5 * _S2PI
            np.multiply(t, t, out=w)
            np.subtract(1, w, out=w)
            x2 *= w
            t += 1
            t *= 0.5
            x2 += t
            np.multiply(cf[s:e], x2, out=rf[s:e])
    pool.map(block, len(blocks), chain_threads())
    return [res]


@_native("softplus")
def _softplus(x):
    out = _elementwise_loop("softplus", x)
    return out if out is not None else registry["softplus"].impl(x)


@_native("softplus_bwd")
def _softplus_bwd(ct, out, x, *, wrt, nout):
    res = _elementwise_loop("softplus_bwd", x, ct)
    return [res] if res is not None else registry["softplus_bwd"].impl(ct, out, x, wrt=wrt,
                                                                        nout=nout)


@_native("silu")
def _silu(x):
    out = _elementwise_loop("silu", x)
    return out if out is not None else registry["silu"].impl(x)


@_native("silu_bwd")
def _silu_bwd(ct, out, x, *, wrt, nout):
    res = _elementwise_loop("silu_bwd", x, ct)
    return [res] if res is not None else registry["silu_bwd"].impl(ct, out, x, wrt=wrt,
                                                                    nout=nout)


# --- fft through scipy.fft -------------------------------------------------------------------
if _scipy_fft is not None:
    @_native("fft")
    def _fft(x, *, fft_type, fft_lengths):
        axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
        if fft_type == "fft":
            out, dt = _scipy_fft.fftn(x, axes=axes), x.dtype
        elif fft_type == "ifft":
            out, dt = _scipy_fft.ifftn(x, axes=axes), x.dtype
        elif fft_type == "rfft":
            out, dt = _scipy_fft.rfftn(x, axes=axes), dtypes.complex_dtype(x.dtype)
        else:
            out = _scipy_fft.irfftn(x, s=fft_lengths, axes=axes)
            dt = dtypes.real_dtype(x.dtype)
        return np.asarray(out).astype(dt, copy=False)
