"""float32 layer_norm, softmax and log_softmax over the last axis and their backwards as
compiled rows, for kernels.py's claims (attention.py runs the softmax rows inside its
kernel too).

The rows are cut into parts of NORM_PART elements (a fixed size: the weight's and
bias's gradients, summed per part and then in part order, do not depend on the thread
count), run on numba's native threads where they are ready (loops.run_parts). A row's
mean and variance are summed in float64 (the reference sums float32 pairwise); the rest
is the reference's float32 arithmetic. The reference's NumPy chains (eight to twelve
passes, the GIL taken by each) ran their parts on at most CHAIN_THREADS threads. W5's
[8,128,256] layer_norm backward (`python benchmarks/suite.py --threads N --profile
--only W5`): one core 3.3 -> 1.35 ms, 16 cores 2.3 -> 0.69 ms. A softmax row takes its
max and sum through four interleaved accumulators (with one, each compare or add waits on
the last: 4.6 ns an element for the row's passes, 2.3 with four); the compiled rows then
beat NumPy's reference passes on one core ([4096,64] forward 1.07 against 1.80 ms,
backward 0.39 against 0.87; [1024,1024] 3.3 against 5.6) and run their parts on the native
threads, where the reference ran on at most CHAIN_THREADS; log_softmax likewise (the
training transformer's jitted [16,64,64] log_softmax on 2 cores 0.41-0.47 -> 0.18 ms, its
gradient 0.59-0.76 -> 0.35).
"""
from __future__ import annotations

import numpy as np

from mirax.backends.cpu import loops
from mirax.backends.cpu.threads import n_threads, parts

