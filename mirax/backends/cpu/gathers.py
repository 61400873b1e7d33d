"""index_select and index_add over rows as compiled loops, for kernels.py's claims.

index_select copies row idx[r] of x into row r of the output (a zero row for an index
outside x); its parts are ranges of output rows, spread evenly over the call's threads
(a copy: any split gives the same values). index_add adds row e of x into row idx[e] of
the output, in index order, as NumPy's `np.add.at` does (bitwise equal: the same
additions in the same order; `np.add.at` pays per element for its general indexing, 40
ms against 5 for 100,000 rows of 64 float32, W6 of benchmarks/suite.py). Its parts are
ranges of targets, each scanning every index and adding the rows whose target is its
own, in index order (the values do not depend on the split; a row whose index is outside
the output lands in no part and is dropped, as the reference drops it). Sorting the rows
by target first, so that each part reads only its rows, measured slower at every thread
count (W6's index_add on the GPU machine's 16 cores, ms at 1 / 4 / 16 threads: 4.5 / 2.3 /
1.6 sorted, 4.3 / 1.1 / 1.2 scanning): x is then read in a scattered order.
scatter_add into x's leading axis, one index a row (the gradient of an embedding
lookup), is index_add onto a copy of x: NumPy's `np.add.at` took 1.2 ms for 1,024 rows of
128 float32 into 64 (the training transformer's embedding) on one core, the rows 0.056.
The parts run on numba's native threads where they are ready, else on the pool
(loops.run_parts). index_select was NumPy's `take` on one thread: 3.8-7.4 ms on the
device against 0.5 in 16 parts, 0.8 in 4.
"""
from __future__ import annotations

import numpy as np

from mirax.backends.cpu import loops
from mirax.backends.cpu.threads import n_threads

# the dtypes numba copies and adds as NumPy does
_TYPES = {np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128,
                                np.int32, np.int64)}

INDEX_SELECT_ROWS = """
def kernel(x, idx, out, s, e):
    n = x.shape[0]
    for r in range(s, e):
        i = idx[r]
        o = out[r]
        if i >= 0 and i < n:
            xi = x[i]
            for c in range(o.size):
                o[c] = xi[c]
        else:
            for c in range(o.size):
                o[c] = 0
    return 0
""" + loops.PARTS_OF_3
# every index scanned; the rows whose target lies in [lo, hi) added in index order
INDEX_ADD_ROWS = """
def kernel(x, idx, out, lo, hi):
    for e in range(x.shape[0]):
        r = idx[e]
        if r >= lo and r < hi:
            xe, o = x[e], out[r]
            for c in range(o.size):
                o[c] += xe[c]
    return 0
""" + loops.PARTS_OF_3

# the same, each row scaled by its own factor first (index_add of a product x * w[:, None]
# whose only use is the index_add: the product never made)
INDEX_ADD_SCALED_ROWS = """
def kernel(x, w, idx, out, lo, hi):
    for e in range(x.shape[0]):
        r = idx[e]
        if r >= lo and r < hi:
            xe, o, we = x[e], out[r], w[e]
            for c in range(o.size):
                o[c] += xe[c] * we
    return 0


@_parts
def kernel_parts(x, w, idx, out, starts, stops, p0, p1):
    for p in _nb.prange(p0, p1):
        kernel(x, w, idx, out, starts[p], stops[p])
    return 0
"""


def _fast(x, idx) -> bool:
    return (x.ndim >= 2 and x.size > 0 and x.dtype in _TYPES and idx.ndim == 1 and
            idx.dtype.kind in "iu" and loops.available())


def index_select(x, idx):
    """x[idx] along axis 0 (zero rows for indices outside x), or None."""
    if not _fast(x, idx):
        return None
    row = x.size // x.shape[0]
    out = np.empty((len(idx), row), x.dtype)
    if len(idx):
        loops.run_parts(INDEX_SELECT_ROWS, (np.ascontiguousarray(x).reshape(-1, row),
                                            np.ascontiguousarray(idx), out),
                        *loops.even_bounds(len(idx), 2 * out.nbytes), n_threads())
    return out.reshape((len(idx),) + x.shape[1:])


def index_add(x, idx, num_rows: int, w=None, into=None):
    """The rows of x (each times w's entry for it, where w is given: one factor a row, of
    x's dtype) summed into num_rows rows by idx (rows outside dropped), or None; the
    rows start from zeros, or from `into` ([num_rows, ...] of x's dtype: added to a copy,
    as scatter_add does)."""
    if not _fast(x, idx) or num_rows == 0:
        return None
    row = x.size // x.shape[0]
    out = np.zeros((num_rows, row), x.dtype) if into is None else \
        np.array(into, dtype=x.dtype, order="C").reshape(num_rows, row)
    rows = np.ascontiguousarray(x).reshape(-1, row)
    src, args = INDEX_ADD_ROWS, (rows, np.ascontiguousarray(idx), out)
    if w is not None:
        src, args = INDEX_ADD_SCALED_ROWS, (rows, np.ascontiguousarray(w).reshape(-1), *args[1:])
    loops.run_parts(src, args, *loops.even_bounds(num_rows, 2 * x.nbytes), n_threads())
    return out.reshape((num_rows,) + x.shape[1:])


def scatter_add_rows(x, idx, upd, axes, mode):
    """scatter_add into x's leading axis (axes (0,), one index a row: an embedding's
    gradient) as index_add onto a copy of x, bitwise the reference's `np.add.at`; or None
    for the other scatters."""
    if tuple(axes) != (0,) or idx.shape[-1:] != (1,) or x.ndim < 2 or \
            mode not in ("clip", "drop"):
        return None
    i = idx.reshape(-1)
    if mode == "clip":
        i = np.clip(i, 0, x.shape[0] - 1)
    return index_add(upd.reshape((-1,) + x.shape[1:]), i, x.shape[0], into=x)
