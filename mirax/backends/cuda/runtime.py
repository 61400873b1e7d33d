"""CUDA execution: a planned Graph becomes one straight-line Python function of CuPy calls
and generated kernels.

Where it sits: `jit` (through the `call` primitive's CUDA impl), `mx.ir.compile(graph,
"cuda")` and eager composites come here, with a graph the compiler's pipeline has already
optimized for this backend: the composites without a CUDA kernel inlined (so gelu(x*w+b)
became one elementwise chain), fused, and regrouped by this backend's own passes
(`regroup`, `merge`: compiler/regroup.py's fold_broadcasts, rematerialize,
merge_elementwise); the claims are declared in one place, the CudaBackend class.
`lower` writes one line per node: fusion nodes call the kernel from codegen.py (or, where
codegen has none, their nodes one by one), other nodes call the backend's impl with
params bound. Dead intermediates are dropped after their last
use so the CuPy pool can reuse their memory. MIRAX_DEBUG=3 prints the plan. A top-level
plan is replayed as a CUDA graph when it is launch-bound (graphs.py, MIRAX_CUDA_GRAPHS).

Invariant: a plan takes and returns CuPy buffers (host inputs are moved to the device on
entry); `graph.cache[("exe", "cuda")]` holds it.
"""
from __future__ import annotations

import functools
import sys

import cupy as cp
import numpy as np

from mirax.core import config, profile_events
from mirax.backends.cuda import codegen, graphs, row_kernels
from mirax.backends.cuda.library import GEMV_MIN, leading, to_device
from mirax.compiler.fusion import elementwise_names
from mirax.compiler.pipeline import debug_level
from mirax.compiler.regroup import fold_broadcasts, merge_elementwise, rematerialize
from mirax.core.avals import ShapedArray
from mirax.core.runtime import executable
from mirax.graph.build import trace_to_graph
from mirax.graph.graph import Graph, Node
from mirax.ops.call import fusion_p

def regroup(graph: Graph) -> Graph:
    """fold_broadcasts + rematerialize (compiler/regroup.py; knob cuda_remat)."""
    return rematerialize(fold_broadcasts(graph)) if config.get("cuda_remat") else graph


def merge(graph: Graph) -> Graph:
    """merge_elementwise (compiler/regroup.py; knob cuda_merge)."""
    return merge_elementwise(graph) if config.get("cuda_merge") else graph