NORM_PART = 1 << 13
# float64 sums of a row
ROW_SUMS = """


@_nb.njit(inline="always")
def _sum(a):
    # float64 sums, four interleaved (one would wait on each add), here and below
    s0 = s1 = s2 = s3 = 0.0
    q = a.size - a.size % 4
    for i in range(0, q, 4):
        s0 += a[i]
        s1 += a[i + 1]
        s2 += a[i + 2]
        s3 += a[i + 3]
    for i in range(q, a.size):
        s0 += a[i]
    return (s0 + s1) + (s2 + s3)


@_nb.njit(inline="always")
def _sum_sq(a, c):   # sum (a - c)^2
    s0 = s1 = s2 = s3 = 0.0
    q = a.size - a.size % 4
    for i in range(0, q, 4):
        d0, d1, d2, d3 = a[i] - c, a[i + 1] - c, a[i + 2] - c, a[i + 3] - c
        s0 += d0 * d0
        s1 += d1 * d1
        s2 += d2 * d2
        s3 += d3 * d3
    for i in range(q, a.size):
        s0 += (a[i] - c) * (a[i] - c)
    return (s0 + s1) + (s2 + s3)


@_nb.njit(inline="always")
def _sum_prod(a, b):   # sum a b
    s0 = s1 = s2 = s3 = 0.0
    q = a.size - a.size % 4
    for i in range(0, q, 4):
        s0 += _np.float64(a[i]) * b[i]
        s1 += _np.float64(a[i + 1]) * b[i + 1]
        s2 += _np.float64(a[i + 2]) * b[i + 2]
        s3 += _np.float64(a[i + 3]) * b[i + 3]
    for i in range(q, a.size):
        s0 += _np.float64(a[i]) * b[i]
    return (s0 + s1) + (s2 + s3)
"""
_NORM_STATS = ROW_SUMS + """


@_nb.njit(inline="always")
def _stats(xr, eps):
    # (mean, 1 / sqrt(var + eps)), var = mean((x - mean)^2) as the reference's
    d = xr.size
    m = _sum(xr) / d
    return _np.float32(m), _np.float32(1.0 / _np.sqrt(_sum_sq(xr, m) / d + eps))
"""
# softmax over a row (attention.py's compiled attention runs it between its products, on
# the part of the row a causal or window mask leaves; softmax itself on the whole row):
# p = exp(s - max) / sum into p (its logsumexp into lse), or (`given`) P = exp(s - lse)
SOFTMAX_ROW = """
def kernel(s, p, lse, t0, k0, causal, window, wl, wr, given):
    # row r is query t0 + r, column c key k0 + c
    inf = _np.float32(_np.inf)
    for r in range(s.shape[0]):
        t = t0 + r
        lo, hi = 0, k0 + s.shape[1]
        if causal:
            hi = min(hi, t + 1)
        if window:
            lo, hi = max(lo, t - wl), min(hi, t + wr + 1)
        lo, hi = max(lo - k0, 0), hi - k0
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
        m = _max(seg)
        if not _np.isfinite(m):
            m = _np.float32(0.0)
        for i in range(seg.size):
            dst[i] = _exp32(seg[i] - m)
        total = _sum(dst)   # float64: a long row's sum keeps float32's precision
        inv = _np.float32(1.0 / total)
        for i in range(seg.size):
            dst[i] *= inv
        lse[r] = m + _np.log(total)
"""
SOFTMAX_HELPERS = """


@_nb.njit(inline="always")
def _max(a):
    # four interleaved maxima (one would wait on each compare)
    m0 = m1 = m2 = m3 = a[0]
    q = a.size - a.size % 4
    for i in range(0, q, 4):
        m0, m1 = max(m0, a[i]), max(m1, a[i + 1])
        m2, m3 = max(m2, a[i + 2]), max(m3, a[i + 3])
    for i in range(q, a.size):
        m0 = max(m0, a[i])
    return max(max(m0, m1), max(m2, m3))
""" + ROW_SUMS
# ds = P (dP - <dP, P> + ct_lse) a row (into dp's buffer where ds is dp: each element is
# read before it is written)
SOFTMAX_ROW_BWD = """
def kernel(p, dp, ct_lse, ds):
    for r in range(p.shape[0]):
        prow, drow, out = p[r], dp[r], ds[r]
        delta = _sum_prod(prow, drow)   # float64, as the forward's sum
        c = _np.float32(ct_lse[r] - delta)
        for i in range(prow.size):
            out[i] = prow[i] * (drow[i] + c)
"""
SOFTMAX_ROWS = SOFTMAX_ROW + """


@_parts
def kernel_parts(x, y, starts, stops, p0, p1):
    for p in _nb.prange(p0, p1):
        s, e = starts[p], stops[p]
        kernel(x[s:e], y[s:e], _np.empty(e - s, _np.float32), 0, 0, False, False, 0, 0, False)
    return 0
""" + SOFTMAX_HELPERS
SOFTMAX_ROWS_BWD = SOFTMAX_ROW_BWD + """


@_parts
def kernel_parts(p, dp, ds, starts, stops, p0, p1):
    for q in _nb.prange(p0, p1):
        s, e = starts[q], stops[q]
        kernel(p[s:e], dp[s:e], _np.zeros(e - s, _np.float32), ds[s:e])
    return 0
""" + ROW_SUMS
# log_softmax a row: (x - max) - log(sum(exp(x - max))), the max 0 where not finite (as the
# reference); its backward ct - exp(y) sum(ct)
LOG_SOFTMAX_ROWS = """
def kernel(x, y, s, e):
    for r in range(s, e):
        row, out = x[r], y[r]
        m = _max(row)
        if not _np.isfinite(m):
            m = _np.float32(0.0)
        for i in range(row.size):
            out[i] = _exp32(row[i] - m)
        lse = _np.float32(_np.log(_sum(out)))
        for i in range(row.size):
            out[i] = (row[i] - m) - lse
    return 0


@_parts
def kernel_parts(x, y, starts, stops, p0, p1):
    for p in _nb.prange(p0, p1):
        kernel(x, y, starts[p], stops[p])
    return 0
""" + SOFTMAX_HELPERS
LOG_SOFTMAX_ROWS_BWD = """
def kernel(ct, y, dx, s, e):
    for r in range(s, e):
        c, yr, d = ct[r], y[r], dx[r]
        total = _np.float32(_sum(c))
        for i in range(c.size):
            d[i] = c[i] - _exp32(yr[i]) * total
    return 0
""" + loops.PARTS_OF_3 + ROW_SUMS
LAYER_NORM_ROWS = """
def kernel(x, w, b, y, s, e, eps, has_w, has_b):
    for r in range(s, e):
        xr, yr = x[r], y[r]
        m, inv = _stats(xr, eps)
        for i in range(xr.size):
            t = (xr[i] - m) * inv
            if has_w:
                t = t * w[i]
            if has_b:
                t = t + b[i]
            yr[i] = t
    return 0


@_parts
def kernel_parts(x, w, b, y, eps, has_w, has_b, starts, stops, p0, p1):
    for p in _nb.prange(p0, p1):
        kernel(x, w, b, y, starts[p], stops[p], eps, has_w, has_b)
    return 0
""" + _NORM_STATS
# dx = inv (g - mean(g) - xhat mean(g xhat)), g = ct w; the weight's gradient sums
# ct xhat over the rows, the bias's ct (into row p of the per-part sums)
LAYER_NORM_ROWS_BWD = """
def kernel(x, w, ct, dx, dw, db, s, e, eps, has_w):
    d = x.shape[1]
    xh = _np.empty(d, _np.float32)
    dw[:] = 0
    db[:] = 0
    for r in range(s, e):
        xr, cr, dr = x[r], ct[r], dx[r]
        m, inv = _stats(xr, eps)
        for i in range(d):   # g and xhat, through dr and the scratch row xh
            xh[i] = (xr[i] - m) * inv
            dr[i] = cr[i] * w[i] if has_w else cr[i]
        mg32 = _np.float32(_sum(dr) / d)
        mgx32 = _np.float32(_sum_prod(dr, xh) / d)
        for i in range(d):
            dr[i] = inv * (dr[i] - mg32 - xh[i] * mgx32)
            dw[i] += cr[i] * xh[i]
            db[i] += cr[i]
    return 0


@_parts
def kernel_parts(x, w, ct, dx, dw, db, eps, has_w, starts, stops, p0, p1):
    for p in _nb.prange(p0, p1):
        kernel(x, w, ct, dx, dw[p], db[p], starts[p], stops[p], eps, has_w)
    return 0
""" + _NORM_STATS




