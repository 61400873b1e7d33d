"""GPU benchmark (H200): mirax's CUDA backend against PyTorch eager, torch.compile and
JAX jit, in one process on one GPU.

Workloads (float32 unless stated):
- fused elementwise gelu(x * w + b), tanh form, x of 65536 x 2048 = 128M values, w and b
  vectors over the last axis: GB/s counting one read of x and one write of the result;
- softmax and layer_norm (weight, bias) over the last axis of 65536 x 2048: GB/s likewise;
  each of the three has a "copy (reference)" row, CuPy copying x: the bandwidth the
  kernels are held to, measured in the same run;
- bf16 matmul 8192^3: TFLOP/s (2 n^3 flops);
- float32 matmul 4096^3 (`matmul_f32`) at each matmul precision: mirax's default (TF32
  tensor cores), "high" (3xTF32) and "highest" (SGEMM), torch (TF32 off, its default) and
  JAX's default (TF32) and "highest";
- one Adam step of an MLP 784-2048-2048-10 (relu, softmax cross-entropy) at batch 8192:
  ms per step (forward, backward, update); mirax at its default matmul precision (float32
  products on TF32 tensor cores, as JAX's default) and at "high" and "highest" (rows
  "mirax jit (high)", "(highest)": `with mx.default_matmul_precision(...)`), JAX at its
  default and "highest" ("jax jit fp32"), torch in float32 (TF32 off, torch's default);
  `--profile` also prints the mirax plan's time per node (CUDA events, runtime.profile)
  and PyTorch's per-kernel profile of its step;
- the same step at batch 64 (`mlp_small`, launch-bound): mirax with CUDA graphs (auto, on,
  off) against torch eager and torch with the whole step captured as a CUDA graph;
- one pre-LN causal transformer block (d 1024, 16 heads of 64, MLP 4096, tanh-gelu) at
  batch 8, sequence 1024, forward + backward of mean(block(x)^2) w.r.t. all parameters,
  in float32 and bfloat16: attention is mirax's fused CUDA kernel, torch's
  F.scaled_dot_product_attention, JAX's jax.nn.dot_product_attention; float32 also at
  mirax's "high" and "highest" and JAX's "highest" matmul precision, bfloat16 also with
  its chains kept in float32 until stored (knob cuda_excess_precision, as torch.compile
  and XLA compute them; mirax's default rounds every operation, as NumPy); `--profile` also
  prints its plan's time per node and times the loss mean(square(y)) alone with codegen's
  two-stage reduction kernel and without it (config knob cuda_two_stage off: CuPy's kernel).

Timing: each case runs a few warm-up calls, then `reps` timed batches of `inner` calls
between device synchronizations; the figure is the median batch time / inner. Results
are ratios mirax / peer (>1: mirax faster). Peers that fail are reported, not fatal.

    PYTHONPATH=. python benchmarks/gpu.py [--quick] [--no-compile] [--json out.json]
        [--only gelu,softmax,layer_norm,matmul,matmul_f32,mlp,mlp_small,attention,
                attention_long,transformer]
        [--update old.json]
        [--profile]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
import traceback
# this checkout's mirax, wherever the script is run from
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # share the GPU with JAX

import numpy as np  # noqa: E402


def timeit(fn, sync, warmup=3, reps=7, inner=10):
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / inner)
    return statistics.median(times)


class Peers:
    """Lazily imported peers; a missing one is recorded, not fatal."""

    def __init__(self, use_compile: bool):
        self.errors = {}
        self.use_compile = use_compile
        try:
            import torch
            self.torch = torch if torch.cuda.is_available() else None
        except Exception as e:  # noqa: BLE001
            self.torch, self.errors["torch"] = None, repr(e)
        try:
            import jax
            self.jax = jax if any(d.platform == "gpu" for d in jax.devices()) else None
            if self.jax is None:
                self.errors["jax"] = f"no GPU device: {jax.devices()}"
        except Exception as e:  # noqa: BLE001
            self.jax, self.errors["jax"] = None, repr(e)

    def tsync(self):
        self.torch.cuda.synchronize()

    @staticmethod
    def jax_case(f, *args):
        """(fn, sync) for a jitted JAX function: sync blocks on the last output."""
        box = [None]

        def fn():
            box[0] = f(*args)
        return fn, lambda: box[0].block_until_ready()


def run_case(results, name, unit, work, impls, **timing):
    """impls: {label: (fn, sync)}; work: bytes or flops per call; unit GB/s or TFLOP/s."""
    row = {"unit": unit}
    for label, make in impls.items():
        try:
            fn, sync = make()
            t = timeit(fn, sync, **timing)
            row[label] = {"ms": 1e3 * t, unit: work / t / (1e9 if unit == "GB/s" else 1e12)}
        except Exception as e:  # noqa: BLE001
            row[label] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
            traceback.print_exc()
        r = row[label]
        print(f"  {name:<12} {label:<16} " + (f"{r['ms']:9.3f} ms  {r[unit]:9.1f} {unit}"
                                              if "ms" in r else r["error"]), flush=True)
    results[name] = row


def ratios(results):
    lines = []
    for name, row in results.items():
        if not isinstance(row, dict) or "mirax jit" not in row or "ms" not in row["mirax jit"]:
            continue
        m = row["mirax jit"]["ms"]
        parts = [f"{label}: {row[label]['ms'] / m:.2f}x" for label in row
                 if label not in ("unit", "mirax jit") and "ms" in row[label]]
        lines.append(f"  {name:<12} mirax jit vs " + ", ".join(parts))
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--json", default=None)
    ap.add_argument("--only", default=None, help="comma-separated case names")
    ap.add_argument("--update", default=None,
                    help="a previous results JSON: its cases not run now are kept")
    ap.add_argument("--profile", action="store_true",
                    help="per-node MLP and transformer profiles")
    args = ap.parse_args()

    import cupy as cp

    import mirax as mx
    import mirax.numpy as mnp
    from mirax.core.runtime import get_device

    dev = get_device("cuda")
    be = dev.backend
    csync = cp.cuda.Device().synchronize
    peers = Peers(not args.no_compile)
    torch, jax = peers.torch, peers.jax
    jnp = jax.numpy if jax else None
    results = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
               "peer_errors": peers.errors}
    print(f"device: {results['device']}; peers: torch={torch is not None}, "
          f"jax={jax is not None}; errors: {peers.errors}", flush=True)
    only = set(args.only.split(",")) if args.only else None
    R, C = (4096, 2048) if args.quick else (65536, 2048)
    rng = np.random.default_rng(0)
    x_h = rng.standard_normal((R, C), dtype=np.float32)
    w_h = rng.standard_normal(C, dtype=np.float32)
    b_h = rng.standard_normal(C, dtype=np.float32)
    x, w, b = (mx.device_put(a, "cuda") for a in (x_h, w_h, b_h))
    if torch:
        xt, wt, bt = (torch.from_numpy(a).cuda() for a in (x_h, w_h, b_h))
    if jax:
        xj, wj, bj = (jax.device_put(a) for a in (x_h, w_h, b_h))
    nbytes = 2 * x_h.nbytes
    checks = {}
    y_copy = cp.empty(x_h.shape, np.float32)

    def copy_row():
        """The bandwidth reference of the row: CuPy copying x (the same bytes read and
        written), timed in the same run."""
        return lambda: cp.copyto(y_copy, x._buf), csync

    def tcompile(f):
        if not peers.use_compile:
            raise RuntimeError("skipped (--no-compile)")
        return torch.compile(f)

    # --- gelu(x * w + b) -------------------------------------------------------------------
    if not only or "gelu" in only:
        mf = mx.jit(lambda x, w, b: mx.nn.gelu(x * w + b))
        impls = {
            "mirax jit": lambda: (lambda: mf(x, w, b), csync),
            "mirax eager": lambda: (lambda: mx.nn.gelu(x * w + b), csync),
            "mirax plan": lambda: (mirax_plan(mx, lambda x, w, b: mx.nn.gelu(x * w + b),
                                              x, w, b), csync),
            "copy (reference)": copy_row,
        }
        if torch:
            tf = lambda x, w, b: torch.nn.functional.gelu(x * w + b, approximate="tanh")  # noqa
            impls["torch eager"] = lambda: (lambda: tf(xt, wt, bt), peers.tsync)
            impls["torch.compile"] = lambda: ((lambda c: lambda: c(xt, wt, bt))(tcompile(tf)),
                                              peers.tsync)
            checks["gelu"] = float(np.max(np.abs(np.asarray(mf(x, w, b))
                                                 - tf(xt, wt, bt).cpu().numpy())))
        if jax:
            jf = jax.jit(lambda x, w, b: jax.nn.gelu(x * w + b, approximate=True))
            impls["jax jit"] = lambda: peers.jax_case(jf, xj, wj, bj)
        run_case(results, "gelu", "GB/s", nbytes, impls)

    # --- softmax ------------------------------------------------------------------------------
    if not only or "softmax" in only:
        ms = mx.jit(lambda x: mx.nn.softmax(x, axis=-1))
        impls = {"mirax jit": lambda: (lambda: ms(x), csync), "copy (reference)": copy_row}
        if torch:
            ts = lambda x: torch.softmax(x, dim=-1)  # noqa: E731
            impls["torch eager"] = lambda: (lambda: ts(xt), peers.tsync)
            impls["torch.compile"] = lambda: ((lambda c: lambda: c(xt))(tcompile(ts)),
                                              peers.tsync)
            checks["softmax"] = float(np.max(np.abs(np.asarray(ms(x)) - ts(xt).cpu().numpy())))
        if jax:
            js = jax.jit(lambda x: jax.nn.softmax(x, axis=-1))
            impls["jax jit"] = lambda: peers.jax_case(js, xj)
        run_case(results, "softmax", "GB/s", nbytes, impls)

    # --- layer_norm ---------------------------------------------------------------------------
    if not only or "layer_norm" in only:
        ml = mx.jit(lambda x, w, b: mx.nn.layer_norm(x, w, b, eps=1e-5))
        impls = {"mirax jit": lambda: (lambda: ml(x, w, b), csync),
                 "copy (reference)": copy_row}
        if torch:
            tl = lambda x, w, b: torch.nn.functional.layer_norm(x, (C,), w, b, 1e-5)  # noqa
            impls["torch eager"] = lambda: (lambda: tl(xt, wt, bt), peers.tsync)
            impls["torch.compile"] = lambda: ((lambda c: lambda: c(xt, wt, bt))(tcompile(tl)),
                                              peers.tsync)
            checks["layer_norm"] = float(np.max(np.abs(np.asarray(ml(x, w, b))
                                                       - tl(xt, wt, bt).cpu().numpy())))
        if jax:
            def jln(x, w, b):
                m = x.mean(-1, keepdims=True)
                v = ((x - m) ** 2).mean(-1, keepdims=True)
                return (x - m) * jax.lax.rsqrt(v + 1e-5) * w + b
            jl = jax.jit(jln)
            impls["jax jit"] = lambda: peers.jax_case(jl, xj, wj, bj)
        run_case(results, "layer_norm", "GB/s", nbytes, impls)
    x = xt = xj = y_copy = None  # free the 512 MiB arrays before the matmul and MLP cases

    # --- bf16 matmul ---------------------------------------------------------------------------
    if not only or "matmul" in only:
        n = 2048 if args.quick else 8192
        a_h = rng.standard_normal((n, n), dtype=np.float32)
        b2_h = rng.standard_normal((n, n), dtype=np.float32)
        am = mx.device_put(a_h, "cuda").astype("bfloat16")
        bm = mx.device_put(b2_h, "cuda").astype("bfloat16")
        mm = mx.jit(lambda a, b: a @ b)
        impls = {"mirax jit": lambda: (lambda: mm(am, bm), csync)}
        if torch:
            at = torch.from_numpy(a_h).cuda().bfloat16()
            bt2 = torch.from_numpy(b2_h).cuda().bfloat16()
            impls["torch eager"] = lambda: (lambda: at @ bt2, peers.tsync)
            ref = (at @ bt2).float().cpu().numpy()
            got = np.asarray(mm(am, bm)).astype(np.float32)
            checks["matmul_rel"] = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
        if jax:
            aj = jax.device_put(a_h).astype(jnp.bfloat16)
            bj2 = jax.device_put(b2_h).astype(jnp.bfloat16)
            jm = jax.jit(lambda a, b: a @ b)
            impls["jax jit"] = lambda: peers.jax_case(jm, aj, bj2)
        run_case(results, "matmul_bf16", "TFLOP/s", 2.0 * n ** 3, impls)

    # --- float32 matmul at each precision ------------------------------------------------------
    if not only or "matmul_f32" in only:
        matmul_f32_case(results, checks, peers, mx, csync, rng, 1024 if args.quick else 4096)

    # --- MLP Adam step ----------------------------------------------------------------------------
    old = {}
    if args.update and os.path.exists(args.update):
        with open(args.update) as f:
            old = json.load(f)

    def save():
        """Write what there is so far (a run cut short keeps its finished cases)."""
        from mirax.backends.cuda import attention
        for key, row in old.items():  # cases, profiles and notes not run now
            if key not in results:
                results[key] = row
        results["attention_fallbacks"] = dict(attention.fallbacks)
        results["checks_max_abs_diff_vs_torch"] = {
            **old.get("checks_max_abs_diff_vs_torch", {}), **checks}
        results["ratios"] = ratios(results)
        results["cuda_failures"] = {str(k): v for k, v in be.failures.items()}
        results["fusion"] = {how: n for (p, how), n in be.report.items() if p == "fusion"}
        from mirax.backends.cuda import graphs
        results["cuda_graphs"] = {**graphs.stats, "failures": list(graphs.failures)}
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1, default=str)

    if not only or "mlp" in only:
        mlp_case(results, checks, peers, mx, mnp, csync, rng, quick=args.quick,
                 profile=args.profile)
        save()
    if not only or "mlp_small" in only:  # launch-bound: CUDA graphs on / off
        mlp_case(results, checks, peers, mx, mnp, csync, rng, batch=64, name="mlp_adam_b64",
                 profile=args.profile)
        save()

    # --- attention alone and the transformer block ------------------------------------------
    if not only or "attention" in only:
        for dtype in ("float32", "bfloat16"):
            attention_case(results, checks, peers, mx, csync, rng, dtype, quick=args.quick)
            save()
    if not only or "attention_long" in only:   # long sequences, head dim 128
        for dtype in ("float32", "bfloat16"):
            for T, Dh in ((4096, 64), (8192, 64), (4096, 128)):
                attention_case(results, checks, peers, mx, csync, rng, dtype,
                               quick=args.quick, T=T, Dh=Dh)
                save()
    if not only or "transformer" in only:
        for dtype in ("float32", "bfloat16"):
            transformer_case(results, checks, peers, mx, mnp, csync, rng, dtype,
                             quick=args.quick, profile=args.profile)
            save()

    save()
    print("\nratios (peer time / mirax jit time; > 1 means mirax is faster):")
    print("\n".join(results["ratios"]))
    print("checks (max |mirax - torch|):", results["checks_max_abs_diff_vs_torch"])
    print("cuda native impls that fell back to the host:", results["cuda_failures"])
    print("attention fallbacks:", results["attention_fallbacks"])


def at_precision(mx, f, precision):
    """f called under `mx.default_matmul_precision(precision)`: a jitted f is traced and
    cached under that precision (the knob is part of jit's key), so every call enters it."""
    def run(*args):
        with mx.default_matmul_precision(precision):
            return f(*args)
    return run


def matmul_f32_case(results, checks, peers, mx, csync, rng, n):
    torch, jax = peers.torch, peers.jax
    a_h = rng.standard_normal((n, n), dtype=np.float32)
    b_h = rng.standard_normal((n, n), dtype=np.float32)
    am, bm = mx.device_put(a_h, "cuda"), mx.device_put(b_h, "cuda")
    impls = {}
    ref = a_h[:256].astype(np.float64) @ b_h.astype(np.float64)  # the first 256 rows
    scale = np.abs(a_h[:256]).astype(np.float64) @ np.abs(b_h).astype(np.float64)
    for prec in ("default", "high", "highest"):
        f = mx.jit(lambda a, b, p=prec: mx.numpy.matmul(a, b, precision=p))
        label = "mirax jit" if prec == "default" else f"mirax jit ({prec})"
        impls[label] = (lambda f: lambda: ((lambda: f(am, bm)), csync))(f)
        got = np.asarray(f(am, bm))[:256].astype(np.float64)
        checks[f"matmul_f32_{prec}_err_over_abs_product"] = float(
            np.max(np.abs(got - ref) / scale))
    if torch:
        at, bt = torch.from_numpy(a_h).cuda(), torch.from_numpy(b_h).cuda()
        impls["torch eager"] = lambda: (lambda: at @ bt, peers.tsync)
    if jax:
        aj, bj = jax.device_put(a_h), jax.device_put(b_h)
        jm = jax.jit(lambda a, b: a @ b)
        jm_hi = jax.jit(lambda a, b: jax.numpy.matmul(a, b, precision="highest"))
        impls["jax jit"] = lambda: peers.jax_case(jm, aj, bj)
        impls["jax jit fp32"] = lambda: peers.jax_case(jm_hi, aj, bj)
    run_case(results, "matmul_f32", "TFLOP/s", 2.0 * n ** 3, impls)


def mirax_plan(mx, f, *args):
    """The compiled CUDA plan called on raw buffers: the kernel time without jit's
    Python dispatch (cache lookup, pytree handling)."""
    from mirax.core.runtime import executable
    plan = executable(mx.make_graph(f)(*args), "cuda")
    bufs = [a._buf for a in args]
    return lambda: plan(*bufs)


def mirax_profile(mx, what, fn, top, *args):
    """[(label, ms)] of every node of fn's CUDA plan (runtime.profile), the first `top`
    printed; None when it fails (the profile is an extra)."""
    try:
        from mirax.core.runtime import get_device
        from mirax.backends.cuda import runtime
        graph = mx.make_graph(fn)(*args)
        leaves = [a._buf for a in mx.tree.leaves(args)]
        be = get_device("cuda").backend
        rows = runtime.profile(be, mx.ir.optimize(graph, be), leaves)
        print(f"  mirax {what}, per node (sum {sum(ms for _, ms in rows):.3f} ms):")
        for label, ms in rows[:top]:
            print(f"    {ms:8.3f} ms  {label}")
        return [(lbl, round(ms, 4)) for lbl, ms in rows]
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        return None


def mlp_case(results, checks, peers, mx, mnp, csync, rng, quick=False, profile=False,
             batch=None, name="mlp_adam"):
    """The MLP Adam step; mirax with CUDA graphs forced on and off besides its default (auto:
    captured when launch-bound), torch eager and torch with the whole step in a CUDA graph."""
    torch, jax = peers.torch, peers.jax
    tag = "mlp" if name == "mlp_adam" else name   # of the profile entries
    sizes = [784, 2048, 2048, 10]
    batch = batch or (1024 if quick else 8192)
    lr, b1, b2, eps = 1e-3, 0.9, 0.999, 1e-8
    init = []
    for i in range(3):
        init.append(rng.standard_normal((sizes[i], sizes[i + 1]), dtype=np.float32)
                    * np.float32(1 / np.sqrt(sizes[i])))
        init.append(np.zeros(sizes[i + 1], np.float32))
    xb = rng.standard_normal((batch, 784), dtype=np.float32)
    yb = rng.integers(0, 10, batch).astype(np.int32)

    def loss(params, x, y):
        h = x
        for i in range(0, 4, 2):
            h = mx.nn.relu(h @ params[i] + params[i + 1])
        logits = h @ params[4] + params[5]
        return mx.nn.softmax_cross_entropy(logits, y).mean()

    def step(params, m, v, t, x, y):
        val, g = mx.value_and_grad(loss)(params, x, y)
        t = t + 1.0
        m = [b1 * mi + (1 - b1) * gi for mi, gi in zip(m, g)]
        v = [b2 * vi + (1 - b2) * gi * gi for vi, gi in zip(v, g)]
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        params = [p - lr * (mi / c1) / (mnp.sqrt(vi / c2) + eps)
                  for p, mi, vi in zip(params, m, v)]
        return params, m, v, t, val

    jstep = mx.jit(step)
    state = {"s": ([mx.device_put(p, "cuda") for p in init],
                   [mx.device_put(np.zeros_like(p), "cuda") for p in init],
                   [mx.device_put(np.zeros_like(p), "cuda") for p in init],
                   mx.device_put(np.float32(0), "cuda"))}
    xm, ym = mx.device_put(xb, "cuda"), mx.device_put(yb, "cuda")

    def mirax_step():
        p, m, v, t = state["s"]
        p, m, v, t, val = jstep(p, m, v, t, xm, ym)
        state["s"] = (p, m, v, t)
        state["loss"] = val

    def no_merge():
        # the same step compiled without runtime.merge_elementwise (its effect, measured)
        st = {"s": state["s"]}
        jstep2 = mx.jit(lambda *a: step(*a))
        with mx.config.override(cuda_merge=False):
            p, m, v, t = st["s"]
            jstep2(p, m, v, t, xm, ym)

        def run():
            p, m, v, t = st["s"]
            p, m, v, t, _ = jstep2(p, m, v, t, xm, ym)
            st["s"] = (p, m, v, t)
        return run, csync

    def graphs(knob):
        # a fresh jit whose plan is made (warm-up calls) with the cuda_graphs knob set
        st = {"s": state["s"]}
        jstep2 = mx.jit(lambda *a: step(*a))

        def run():
            p, m, v, t = st["s"]
            p, m, v, t, _ = jstep2(p, m, v, t, xm, ym)
            st["s"] = (p, m, v, t)
        with mx.config.override(cuda_graphs=knob):
            for _ in range(3):
                run()
        return run, csync

    def precise(precision):
        # a fresh jit traced and called under the matmul precision (float32: "high" is
        # 3xTF32, "highest" exact SGEMM; "mirax jit" runs at the default, TF32)
        st = {"s": state["s"]}
        jstep2 = at_precision(mx, mx.jit(lambda *a: step(*a)), precision)

        def run():
            p, m, v, t = st["s"]
            p, m, v, t, _ = jstep2(p, m, v, t, xm, ym)
            st["s"] = (p, m, v, t)
        return run, csync

    impls = {"mirax jit": lambda: (mirax_step, csync),
             "mirax jit (high)": lambda: precise("high"),
             "mirax jit (highest)": lambda: precise("highest"),
             "mirax jit (graphs on)": lambda: graphs("1"),
             "mirax jit (graphs off)": lambda: graphs("0")}
    if name == "mlp_adam":
        impls["mirax jit (no merge)"] = no_merge
    if profile:
        p, m, v, t = state["s"]
        results[f"{tag}_profile_mirax"] = mirax_profile(mx, "MLP step", step, 45,
                                                        p, m, v, t, xm, ym)
    if torch:
        def torch_setup(compiled):
            model = torch.nn.Sequential(
                torch.nn.Linear(784, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048),
                torch.nn.ReLU(), torch.nn.Linear(2048, 10)).cuda()
            with torch.no_grad():
                for lin, i in zip([model[0], model[2], model[4]], range(0, 6, 2)):
                    lin.weight.copy_(torch.from_numpy(init[i].T.copy()))
                    lin.bias.copy_(torch.from_numpy(init[i + 1]))
            opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(b1, b2), eps=eps)
            fwd = model
            if compiled:
                if not peers.use_compile:
                    raise RuntimeError("skipped (--no-compile)")
                fwd = torch.compile(model)
            xt, yt = torch.from_numpy(xb).cuda(), torch.from_numpy(yb).long().cuda()

            def tstep():
                opt.zero_grad(set_to_none=True)
                lval = torch.nn.functional.cross_entropy(fwd(xt), yt)
                lval.backward()
                opt.step()
            return tstep, peers.tsync
        impls["torch eager"] = lambda: torch_setup(False)
        impls["torch.compile"] = lambda: torch_setup(True)

        def torch_graph():
            # the whole step (forward, backward, Adam) captured once, as PyTorch's docs show
            model = torch.nn.Sequential(
                torch.nn.Linear(784, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048),
                torch.nn.ReLU(), torch.nn.Linear(2048, 10)).cuda()
            opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(b1, b2), eps=eps,
                                   capturable=True)
            xt, yt = torch.from_numpy(xb).cuda(), torch.from_numpy(yb).long().cuda()

            def body():
                opt.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(model(xt), yt).backward()
                opt.step()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    body()
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            opt.zero_grad(set_to_none=True)
            with torch.cuda.graph(g):
                torch.nn.functional.cross_entropy(model(xt), yt).backward()
                opt.step()
            return g.replay, peers.tsync
        impls["torch CUDA graph"] = torch_graph
    if jax:
        jnp = jax.numpy

        def jloss(params, x, y):
            h = x
            for i in range(0, 4, 2):
                h = jax.nn.relu(h @ params[i] + params[i + 1])
            logits = h @ params[4] + params[5]
            return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1))

        def jstep_raw(params, m, v, t, x, y):
            val, g = jax.value_and_grad(jloss)(params, x, y)
            t = t + 1.0
            m = [b1 * mi + (1 - b1) * gi for mi, gi in zip(m, g)]
            v = [b2 * vi + (1 - b2) * gi * gi for vi, gi in zip(v, g)]
            c1, c2 = 1 - b1 ** t, 1 - b2 ** t
            params = [p - lr * (mi / c1) / (jnp.sqrt(vi / c2) + eps)
                      for p, mi, vi in zip(params, m, v)]
            return params, m, v, t, val

        xj, yj = jax.device_put(xb), jax.device_put(yb)

        def jax_setup(precision):
            # JAX's default f32 matmul precision on this GPU is TF32 (as mirax's default);
            # "highest" is full float32, as mirax's "highest" (cuBLAS SGEMM) and torch
            # (allow_tf32 off) compute.
            ctx = (jax.default_matmul_precision(precision) if precision
                   else contextlib.nullcontext())
            jstep_ = jax.jit(jstep_raw)
            st = {"s": ([jax.device_put(p) for p in init], [jnp.zeros_like(p) for p in init],
                        [jnp.zeros_like(p) for p in init], jnp.float32(0))}

            def jax_step():
                p, m, v, t = st["s"]
                with ctx:
                    p, m, v, t, val = jstep_(p, m, v, t, xj, yj)
                st["s"] = (p, m, v, t)
                st["loss"] = val
            return jax_step, lambda: st["loss"].block_until_ready()
        impls["jax jit"] = lambda: jax_setup(None)
        impls["jax jit fp32"] = lambda: jax_setup("highest")
    flops = 6.0 * batch * sum(sizes[i] * sizes[i + 1] for i in range(3))
    if profile and torch:
        try:
            fn, sync = torch_setup(False)
            for _ in range(3):
                fn()
            sync()
            from torch.profiler import ProfilerActivity
            from torch.profiler import profile as tprofile
            with tprofile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    fn()
                sync()
            table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=25)
            print("  torch eager MLP step, per kernel (5 steps):\n" + table)
            results[f"{tag}_profile_torch"] = table
        except Exception as e:  # noqa: BLE001
            print("  torch profile failed:", repr(e))
        # column sums (bias gradients): CuPy's axis-0 reduction against a GEMV
        import cupy as cp
        a = cp.random.standard_normal((batch, 2048), dtype=cp.float32)
        ones = cp.ones((1, batch), cp.float32)
        for label, f in (("cp.sum(axis=0)", lambda: cp.sum(a, axis=0)),
                         ("ones @ a", lambda: ones @ a)):
            print(f"  column sum [{batch},2048] {label}: "
                  f"{1e3 * timeit(f, csync):.4f} ms", flush=True)
    run_case(results, name, "TFLOP/s", flops, impls)
    # the first mirax losses go down (a sanity check that the step trains)
    if "loss" in state:
        checks["mlp_loss_after_bench"] = float(np.asarray(state["loss"]))



