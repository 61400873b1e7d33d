"""Collectives and data-parallel training across processes.

    python benchmarks/distributed.py [--procs 1,2] [--quick] [--only allreduce|charlm]

1. All-reduce bandwidth vs message size, float32, under `mpiexec -n 2` on the CPU: mirax's
   MPI engine (what a psum node runs), a pmap'd psum called from Python (the whole user
   path: slicing, the member's plan, stacking), mpi4py's own Allreduce, and
   torch.distributed (gloo) when PyTorch is installed. On a machine with CuPy and a GPU,
   also NCCL (mirax's engine and CuPy's raw allReduce) at world size = 1 process.
2. Data-parallel charlm throughput (samples/s) at 1, 2, ... processes (--procs; repeat
   entries to interleave rounds, e.g. 1,2,1,2,1,2) at the same per-process batch: the
   median of each process count and its ratio to one process's.

Each measurement runs in workers launched with mpiexec; rank 0 prints one JSON line per
result, and this script prints the tables. Times are medians of interleaved rounds.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

# this checkout's mirax, wherever the script is run from
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ROOT = Path(__file__).resolve().parents[1]
SIZES = [2 ** k for k in range(10, 25, 2)]   # bytes


def _median_time(fn, reps: int, rounds: int = 5) -> float:
    fn()
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        out.append((time.perf_counter() - t0) / reps)
    return statistics.median(out)


def worker_allreduce(quick: bool):
    import numpy as np
    import mirax as mx
    from mirax.distributed import engines, process
    mx.distributed.initialize()
    comm = process.group.comm
    rank, size = comm.Get_rank(), comm.Get_size()
    eng = engines.MpiComm(comm, "axis 'i'")
    pm = mx.pmap(lambda a: mx.lax.psum(a, "i"), axis_name="i")
    torch_ar = _torch_gloo(rank, size)
    for nbytes in SIZES[:5] if quick else SIZES:
        n = nbytes // 4
        x = np.ones(n, np.float32)
        out = np.empty_like(x)
        reps = max(3, min(200, (1 << 22) // nbytes))
        cases = {
            "mpi4py Allreduce": lambda: comm.Allreduce(x, out),
            "mirax MPI engine": lambda: eng.allreduce(x, "sum"),
            "mirax pmap psum": lambda: pm(x[None]),
        }
        if torch_ar is not None:
            tx = torch_ar[1](x)
            cases["torch gloo all_reduce"] = lambda: torch_ar[0](tx)
        for name, fn in cases.items():
            comm.Barrier()
            t = _median_time(fn, reps)
            if rank == 0:
                print(json.dumps({"kind": "allreduce", "impl": name, "bytes": nbytes,
                                  "seconds": t, "procs": size}), flush=True)
    if torch_ar is not None:   # (gloo's threads left running abort the exit)
        import torch.distributed as dist
        dist.destroy_process_group()


def _torch_gloo(rank, size):
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        return None
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("gloo", rank=rank, world_size=size)
    return (lambda t: dist.all_reduce(t)), (lambda x: torch.from_numpy(x.copy()))


def worker_nccl(quick: bool):
    import cupy as cp
    import numpy as np
    import mirax as mx
    from cupy.cuda import nccl
    devs = mx.local_devices("cuda")[:1]
    pm = mx.pmap(lambda a: mx.lax.psum(a, "i"), axis_name="i", devices=devs)
    raw = nccl.NcclCommunicator(1, nccl.get_unique_id(), 0)
    tnccl = _torch_nccl()
    for nbytes in SIZES[:5] if quick else SIZES:
        x = cp.ones(nbytes // 4, cp.float32)
        out = cp.empty_like(x)
        host = np.ones((1, nbytes // 4), np.float32)

        def sync(fn):
            def run():
                fn()
                cp.cuda.get_current_stream().synchronize()
            return run
        cases = {
            "cupy nccl allReduce": sync(lambda: raw.allReduce(
                x.data.ptr, out.data.ptr, x.size, nccl.NCCL_FLOAT32, nccl.NCCL_SUM,
                cp.cuda.get_current_stream().ptr)),
            "mirax pmap psum (host in/out)": sync(lambda: pm(host)),
            "mirax pmap psum (on device)": sync(lambda: pm(dev_in)),
        }
        dev_in = mx.device_put(host, devs[0])
        if tnccl is not None:
            tx = tnccl[1](x)
            cases["torch nccl all_reduce"] = sync(lambda: tnccl[0](tx))
        for name, fn in cases.items():
            t = _median_time(fn, max(3, min(100, (1 << 22) // nbytes)))
            print(json.dumps({"kind": "allreduce", "impl": name, "bytes": nbytes,
                              "seconds": t, "procs": 1}), flush=True)
    if tnccl is not None:
        import torch.distributed as dist
        dist.destroy_process_group()


def _torch_nccl():
    """torch.distributed's NCCL all-reduce at world size 1 (None without torch)."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        return None
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29518")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))

    def run(t):
        dist.all_reduce(t)
        torch.cuda.synchronize()
    return run, (lambda x: torch.as_tensor(x, device="cuda"))


