"""Fit a small tanh MLP to a 1-d function with jit(value_and_grad) and plain SGD.

    python -m mirax.examples.fit_mlp [--steps 500]

Prints the loss every 100 steps and a final one-line summary.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import mirax as mx
import mirax.numpy as mnp


def init(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [(mnp.asarray(rng.normal(0, 1 / np.sqrt(m), (m, n)).astype(np.float32)),
             mnp.zeros(n)) for m, n in zip(sizes[:-1], sizes[1:])]


def predict(params, x):
    for w, b in params[:-1]:
        x = mnp.tanh(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def loss(params, x, y):
    return mnp.mean((predict(params, x) - y) ** 2)


@mx.jit
def step(params, x, y, lr):
    value, grads = mx.value_and_grad(loss)(params, x, y)
    return value, mx.tree.map(lambda p, g: p - lr * g, params, grads)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=500)
    args = ap.parse_args(argv)
    x = np.linspace(-3, 3, 256, dtype=np.float32)[:, None]
    y = np.sin(2 * x) + 0.1 * x ** 2
    x, y = mnp.asarray(x), mnp.asarray(y)
    params = init([1, 64, 64, 1])
    t0, first = time.perf_counter(), None
    for i in range(args.steps):
        value, params = step(params, x, y, 0.05)
        if i % 100 == 0:
            print(f"step {i:4d}  loss {float(value):.5f}")
        first = float(value) if first is None else first
    final = float(loss(params, x, y))
    print(f"fit_mlp: loss {first:.4f} -> {final:.4f} in {args.steps} steps, "
          f"{time.perf_counter() - t0:.1f} s")
    return final


if __name__ == "__main__":
    main()
