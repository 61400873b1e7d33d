"""2-d convolutions on the CPU: a jitted 3x3 "SAME" convolution (NHWC, HWIO), forward
and forward + backward (the gradient of sum(conv(x, w)^2) with respect to x and w), mirax
against JAX jit and PyTorch eager (its NCHW conv2d, autograd), interleaved round by round,
medians; ratios mirax / peer (below 1: mirax faster).

Shapes: the small ResNet of benchmarks/training.py (batch 16, 16x16, 16 channels), then
wider and bigger ones, and a deep layer (256 channels). mirax's kernel:
backends/cpu/conv.py.

    python benchmarks/conv.py [--threads N] [--rounds 7]

writes benchmarks/results/conv_<threads>t.md.
"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import blas_info, interleave, markdown_table, threads_from_argv, torch_threads  # noqa: E402,E501

THREADS = threads_from_argv(0)

import argparse  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(HERE.parent))
import mirax as mx  # noqa: E402

SHAPES = [(16, 16, 16, 16, 16), (64, 16, 16, 32, 32), (32, 32, 32, 64, 64),
          (8, 14, 14, 256, 256)]  # N H W Ci Co


def frameworks(x, w):
    """name -> (forward, forward + backward) zero-argument callables."""
    out = {}

    def make(lax, jit, grad, xx, ww):
        def conv(a, b):
            return lax.conv_general_dilated(a, b, (1, 1), "SAME",
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))
        fwd = jit(conv)
        both = jit(grad(lambda a, b: (conv(a, b) ** 2).sum(), argnums=(0, 1)))
        return fwd, both, xx, ww
    fwd, both, xm, wm = make(mx.lax, mx.jit, mx.grad, mx.asarray(x), mx.asarray(w))
    out["mirax jit"] = (lambda: fwd(xm, wm).block_until_ready(),
                        lambda: mx.block_until_ready(both(xm, wm)))
    try:
        import jax
        fwd_j, both_j, xj, wj = make(jax.lax, jax.jit, jax.grad, jax.numpy.asarray(x),
                                     jax.numpy.asarray(w))
        out["jax jit"] = (lambda: fwd_j(xj, wj).block_until_ready(),
                          lambda: jax.block_until_ready(both_j(xj, wj)))
    except ImportError:
        pass
    try:
        import torch
        torch_threads(THREADS)
        xt = torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
        wt = torch.from_numpy(np.ascontiguousarray(w.transpose(3, 2, 0, 1)))
        conv = torch.nn.functional.conv2d

        def t_fwd():
            with torch.no_grad():
                return conv(xt, wt, padding=1)

        def t_both():
            a, b = xt.clone().requires_grad_(True), wt.clone().requires_grad_(True)
            (conv(a, b, padding=1) ** 2).sum().backward()
        out["torch eager"] = (t_fwd, t_both)
    except ImportError:
        pass
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    for n, h, wd, ci, co in SHAPES:
        x = rng.standard_normal((n, h, wd, ci)).astype(np.float32)
        w = (rng.standard_normal((3, 3, ci, co)) / np.sqrt(9 * ci)).astype(np.float32)
        fws = frameworks(x, w)
        for k, what in enumerate(("forward", "forward + backward")):
            t = interleave({name: f[k] for name, f in fws.items()}, rounds=args.rounds)
            base = t["mirax jit"]
            for name, s in t.items():
                rows.append([f"{n}x{h}x{wd}x{ci} -> {co}", what, name, f"{1e3 * s:.2f}",
                             f"{base / s:.2f}" if name != "mirax jit" else ""])
            print(rows[-len(t):], flush=True)
    kernels = [(b["internal_api"], b["architecture"]) for b in blas_info()]
    text = (f"# 3x3 convolutions, mirax vs JAX and PyTorch (CPU)\n\n`python "
            f"benchmarks/conv.py --threads {args.threads} --rounds {args.rounds}`: "
            f"{THREADS} thread(s), medians of interleaved rounds; \"mirax / this\": "
            f"mirax's time over the peer's (above 1: mirax slower). BLAS: {kernels}.\n\n"
            + markdown_table(["shape (N H W Ci -> Co)", "pass", "framework", "ms",
                              "mirax / this"], rows) + "\n")
    out = HERE / "results" / f"conv_{THREADS}t.md"
    out.write_text(text)
    print(text)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
