"""float32 attention on the CPU as one compiled call over the (batch, head) pairs (the
softmax rows it runs, and softmax's backward over the last axis, are SOFTMAX_ROWS and
SOFTMAX_ROWS_BWD); the reference impls, the batch split over the thread pool, otherwise.
kernels.NATIVE holds `forward` and `backward` for the attention primitive and its
backward."""
from __future__ import annotations

import functools

import numpy as np

from mirax.backends.cpu import loops
from mirax.backends.cpu.norms import SOFTMAX_HELPERS, SOFTMAX_ROW, SOFTMAX_ROW_BWD
from mirax.backends.cpu.threads import chain_threads, n_threads, parts, pool
from mirax.core.primitive import registry

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
# [16,4,64,64] 0.45 -> 0.19 ms. The pairs on native threads, the gemm called from the loop,
# against the batch split over the pool (its parts NumPy products and the compiled
# rows): causal [4,512,8,64] on 2 cores, jitted, forward 12.7-13.1 -> 9.6-9.8 ms, forward
# + backward 38-40 -> 30; W5 of benchmarks/suite.py on 16 cores 36.1 -> 29.9 ms (the
# suite's runs just before and after the change). Under a causal or sliding-window mask a
# pair's queries go in blocks of ATTN_ROWS, each block's products over only the keys its
# rows may attend (its dK and dV parts added up), and the softmax rows take their max
# and sum through interleaved accumulators (norms.py). Both, on one core, jitted, before
# -> after (ms, a one-off script): causal [8,128,4,64] forward 4.4 -> 3.7, forward +
# backward 17.7 -> 11.8; causal [4,512,8,64] 61 -> 47 and 177 -> 141; a 64-key window
# over [2,512,4,64] 13.5 -> 3.9 and 39 -> 12.3; no mask [8,128,4,64] 6.0 -> 4.7.
ATTN_MIN = 1 << 17    # score elements (B H T S) from which the reference's batch is split
ATTN_PART = 1 << 15   # score elements a native thread takes at least
ATTN_ROWS = 32      # query rows a block of causal or windowed attention takes
# _gemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) (loops.gemm_source):
# no transpose 111, transpose 112; a head (b, h) of x [B, L, H, D] is x[b, 0, h] with rows
# H D apart
_ATTN_PARTS = """


@_nb.njit(cache=__CACHE__, nogil=True, error_model="numpy", inline="always")
def keys(t0, t1, s_n, causal, window, wl, wr):
    # the keys [k0, k1) that queries [t0, t1) may attend (k0 == k1: none)
    k0, k1 = 0, s_n
    if causal:
        k1 = min(k1, t1)
    if window:
        k0, k1 = min(max(k0, t0 - wl), s_n), min(k1, t1 + wr)
    return k0, max(k0, k1)


@_nb.njit(cache=__CACHE__, nogil=True, error_model="numpy", inline="always")
def probs(q, k, b, h, t0, n, k0, nk, scale, sbuf, pbuf, lse, causal, window, wl, wr, given):
    # the probabilities of queries [t0, t0 + n) over keys [k0, k0 + nk) of pair (b, h), an
    # [n, nk] array in pbuf (the scores q k^T scale in sbuf first); their logsumexp into
    # lse, or (`given`) P = exp(score - lse)
    h_n, d = q.shape[2], q.shape[3]
    sc, pr = sbuf[:n * nk].reshape((n, nk)), pbuf[:n * nk].reshape((n, nk))
    _gemm(111, 112, n, nk, d, scale, q[b, t0, h], h_n * d, k[b, k0, h], h_n * d,
          _np.float32(0), sc, nk)
    kernel(sc, pr, lse[b, h, t0:t0 + n], t0, k0, causal, window, wl, wr, given)
    return sc, pr


@_nb.njit(cache=__CACHE__, nogil=True, error_model="numpy", inline="always")
def zero_rows(x, b, h, r0, r1):
    for r in range(r0, r1):
        for i in range(x.shape[3]):
            x[b, r, h, i] = 0


@_parts
def forward_parts(q, k, v, o, lse, scale, causal, window, wl, wr, rb, starts, stops, p0,
                  p1):
    h_n, t_n, s_n, dv = q.shape[2], q.shape[1], k.shape[1], v.shape[3]
    zero, one, inf = _np.float32(0), _np.float32(1), _np.float32(_np.inf)
    for p in _nb.prange(p0, p1):
        sbuf = _np.empty(rb * s_n, _np.float32)
        pbuf = _np.empty(rb * s_n, _np.float32)
        for bh in range(starts[p], stops[p]):
            b, h = bh // h_n, bh % h_n
            for t0 in range(0, t_n, rb):
                n = min(rb, t_n - t0)
                k0, k1 = keys(t0, t0 + n, s_n, causal, window, wl, wr)
                if k1 == k0:   # no key: zeros, an infinite logsumexp
                    zero_rows(o, b, h, t0, t0 + n)
                    lse[b, h, t0:t0 + n] = inf
                    continue
                _, pr = probs(q, k, b, h, t0, n, k0, k1 - k0, scale, sbuf, pbuf, lse, causal,
                              window, wl, wr, False)
                _gemm(111, 111, n, dv, k1 - k0, one, pr, k1 - k0, v[b, k0, h], h_n * dv,
                      zero, o[b, t0, h], h_n * dv)
    return 0


@_parts
def backward_parts(ct, ct_lse, lse, q, k, v, dq, dk, dv, scale, causal, window, wl, wr, rb,
                   starts, stops, p0, p1):
    h_n, t_n, d, s_n, e = q.shape[2], q.shape[1], q.shape[3], k.shape[1], v.shape[3]
    zero, one = _np.float32(0), _np.float32(1)
    for p in _nb.prange(p0, p1):
        sbuf = _np.empty(rb * s_n, _np.float32)
        pbuf = _np.empty(rb * s_n, _np.float32)
        for bh in range(starts[p], stops[p]):
            b, h = bh // h_n, bh % h_n
            if dk.shape[0]:   # the row blocks add their parts into dK and dV
                zero_rows(dk, b, h, 0, s_n)
            if dv.shape[0]:
                zero_rows(dv, b, h, 0, s_n)
            for t0 in range(0, t_n, rb):
                n = min(rb, t_n - t0)
                k0, k1 = keys(t0, t0 + n, s_n, causal, window, wl, wr)
                nk = k1 - k0
                if nk == 0:
                    if dq.shape[0]:
                        zero_rows(dq, b, h, t0, t0 + n)
                    continue
                # P = exp(q k^T scale - lse); dV += P^T dO
                ds, pr = probs(q, k, b, h, t0, n, k0, nk, scale, sbuf, pbuf, lse, causal,
                               window, wl, wr, True)
                ch = ct[b, t0, h]
                if dv.shape[0]:
                    _gemm(112, 111, nk, e, n, one, pr, nk, ch, h_n * e, one, dv[b, k0, h],
                          h_n * e)
                # dP = dO v^T, then dS in its place; dQ = dS k scale, dK += dS^T q scale
                _gemm(111, 112, n, nk, e, one, ch, h_n * e, v[b, k0, h], h_n * e, zero, ds,
                      nk)
                rows_bwd(pr, ds, ct_lse[b, h, t0:t0 + n], ds)
                if dq.shape[0]:
                    _gemm(111, 111, n, d, nk, scale, ds, nk, k[b, k0, h], h_n * d, zero,
                          dq[b, t0, h], h_n * d)
                if dk.shape[0]:
                    _gemm(112, 111, nk, d, n, scale, ds, nk, q[b, t0, h], h_n * d, one,
                          dk[b, k0, h], h_n * d)
    return 0
"""


