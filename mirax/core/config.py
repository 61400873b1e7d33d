"""Configuration: every knob of mirax, declared once.

Each knob has a type, a default, an environment variable (`MIRAX_<NAME>`, read once at
import; this is the only module that reads `os.environ`) and a one-line doc. Code reads a
knob with `config.get(name)`; users change one with `config.update(name, value)` (for the
whole process) or `with config.override(name=value):` (this thread only, for the block).
`config.describe()` returns the table.

Knobs marked `internal` are A/B switches for benchmarks and tests (e.g. turning one CUDA
optimization off to measure it): they have no environment variable and are not part of
the product surface; benchmarks set them through `override`.
"""
from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable


@dataclass(frozen=True)
class Knob:
    name: str
    type: type
    default: Any
    doc: str
    choices: tuple = ()
    internal: bool = False

    @property
    def env(self) -> str | None:
        return None if self.internal else "MIRAX_" + self.name.upper()


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def _check(knob: Knob, value, source: str):
    """`value` converted to the knob's type (from a string when it came from the
    environment); a ValueError naming the knob and the source otherwise."""
    def bad(why):
        return ValueError(f"config: {knob.name} ({source}): {why}; got {value!r}")
    if value is None and knob.default is None:
        return None
    if knob.type is bool:
        if isinstance(value, str):
            v = value.strip().lower()
            if v not in _TRUE + _FALSE:
                raise bad("expected one of 0/1/true/false/yes/no/on/off")
            return v in _TRUE
        if not isinstance(value, (bool, int)) or value not in (0, 1):
            raise bad("expected a bool")
        return bool(value)
    if knob.type is int:
        try:
            v = int(value) if isinstance(value, str) else value
        except ValueError:
            raise bad("expected an integer") from None
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise bad("expected a non-negative integer")
        return v
    if not isinstance(value, (str, Path)):
        raise bad("expected a string")
    v = str(value).strip()
    if knob.choices:
        v = v.lower()
        if v not in knob.choices:
            raise bad(f"expected one of {', '.join(knob.choices)}")
    return v


# --- the knobs ----------------------------------------------------------------------------
KNOBS: dict[str, Knob] = {}


def _declare(name, type_, default, doc, choices=(), internal=False):
    KNOBS[name] = Knob(name, type_, default, doc, tuple(choices), internal)


_declare("device", str, "cpu", "default device for new arrays: cpu, cuda (or cuda:N), gpu")
_declare("debug", int, 0, "1: pass timings and the dispatch report; 2: listings after "
         "each pass; 3: also generated kernel source")
_declare("jit_cache_size", int, 64, "compiled signatures kept per jitted function (LRU)")
_declare("explain_cache_misses", bool, False, "jit says why it retraced, by argument path")
_declare("default_matmul_precision", str, "default", "precision of matrix products made "
         "without an explicit one: default (CUDA float32: TF32), high (3xTF32), highest "
         "(exact float32); or JAX's bfloat16, tensorfloat32, float32. CPU: exact always",
         choices=("default", "high", "highest", "bfloat16", "tensorfloat32", "float32",
                  "fastest"))
_declare("cpu_threads", int, 0, "threads for CPU kernels (0: every core this process may "
         "run on)")
_declare("cpu_native_threads", bool, True, "compiled CPU loops run their parts on numba's "
         "TBB threads (off, or without the tbb package: on mirax's pool of Python threads)")
_declare("cpu_blas_spin", int, 20, "how long OpenBLAS's idle threads spin after a call "
         "before they sleep, as log2 of CPU cycles (4-30; 20: about 0.4 ms, through "
         "back-to-back products but not into the loops after them); 0 leaves the library's "
         "own (2^28 cycles, about 0.1 s); an OPENBLAS_THREAD_TIMEOUT in the environment wins")
_declare("cpu_gemm", str, "auto", "threads of big matrix products in CPU plans: native "
         "(a grid of blocks on numba's native threads, one single-threaded BLAS call a "
         "block), blas (each product whole, on the BLAS library's own threads, which spin "
         "for a while after each call), pool (split over mirax's Python threads) or auto "
         "(native from 8 threads, blas below)", choices=("auto", "native", "blas", "pool"))
_declare("numba", bool, True, "compile CPU fusion nodes of arithmetic ops with numba when "
         "it is installed")
_declare("cpu_malloc", str, "reuse", "CPU plan outputs: reuse (memory glibc keeps, no page "
         "faults per call) or default (plain NumPy allocation)", choices=("reuse", "default"))
_declare("cache_dir", str, str(Path.home() / ".cache" / "mirax"),
         "on-disk cache of compiled kernels")
_declare("cuda_graphs", str, "auto", "capture CUDA plans as CUDA graphs: auto (launch-bound "
         "plans, kept where their replays measure faster), 1 (always), 0 (never)",
         choices=("auto", "1", "0", "on", "off"))
