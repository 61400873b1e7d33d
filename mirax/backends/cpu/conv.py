"""2-d convolutions on the CPU: im2col rows copied by a compiled loop a cache-sized block at
a time, each block multiplied by the BLAS library's gemm called from that loop (`kernel`,
which kernels.specialize builds for a conv_general_dilated node)."""
from __future__ import annotations

import math

import numpy as np

from mirax.backends.cpu import loops, parallel
from mirax.backends.cpu.threads import n_threads, parts, pool

_FAST = (np.dtype(np.float32), np.dtype(np.float64))

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
        if forward:   # (no transposes)
            _gemm(111, 111, r1 - r0, o, width, one, cols, width, w, o, zero, y[r0:r1], o)
        else:         # (cols transposed)
            _gemm(112, 111, width, o, r1 - r0, one, cols, width, w[r0:r1], o, zero, y[p], o)
    return 0
"""
CONV_BLOCK = 1 << 19   # bytes of columns a block (L2-sized: copied, then multiplied in cache)
CONV_PARTIALS = 1 << 26   # bytes of a weight gradient's per-block products, at most
CONV_DEPTH = 256   # rows a weight gradient's block has at least (its products' depth)
# A thread takes a run of blocks with at least this much of the product's work (and as
# much copying): the small ResNet's 16-channel forward (19 MFLOP) ran its 16 blocks on the
# device's 16 cores in 0.95 ms, on 4 threads 0.50 ms (its training epoch 242 -> 157 ms)
CONV_FLOPS_PER_THREAD = 1 << 22


def kernel(node):
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
