"""Per-op and per-call overhead: mirax (eager, jit) against NumPy, JAX and PyTorch.

    python benchmarks/overhead.py [--rounds 9]

1. A chain of 200 tiny ops (add, mul by a Python float, sin, tanh, sub, in turn) on a
   16-element float32 array: microseconds per op for mirax eager, mirax jit (the chain as
   one jitted function, divided by 200), NumPy, JAX eager, JAX jit and PyTorch eager.
2. The call overhead of a jitted function of ten small (4-element) arguments: returning the
   first argument, and adding all ten.
Single-threaded and pinned to one CPU, frameworks interleaved round by round, medians.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import interleave, markdown_table, single_thread, torch_single_thread  # noqa: E402

if __name__ == "__main__":   # (imported by suite.py, which sets its own thread count)
    single_thread()

import argparse  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import mirax as mx  # noqa: E402
import mirax.numpy as mnp  # noqa: E402

N_OPS = 200


def chain(ns, x, y):
    """The 200-op chain written once, run by every framework via its namespace `ns`."""
    for i in range(N_OPS // 5):
        x = x + y
        x = x * 0.5
        x = ns.sin(x)
        x = ns.tanh(x)
        x = x - y
    return x


def frameworks():
    """name -> (namespace, x, y, run-one-chain, jit?) for what is installed."""
    xs = np.linspace(-1, 1, 16, dtype=np.float32)
    ys = np.linspace(0, 0.5, 16, dtype=np.float32)
    out = {}
    mx_x, mx_y = mx.asarray(xs), mx.asarray(ys)
    out["mirax eager"] = lambda: chain(mnp, mx_x, mx_y)
    mx_chain = mx.jit(lambda x, y: chain(mnp, x, y))
    out["mirax jit"] = lambda: mx_chain(mx_x, mx_y)
    out["numpy"] = lambda: chain(np, xs, ys)
    try:
        import jax
        import jax.numpy as jnp
        jx, jy = jnp.asarray(xs), jnp.asarray(ys)
        out["jax eager"] = lambda: chain(jnp, jx, jy).block_until_ready()
        j_chain = jax.jit(lambda x, y: chain(jnp, x, y))
        out["jax jit"] = lambda: j_chain(jx, jy).block_until_ready()
    except ImportError:
        pass
    try:
        import torch
        if __name__ == "__main__":
            torch_single_thread()
        tx, ty = torch.from_numpy(xs.copy()), torch.from_numpy(ys.copy())
        out["torch eager"] = lambda: chain(torch, tx, ty)
    except ImportError:
        pass
    return out, xs, ys


def check(cases, xs, ys):
    want = chain(np, xs.astype(np.float64), ys.astype(np.float64))
    for name, fn in cases.items():
        got = np.asarray(fn(), dtype=np.float64)
        assert np.allclose(got, want, atol=1e-4), f"{name} disagrees with NumPy"


def call_overhead_cases():
    args = [np.full(4, i, np.float32) for i in range(10)]
    out = {}
    ma = [mx.asarray(a) for a in args]
    first = mx.jit(lambda a, b, c, d, e, f, g, h, i, j: a)
    total = mx.jit(lambda a, b, c, d, e, f, g, h, i, j: a + b + c + d + e + f + g + h + i + j)
    out["mirax jit: return a"] = lambda: first(*ma)
    out["mirax jit: sum of 10"] = lambda: total(*ma)
    try:
        import jax
        import jax.numpy as jnp
        ja = [jnp.asarray(a) for a in args]
        jfirst = jax.jit(lambda a, b, c, d, e, f, g, h, i, j: a)
        jtotal = jax.jit(lambda a, b, c, d, e, f, g, h, i, j: a + b + c + d + e + f + g + h +
                         i + j)
        out["jax jit: return a"] = lambda: jfirst(*ja).block_until_ready()
        out["jax jit: sum of 10"] = lambda: jtotal(*ja).block_until_ready()
    except ImportError:
        pass
    try:
        import torch
        ta = [torch.from_numpy(a.copy()) for a in args]
        out["torch eager: sum of 10"] = lambda: (ta[0] + ta[1] + ta[2] + ta[3] + ta[4] + ta[5]
                                                 + ta[6] + ta[7] + ta[8] + ta[9])
    except ImportError:
        pass
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args(argv)
    cases, xs, ys = frameworks()
    check(cases, xs, ys)
    per_chain = interleave(cases, rounds=args.rounds, number=5)
    per_op = {k: 1e6 * v / N_OPS for k, v in per_chain.items()}
    rows = [[k, f"{v:.2f}", f"{v / per_op['numpy']:.2f}",
             f"{v / per_op['jax eager']:.2f}" if "jax eager" in per_op else "-",
             f"{v / per_op['torch eager']:.2f}" if "torch eager" in per_op else "-"]
            for k, v in per_op.items()]
    print(f"Eager per-op cost: chain of {N_OPS} tiny ops on f32[16] (median of "
          f"{args.rounds} interleaved rounds)\n")
    print(markdown_table(["framework", "µs / op", "× numpy", "× jax eager", "× torch eager"],
                         rows))
    calls = call_overhead_cases()
    per_call = interleave(calls, rounds=args.rounds, number=2000)
    print("\nJit call overhead, ten f32[4] arguments\n")
    print(markdown_table(["case", "µs / call"],
                         [[k, f"{1e6 * v:.2f}"] for k, v in per_call.items()]))
    return per_op, {k: 1e6 * v for k, v in per_call.items()}


if __name__ == "__main__":
    main()