_declare("cuda_strict", bool, False, "CUDA: raise instead of falling back to the host for a "
         "primitive without a native kernel")
_declare("cuda_excess_precision", bool, False, "CUDA: a fused chain over float16 / bfloat16 "
         "keeps its intermediates in float32 and rounds where it stores (as XLA's "
         "xla_allow_excess_precision and torch.compile); off, every operation rounds to the "
         "16-bit type, as NumPy. Read when a plan is made")
_declare("cpu_devices", int, 1, "CPU devices in this process, for pmap / shard_map over "
         "several devices on one machine (JAX's --xla_force_host_platform_device_count)")
_declare("collective_timeout", int, 300, "seconds a collective waits for the other members "
         "(threads, MPI processes) before raising an error naming it (0: wait forever)")
# A/B switches for benchmarks (no environment variable; `config.override` sets them)
_declare("cuda_remat", bool, True, "CUDA: consumers recompute cheap elementwise chains",
         internal=True)
_declare("cuda_merge", bool, True, "CUDA: merge elementwise groups into their consumers",
         internal=True)
_declare("cuda_two_stage", bool, True, "CUDA: two-stage kernels for long-row reductions",
         internal=True)
_declare("cuda_attn_path", str, "", "CUDA attention: force a kernel family (simt, tc)",
         internal=True)
_declare("cuda_attn_tpr", int, 1, "CUDA attention: least threads per row", internal=True)
_declare("cuda_attn_wgmma", bool, True, "CUDA attention: the Hopper kernels (wgmma) where "
         "it applies", internal=True)


# --- values -------------------------------------------------------------------------------
def _from_environment() -> dict:
    values = {}
    for k in KNOBS.values():
        raw = None if k.env is None else os.environ.get(k.env)
        values[k.name] = k.default if raw is None else _check(k, raw, k.env)
    return values


_values: dict = _from_environment()
_lock = threading.Lock()
_local = threading.local()   # .overrides: a list of dicts, innermost last


def _knob(name: str) -> Knob:
    k = KNOBS.get(name)
    if k is None:
        raise KeyError(f"config: unknown knob {name!r}; known: {', '.join(sorted(KNOBS))}")
    return k


def get(name: str):
    """The value of a knob in this thread (innermost override, else the process value)."""
    for layer in reversed(getattr(_local, "overrides", ())):
        if name in layer:
            return layer[name]
    try:
        return _values[name]
    except KeyError:
        _knob(name)
        raise


def update(name: str, value) -> None:
    """Set a knob for the whole process (every thread without an override)."""
    v = _check(_knob(name), value, "config.update")
    with _lock:
        _values[name] = v
    for fn in _listeners.get(name, ()):
        fn(v)


@contextlib.contextmanager
def override(**values):
    """`with config.override(debug=2):` sets knobs for this thread, for the block."""
    layer = {n: _check(_knob(n), v, "config.override") for n, v in values.items()}
    stack = getattr(_local, "overrides", None)
    if stack is None:
        stack = _local.overrides = []
    stack.append(layer)
    try:
        yield
    finally:
        stack.remove(layer)


def thread_overrides() -> tuple:
    """This thread's override layers, to hand to worker threads (`inherit`)."""
    return tuple(getattr(_local, "overrides", ()))


@contextlib.contextmanager
def inherit(layers: tuple):
    """`with config.inherit(layers):` a worker thread sees the knobs its parent set."""
    saved = getattr(_local, "overrides", None)
    _local.overrides = list(layers)
    try:
        yield
    finally:
        _local.overrides = saved if saved is not None else []


_listeners: dict[str, list[Callable]] = {}


def on_update(name: str, fn: Callable) -> None:
    """Call fn(new_value) when `update` changes a knob (for values cached at import)."""
    _listeners.setdefault(_knob(name).name, []).append(fn)


def describe(internal: bool = False) -> str:
    """The knobs as a table: name, value now, default, environment variable, doc."""
    home = str(Path.home())
    rows = [(k.name, str(get(k.name)).replace(home, "~"), str(k.default).replace(home, "~"),
             k.env or "(benchmarks only)", k.doc)
            for k in KNOBS.values() if internal or not k.internal]
    head = ("knob", "value", "default", "environment", "doc")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4]
                     for r in [head] + rows)


def environ_set(**variables: str) -> None:
    """Set variables of the process environment for a library this process loads later
    (the MPI library reads its process manager's address at MPI_Init)."""
    os.environ.update(variables)


@contextlib.contextmanager
def environ_for(name: str, value: str):
    """`name` set to `value` in the process environment for the block, then as it was
    before: for a library that reads its own variable when asked (OpenBLAS's
    OPENBLAS_THREAD_TIMEOUT, re-read by its openblas_read_env)."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def environ_get(name: str, default: str | None = None) -> str | None:
    """A variable of the process environment that is not a mirax knob (the MPI launcher's
    rank and size, a CUDA library path). Only here, so that no other module reads
    `os.environ`."""
    return os.environ.get(name, default)
