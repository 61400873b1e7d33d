"""CUDA execution: a planned Graph becomes one straight-line Python function of CuPy calls
and generated kernels.

Where it sits: `jit` (through the `call` primitive's CUDA impl), `mx.ir.compile(graph,
"cuda")` and eager composites come here. `lower` first inlines the composites this backend
has no fused kernel for (so gelu(x*w+b) becomes one elementwise chain) and re-runs the
pass pipeline when it did, then writes one line per node: fusion nodes call the kernel
from codegen.py (or, where codegen has none, their nodes one by one), other nodes call
the backend's impl with params bound. Dead intermediates are dropped after their last
use so the CuPy pool can reuse their memory. MIRAX_DEBUG=3 prints the plan. A top-level
plan is replayed as a CUDA graph when it is launch-bound (graphs.py, MIRAX_CUDA_GRAPHS).

Invariant: a plan takes and returns CuPy buffers (host inputs are moved to the device on
entry); `graph.cache[("exe", "cuda")]` holds it.
"""
from __future__ import annotations

import functools
import os
import sys

import cupy as cp
import numpy as np

from mirax.backends.cuda import codegen, graphs
from mirax.backends.cuda.library import GEMV_MIN, leading, to_device
from mirax.core.avals import ShapedArray
from mirax.ir.graph import Graph

# Composites with a hand-written CUDA kernel: left whole by `lower` (others are inlined).
KEEP = frozenset({"softmax", "log_softmax", "layer_norm", "rms_norm",
                  "dot_product_attention", "dot_product_attention_bwd"})


def backend():
    from mirax.backends import _load_cuda
    return _load_cuda()


def executable(graph: Graph):
    """The CUDA plan of `graph`, compiled once (optimize, then `lower`) and cached."""
    from mirax.transforms.jit import executable as exe
    return exe(graph, "cuda")


def _needs_decompose(graph: Graph) -> bool:
    from mirax.compiler.fusion import fusion_p
    for n in graph.nodes:
        if n.prim is fusion_p:
            if _needs_decompose(n.params["graph"]):
                return True
        elif n.prim.decomposition is not None and n.prim.name not in KEEP and \
                not hasattr(n.prim, "tape_rule"):
            return True
    return False


def prepare(be, graph: Graph) -> Graph:
    """Inline the composites without a CUDA kernel, then optimize again (re-fuse)."""
    if not _needs_decompose(graph):
        return graph
    from mirax.compiler import optimize
    from mirax.compiler.decompose import decompose
    from mirax.compiler.fusion import fusion_p
    keep = KEEP | {name for name, p in _registry().items() if hasattr(p, "tape_rule")}
    keep = keep - {fusion_p.name}
    g = decompose(graph, keep)
    g.cache.update({k: v for k, v in graph.cache.items() if k == "donate"})
    return optimize(g, be)


def _registry():
    from mirax.core.primitive import registry
    return registry


def lower(be, graph: Graph, timer: list | None = None, merge: bool = True):
    """A callable(*buffers) -> list of CuPy buffers running `graph` on the GPU (a top-level
    plan: graphs.Replay, which captures it as a CUDA graph once that pays).

    With `timer` (a list), every node's call is bracketed by CUDA events appended to it as
    (label, start, end): see `profile`. `merge=False` for a fusion node's own nodes run one
    by one (merging them would make the same fusion node again)."""
    from mirax.compiler.fusion import fusion_p
    graph = prepare(be, graph)
    if merge and os.environ.get("MIRAX_CUDA_MERGE", "1") != "0":  # =0: measure without it
        graph = merge_elementwise(graph)
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
        if node.prim is fusion_p:
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
    from mirax.compiler.pipeline import debug_level
    if debug_level() >= 3:
        print(f"# --- generated CUDA plan for {graph.name} ---\n{src}", file=sys.stderr)
    exec(compile(src, f"<mirax cuda plan {graph.name}>", "exec"), env)
    plan = env["plan"]
    in_dtypes = [v.aval.dtype for v in graph.inputs]
    if timer is None and merge:  # a top-level plan: replayed as a CUDA graph once it pays
        run = graphs.Replay(be, plan, in_dtypes, graph.name)
    else:
        def run(*bufs):
            return plan(*[b if type(b) is cp.ndarray else cp.asarray(np.asarray(b, d))
                          for b, d in zip(bufs, in_dtypes)])
    run.source = src
    run.graph = graph
    return run


# --- merging elementwise groups (CUDA only) ------------------------------------------------------
def _ew_names() -> set:
    from mirax.compiler.fusion import _elementwise_names
    return _elementwise_names()


def _members(node, ew) -> list | None:
    """The elementwise nodes `node` computes (itself, or a fusion node's chain), or None when
    it is not a pure elementwise group (a reduction, any other primitive)."""
    from mirax.compiler.fusion import fusion_p
    if node.prim is fusion_p:
        sub = node.params["graph"].nodes
        return list(sub) if all(n.prim.name in ew for n in sub) else None
    if node.prim.name in ew and len(node.outputs) == 1:
        return [node]
    return None


