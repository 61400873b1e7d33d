"""What the strong-zero guard costs in the backward pass.

    python benchmarks/strong_zero.py

Rules whose local derivative can be inf/NaN at a finite point (sqrt, log, div, pow, ...)
multiply the cotangent through `_guard` (elementwise.py), which masks the derivative where
the cotangent is exactly zero. This script times grad of a function made of such ops with
the guard as shipped and with it replaced by a plain multiply (monkeypatched), eagerly and
under jit, single-threaded, interleaved, medians. Ops with finite derivatives (exp, tanh,
mul, matmul, ...) carry no guard, so they cost nothing extra.
"""
import os

for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[v] = "1"
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})

import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import mirax as mx  # noqa: E402
import mirax.numpy as mnp  # noqa: E402
from mirax.ops import elementwise as ew  # noqa: E402


def f(x):
    return mnp.sum(mnp.sqrt(x) * mnp.log(x) / (1.0 + x) + x ** 1.5)


def build():
    return mx.grad(f), mx.jit(mx.grad(f))


def main(n=100_000, rounds=21):
    x = mnp.asarray(np.random.default_rng(0).uniform(0.5, 2.0, n).astype(np.float32))
    guarded = ew._guard
    variants = {}
    for name, guard in (("guarded", guarded), ("plain", lambda g, d: ew.mul(g, d))):
        ew._guard = guard
        eager, jitted = build()
        jitted(x)  # trace and compile with this guard
        variants[name] = (eager, jitted, guard)
    ew._guard = guarded
    ref = np.asarray(variants["plain"][1](x))
    np.testing.assert_allclose(np.asarray(variants["guarded"][1](x)), ref, rtol=1e-6)
    times = {(v, m): [] for v in variants for m in ("eager", "jit")}
    for _ in range(rounds):
        for v, (eager, jitted, guard) in variants.items():
            ew._guard = guard
            for m, fn in (("eager", eager), ("jit", jitted)):
                t0 = time.perf_counter()
                fn(x)
                times[(v, m)].append(time.perf_counter() - t0)
    ew._guard = guarded
    print(f"grad of sum(sqrt(x) log(x) / (1 + x) + x^1.5), x: f32[{n}], median of {rounds}")
    for m in ("eager", "jit"):
        g = statistics.median(times[("guarded", m)])
        p = statistics.median(times[("plain", m)])
        print(f"  {m:5s}: guarded {1e3 * g:7.2f} ms   plain {1e3 * p:7.2f} ms   "
              f"cost x{g / p:.2f}")


if __name__ == "__main__":
    main()
