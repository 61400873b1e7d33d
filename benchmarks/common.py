"""Shared benchmark plumbing: one thread on one pinned CPU (or n threads on n cores),
interleaved rounds, medians.

Import this module first (before NumPy, JAX or PyTorch) and call `single_thread()` or
`use_threads(n)`: the thread-count variables are read when those libraries load.
"""
import os
import sys
import statistics
import time


def single_thread():
    use_threads(1)


def use_threads(n: int) -> int:
    """Run every framework on n cores (0: all the process may use): the process is pinned
    to the first n of its cores (one core for n = 1), and the thread pools of BLAS,
    OpenMP, XLA and mirax are sized to them. Returns the number of cores."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    n = n or len(cores) or os.cpu_count() or 1
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
              "NUMEXPR_NUM_THREADS", "MIRAX_CPU_THREADS"):
        os.environ[v] = str(n)
    if n == 1:
        os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if cores and n < len(cores):
        os.sched_setaffinity(0, set(cores[:n]))
    return n


def threads_from_argv(default: int) -> int:
    """use_threads() for the script's --threads N (or --threads=N; else `default`), read
    before NumPy, JAX and PyTorch load (they size their pools at import)."""
    args = sys.argv[1:]
    for i, a in enumerate(args):
        if a.startswith("--threads="):
            return use_threads(int(a.split("=", 1)[1]))
        if a == "--threads" and i + 1 < len(args):
            return use_threads(int(args[i + 1]))
    return use_threads(default)


def torch_single_thread():
    torch_threads(1)


def torch_threads(n: int):
    try:
        import torch
        torch.set_num_threads(n)
        torch.set_num_interop_threads(1)
    except Exception:  # not installed, or interop threads already set
        pass


def blas_info() -> list:
    """The BLAS libraries loaded (threadpoolctl's view: library, kernel, threads)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return [{k: d.get(k) for k in ("internal_api", "version", "architecture", "num_threads",
                                   "filepath")} for d in threadpool_info()]


def blas_line(info=None) -> str:
    """The BLAS libraries in use (blas_info(), or `info` as it returned earlier), one line
    for a results file: library, version, kernel and thread count of each."""
    return ", ".join(f"{b['internal_api']} {b['version']} {b['architecture']} kernels, "
                     f"{b['num_threads']} threads" for b in (info or blas_info()))


def interleave(cases: dict, rounds: int = 7, number: int = 1, warmup: int = 2) -> dict:
    """Median seconds per call of each zero-argument callable, timing `number` calls per
    round and visiting the cases round by round (so slow drifts hit all alike).

    Each round's timed calls follow one untimed call of the same case: the framework run
    just before may leave its threads spinning on the cores for a while after its last
    call (OpenMP's and XLA's workers wait that way), and the first call after the switch
    pays for it. On 2 cores that first call measured up to 3x the next ones (a 0.5 ms
    convolution right after PyTorch's)."""
    for fn in cases.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            fn()
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            times[name].append((time.perf_counter() - t0) / number)
    return {name: statistics.median(ts) for name, ts in times.items()}


def markdown_table(header: list, rows: list) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
