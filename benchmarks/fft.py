"""FFT benchmark: mirax.numpy.fft against NumPy (pocketfft), JAX and PyTorch (optional),
forward and gradient.

Cases: fft, ifft (complex64) and rfft (float32) of 2^10 .. 2^22 points (every other power
by default, each power with --all) and a 2-D fft of 4096 x 4096 (complex64). Forward is the
transform itself; gradient is grad of sum(|fft(x)|^2) with respect to x (one forward, one
transposed transform and the elementwise work). mirax and JAX run under jit; NumPy has no
gradient (its column is forward only); PyTorch is eager (its gradient through autograd),
and its column is skipped when torch is not importable.

On the CPU everything runs single-threaded on one pinned core (benchmarks/common.py). With
--device cuda, mirax runs on cuda:0 (cuFFT through CuPy) against torch.fft on the GPU and
JAX on its GPU; NumPy is left out. Figures are milliseconds per call (median of
interleaved rounds) and the ratio peer / mirax (> 1: mirax faster).

    PYTHONPATH=. python benchmarks/fft.py [--quick] [--all] [--device cpu|cuda]
        [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
# this checkout's mirax, wherever the script is run from
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import interleave, markdown_table, single_thread, torch_single_thread  # noqa: E402


def _cases(args):
    powers = range(10, 23) if args.all else range(10, 23, 2)
    if args.quick:
        powers = (10, 14)
    out = [(op, (1 << p,)) for p in powers for op in ("fft", "ifft", "rfft")]
    out.append(("fft2", (512, 512) if args.quick else (4096, 4096)))
    return out


def _data(op, shape, np):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    if op == "rfft":
        return x
    return (x + 1j * rng.standard_normal(shape).astype(np.float32)).astype(np.complex64)


def _mirax(op, x, device):
    import mirax as mx
    import mirax.numpy as mnp
    a = mx.device_put(mnp.asarray(x), device)
    f = getattr(mnp.fft, op)
    fwd = mx.jit(f)
    grad = mx.jit(mx.grad(lambda v: mnp.sum(mnp.abs(f(v)) ** 2)))
    return (lambda: fwd(a).block_until_ready()), (lambda: grad(a).block_until_ready())


def _jax(op, x, gpu):
    import jax
    import jax.numpy as jnp
    dev = jax.devices("gpu" if gpu else "cpu")[0]
    a = jax.device_put(jnp.asarray(x), dev)
    f = getattr(jnp.fft, op)
    fwd = jax.jit(f)
    grad = jax.jit(jax.grad(lambda v: jnp.sum(jnp.abs(f(v)) ** 2)))
    return (lambda: fwd(a).block_until_ready()), (lambda: grad(a).block_until_ready())


def _torch(op, x, gpu):
    import torch
    dev = "cuda" if gpu else "cpu"
    t = torch.from_numpy(x).to(dev)
    f = getattr(torch.fft, op)
    sync = torch.cuda.synchronize if gpu else (lambda: None)

    def fwd():
        f(t)
        sync()

    def grad():
        v = t.detach().requires_grad_(True)
        (f(v).abs() ** 2).sum().backward()
        sync()
    return fwd, grad


def _numpy(op, x, np):
    f = getattr(np.fft, op)
    return (lambda: f(x)), None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes only (a smoke test)")
    ap.add_argument("--all", action="store_true", help="every power of two 2^10..2^22")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    gpu = args.device == "cuda"
    if not gpu:
        single_thread()
        torch_single_thread()
    import numpy as np

    peers = {"jax": lambda op, x: _jax(op, x, gpu)}
    try:
        import torch  # noqa: F401
        peers["torch"] = lambda op, x: _torch(op, x, gpu)
    except ImportError:
        print("torch is not importable: its column is skipped")
    if not gpu:
        peers = {"numpy": lambda op, x: _numpy(op, x, np), **peers}

    rows, results = [], []
    for op, shape in _cases(args):
        x = _data(op, shape, np)
        fns = {"mirax": _mirax(op, x, args.device)}
        for name, make in peers.items():
            try:
                fns[name] = make(op, x)
            except Exception as e:  # noqa: BLE001 - a failing peer is reported, not fatal
                print(f"{name} failed on {op}{list(shape)}: {e!r}")
        for mode, k in (("forward", 0), ("grad", 1)):
            cases = {n: f[k] for n, f in fns.items() if f[k] is not None}
            number = 1 if x.size >= 1 << 20 else 10
            t = interleave(cases, rounds=args.rounds, number=number)
            rec = {"op": op, "shape": list(shape), "mode": mode,
                   "ms": {n: v * 1e3 for n, v in t.items()}}
            results.append(rec)
            cells = [f"{t[n] * 1e3:.3f}" if n in t else "-" for n in ["mirax", *peers]]
            ratios = [f"{t[n] / t['mirax']:.2f}" if n in t else "-" for n in peers]
            rows.append([op, "x".join(map(str, shape)), mode, *cells, *ratios])
            print(" | ".join(map(str, rows[-1])), flush=True)
    header = ["op", "shape", "mode", "mirax ms", *[f"{n} ms" for n in peers],
              *[f"{n}/mirax" for n in peers]]
    print()
    print(markdown_table(header, rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": args.device, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