def lower(be, graph: Graph, timer: list | None = None, merge: bool = True):
    """A callable(*buffers) -> list of CuPy buffers running `graph` on the GPU (a top-level
    plan: graphs.Replay, which captures it as a CUDA graph once that pays).

    With `timer` (a list), every node's call is bracketed by CUDA events appended to it as
    (label, start, end): see `profile`. `merge=False` for a fusion node's own nodes run one
    by one (merging them would make the same fusion node again)."""
    names: dict = {}
    env: dict = {}

    def name(v):
        if v not in names:
            names[v] = f"v{len(names)}"
        return names[v]

    args = [name(v) for v in graph.inputs]
    host_consts = {}  # 0-d host constants: fusion kernels inline them as literals
    for v, buf in graph.consts.items():
        buf = getattr(buf, "_buf", buf)  # an Array's buffer
        env[name(v)] = buf if isinstance(buf, cp.ndarray) else \
            cp.asarray(np.asarray(buf, v.aval.dtype))
        if isinstance(buf, (np.ndarray, np.generic, bool, int, float)) and np.ndim(buf) == 0:
            host_consts[v] = buf
    last_use = {}
    for i, node in enumerate(graph.nodes):
        for v in node.inputs:
            last_use[v] = i
    keep = set(graph.outputs) | set(graph.inputs) | set(graph.consts)
    body = []
    for i, node in enumerate(graph.nodes):
        k = f"_k{i}"
        alone = fusion_callable(be, _alone(node), host_consts) \
            if merge and _kernel_alone(node) else None
        if getattr(alone, "fused", False):  # codegen's kernel for one op too
            env[k] = lambda *bufs, run=alone: run(*bufs)[0]
        elif node.prim is fusion_p:
            env[k] = fusion_callable(be, node, host_consts)
            be.report[("fusion", "native" if getattr(env[k], "fused", False)
                       else "op-by-op")] += 1
        else:
            env[k] = functools.partial(be.impl(node.prim), **node.params) if node.params \
                else be.impl(node.prim)
        if timer is not None:
            env[k] = _timed(env[k], _label(i, node), timer)
        outs = ", ".join(name(o) for o in node.outputs)
        lhs = outs + ("," if node.prim.multiple_results and len(node.outputs) == 1 else "")
        body.append(f"{lhs} = {k}({', '.join(name(v) for v in node.inputs)})"
                    f"  # {node.prim.name}")
        dead = [name(v) for v in dict.fromkeys(node.inputs)
                if last_use.get(v) == i and v not in keep]
        if dead:
            body.append(f"del {', '.join(dead)}")
    body.append(f"return [{', '.join(name(v) for v in graph.outputs)}]")
    src = "\n".join([f"def plan({', '.join(args)}):"] + ["    " + ln for ln in body])
    if debug_level() >= 3:
        print(f"# --- generated CUDA plan for {graph.name} ---\n{src}", file=sys.stderr)
    exec(compile(src, f"<mirax cuda plan {graph.name}>", "exec"), env)
    plan = env["plan"]
    in_dtypes = [v.aval.dtype for v in graph.inputs]
    # a top-level plan: replayed as a CUDA graph once it pays; not one with collectives
    # (NCCL calls run on the current stream, a plain plan's: never captured)
    if timer is None and merge and not any(n.prim.named_axes for n in graph.nodes):
        run = graphs.Replay(be, plan, in_dtypes, graph.name)
        run.profiled = _profiled(be, graph, graph.name)
    else:
        def run(*bufs):
            return plan(*[b if type(b) is cp.ndarray else cp.asarray(np.asarray(b, d))
                          for b, d in zip(bufs, in_dtypes)])
    run.source = src
    run.graph = graph
    return run


def _kernel_alone(node) -> bool:
    """Does `node`, outside any fusion node, run as a generated kernel: a reduction with
    one (`codegen.reduction_layout`), a floating elementwise op (bf16 and f16 have no CuPy
    ufuncs; a bias add reads the bias by index, as in a fusion)?"""
    if node.prim.name in codegen.REDUCE:
        return codegen.reduction_layout(node) is not None
    if node.prim.name not in elementwise_names() or len(node.outputs) != 1:
        return False
    out = node.outputs[0].aval
    dt = np.dtype(out.dtype)
    return out.size >= ALONE_MIN and (dt.kind == "f" or dt in codegen.LOW)


ALONE_MIN = 1 << 12  # an elementwise op on fewer values keeps the backend's impl


def _alone(node):
    """A fusion node computing `node` alone."""
    sub = Graph(node.prim.name)
    sub.inputs, sub.nodes, sub.outputs = list(node.inputs), [node], list(node.outputs)
    return Node(fusion_p, node.inputs, {"graph": sub, "name": node.prim.name}, node.outputs,
                node.source)


# --- profiling ------------------------------------------------------------------------------------
def _label(i, node) -> str:
    name = node.params["name"] if node.prim is fusion_p else node.prim.name
    shapes = ",".join("x".join(map(str, v.aval.shape)) for v in node.inputs[:3])
    return f"{i:03d} {name}[{shapes}]"


def _timed(fn, label, timer):
    def run(*args):
        start = cp.cuda.Event()
        start.record()
        out = fn(*args)
        end = cp.cuda.Event()
        end.record()
        timer.append((label, start, end))
        return out
    return run


CUDA_TRACK = 1   # the profiler's track (Chrome-trace thread id) of GPU slices


