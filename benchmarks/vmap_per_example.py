"""Per-example gradients of a 64-128-10 tanh MLP at batch 128 (the vmap issue's benchmark).

    python benchmarks/vmap_per_example.py [--rounds 15]

Compares, in one run, single-threaded and pinned to one CPU: mirax vmap(grad) (eager and
jit), a Python loop of mirax grad, JAX jit(vmap(grad)) and torch.func vmap(grad).
Frameworks are interleaved round by round; medians; ratios against JAX (within ±15% is a
tie on this noisy machine). Values are cross-checked before timing.
"""
import os

for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[v] = "1"
os.environ.setdefault("JAX_PLATFORMS", "cpu")
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import mirax as mx  # noqa: E402
import mirax.numpy as mnp  # noqa: E402

B, D, H, C = 128, 64, 128, 10


def data():
    rng = np.random.default_rng(0)
    w1 = rng.normal(0, 1 / np.sqrt(D), (D, H)).astype(np.float32)
    b1 = np.zeros(H, np.float32)
    w2 = rng.normal(0, 1 / np.sqrt(H), (H, C)).astype(np.float32)
    b2 = np.zeros(C, np.float32)
    x = rng.normal(size=(B, D)).astype(np.float32)
    y = rng.normal(size=(B, C)).astype(np.float32)
    return (w1, b1, w2, b2), x, y


def mirax_fns(params, x, y):
    p = tuple(mnp.asarray(a) for a in params)
    xm, ym = mnp.asarray(x), mnp.asarray(y)

    def loss(p, x, y):
        w1, b1, w2, b2 = p
        return mnp.sum((mnp.tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2)

    per_ex = mx.vmap(mx.grad(loss), in_axes=(None, 0, 0))
    jitted = mx.jit(per_ex)

    rows = [(mnp.asarray(x[i]), mnp.asarray(y[i])) for i in range(B)]

    def loop():
        return [mx.grad(loss)(p, xi, yi) for xi, yi in rows]
    return {"mirax jit(vmap(grad))": lambda: jitted(p, xm, ym),
            "mirax vmap(grad) eager": lambda: per_ex(p, xm, ym),
            "mirax loop of grad": loop}


def jax_fns(params, x, y):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return {}
    p = tuple(jnp.asarray(a) for a in params)

    def loss(p, x, y):
        w1, b1, w2, b2 = p
        return jnp.sum((jnp.tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2)
    f = jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))
    xj, yj = jnp.asarray(x), jnp.asarray(y)
    return {"jax jit(vmap(grad))": lambda: jax.block_until_ready(f(p, xj, yj))}


def torch_fns(params, x, y):
    try:
        import torch
        from torch.func import grad, vmap
    except ImportError:
        return {}
    torch.set_num_threads(1)
    p = tuple(torch.tensor(a) for a in params)

    def loss(p, x, y):
        w1, b1, w2, b2 = p
        return torch.sum((torch.tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2)
    f = vmap(grad(loss), in_dims=(None, 0, 0))
    xt, yt = torch.tensor(x), torch.tensor(y)
    return {"torch.func vmap(grad)": lambda: f(p, xt, yt)}


def to_np(out):
    if isinstance(out, list):  # the loop: stack per-example results
        return [np.stack([np.asarray(o[k]) for o in out]) for k in range(4)]
    return [np.asarray(o.detach() if hasattr(o, "detach") else o) for o in out]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    params, x, y = data()
    fns = {**mirax_fns(params, x, y), **jax_fns(params, x, y), **torch_fns(params, x, y)}
    ref = to_np(fns["mirax jit(vmap(grad))"]())
    for name, fn in fns.items():  # correctness cross-check (and warm-up)
        for a, b in zip(to_np(fn()), ref):
            np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4, err_msg=name)
    times = {k: [] for k in fns}
    for _ in range(args.rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med.get("jax jit(vmap(grad))")
    print(f"per-example grads, MLP {D}-{H}-{C}, batch {B}, 1 thread, median of {args.rounds}")
    print(f"{'':28s} {'ms':>9s} {'vs JAX':>8s}")
    for k, v in med.items():
        ratio = f"{v / base:8.2f}" if base else "     n/a"
        print(f"{k:28s} {1e3 * v:9.3f} {ratio}")


if __name__ == "__main__":
    main()
