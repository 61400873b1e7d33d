"""Tile sizes of the CUDA tensor-core attention kernels (mirax/backends/cuda/attention.py,
`tc_tiles`): each kernel's variants timed alone with CUDA events, the others at the
current sizes, q/k/v [B, T, H, D] causal (default [8, 1024, 16, 64]), bf16 and float32
(TF32 at precision "default").

Rows: fwd (NWF warps of 16 MTF query rows, BNF-key tiles; it writes the rows' logsumexp
that the backward reads), dq (NWD warps, BND-key tiles) and dkdv (NWK warps, BMQ-query
tiles); on an sm_90 device, for f16/bf16 and head dims that are multiples of 64, the Hopper
kernels (`wg_tiles`): wg_fwd (NWG warpgroups of 64 query rows, BNW-key tiles, registers
bounded for MINB blocks a multiprocessor), wg_dq (DQ_NWG, DQ_BN, DQ_MINB) and wg_dkdv
(DK_NWG warpgroups of 64 keys, DK_BM-query tiles, DK_MINB); milliseconds a call (median of
`--reps` batches of 10 calls); a variant that does not compile or launch is reported with its
error. The sizes `tc_tiles` and `wg_tiles` return are marked with *. `--kernels` times only
the named rows.

    PYTHONPATH=. python benchmarks/attention_tiles.py [--dtype bfloat16,float32]
        [--shape 8,1024,16,64] [--reps 5] [--kernels wg_fwd,wg_dq] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

VARIANTS = {  # kernel: the #defines it reads, and the values tried
    "fwd": ("NWF MTF BNF", [(4, 1, 64), (4, 1, 128), (4, 1, 32), (4, 2, 32), (4, 2, 64),
                            (8, 1, 64), (8, 1, 128), (2, 2, 64)]),
    "dq": ("NWD BND", [(4, 64), (4, 32), (4, 128), (8, 64), (8, 32), (2, 64)]),
    "dkdv": ("NWK BMQ", [(4, 32), (4, 16), (4, 64), (8, 32), (8, 16), (2, 32), (2, 64)]),
    # the Hopper kernels (sm_90 only; f16/bf16, head dims multiples of 64)
    "wg_fwd": ("NWG BNW MINB", [(1, 64, 4), (1, 64, 3), (2, 64, 2), (2, 128, 1), (2, 128, 2),
                                (1, 128, 2)]),
    "wg_dq": ("DQ_NWG DQ_BN DQ_MINB", [(1, 64, 2), (1, 64, 3), (1, 32, 4), (1, 32, 3),
                                       (2, 64, 1), (1, 128, 1), (2, 32, 2)]),
    "wg_dkdv": ("DK_NWG DK_BM DK_MINB", [(1, 64, 2), (1, 32, 3), (2, 64, 1), (1, 128, 1),
                                         (1, 16, 4)]),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="bfloat16,float32")
    ap.add_argument("--shape", default="8,1024,16,64")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", default=None)
    ap.add_argument("--kernels", default=None,
                    help="comma-separated variant groups (fwd,dq,dkdv,wg_fwd,...): only these")
    args = ap.parse_args()
    only = set(args.kernels.split(",")) if args.kernels else None

    import cupy as cp

    import mirax as mx
    from mirax.backends.cuda import attention

    B, T, H, D = map(int, args.shape.split(","))
    rng = np.random.default_rng(0)
    results = {"shape": [B, T, H, D]}
    for dtype in args.dtype.split(","):
        q, k, v, do = (mx.device_put(rng.standard_normal((B, T, H, D), dtype=np.float32),
                                     "cuda").astype(dtype)._buf for _ in range(4))
        c = attention._Call(q, k, v, None, None, D ** -0.5, True, None, backward=True,
                            precision="default")
        assert c.path == "tc", c.path
        base = attention.tc_tiles(D, D, c.dtype)
        o, lse = attention.forward(q, k, v, None, None, scale=c.scale, is_causal=True,
                                   window=None, precision="default")
        delta = attention._delta(c, do, o, cp.zeros_like(lse))
        out = {n: cp.empty_like(x) for n, x in (("o", q), ("dq", q), ("dk", k), ("dv", v))}
        common = (attention._ptr(c.q), attention._ptr(c.k), attention._ptr(c.v),
                  attention._ptr(do), attention._ptr(lse), attention._ptr(delta))
        calls = {
            "fwd": ("mx_tc_fwd", T, (attention._ptr(c.q), attention._ptr(c.k),
                                     attention._ptr(c.v), attention._ptr(out["o"]),
                                     attention._ptr(cp.empty_like(lse)), *c.extra, *c.dims,
                                     c.scale)),
            "dq": ("mx_tc_dq", T, (*common, attention._ptr(out["dq"]), *c.extra, *c.dims,
                                   c.scale)),
            "dkdv": ("mx_tc_dkdv", T, (*common, attention._ptr(out["dk"]),
                                       attention._ptr(out["dv"]), np.uint64(0), *c.extra,
                                       *c.dims, c.scale)),
        }
        for kern in ("fwd", "dq", "dkdv"):
            calls["wg_" + kern] = ("mx_wg_" + kern,) + calls[kern][1:]
        wg_base = attention.wg_tiles(D, D)
        rows = {}
        for group, (names, values) in VARIANTS.items():
            if only and group not in only:
                continue
            kernels = (group,)
            wg = group.startswith("wg")
            if wg and not (dtype != "float32" and attention.hopper(c)):
                continue
            for val in values:
                tiles = dict(wg_base if wg else base, **dict(zip(names.split(), val)))
                label = " ".join(f"{n}={x}" for n, x in zip(names.split(), val))
                label += " *" if tiles == (wg_base if wg else base) else ""
                which = "wg_tiles" if wg else "tc_tiles"
                orig = getattr(attention, which)
                setattr(attention, which, lambda d, dv, *_, t=tiles: dict(t, D=d, DV=dv))
                try:
                    launch = (attention.wg_launcher if wg else attention.tc_launcher)(c)
                    for kern in kernels:
                        name, n, kargs = calls[kern]
                        rows.setdefault(kern, {})[label] = _time(
                            cp, lambda: launch(c, name, n, kargs), args.reps)
                except Exception as e:  # noqa: BLE001
                    for kern in kernels:
                        rows.setdefault(kern, {})[label] = repr(e)[:200]
                finally:
                    setattr(attention, which, orig)
        results[dtype] = {"current": base, "ms": rows}
        if "wg_fwd" in rows:
            results[dtype]["current_wg"] = wg_base
        print(f"{dtype} {B}x{T}x{H}x{D} causal (ms a call):")
        for kern, r in rows.items():
            for label, ms in r.items():
                print(f"  {kern:6s} {label:22s} " +
                      (f"{ms:.4f}" if isinstance(ms, float) else ms), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


def _time(cp, fn, reps):
    for _ in range(3):
        fn()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(reps):
        start.record()
        for _ in range(10):
            fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) / 10)
    return statistics.median(times)


if __name__ == "__main__":
    main()