def _profiled(be, graph: Graph, name: str):
    """The plan run under a profiler trace (mirax.profiler): lowered again with CUDA events
    around every node (at the first traced call). The host records the call as one slice;
    the GPU slices are placed at their event times relative to an event recorded at the
    call's start, once the trace ends (profiler._finish)."""
    state: dict = {}

    def run(bufs):
        rec = profile_events.active
        if "plan" not in state:
            state["timer"] = []
            state["plan"] = lower(be, graph, state["timer"])
        timer = state["timer"]
        timer.clear()
        ref = cp.cuda.Event()
        ref.record()
        t0 = profile_events.now()
        out = state["plan"](*bufs)
        rec.add(name, "plan", t0, profile_events.now(), {"nodes": len(timer)})
        marks = list(timer)
        timer.clear()

        def resolve(rec):
            rec.threads.setdefault(CUDA_TRACK, "CUDA stream")
            for label, s, e in marks:
                e.synchronize()
                a = t0 + int(1e6 * cp.cuda.get_elapsed_time(ref, s))
                b = t0 + int(1e6 * cp.cuda.get_elapsed_time(ref, e))
                i, _, what = label.partition(" ")
                rec.add(what, "cuda", a, b, {"node": int(i), "plan": name}, tid=CUDA_TRACK)
        rec.__dict__.setdefault("deferred", []).append(resolve)
        return out
    return run


def profile(be, graph: Graph, bufs, reps: int = 5) -> list:
    """[(label, mean ms)] of every node of `graph`'s CUDA plan, slowest first: the GPU time
    between events recorded around each node's call (it includes any wait for the host).
    `graph` is optimized for this backend already (`mx.ir.optimize(graph, backend)`)."""
    timer: list = []
    run = lower(be, graph, timer)
    run(*bufs)
    cp.cuda.get_current_stream().synchronize()
    timer.clear()
    for _ in range(reps):
        run(*bufs)
    cp.cuda.get_current_stream().synchronize()
    total: dict = {}
    for label, s, e in timer:
        total[label] = total.get(label, 0.0) + cp.cuda.get_elapsed_time(s, e) / reps
    return sorted(total.items(), key=lambda kv: -kv[1])


def fusion_callable(be, node, host_consts: dict):
    """One generated kernel for a fusion node, or its nodes one by one when codegen has
    none (an op or dtype it does not cover)."""
    sub = node.params["graph"]
    kname = node.params.get("name", "fused")
    inline = {v: host_consts[v] for v in sub.inputs if v in host_consts}
    try:
        if sub.nodes[-1].prim.name in codegen.REDUCE:
            red = sub.nodes[-1]
            src = red.inputs[0].aval
            # a large sum over leading axes without a generated kernel (cuda_two_stage off):
            # chain kernel, then a GEMV
            gemv = red.prim.name == "reduce_sum" and src.size >= GEMV_MIN and \
                leading(red.params["axes"], src.ndim) and \
                np.dtype(src.dtype) in (np.dtype(np.float32), np.dtype(np.float64))
            if codegen.with_values(sub) or (not gemv and list(sub.outputs) == [red.outputs[0]]):
                run = codegen.reduction_kernel(sub, inline, kname)  # (and the chain's values)
            else:  # other chain values are needed too: one elementwise kernel, then reduce
                pre = Graph(kname)
                pre.inputs, pre.nodes = sub.inputs, sub.nodes[:-1]
                need = [o for o in sub.outputs if o is not red.outputs[0]]
                if red.inputs[0] not in need:
                    need.append(red.inputs[0])
                ew = codegen.elementwise_kernel(pre, inline, need, kname)
                reduce = functools.partial(be.impl(red.prim), **red.params)
                pos = {v: j for j, v in enumerate(need)}

                def run(*bufs, ew=ew, reduce=reduce, pos=pos, need=need):
                    vals = ew(*bufs)
                    r = reduce(vals[pos[red.inputs[0]]])
                    return [r if o is red.outputs[0] else vals[pos[o]] for o in sub.outputs]
        else:
            run = codegen.elementwise_kernel(sub, inline, list(sub.outputs), kname)
        run.fused = True
        return run
    except codegen.Unsupported:
        sub_run = lower(be, sub, merge=False)
        return lambda *bufs: sub_run(*bufs)


