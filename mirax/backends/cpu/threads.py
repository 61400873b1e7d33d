"""The CPU backend's threads: a pool for parallel kernels (big elementwise ops and
reductions, blocked fusion loops, matrix products, attention, row-wise composites,
scatter), numba's native threads for compiled loops, and the BLAS library's thread count.

Engines: a pool of plain Python threads running NumPy calls and BLAS on parts of an op
(and numba kernels compiled `nogil`); both release the GIL in their inner loops, so the
parts of one op run at once on every core. But every part takes the GIL to start and to
finish: a hand-off cost 40-50 us on 2 cores, and on 16 cores the parts queue for the GIL
(a compiled loop called about nine times a thread took 4.6 ms on one thread, 2.2 on
four, 4.5 on sixteen). So compiled loops (fusions, activations) split themselves into
parts on numba's native threads instead, in one call (`Native` below): TBB's threads,
which sleep when idle as the pool's workers do, so the two engines do not take each
other's cores. Compiled loops that need matrix products (convolutions' blocks, attention's
(batch, head) pairs, parts of mid-size products) call the BLAS library's gemm themselves
(`Blas.cblas`, loops.gemm_source), one BLAS thread each, so those kernels too are one
call on native threads.

The caller claims parts too, so it never waits on a worker that has not woken yet: on a
machine whose cores are busy with other processes it may run every part itself. (An
earlier rule that ran the next 200 calls on the caller alone after workers came late
misfired on idle machines, where a worker's wake-up and first GIL hand-off alone take
longer than a small part: measured on 16 idle cores, it made the W5 transformer step
2.2x slower and the W6 graph layer 1.9x slower.)

Where the split decides a result's rounding (reductions: partial results combined in part
order), parts have a fixed size that does not depend on the thread count, so a plan's
results are the same, bit for bit, at every thread count and on every run; against the
unsplit NumPy call they differ by rounding only. Elementwise work, whose values do not
depend on the split, is spread evenly over the threads of the call.

Thread count: `mx.config` knob cpu_threads (0: every core of this process's CPU affinity,
read at each call, so `config.override(cpu_threads=1)` holds for a block). Small ops stay on
the calling thread: a kernel goes parallel only with at least two parts of work.
GEMMs: inside a plan BLAS runs on one thread (`blas.enter`, the caller's count restored at
the plan's end). A product big enough for several threads runs whole on as many of BLAS's
own threads as it has GEMM_FLOPS_PER_THREAD (`blas.call`; knob cpu_gemm "blas"), or is
cut into a grid of blocks on numba's native threads, one single-threaded BLAS call a block
("native"), or split over this pool ("pool"); "auto", the default, takes "native" on many
threads and "blas" on few (parallel.NATIVE_GEMM_THREADS says what was measured). Whole,
BLAS's threads share the packed operands, where each block packs its rows and columns
again; but OpenBLAS's threads spin after each call (by default 2^28 cycles, about 0.1 s)
and take the cores from the kernels that follow, and from JAX's or PyTorch's threads in
the same process: on the 16-core Xeon a parallel kernel waits for its slowest part, and a
part whose thread lost its core waits a time slice. So mirax shortens the spin to 2^20
cycles (knob cpu_blas_spin, `Blas.set_spin`): long enough to carry BLAS's threads through
back-to-back products, short enough to be over before the loops after them. On 2 cores
(`OPENBLAS_THREAD_TIMEOUT=28|20|16|12 python benchmarks/suite.py --threads 0 --no-torch
--no-eager --rounds 3`, each in its own process, mirax jit ms): W1 8.8 / 7.4 / 8.4 / 9.4,
W3 3.9 / 2.2 / 2.7 / 2.7, W5 57 / 51 / 51 / 41, W6 54 / 29 / 33 / 30; the VAE's epoch
(`benchmarks/training.py`'s) 269 -> 222 ms. (With 2^4 BLAS's threads sleep at once and
waking them, one after another, cost more than the products: W1 3.7 -> 9.5 ms on 16
cores.) On a
machine whose cores are busy with other processes BLAS's threads also wait on each other
(a 256x512x512 product once measured 74 ms on two busy cores against 0.9 ms on one
thread): "pool" and "native" are for those.
"""
from __future__ import annotations

import ctypes
import itertools
import os
import queue
import threading

from mirax.core import config, profile_events