# --- attention alone ------------------------------------------------------------------------------
def attention_case(results, checks, peers, mx, csync, rng, dtype, quick=False, T=1024,
                   Dh=64):
    """Causal attention forward + backward, q, k, v [B, T, H, Dh] (default [8, 1024, 16, 64];
    longer sequences keep B * T = 8192 tokens, head dim 128 halves the heads): mirax's kernels
    (jit of value_and_grad; as the rule picks them, and each path forced) against torch's
    F.scaled_dot_product_attention (flash / memory-efficient kernels) and JAX's
    jax.nn.dot_product_attention. The loss sum(o * w) around it is part of every row; the
    "mirax jit vjp (no loss)" row pulls w back through attention alone."""
    torch, jax = peers.torch, peers.jax
    name = f"attention_{dtype}" + ("" if (T, Dh) == (1024, 64) else f"_T{T}_d{Dh}")
    B, H = max(1, 8192 // T), 1024 // Dh
    if quick:
        B, T, H = 2, T // 4, 4
    qkv = [rng.standard_normal((B, T, H, Dh), dtype=np.float32) for _ in range(3)]
    w_h = rng.standard_normal((B, T, H, Dh), dtype=np.float32)
    mq = [mx.device_put(a, "cuda").astype(dtype) for a in qkv]
    mw = mx.device_put(w_h, "cuda")

    def mloss(q, k, v):
        o = mx.nn.dot_product_attention(q, k, v, is_causal=True)
        return (o.astype("float32") * mw).sum()
    mf = mx.jit(mx.value_and_grad(mloss, argnums=(0, 1, 2)))
    mfwd = mx.jit(lambda q, k, v: mx.nn.dot_product_attention(q, k, v, is_causal=True))

    def forced(path, fwd_only=False):
        """The kernels of one path (attention.path's rule overridden): the data for the rule."""
        from mirax.backends.cuda import attention
        f = mx.jit(mloss if fwd_only else mx.value_and_grad(mloss, argnums=(0, 1, 2)))

        def run():
            attention.force_path = path
            try:
                f(*mq)
            finally:
                attention.force_path = None
        return run, csync
    impls = {"mirax jit": lambda: ((lambda: mf(*mq)), csync),
             "mirax forward only": lambda: ((lambda: mfwd(*mq)), csync)}
    for path in ("simt", "blas", "tc"):  # float32 "tc": TF32 (the default precision)
        impls[f"mirax jit ({path})"] = (lambda p: lambda: forced(p))(path)
    if dtype == "float32":
        impls["mirax forward only (blas)"] = lambda: forced("blas", fwd_only=True)
        impls["mirax jit (highest)"] = lambda: (
            (lambda: at_precision(mx, mf, "highest")(*mq)), csync)
    ct = mx.device_put(w_h, "cuda").astype(dtype)

    def mvjp(q, k, v):  # forward + backward with the cotangent given: no loss around it
        _, pull = mx.vjp(lambda q, k, v: mx.nn.dot_product_attention(q, k, v, is_causal=True),
                         q, k, v)
        return pull(ct)
    mv = mx.jit(mvjp)
    impls["mirax jit vjp (no loss)"] = lambda: ((lambda: mv(*mq)), csync)
    if torch:
        tq = [torch.from_numpy(a).cuda().to(getattr(torch, dtype)).transpose(1, 2)
              .requires_grad_(True) for a in qkv]
        tw = torch.from_numpy(w_h).cuda().transpose(1, 2)
        sdpa = torch.nn.functional.scaled_dot_product_attention

        def tstep():
            o = sdpa(*tq, is_causal=True)
            val = (o.float() * tw).sum()
            return torch.autograd.grad(val, tq)
        impls["torch eager"] = lambda: (tstep, peers.tsync)

        def tfwd():
            with torch.no_grad():
                return sdpa(*tq, is_causal=True)
        impls["torch forward only"] = lambda: (tfwd, peers.tsync)
        try:
            tg = tstep()
            _, mg = mf(*mq)
            checks[f"{name}_grad_rel"] = max(
                float(np.max(np.abs(np.asarray(m.astype("float32"))
                                    - t.transpose(1, 2).float().cpu().numpy())))
                / float(t.float().abs().max()) for m, t in zip(mg, tg))
        except Exception as e:  # noqa: BLE001
            checks[name] = repr(e)[:300]
    if jax:
        jnp = jax.numpy
        jq = [jnp.asarray(a, getattr(jnp, dtype)) for a in qkv]
        jw = jnp.asarray(w_h)

        def jloss(q, k, v):
            o = jax.nn.dot_product_attention(q, k, v, is_causal=True)
            return (o.astype(jnp.float32) * jw).sum()
        jf = jax.jit(jax.value_and_grad(jloss, argnums=(0, 1, 2)))
        impls["jax jit"] = lambda: peers.jax_case(lambda *a: jf(*a)[0], *jq)
    flops = 3.5 * 2.0 * B * H * T * T * Dh  # causal: forward 2BHT^2D, backward 2.5x
    run_case(results, name, "TFLOP/s", flops, impls, warmup=2, reps=5, inner=5)


# --- transformer block ----------------------------------------------------------------------------
def _block(F, p, x, heads):
    """One pre-LN causal transformer block on x [B,T,D] (as benchmarks/suite.py W5)."""
    B, T, D = x.shape
    h = F.ln(x, p["ln1_w"], p["ln1_b"])
    q, k, v = (F.reshape(h @ p["w" + n] + p["b" + n], (B, T, heads, D // heads))
               for n in "qkv")
    x = x + F.reshape(F.attn(q, k, v), (B, T, D)) @ p["wo"] + p["bo"]
    h = F.ln(x, p["ln2_w"], p["ln2_b"])
    return x + F.gelu(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def transformer_case(results, checks, peers, mx, mnp, csync, rng, dtype, quick=False,
                     profile=False):
    torch, jax = peers.torch, peers.jax
    B, T, D, H, FF = (2, 256, 256, 4, 1024) if quick else (8, 1024, 1024, 16, 4096)

    def w(a, b):
        return (rng.standard_normal((a, b), dtype=np.float32) / np.float32(np.sqrt(a)))
    init = {"ln1_w": np.ones(D, np.float32), "ln1_b": np.zeros(D, np.float32),
            "ln2_w": np.ones(D, np.float32), "ln2_b": np.zeros(D, np.float32),
            "wq": w(D, D), "bq": np.zeros(D, np.float32), "wk": w(D, D),
            "bk": np.zeros(D, np.float32), "wv": w(D, D), "bv": np.zeros(D, np.float32),
            "wo": w(D, D), "bo": np.zeros(D, np.float32), "w1": w(D, FF),
            "b1": np.zeros(FF, np.float32), "w2": w(FF, D), "b2": np.zeros(D, np.float32)}
    x_h = rng.standard_normal((B, T, D), dtype=np.float32)
    keys = sorted(init)

    class MF:
        reshape = staticmethod(lambda x, s: mnp.reshape(x, s))
        ln = staticmethod(lambda x, w, b: mx.nn.layer_norm(x, w, b, eps=1e-5))
        attn = staticmethod(lambda q, k, v: mx.nn.dot_product_attention(q, k, v,
                                                                        is_causal=True))
        gelu = staticmethod(lambda x: mx.nn.gelu(x, approximate=True))

    def mloss(p, x):
        y = _block(MF, p, x, H)
        return mnp.mean(mnp.square(y.astype("float32")))

    mp = {k: mx.device_put(v, "cuda").astype(dtype) for k, v in init.items()}
    mxx = mx.device_put(x_h, "cuda").astype(dtype)
    mf = mx.jit(mx.value_and_grad(mloss))
    box = {}

    def mrun():
        box["out"] = mf(mp, mxx)
    impls = {"mirax jit": lambda: (mrun, csync)}

    def knobbed(**env):  # a fresh jit whose plan is made under the config knobs `env`
        f = mx.jit(mx.value_and_grad(mloss))

        def run():
            box["out"] = f(mp, mxx)
        with mx.config.override(**env):
            for _ in range(2):
                run()
        return run, csync
    def precise(precision):  # a fresh jit traced and called under the matmul precision
        f = at_precision(mx, mx.jit(mx.value_and_grad(mloss)), precision)

        def run():
            box["out"] = f(mp, mxx)
        return run, csync
    if dtype == "float32":
        impls["mirax jit (high)"] = lambda: precise("high")
        impls["mirax jit (highest)"] = lambda: precise("highest")
    impls["mirax jit (graphs on)"] = lambda: knobbed(cuda_graphs="1")
    if dtype != "float32":   # chains kept in float32 until stored, as torch.compile and XLA
        impls["mirax jit (excess precision)"] = lambda: knobbed(cuda_excess_precision=True)
    impls["mirax jit (no remat)"] = lambda: knobbed(cuda_remat=False)
    impls["mirax jit (CuPy reductions)"] = lambda: knobbed(cuda_two_stage=False)
    if profile:
        rows = mirax_profile(mx, f"transformer {dtype} step", mx.value_and_grad(mloss), 25,
                             mp, mxx)
        results[f"transformer_{dtype}_profile_mirax"] = rows and rows[:40]
        # the loss alone on y [B, T, D]: the two-stage reduction against CuPy's kernel
        y = mxx * 1.5
        ab = {}
        for knob in ("1", "0"):
            try:
                with mx.config.override(cuda_two_stage=knob == "1"):
                    lf = mx.jit(lambda y: mnp.mean(mnp.square(y.astype("float32"))))
                    lf(y)   # compiled here, under the knob
                ab["two-stage" if knob == "1" else "cupy ReductionKernel"] = {
                    "ms": round(1e3 * timeit(lambda: lf(y), csync), 4),
                    "value": float(lf(y))}
            except Exception:  # noqa: BLE001
                traceback.print_exc()
        print(f"  loss mean(square(y)) on {dtype}{list(y.shape)}: {ab}", flush=True)
        results[f"loss_reduction_{dtype}"] = ab
    if torch:
        tdt = getattr(torch, dtype)
        TF = torch.nn.functional

        class TFn:
            reshape = staticmethod(lambda x, s: torch.reshape(x, s))
            ln = staticmethod(lambda x, w, b: TF.layer_norm(x, (x.shape[-1],), w, b, 1e-5))
            gelu = staticmethod(lambda x: TF.gelu(x, approximate="tanh"))

            @staticmethod
            def attn(q, k, v):
                o = TF.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                    v.transpose(1, 2), is_causal=True)
                return o.transpose(1, 2)

        tp = {k: torch.from_numpy(v).cuda().to(tdt).requires_grad_(True)
              for k, v in init.items()}
        tx = torch.from_numpy(x_h).cuda().to(tdt)

        def tloss(p, x):
            return torch.mean(torch.square(_block(TFn, p, x, H).float()))

        def tstep(fn):
            def run():
                val = fn(tp, tx)
                return val, torch.autograd.grad(val, [tp[k] for k in keys])
            return run
        impls["torch eager"] = lambda: (tstep(tloss), peers.tsync)

        def tcomp():
            if not peers.use_compile:
                raise RuntimeError("skipped (--no-compile)")
            return tstep(torch.compile(tloss)), peers.tsync
        impls["torch.compile"] = tcomp
        try:
            tval, tg = tstep(tloss)()
            mval, mg = mf(mp, mxx)
            checks[f"transformer_{dtype}_loss"] = abs(float(mval) - float(tval.detach()))
            # max |difference| over all gradients / max |torch gradient| (bk's gradient is
            # zero in exact arithmetic: a per-parameter ratio would compare noise)
            diff = max(float(np.max(np.abs(np.asarray(mg[k].astype("float32"))
                                           - tg[i].float().cpu().numpy())))
                       for i, k in enumerate(keys))
            checks[f"transformer_{dtype}_grad_rel"] = diff / max(
                float(g.float().abs().max()) for g in tg)
        except Exception as e:  # noqa: BLE001
            checks[f"transformer_{dtype}"] = repr(e)[:300]
    if jax:
        jnp = jax.numpy
        jdt = getattr(jnp, dtype)

        class JF:
            reshape = staticmethod(lambda x, s: jnp.reshape(x, s))
            gelu = staticmethod(lambda x: jax.nn.gelu(x, approximate=True))
            attn = staticmethod(lambda q, k, v: jax.nn.dot_product_attention(
                q, k, v, is_causal=True))

            @staticmethod
            def ln(x, w, b):
                xf = x.astype(jnp.float32)
                mu = jnp.mean(xf, -1, keepdims=True)
                var = jnp.mean(jnp.square(xf - mu), -1, keepdims=True)
                return ((xf - mu) * jax.lax.rsqrt(var + 1e-5)).astype(x.dtype) * w + b

        def jloss(p, x):
            return jnp.mean(jnp.square(_block(JF, p, x, H).astype(jnp.float32)))
        jp = {k: jnp.asarray(v, jdt) for k, v in init.items()}
        jx = jnp.asarray(x_h, jdt)

        def jsetup(precision):
            ctx = (jax.default_matmul_precision(precision) if precision
                   else contextlib.nullcontext())
            with ctx:
                jf = jax.jit(jax.value_and_grad(jloss))
                jf(jp, jx)[0].block_until_ready()
            jbox = {}

            def run():
                with ctx:
                    jbox["o"] = jf(jp, jx)
            return run, lambda: jbox["o"][0].block_until_ready()
        impls["jax jit"] = lambda: jsetup(None)
        if dtype == "float32":
            impls["jax jit fp32"] = lambda: jsetup("highest")
    n = B * T
    flops = 3 * (2.0 * n * (4 * D * D + 2 * D * FF) + 2.0 * B * H * T * T * (D // H))
    run_case(results, f"transformer_{dtype}", "TFLOP/s", flops, impls,
             warmup=2, reps=5, inner=3)


if __name__ == "__main__":
    sys.exit(main())