# --- composites on CUDA: a row kernel where one applies, else the body compiled -----------------
def body_impl(prim):
    """An impl running `prim`'s body as a compiled CUDA plan (cached per signature)."""
    cache: dict = {}

    def run(*bufs, **params):
        bufs = [to_device(b) if not isinstance(b, (bool, int, float)) else
                cp.asarray(b) for b in bufs]
        key = (tuple((b.shape, b.dtype) for b in bufs), tuple(sorted(params.items())))
        exe = cache.get(key)
        if exe is None:
            avals = [ShapedArray(b.shape, b.dtype, False) for b in bufs]

            def fn(*xs):
                out = prim.decomposition(*xs, **params)
                return list(out) if prim.multiple_results else [out]
            g, captured = trace_to_graph(fn, avals, prim.name)
            assert not captured, f"{prim.name}: body captured an outer tracer"
            exe = cache.setdefault(key, executable(g, "cuda"))  # concurrent builds: first wins
        outs = exe(*bufs)
        return outs if prim.multiple_results else outs[0]
    return run


def row_impl(prim, op):
    """softmax & co over the last axis with codegen's row kernel; the body otherwise."""
    fallback = body_impl(prim)
    if op.startswith("softmax_cross_entropy"):
        return _cross_entropy(op, fallback)

    def run(*bufs, **params):
        x = bufs[0]
        if op in ("softmax", "log_softmax") and tuple(params["axes"]) != (-1,):
            return fallback(*bufs, **params)
        try:
            d = x.shape[-1] if x.ndim else 0
            has_w = params.get("has_weight", False)
            has_b = params.get("has_bias", False)
            kern, block = row_kernels.row_kernel(op, x.dtype, d, has_w, has_b)
        except codegen.Unsupported:
            return fallback(*bufs, **params)
        x = cp.ascontiguousarray(x)
        y = cp.empty_like(x)
        rows = x.size // d
        if rows == 0:
            return y
        extra = [cp.ascontiguousarray(b.astype(x.dtype, copy=False)) for b in bufs[1:]]
        eps = (np.float64 if x.dtype == np.float64 else np.float32)(params.get("eps", 0))
        if op in ("softmax", "log_softmax"):
            kern((rows,), (block,), (x, y))
        elif op == "layer_norm":
            w = extra.pop(0) if has_w else x
            b = extra.pop(0) if has_b else x
            kern((rows,), (block,), (x, w, b, y, eps))
        else:
            w = extra.pop(0) if has_w else x
            kern((rows,), (block,), (x, w, y, eps))
        return y
    return run


def _cross_entropy(op, fallback):
    """softmax_cross_entropy(logits, labels) -> a loss a row, and its backward (ct, out,
    logits, labels) -> [d logits], one row kernel each (the body: a dozen kernels)."""
    bwd = op.endswith("_bwd")

    def run(*bufs, **params):
        x, labels = bufs[2:4] if bwd else bufs
        try:
            if bwd and tuple(params["wrt"]) != (0,):
                raise codegen.Unsupported(op)
            kern, block = row_kernels.row_kernel(op, x.dtype, x.shape[-1],
                                                 label_dtype=labels.dtype)
        except codegen.Unsupported:
            return fallback(*bufs, **params)
        x, labels = cp.ascontiguousarray(x), cp.ascontiguousarray(labels)
        out = cp.empty_like(x) if bwd else cp.empty(x.shape[:-1], x.dtype)
        if x.size:
            args = (x, labels, out)
            if bwd:
                args = (cp.ascontiguousarray(bufs[0].astype(x.dtype, copy=False)),) + args
            kern((x.size // x.shape[-1],), (block,), args)
        return [out] if bwd else out
    return run