def _rows(x, *others):
    """(rows, d) and the parts' bounds for the compiled rows, or None where they do not
    apply (float32, at least 2-d, numba present)."""
    if x.ndim < 2 or x.size == 0 or x.dtype != np.float32 or not loops.available() or \
            any(a is not None and a.dtype != np.float32 for a in others):
        return None
    d = x.shape[-1]
    rows = x.size // d
    return rows, d, loops.bounds(parts(rows, max(1, NORM_PART // d)))


def _or_ones(a, d):
    """The weight (or bias) to pass, ones where there is none (the kernel skips it)."""
    return np.ones(d, np.float32) if a is None else np.ascontiguousarray(a)


def layer_norm(x, w, b, eps):
    """layer_norm over x's last axis (w, b: None or of shape [d]), or None."""
    split = _rows(x, w, b)
    if split is None:
        return None
    rows, d, (starts, stops) = split
    y = np.empty((rows, d), np.float32)
    loops.run_parts(LAYER_NORM_ROWS, (np.ascontiguousarray(x).reshape(rows, d),
                                      _or_ones(w, d), _or_ones(b, d), y, np.float32(eps),
                                      w is not None, b is not None),
                    starts, stops, n_threads())
    return y.reshape(x.shape)


def layer_norm_bwd(ct, x, w, b, eps):
    """[dx, dw (with w), db (with b)] of layer_norm for the cotangent ct, or None."""
    split = _rows(x, w, b, ct)
    if split is None or ct.shape != x.shape:
        return None
    rows, d, (starts, stops) = split
    dx = np.empty((rows, d), np.float32)
    dw, db = (np.empty((len(starts), d), np.float32) for _ in range(2))
    loops.run_parts(LAYER_NORM_ROWS_BWD, (np.ascontiguousarray(x).reshape(rows, d),
                                          _or_ones(w, d),
                                          np.ascontiguousarray(ct).reshape(rows, d),
                                          dx, dw, db, np.float32(eps), w is not None),
                    starts, stops, n_threads())
    return [dx.reshape(x.shape)] + [loops.summed(sums) for a, sums in ((w, dw), (b, db))
                                    if a is not None]


def _row_map(src, x, *others):
    """`src`'s parts over the rows of x and of the same-shaped `others` (float32, the last
    axis the row), into a new array of x's shape (its kernel_parts' last array), or None
    (as _rows)."""
    split = _rows(x, *others)
    if split is None or any(a.shape != x.shape for a in others):
        return None
    rows, d, (starts, stops) = split
    out = np.empty((rows, d), np.float32)
    loops.run_parts(src, (*(np.ascontiguousarray(a).reshape(rows, d) for a in (x, *others)),
                          out), starts, stops, n_threads())
    return out.reshape(x.shape)


def softmax(x):
    """softmax over x's last axis, or None."""
    return _row_map(SOFTMAX_ROWS, x)


def softmax_bwd(ct, y):
    """The cotangent of softmax's operand, y (ct - <ct, y>) a row, for its output y and
    cotangent ct; or None."""
    return _row_map(SOFTMAX_ROWS_BWD, y, ct)


def log_softmax(x):
    """log_softmax over x's last axis, or None."""
    return _row_map(LOG_SOFTMAX_ROWS, x)


def log_softmax_bwd(ct, y):
    """The cotangent of log_softmax's operand, ct - exp(y) sum(ct) a row, for its output y
    and cotangent ct; or None."""
    return _row_map(LOG_SOFTMAX_ROWS_BWD, ct, y)
