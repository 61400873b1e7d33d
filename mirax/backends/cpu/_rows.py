"""numba kernels over rows, for kernels.py (imported only when loops.available()).

Scatter-add of rows into their targets in index order: NumPy's `np.add.at` does the same
additions in the same order (bitwise equal results) but pays per element for its general
indexing: 40 ms against 5 ms for 100,000 rows of 64 float32 (W6 in benchmarks/suite.py).
"""
import numba


@numba.njit(cache=True, nogil=True)
def scatter_add_rows(x, idx, out):
    """out[idx[e], :] += x[e, :] for every row e, in order; x and out are 2-d."""
    for e in range(x.shape[0]):
        r = idx[e]
        for c in range(x.shape[1]):
            out[r, c] += x[e, c]


@numba.njit(cache=True, nogil=True)
def scatter_add_rows_range(x, idx, out, lo, hi):
    """scatter_add_rows for the targets lo <= idx[e] < hi only (one thread's share: every
    target still gets its rows in index order)."""
    for e in range(x.shape[0]):
        r = idx[e]
        if lo <= r < hi:
            for c in range(x.shape[1]):
                out[r, c] += x[e, c]
