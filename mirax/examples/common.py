"""Shared helpers for the examples: shipped data files, a progress bar that falls back to
plain prints when tqdm is missing, and a loss-curve PNG when matplotlib is installed."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"


def data_path(name: str) -> Path:
    path = DATA / name
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: the examples' data ships in "
                                "mirax/examples/data (package-data in pyproject.toml)")
    return path


def limit_blas_threads(n: int = 1) -> bool:
    """Ask NumPy's bundled OpenBLAS for `n` threads (at run time: by now numpy is imported, so
    OPENBLAS_NUM_THREADS would come too late). The examples' matrices are small; on 2 shared
    cores, OpenBLAS's spinning threads cost ~3x the CPU time of one thread. Returns whether
    it worked (False for other BLAS builds: nothing changes then)."""
    import ctypes
    import glob

    import numpy as np
    libs = glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs",
                                  "*openblas*"))
    for lib in libs:
        try:
            dll = ctypes.CDLL(lib)
        except OSError:
            continue
        for name in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_",
                     "openblas_set_num_threads"):
            fn = getattr(dll, name, None)
            if fn is not None:
                fn(ctypes.c_int(n))
                return True
    return False


class Progress:
    """`for i in Progress(n, "charlm"): ... bar.set(loss=...)`: tqdm when installed (and
    `quiet` is off), else a line every `every` steps."""

    def __init__(self, total: int, desc: str, every: int | None = None, quiet: bool = False):
        self.total, self.desc, self.quiet = total, desc, quiet
        self.every = every or max(1, total // 10)
        self.info: dict = {}
        self._bar = None
        if not quiet:
            try:
                from tqdm.auto import tqdm
                # redraw less often when the output is a log file rather than a terminal
                every_s = 0.1 if sys.stdout.isatty() else 10.0
                self._bar = tqdm(total=total, desc=desc, file=sys.stdout, dynamic_ncols=True,
                                 mininterval=every_s)
            except ImportError:
                pass

    def __iter__(self):
        self.t0 = time.perf_counter()
        for i in range(self.total):
            yield i
            if self._bar is not None:
                self._bar.update(1)
                self._bar.set_postfix({k: _fmt(v) for k, v in self.info.items()}, refresh=False)
            elif not self.quiet and ((i + 1) % self.every == 0 or i + 1 == self.total):
                shown = "  ".join(f"{k} {_fmt(v)}" for k, v in self.info.items())
                print(f"{self.desc}: step {i + 1}/{self.total}  {shown}  "
                      f"({time.perf_counter() - self.t0:.1f} s)", flush=True)
        if self._bar is not None:
            self._bar.close()

    def set(self, **info) -> None:
        self.info.update(info)

    def write(self, text: str) -> None:
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.write(text)
        else:
            print(text, flush=True)


def _fmt(v) -> str:
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def plot_curves(path: str | os.PathLike | None, curves: dict, title: str,
                ylabel: str = "loss", hlines: dict | None = None) -> str | None:
    """Write a PNG of named (steps, values) curves; returns the path, or None when matplotlib
    is missing or path is None."""
    if path is None:
        return None
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, (xs, ys) in curves.items():
        ax.plot(xs, ys, label=name)
    for name, y in (hlines or {}).items():
        ax.axhline(y, linestyle="--", color="gray", linewidth=1)
        ax.text(0, y, f" {name}", va="bottom", fontsize=8, color="gray")
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return str(path)


def add_run_args(ap, name: str):
    """The flags every example shares: --seed, --plot, --quiet, --blas-threads."""
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot", default=f"{name}_loss.png", help="'' to skip the PNG")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--blas-threads", type=int, default=1,
                    help="OpenBLAS threads (0: leave as is); small matrices run best on 1")


def start_run(args):
    """Apply the shared flags; returns `say`, a print that --quiet silences."""
    if args.blas_threads:
        limit_blas_threads(args.blas_threads)
    return (lambda *a: None) if args.quiet else print


def fit(step, model, state, steps: int, name: str, quiet: bool = False):
    """Run `model, state, loss = step(model, state)` for `steps` steps with a progress bar.

    Returns (model, state, losses, seconds)."""
    losses = []
    t0 = time.perf_counter()
    bar = Progress(steps, name, quiet=quiet)
    for _ in bar:
        model, state, loss = step(model, state)
        losses.append(float(loss))
        bar.set(loss=losses[-1])
    return model, state, losses, time.perf_counter() - t0