def merge_elementwise(graph: Graph) -> Graph:
    """Merge elementwise groups into their elementwise consumers where the compiler's fusion
    pass (which grows one group along the node order) left them apart: an optimizer's
    update `b1 * m + (1 - b1) * g` starts two groups, and the chain
    m -> m_hat -> update -> new p spans several; after merging, one kernel per parameter
    reads p, m, v, g and writes p, m, v. A group P joins its consumer C when both are
    elementwise over one shape and every other use of P's outputs comes after C (the merged
    node sits at C's position; P's outputs used elsewhere stay outputs). A broadcast of a
    0-d value feeding a group is read as that value (no materialized array)."""
    from mirax.compiler.fusion import fusion_p
    ew = _ew_names()
    nodes = list(graph.nodes)
    outs = set(graph.outputs)
    # 0-d broadcasts: out var -> the scalar var
    scalar_of = {n.outputs[0]: n.inputs[0] for n in nodes
                 if n.prim.name == "broadcast_in_dim" and n.inputs[0].aval.ndim == 0
                 and n.outputs[0] not in outs}
    changed = True
    merged_any = False
    while changed:
        changed = False
        producer, users = {}, {}
        for i, n in enumerate(nodes):
            for v in n.inputs:
                users.setdefault(v, []).append(i)
            for o in n.outputs:
                producer[o] = i
        for ci, c in enumerate(nodes):
            if (c.prim is fusion_p or c.prim.name in ew) and \
                    any(v in scalar_of for v in c.inputs):
                members = c.params["graph"].nodes if c.prim is fusion_p else [c]
                nodes[ci] = _group(c, members, [], c.outputs, scalar_of, ew)
                changed = merged_any = True
                break
            cm = _members(c, ew)
            if cm is None:
                continue
            shape = tuple(c.outputs[0].aval.shape)
            for v in dict.fromkeys(c.inputs):
                pi = producer.get(v)
                if pi is None:
                    continue
                p = nodes[pi]
                pm = _members(p, ew)
                if pm is None or tuple(p.outputs[0].aval.shape) != shape or \
                        any(tuple(o.aval.shape) != shape for o in p.outputs):
                    continue
                if any(u != ci and u < ci for o in p.outputs for u in users.get(o, ())):
                    continue
                keep = [o for o in p.outputs
                        if o in outs or any(u != ci for u in users.get(o, ()))]
                nodes[ci] = _group(c, pm + cm, keep, c.outputs, scalar_of, ew)
                del nodes[pi]
                changed = merged_any = True
                break
            if changed:
                break
    if not merged_any:
        return graph
    used = set(graph.outputs)
    for n in nodes:
        used.update(n.inputs)
    nodes = [n for n in nodes if n.prim is fusion_p or any(o in used for o in n.outputs)]
    return graph.replace(nodes=nodes)


def _group(c, members, extra_outs, c_outs, scalar_of, ew):
    """A fusion node computing `members`, with outputs `c_outs` + `extra_outs`; elementwise
    members read 0-d values in place of their broadcasts."""
    from mirax.compiler.fusion import fusion_p
    from mirax.ir.graph import Node
    members = [Node(n.prim, [scalar_of.get(v, v) for v in n.inputs], n.params, n.outputs,
                    n.source) if n.prim.name in ew and any(v in scalar_of for v in n.inputs)
               else n for n in members]
    made = {o for n in members for o in n.outputs}
    ins = {}
    for n in members:
        for v in n.inputs:
            if v not in made:
                ins[v] = None
    outputs = list(dict.fromkeys(list(c_outs) + list(extra_outs)))
    name = c.params["name"] if c.prim is fusion_p else c.prim.name
    name = name if name.startswith("merged_") else "merged_" + name
    sub = Graph(name)
    sub.inputs, sub.nodes, sub.outputs = list(ins), members, outputs
    return Node(fusion_p, list(ins), {"graph": sub, "name": name}, outputs, c.source)


# --- profiling ------------------------------------------------------------------------------------
def _label(i, node) -> str:
    from mirax.compiler.fusion import fusion_p
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


def profile(be, graph: Graph, bufs, reps: int = 5) -> list:
    """[(label, mean ms)] of every node of `graph`'s CUDA plan, slowest first: the GPU time
    between events recorded around each node's call (it includes any wait for the host)."""
    from mirax.compiler import optimize
    timer: list = []
    run = lower(be, optimize(graph, be), timer)
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
            # a large sum over leading axes (bias gradients): chain kernel, then a GEMV
            gemv = red.prim.name == "reduce_sum" and src.size >= GEMV_MIN and \
                leading(red.params["axes"], src.ndim) and \
                np.dtype(src.dtype) in (np.dtype(np.float32), np.dtype(np.float64))
            if not gemv and (list(sub.outputs) == [red.outputs[0]] or codegen.with_values(sub)):
                run = codegen.reduction_kernel(sub, inline, kname)  # (with_values: a loss)
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
            from mirax.ir.build import trace_to_graph
            avals = [ShapedArray(b.shape, b.dtype, False) for b in bufs]

            def fn(*xs):
                out = prim.decomposition(*xs, **params)
                return list(out) if prim.multiple_results else [out]
            g, captured = trace_to_graph(fn, avals, prim.name)
            assert not captured, f"{prim.name}: body captured an outer tracer"
            exe = cache[key] = executable(g)
        outs = exe(*bufs)
        return outs if prim.multiple_results else outs[0]
    return run


def row_impl(prim, op):
    """softmax & co over the last axis with codegen's row kernel; the body otherwise."""
    fallback = body_impl(prim)

    def run(*bufs, **params):
        x = bufs[0]
        if op in ("softmax", "log_softmax") and tuple(params["axes"]) != (-1,):
            return fallback(*bufs, **params)
        try:
            d = x.shape[-1] if x.ndim else 0
            has_w = params.get("has_weight", False)
            has_b = params.get("has_bias", False)
            kern, block = codegen.row_kernel(op, x.dtype, d, has_w, has_b)
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
