"""Compiled CPU loops on N cores: mirax's two engines for their parts (numba's native
threads, `cpu_native_threads` on; the pool of Python threads, off) side by side with JAX
jit and PyTorch eager on the same elementwise programs.

    python benchmarks/loops_threads.py --threads N   (0: every core; default 1)

Cases: a tanh fusion over 1M and 100K float32 values (tanh(2x) x + 1), an arithmetic
fusion over 1M (2x + 1 - x^2) and gelu (tanh form) over [8,128,1024]. Prints ms a call
and the ratio to JAX jit (medians of interleaved rounds, each timed call after an
untimed one: benchmarks/common.py).
"""
import argparse
from pathlib import Path

from common import interleave, markdown_table, threads_from_argv, torch_threads

THREADS = threads_from_argv(1)

import numpy as np  # noqa: E402

import mirax as mx  # noqa: E402
import mirax.numpy as mnp  # noqa: E402


def cases():
    """(name, input shape, mirax function, JAX function, PyTorch function)."""
    import jax
    import jax.numpy as jnp
    out = [("tanh fusion", (1 << 20,), lambda x: mnp.tanh(x * 2.0) * x + 1.0,
            lambda x: jnp.tanh(x * 2.0) * x + 1.0),
           ("tanh fusion", (100_000,), lambda x: mnp.tanh(x * 2.0) * x + 1.0,
            lambda x: jnp.tanh(x * 2.0) * x + 1.0),
           ("arithmetic fusion", (1 << 20,), lambda x: x * 2.0 + 1.0 - x * x,
            lambda x: x * 2.0 + 1.0 - x * x),
           ("gelu", (8, 128, 1024), lambda x: mx.nn.gelu(x),
            lambda x: jax.nn.gelu(x, approximate=True))]
    try:
        import torch
        torch_threads(THREADS)
        tf = {"tanh fusion": lambda x: torch.tanh(x * 2.0) * x + 1.0,
              "arithmetic fusion": lambda x: x * 2.0 + 1.0 - x * x,
              "gelu": lambda x: torch.nn.functional.gelu(x, approximate="tanh")}
    except ImportError:
        tf = {}
    return [(name, shape, f, jax.jit(g), tf.get(name)) for name, shape, f, g in out], jax


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args(argv)
    rows = []
    todo, jax = cases()
    for name, shape, f, g, t in todo:
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        xm, xj = mx.asarray(x), jax.device_put(x)
        jf = mx.jit(f)

        def engine(on):
            def call():
                with mx.config.override(cpu_native_threads=on):
                    np.asarray(jf(xm))
            return call
        runs = {"mirax native": engine(True), "mirax pool": engine(False),
                "JAX jit": lambda: g(xj).block_until_ready()}
        if t is not None:
            import torch
            xt = torch.from_numpy(x)
            runs["torch eager"] = lambda: t(xt)
        med = interleave(runs, rounds=args.rounds, number=5)
        ref = med["JAX jit"]
        label = f"{name} f32{list(shape)}"
        for k, v in med.items():
            rows.append([label, k, f"{1e3 * v:.3f}", f"{v / ref:.2f}"])
            print(f"{label:<32} {k:<14} {1e3 * v:8.3f} ms {v / ref:6.2f}x JAX jit",
                  flush=True)
    md = (f"# Compiled CPU loops, {THREADS} thread(s)\n\n`python benchmarks/loops_threads.py "
          f"--threads {args.threads}`: medians of {args.rounds} interleaved rounds (5 calls "
          "each); mirax native / pool: `cpu_native_threads` on / off.\n\n" +
          markdown_table(["case", "framework", "ms", "vs JAX jit"], rows) + "\n")
    out = Path(__file__).parent / "results" / f"loops_threads_{THREADS}t.md"
    out.write_text(md)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