def affinity() -> int:
    """The number of cores this process may run on: its CPU affinity, capped by a cgroup
    CPU quota (a container's `--cpus`), rounded up."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:   # not Linux
        n = os.cpu_count() or 1
    quota = _cgroup_cpus()
    return min(n, quota) if quota else n


def _cgroup_cpus() -> int | None:
    """The CPUs a cgroup quota allows (v2 cpu.max, v1 cfs_quota_us / cfs_period_us), or
    None without one."""
    for path, period in (("/sys/fs/cgroup/cpu.max", None),
                         ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
                          "/sys/fs/cgroup/cpu/cpu.cfs_period_us")):
        try:
            with open(path) as f:
                fields = f.read().split()
            if period is not None:
                with open(period) as f:
                    fields.append(f.read().strip())
            quota, every = int(fields[0]), int(fields[1])
        except (OSError, ValueError, IndexError):   # no such file, or "max": no quota
            continue
        if quota > 0 and every > 0:
            return max(1, -(-quota // every))
    return None


def n_threads() -> int:
    """Threads for CPU kernels now (the cpu_threads knob; 0: the process's affinity)."""
    t = config.get("cpu_threads")
    return t if t > 0 else _AFFINITY


_AFFINITY = affinity()


def chain_threads() -> int:
    """Threads for kernels whose parts are chains of NumPy calls (blocked fusions, gelu,
    row-wise composites, attention's batch parts): each call takes the GIL to enter and
    leave its loop, so past a few threads the parts queue for the GIL instead of working.
    Measured on 16 idle cores (a 1M-element gelu backward, 15 calls a block): 3.0 ms on
    1 thread, 1.9 on 2, 2.0 on 4, 2.5 on 8, 3.3 on 16. Kernels whose parts are single
    calls (BLAS, one ufunc, a numba loop) use every thread."""
    return min(n_threads(), CHAIN_THREADS)


def parts(n: int, grain: int) -> list[tuple[int, int]]:
    """[0, n) cut into consecutive (start, stop) ranges of `grain` (the last one shorter)."""
    return [(s, min(s + grain, n)) for s in range(0, n, grain)]


# --- the pool -----------------------------------------------------------------------------
class Pool:
    """Worker threads that take jobs from one queue; `map` runs a function over part
    indices on the caller and up to threads - 1 workers, parts claimed in order."""

    def __init__(self):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._local = threading.local()

    def _ensure(self, n: int):
        if len(self._workers) >= n:
            return
        with self._lock:
            while len(self._workers) < n:
                t = threading.Thread(target=self._work, name=f"mirax-cpu-{len(self._workers)}",
                                     daemon=True)
                t.start()
                self._workers.append(t)

    def _work(self):
        self._local.worker = True
        while True:
            self._jobs.get()()

    @staticmethod
    def _timed(rec, fn, i, n):
        t0 = profile_events.now()
        try:
            return fn(i)
        finally:
            rec.add(f"part {i}/{n}", "pool", t0, profile_events.now())

    def map(self, fn, n: int, threads: int | None = None) -> list:
        """[fn(0), ..., fn(n - 1)], computed on up to `threads` threads (default
        n_threads()). A call from inside a worker runs inline (no nested parallelism).

        The caller claims parts too: on a busy machine it may run every part itself, and
        then returns as soon as the parts a worker did claim are done (workers that wake
        later find none)."""
        t = min(n_threads() if threads is None else threads, n)
        rec = profile_events.active   # a profiler trace: a slice per part, on its thread
        if t <= 1 or getattr(self._local, "worker", False):
            if rec is None or n == 1:
                return [fn(i) for i in range(n)]
            return [self._timed(rec, fn, i, n) for i in range(n)]
        out: list = [None] * n
        errors: list = []
        claim = itertools.count()   # next() on a count is atomic under the GIL
        left = [n]                  # parts not finished yet
        lock = threading.Lock()
        finished = threading.Event()


        def drain():
            while True:
                i = next(claim)
                if i >= n:
                    return
                try:
                    out[i] = fn(i) if rec is None else self._timed(rec, fn, i, n)
                except BaseException as e:   # re-raised on the caller
                    errors.append(e)
                with lock:
                    left[0] -= 1
                    if left[0] == 0:
                        finished.set()

        self._ensure(t - 1)
        for _ in range(t - 1):
            self._jobs.put(drain)
        drain()
        finished.wait()
        if errors:
            raise errors[0]
        return out


# primitives whose CPU kernels call BLAS on the pool's threads (plans that hold one run
# with one BLAS thread: lower.py)
BLAS_USERS = frozenset({"dot_general", "dot_product_attention", "dot_product_attention_bwd",
                        "conv_general_dilated"})
pool = Pool()


def run_parts(fn, n: int, grain: int) -> list:
    """[fn(s, e) for each part of [0, n)] on the pool (in part order)."""
    ps = parts(n, grain)
    return pool.map(lambda i: fn(*ps[i]), len(ps))


# --- native threads -----------------------------------------------------------------------
class Native:
    """numba's threading layer, for compiled kernels that split themselves into parts
    (`prange` over the parts, parallel=True): one call from Python, its parts run on
    native threads. Measured on this machine's 2 cores, x * 2 + 1 over 16K float32
    elements: 11 us on one thread, 38 us in two parts on the pool (the worker's wake-up
    and the GIL's passes), 10-16 us in two parts on TBB's or OpenMP's threads; on 64K
    elements 42, 62 and 30-40 us. On 16 cores the pool's parts queue for the GIL.

    The layer is TBB's (the `tbb` package; numba finds its library once it is loaded):
    safe for calls from several threads at once and in forked children, and its threads
    sleep when a loop ends. GNU OpenMP's spin for milliseconds after each loop and took
    the cores from the pool's products that follow (W5 on 2 cores: its products 3.0 ->
    4.1-5.5 ms); its wait policy is read once, when the library loads, and PyTorch loads
    its own copy first, so mirax cannot set it. OpenMP is used only where the user chose
    it (NUMBA_THREADING_LAYER), not in a forked child (numba aborts there). numba's
    workqueue layer aborts the process on concurrent calls: never used. Without a layer,
    or with the `cpu_native_threads` knob off, kernels run their parts on the pool."""

    def __init__(self):
        self._state = None   # None: not tried yet; False: unusable; True: launched
        self._numba = None
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self):
        if self._state and self._numba.threading_layer() == "omp":
            self._state = False

    def ready(self) -> bool:
        """Whether parallel kernels may run now (launches the layer on first use)."""
        if not config.get("cpu_native_threads") or self._state is False:
            return False
        if self._state is None:
            self._state = self._launch()
        return self._state

    def _launch(self) -> bool:
        # With one CPU TBB starts no worker threads, and numba's TBB layer then hung at
        # the process's exit (its exit handler waits on a task queued when it launched,
        # which no thread ran: seen with the tests pinned to one core by `taskset`); one
        # CPU has no parts to share out anyway
        if affinity() < 2:
            return False
        try:
            import numba
        except ImportError:
            return False
        chosen = numba.config.THREADING_LAYER
        if chosen == "default":   # (the user's choice stands)
            _load_tbb()
            numba.config.THREADING_LAYER = "safe"   # TBB only
        try:
            numba.get_num_threads()   # (launches the layer)
        except (ValueError, RuntimeError):   # no such layer here: numba's own default back
            numba.config.THREADING_LAYER = chosen
            return False
        self._numba = numba
        return numba.threading_layer() in ("tbb", "omp")

    def threads(self, n: int):
        """Up to `n` native threads for this thread's next kernels."""
        n = min(n, self._numba.config.NUMBA_NUM_THREADS)
        if n != self._numba.get_num_threads():
            self._numba.set_num_threads(n)