def worker_charlm(quick: bool, batch: int):
    import numpy as np
    import mirax as mx
    from mirax import optim
    from mirax.examples import charlm
    mx.distributed.initialize()
    p = mx.process_count()
    gbatch = batch * p
    ctx, vocab = 64, 64
    model = charlm.CharLM(vocab, ctx, 96, 4, 2, key=mx.random.key(0))
    opt = optim.adamw(1e-3)
    state = opt.init(model)
    step = charlm.data_parallel_step(charlm.loss_fn, opt)
    rng = np.random.RandomState(0)
    x = rng.randint(0, vocab, (gbatch, ctx)).astype(np.int32)
    y = rng.randint(0, vocab, (gbatch, ctx)).astype(np.int32)
    for _ in range(2):   # compile, warm up
        model, state, loss = step(model, state, x, y)
    steps = 3 if quick else 10
    mx.distributed.data_parallel.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        model, state, loss = step(model, state, x, y)
    float(loss)
    dt = time.perf_counter() - t0
    if mx.process_index() == 0:
        print(json.dumps({"kind": "charlm", "procs": p, "per_process_batch": batch,
                          "samples_per_s": gbatch * steps / dt}), flush=True)


def _launch(n, args, env=None):
    mpiexec = Path(sys.executable).parent / "mpiexec"
    mpiexec = str(mpiexec) if mpiexec.exists() else shutil.which("mpiexec")
    if mpiexec is None:
        sys.exit("benchmarks/distributed.py: needs mpiexec (pip install 'mirax[distributed]')")
    e = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1",
             OPENBLAS_NUM_THREADS="1", MIRAX_CPU_THREADS="1", **(env or {}))
    r = subprocess.run([mpiexec, "-n", str(n), sys.executable, __file__, *args], env=e,
                       capture_output=True, text=True, timeout=1800)
    # (Open MPI may put terminal escapes before a line: the JSON starts at its brace)
    rows = [json.loads(ln[ln.index("{"):]) for ln in r.stdout.splitlines()
            if '{"kind"' in ln]
    if r.returncode or not rows:
        print(r.stdout[-2000:], r.stderr[-4000:], file=sys.stderr)
        raise SystemExit(f"worker {args} on {n} processes failed (exit {r.returncode})")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", default="")
    ap.add_argument("--procs", default="1,2")
    ap.add_argument("--batch", type=int, default=16, help="charlm batch per process")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", choices=("allreduce", "charlm"), default=None)
    args = ap.parse_args()
    if args.worker == "allreduce":
        return worker_allreduce(args.quick)
    if args.worker == "nccl":
        return worker_nccl(args.quick)
    if args.worker == "charlm":
        return worker_charlm(args.quick, args.batch)
    q = ["--quick"] if args.quick else []
    if args.only != "charlm":
        allreduce_tables(q)
    if args.only != "allreduce":
        charlm_table(args, q)


def allreduce_tables(q):
    rows = _launch(2, ["--worker", "allreduce"] + q)
    try:
        import cupy
        if cupy.cuda.is_available():
            rows += _launch(1, ["--worker", "nccl"] + q)
    except ImportError:
        pass
    print("all-reduce, float32 (bus bandwidth = bytes / time; 2 processes unless noted)")
    impls = list(dict.fromkeys(r["impl"] for r in rows))
    print(f"{'bytes':>10}  " + "  ".join(f"{i:>24}" for i in impls))
    for b in sorted({r["bytes"] for r in rows}):
        cells = []
        for i in impls:
            t = next((r["seconds"] for r in rows if r["impl"] == i and r["bytes"] == b), None)
            cells.append(f"{t * 1e6:9.1f}us {b / t / 1e9:7.2f}GB/s" if t else " " * 24)
        print(f"{b:>10}  " + "  ".join(f"{c:>24}" for c in cells))


def charlm_table(args, q):
    """One launch per entry of --procs, in its order (repeat entries to interleave rounds:
    --procs 1,2,1,2,1,2); then the median samples/s of each process count and its ratio
    to one process's median."""
    print(f"\ndata-parallel charlm, batch {args.batch} per process")
    runs: dict = {}
    for n in [int(p) for p in args.procs.split(",")]:
        r = _launch(n, ["--worker", "charlm", "--batch", str(args.batch)] + q)[0]
        runs.setdefault(n, []).append(r["samples_per_s"])
        print(f"  {n} processes: {r['samples_per_s']:8.1f} samples/s")
    base = statistics.median(runs.get(1, [None])) if 1 in runs else None
    print("medians:")
    for n, v in runs.items():
        m = statistics.median(v)
        print(f"  {n} processes: {m:8.1f} samples/s over {len(v)} runs" +
              (f"  ({m / base:.2f}x one process)" if base else ""))


if __name__ == "__main__":
    main()