@functools.cache
def _source():
    """The compiled attention's module source, or None without the BLAS library's gemm."""
    gemm = loops.gemm_source(np.float32)
    if gemm is None:
        return None
    rows_bwd = SOFTMAX_ROW_BWD.replace("def kernel(", "def rows_bwd(")
    return (SOFTMAX_ROW + '\n\n@_nb.njit(cache=__CACHE__, nogil=True, error_model="numpy")' +
            rows_bwd + SOFTMAX_HELPERS + gemm + _ATTN_PARTS)


def _pairs(q, k):
    """The parts of the (batch, head) pairs, as run_parts takes them, and the threads."""
    b, t, h, _ = q.shape
    pairs = b * h
    n = max(1, min(n_threads(), pairs, pairs * t * k.shape[1] // ATTN_PART))
    return loops.bounds(parts(pairs, -(-pairs // n))), n


def native_source(arrays, has_mask, has_bias):
    """The compiled attention's source where it applies to these operands, else None."""
    if has_mask or has_bias or not all(np.dtype(a.dtype) == np.float32 for a in arrays) or \
            any(0 in a.shape for a in arrays) or not loops.available():
        return None
    return _source()


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


def _row_block(q, is_causal, window) -> int:
    """Query rows a block of the compiled attention takes: all of them, but where a causal
    or sliding-window mask leaves each block fewer keys."""
    t = q.shape[1]
    return min(t, ATTN_ROWS) if is_causal or window is not None else max(t, 1)


def forward(q, k, v, *args, scale, is_causal, window, has_mask, has_bias,
               precision="default"):
    src = native_source((q, k, v), has_mask, has_bias)
    if src is None:
        return _attention_ref(q, k, v, *args, scale=scale, is_causal=is_causal,
                              window=window, has_mask=has_mask, has_bias=has_bias,
                              precision=precision)
    b, t, h, _ = q.shape
    o = np.empty((b, t, h, v.shape[3]), np.float32)
    lse = np.empty((b, h, t), np.float32)
    (starts, stops), n = _pairs(q, k)
    q, k, v = (np.ascontiguousarray(a) for a in (q, k, v))
    loops.run_gemm_parts(src, (q, k, v, o, lse, np.float32(scale), bool(is_causal),
                               *_window(window), _row_block(q, is_causal, window)),
                         starts, stops, n, fn="forward_parts")
    return [o, lse]


def backward(ct, ct_lse, out, lse, q, k, v, *args, wrt, nout, scale, is_causal,
                   window, has_mask, has_bias, precision="default"):
    src = native_source((q, k, v, ct), has_mask, has_bias)
    if src is None:
        return _attention_bwd_ref(ct, ct_lse, out, lse, q, k, v, *args, wrt=wrt, nout=nout,
                                  scale=scale, is_causal=is_causal, window=window,
                                  has_mask=has_mask, has_bias=has_bias, precision=precision)
    none = np.empty((0, 1, 1, 1), np.float32)   # a gradient not asked for
    grads = [np.empty(a.shape, np.float32) if i in wrt else none
             for i, a in enumerate((q, k, v))]
    (starts, stops), n = _pairs(q, k)
    ct, ct_lse, lse, q, k, v = (np.ascontiguousarray(a, np.float32)
                                for a in (ct, ct_lse, lse, q, k, v))
    loops.run_gemm_parts(src, (ct, ct_lse, lse, q, k, v, *grads, np.float32(scale),
                               bool(is_causal), *_window(window),
                               _row_block(q, is_causal, window)), starts, stops, n,
                         fn="backward_parts")
    return [grads[i] for i in wrt]
