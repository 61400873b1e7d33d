"""The matrix products of benchmarks/training.py's MLP and VAE steps, each jitted alone:
mirax (NumPy's BLAS, as its CPU plans call it), JAX (XLA's own CPU products) and PyTorch
eager, in the same process, interleaved round by round.

    python benchmarks/products.py [--threads N] [--rounds 7] [--no-torch]

--threads as in benchmarks/suite.py (default 0: every core; 1: one pinned thread). Each
product appears in the orientations the steps use: x @ w (forward), g @ w^T (the input's
gradient), x^T @ g (the weight's gradient). It tells a training step's gap that comes
from the products (the BLAS library against XLA's) from the gap around them. Results:
benchmarks/results/products_<N>t.md (products_<N>t_no_torch.md).
"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import blas_line, interleave, markdown_table, threads_from_argv, \
    torch_threads  # noqa: E402

THREADS = threads_from_argv(0)

import argparse  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(HERE.parent))
import mirax as mx  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

# (model, rows, in, out): the steps' layers at batch 128
LAYERS = [("mlp", 128, 784, 1024), ("mlp", 128, 1024, 1024), ("vae", 128, 784, 512),
          ("vae", 128, 512, 784)]
ORIENTATIONS = {  # name -> (operand shapes from (rows, in, out), the product)
    "x @ w": (lambda b, i, o: ((b, i), (i, o)), lambda x, w: x @ w),
    "g @ w^T": (lambda b, i, o: ((b, o), (i, o)), lambda g, w: g @ w.T),
    "x^T @ g": (lambda b, i, o: ((b, i), (b, o)), lambda x, g: x.T @ g),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--no-torch", action="store_true",
                    help="leave PyTorch out (its OpenMP threads spin after each of its calls, "
                         "into the next framework's timing)")
    args = ap.parse_args(argv)
    torch = None
    if not args.no_torch:
        try:
            import torch
            torch_threads(THREADS)
        except ImportError:
            pass
    rng = np.random.default_rng(0)
    rows = []
    for model, b, i, o in LAYERS:
        for name, (shapes, f) in ORIENTATIONS.items():
            a_np, b_np = (rng.standard_normal(s).astype(np.float32) for s in shapes(b, i, o))
            fm, fj = mx.jit(f), jax.jit(f)
            ma, mb = mx.asarray(a_np), mx.asarray(b_np)
            ja, jb = jnp.asarray(a_np), jnp.asarray(b_np)
            cases = {"mirax": lambda: np.asarray(fm(ma, mb)),
                     "jax": lambda: fj(ja, jb).block_until_ready()}
            if torch is not None:
                ta, tb = torch.from_numpy(a_np), torch.from_numpy(b_np)
                cases["torch"] = lambda: f(ta, tb)
            t = interleave(cases, rounds=args.rounds, number=5)
            row = [f"{model} {b}x{i}x{o}", name, f"{1e3 * t['mirax']:.3f}",
                   f"{1e3 * t['jax']:.3f}", f"{t['mirax'] / t['jax']:.2f}"]
            if torch is not None:
                row += [f"{1e3 * t['torch']:.3f}", f"{t['torch'] / t['jax']:.2f}"]
            rows.append(row)
            print(" | ".join(row), flush=True)
    head = ["layer (rows x in x out)", "product", "mirax ms", "JAX ms", "mirax / JAX"]
    if torch is not None:
        head += ["torch ms", "torch / JAX"]
    flag, tag = (" --no-torch", "_no_torch") if args.no_torch else ("", "")
    text = (f"# Matrix products of the training steps\n\n`python benchmarks/products.py "
            f"--threads {args.threads}{flag}`: {THREADS} thread(s), median of {args.rounds} "
            f"interleaved rounds of 5 calls. BLAS: {blas_line()}.\n\n"
            + markdown_table(head, rows) + "\n")
    out = HERE / "results" / f"products_{THREADS}t{tag}.md"
    out.write_text(text)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