def _load_tbb():
    """Load the `tbb` package's library, which pip puts in the environment's lib/ (off
    the loader's path), so that numba's TBB layer finds it."""
    try:
        from importlib import metadata
        files = metadata.files("tbb") or []
    except Exception:   # not installed: numba may still find a system TBB
        return
    for f in files:
        if (f.name.startswith("libtbb.so.") and f.name.count(".") == 2) or \
                f.name == "tbb12.dll":
            try:
                ctypes.CDLL(str(f.locate()), mode=getattr(ctypes, "RTLD_GLOBAL", 0))
            except OSError:
                pass
            return


native = Native()


# --- BLAS threads -------------------------------------------------------------------------
class Blas:
    """The thread count of the BLAS library NumPy calls (OpenBLAS, found among the
    process's loaded libraries); a no-op where there is none we can drive."""

    def __init__(self):
        self._set = self._get = self._core = self._lib = None
        self.current = None
        self.spin = None    # the cpu_blas_spin last applied (None: not yet)
        self._lock = threading.Lock()
        self.library = None
        self._names = ("", "")   # the library's symbol prefix and suffix
        # NumPy's own first (SciPy may have loaded another OpenBLAS before mirax)
        for path in sorted(_loaded_libraries(), key=lambda p: "numpy" not in p):
            name = os.path.basename(path).lower()
            if "openblas" not in name:
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for pre, suf in (("scipy_", "64_"), ("", "64_"), ("scipy_", ""), ("", "")):
                if hasattr(lib, f"{pre}openblas_set_num_threads{suf}"):
                    self._set = getattr(lib, f"{pre}openblas_set_num_threads{suf}")
                    self._get = getattr(lib, f"{pre}openblas_get_num_threads{suf}")
                    core = getattr(lib, f"{pre}openblas_get_corename{suf}", None)
                    if core is not None:
                        core.restype = ctypes.c_char_p
                    self._core, self.library = core, path
                    self._lib, self._names = lib, (pre, suf)
                    break
            if self._set is not None:
                break
        if self._set is not None:
            self.current = self._get()
            self.set_spin(config.get("cpu_blas_spin"))

    @property
    def available(self) -> bool:
        return self._set is not None

    def cblas(self, name: str) -> tuple[int, bool] | None:
        """The address of the library's CBLAS function `name` (say "cblas_sgemm") and
        whether its integers are 64-bit, for compiled loops that call it; None where
        there is none."""
        pre, suf = self._names
        fn = getattr(self._lib, f"{pre}{name}{suf}", None) if self._lib is not None else None
        if fn is None:
            return None
        return ctypes.cast(fn, ctypes.c_void_p).value, suf == "64_"

    def corename(self) -> str:
        return self._core().decode() if self._core is not None else "?"

    def threads(self) -> int | None:
        return self._get() if self._get is not None else None

    def set(self, n: int):
        """Use `n` threads for the next BLAS calls (a library call only on a change)."""
        if n != self.current and self._set is not None:
            self._set(n)
            self.current = n

    def call(self, n: int, fn, *args):
        """fn(*args) on `n` BLAS threads, the count before given back after."""
        prev = self.current
        self.set(n)
        spin = config.get("cpu_blas_spin")
        if spin != self.spin:
            self.set_spin(spin)
        try:
            return fn(*args)
        finally:
            self.set(prev)

    def set_spin(self, e: int):
        """OpenBLAS's idle threads spin 2^e cycles after a call from now on (e = 0: the
        library's own time), unless the user set OPENBLAS_THREAD_TIMEOUT. The library
        reads the variable when it loads (before mirax, as a rule): it is set for its
        re-read (`openblas_read_env`) and taken out again, and the threads are stopped
        (`blas_thread_shutdown_`), to start with the new time at the next threaded call.
        Called when mirax finds the library (at import, before any plan runs a product on
        its threads) and at the first threaded product after the knob changed."""
        with self._lock:
            if e != self.spin:
                self._set_spin(e)

    def _set_spin(self, e: int):
        first, self.spin = self.spin is None, e
        read = getattr(self._lib, "openblas_read_env", None)
        stop = getattr(self._lib, "blas_thread_shutdown_", None)
        if read is None or stop is None or (first and not e) or \
                config.environ_get("OPENBLAS_THREAD_TIMEOUT") is not None:
            return
        if e:
            with config.environ_for("OPENBLAS_THREAD_TIMEOUT", str(e)):
                read()
        else:
            read()
        stop()

    def timeout(self) -> int | None:
        """The spin time OpenBLAS read (log2 of cycles; 0: its own), or None."""
        fn = getattr(self._lib, "openblas_thread_timeout", None)
        return fn() if fn is not None else None

    def enter(self):
        """One BLAS thread from here (but for a plan's big products); returns the
        count to give back to `exit` (the user's own NumPy calls keep theirs)."""
        prev = self.current
        if prev != 1:
            self.set(1)
        return prev

    def exit(self, prev):
        if prev != 1 and prev is not None:
            self.set(prev)


def _loaded_libraries() -> list[str]:
    try:
        with open("/proc/self/maps") as f:
            return list(dict.fromkeys(ln.split()[-1] for ln in f
                                      if ln.rstrip().endswith(".so") or ".so." in ln))
    except OSError:   # not Linux: no control (BLAS keeps its own count)
        return []


blas = Blas()

CHAIN_THREADS = 4   # chain_threads()'s cap

# GEMM flops (2 m n k) per thread: ~150 us of one core's sgemm; a smaller part costs too
# much to hand to a thread (waking it, packing the shared operand again)
GEMM_FLOPS_PER_THREAD = 1 << 24
