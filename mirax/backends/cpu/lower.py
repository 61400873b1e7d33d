"""CPU lowering: a Graph becomes one generated Python function of NumPy calls.

Each node is one line. Elementwise primitives whose impl is a NumPy ufunc are called
directly (`v3 = _add(v1, v2)`), writing into a dead input's buffer (`out=v1`) when the
memory plan (compiler/memory.py) says it is safe; impls that only wrap a ufunc in
`np.errstate` are called as raw ufuncs inside one errstate block for the whole function
(one context switch per call instead of one per op); so are float div and pow, whose impls
only branch on integer dtypes. Other nodes call a kernel built for the node (fusion:
a compiled loop, the tape or blocked chunks; specialize: dot_general, convolutions),
else the backend's kernel or the reference impl with the params bound (`v5 =
_k5(v4)`). A reduce_sum over trailing axes of a product used nowhere else runs as one
einsum at the sum (mul_sum), an index_add of rows each scaled by one factor as one loop
that scales as it adds (mul_index_add). Big intermediates are freed after their last use.
MIRAX_DEBUG=3 prints the source.
"""
from __future__ import annotations

import functools
import sys

import numpy as np

from mirax.backends.cpu import blocked, collectives, kernels, tape
from mirax.backends.cpu.kernels import ufunc_of
from mirax.graph.graph import Graph
from mirax.compiler.pipeline import debug_level
from mirax.backends.cpu import loops, parallel, threads
from mirax.core import profile_events

_ERRSTATE = "_np.errstate(divide='ignore', invalid='ignore', over='ignore')"


def fusion(node):
    """A fusion node's kernel: its compiled loop (loops.py) where numba takes the group,
    the tape interpreter (tape.py) for few elements, else (and where numba fails to
    compile the loop) cache-blocked NumPy chunks (blocked.py)."""
    members = node.params["graph"].nodes
    fn = loops.compile_fusion(node) if loops.eligible(members) else None
    if fn is None and tape.eligible(members):
        fn = tape.compile_fusion(node)
    return fn if fn is not None else blocked.compile_fusion(node)


def writes_into(node) -> bool:
    """Whether the lowered node can write its result into a given buffer (`out=`)."""
    return not node.params and ufunc_of(node.prim, node)[0] is not None


# consumers that can compute a product they alone read: name -> (the kernel's maker, label)
_PAIRED = {"reduce_sum": (kernels.mul_sum, "mul+reduce_sum (einsum)"),
           "index_add": (kernels.mul_index_add, "mul+index_add")}


def _mul_pairs(graph: Graph, reuse: dict) -> dict:
    """Consumers of a product read by nothing else that compute it themselves: index ->
    (index of the mul, kernel, its inputs: the factors, then the consumer's other inputs,
    label). A reduce_sum over trailing axes runs as one einsum of the factors (mul_sum); an
    index_add of rows each scaled by one factor scales them as it adds them
    (mul_index_add). Not where a node between the two writes its result into a factor's
    buffer (the memory plan's `reuse`, made for the factors dying at their last reader
    before the consumer)."""
    uses: dict = {}
    for v in graph.outputs:
        uses[v] = uses.get(v, 0) + 1
    for n in graph.nodes:
        for v in n.inputs:
            uses[v] = uses.get(v, 0) + 1
    muls = {n.outputs[0]: i for i, n in enumerate(graph.nodes) if n.prim.name == "mul"}
    pairs = {}
    for j, n in enumerate(graph.nodes):
        m = muls.get(n.inputs[0]) if n.prim.name in _PAIRED else None
        if m is None or uses[n.inputs[0]] != 1:
            continue
        mul = graph.nodes[m]
        if any(graph.nodes[k].inputs[reuse[k]] in mul.inputs for k in range(m + 1, j)
               if k in reuse):
            continue
        make, label = _PAIRED[n.prim.name]
        if (fn := make(mul, n)) is not None:
            pairs[j] = (m, fn, [*mul.inputs, *n.inputs[1:]], label)
    return pairs


def lower(be, graph: Graph):
    """A plan for `graph` on the CPU backend `be` (whose dispatch report counts its nodes)."""
    names: dict = {}
    env: dict = {"_np": np}

    def name(v):
        if v not in names:
            names[v] = f"v{len(names)}"
        return names[v]

    plan = graph.cache.get("memory_plan")
    reuse = plan.reuse if plan is not None else {}
    free_after = plan.free_after if plan is not None else {}
    args = [name(v) for v in graph.inputs]
    for v, buf in graph.consts.items():
        env[name(v)] = buf
    pairs = _mul_pairs(graph, reuse)   # consumer -> (mul node, kernel, inputs, label)
    merged = {m: j for j, (m, *_) in pairs.items()}
    deferred: dict = {}         # consumer -> dels moved from its merged mul
    n_err = sum(1 for n in graph.nodes if not n.params and ufunc_of(n.prim, n)[1])
    body = []
    timed: dict = {}   # line of body -> (node index, what it runs): the profiled lines
    pending: dict = {}   # output var of a started collective -> its node index
    reading: dict = {}   # var -> started collectives still reading it (its buffer)

    def wait(vs):
        """The waits for the started collectives among `vs` (before their use)."""
        for c in dict.fromkeys(pending[v] for v in vs if v in pending):
            cn = graph.nodes[c]
            lhs = ", ".join(name(o) for o in cn.outputs)
            timed[len(body)] = (c, f"{cn.prim.name} (wait)")
            body.append(f"{lhs}{',' if cn.prim.multiple_results else ''} = _f{c}.result()")
            for o in cn.outputs:
                pending.pop(o, None)
            for v in cn.inputs:
                reading[v] -= 1

    for i, node in enumerate(graph.nodes):
        prim = node.prim
        wait(node.inputs)
        if i in reuse and reading.get(node.inputs[reuse[i]]):
            # this node writes into a buffer a collective still sends: that one first
            wait([o for c in set(pending.values()) if node.inputs[reuse[i]] in
                  graph.nodes[c].inputs for o in graph.nodes[c].outputs])
        if i in merged:  # computed at its consumer; its inputs live until then
            deferred.setdefault(merged[i], []).extend(free_after.get(i, ()))
            continue
        be.report[(prim.name, "native")] += 1
        outs = ", ".join(name(o) for o in node.outputs)
        ins = [name(v) for v in node.inputs]
        u, err = ufunc_of(prim, node) if not node.params else (None, False)
        if i in pairs:
            _, fn, pair_ins, _ = pairs[i]
            k = f"_k{i}"
            env[k] = fn
            ins = [name(v) for v in pair_ins]
        elif u is not None and (pk := loops.compile_single(node)) is not None:
            k = f"_p{i}"    # big: a compiled loop on native threads
            env[k] = pk
        elif u is not None and (pk := parallel.elementwise(u, node)) is not None:
            k = f"_p{i}"    # big: split over the thread pool
            env[k] = pk
            if i in reuse:
                ins.append(f"out={ins[reuse[i]]}")
        elif u is not None and (not err or n_err > 1):
            k = f"_{u.__name__}"
            env[k] = u
            if i in reuse:
                ins.append(f"out={ins[reuse[i]]}")
        else:
            k = f"_k{i}"
            fn = fusion(node) if prim.name == "fusion" else kernels.specialize(node)
            if fn is None:
                fn = be.impl(prim)   # raises for a primitive with no impl
                fn = functools.partial(fn, **node.params) if node.params else fn
            env[k] = fn
        lhs = outs + ("," if prim.multiple_results and len(node.outputs) == 1 else "")
        what = pairs[i][3] if i in pairs else prim.name
        if prim.name in collectives.COLLECTIVES:   # started now, waited for at first use
            env["_start"] = collectives.start
            timed[len(body)] = (i, f"{what} (start)")
            body.append(f"_f{i} = _start({', '.join([k, *ins])})  # {what}")
            pending.update((o, i) for o in node.outputs)
            for v in node.inputs:
                reading[v] = reading.get(v, 0) + 1
        else:
            timed[len(body)] = (i, what)
            body.append(f"{lhs} = {k}({', '.join(ins)})  # {what}")
        dead = [v for v in dict.fromkeys([*free_after.get(i, ()), *deferred.get(i, ())])
                if i not in pairs or v is not node.inputs[0]]
        wait([v for v in dead if v in pending])
        if dead:
            body.append(f"del {', '.join(name(v) for v in dead)}")
    wait(graph.outputs)
    wait(list(pending))   # outputs nobody reads: waited for, so that their errors surface
    ret = f"[{', '.join(name(v) for v in graph.outputs)}]"
    traced = _traced_source(graph, body, timed, ret, args, n_err > 1, env)
    body.append(f"return {ret}")
    if n_err > 1:
        body = [f"with {_ERRSTATE}:"] + ["    " + line for line in body]
    # while a profiler trace is on, the instrumented variant runs (compiled at its first
    # call); otherwise this one test is all the profiler costs
    call = ", ".join(["_pe.active", *args])
    body.insert(0, f"if _pe.active is not None:\n    return _traced({call})")
    if any(n.prim.name in threads.BLAS_USERS for n in graph.nodes):
        # one BLAS thread but for big products (parallel.matmul); the caller's count comes back
        body = ["_b = _blas_enter()", "try:", *("    " + ln for line in body
                                                for ln in line.splitlines()),
                "finally:", "    _blas_exit(_b)"]
        env["_blas_enter"], env["_blas_exit"] = threads.blas.enter, threads.blas.exit
    src = "\n".join([f"def run({', '.join(args)}):"] +
                    ["    " + ln for line in body for ln in line.splitlines()])
    if debug_level() >= 3:
        print(f"# --- generated CPU plan for {graph.name} ---\n{src}", file=sys.stderr)
    env["__name__"] = "mirax.plan"  # (NumPy's RuntimeWarnings from mirax code are ignored)
    env["_pe"] = profile_events

    def build_traced(*a):
        exec(compile(traced, f"<mirax plan {graph.name} (profiled)>", "exec"), env)
        env["_traced"] = env["traced"]
        return env["traced"](*a)
    env["_traced"] = build_traced
    exec(compile(src, f"<mirax plan {graph.name}>", "exec"), env)
    return env["run"]


def _traced_source(graph, body, timed, ret, args, errstate, env) -> str:
    """The plan's instrumented variant: `traced(recorder, *args)` records one slice per
    node (its label: the primitive or fusion; args: operand avals, the user's source line)
    inside one slice named after the graph (the jitted function)."""
    labels, info = [], []
    for i, what in timed.values():
        node = graph.nodes[i]
        label = f"fusion {node.params['name']}" if node.prim.name == "fusion" else what
        labels.append(label)
        info.append({"node": i, "out": " ".join(v.aval.str_short() for v in node.outputs),
                     "in": " ".join(v.aval.str_short() for v in node.inputs),
                     "source": node.source})
    env["_labels"], env["_info"], env["_now"] = labels, info, profile_events.now
    lines, k = [], 0
    for j, line in enumerate(body):
        if j in timed:
            lines += ["_t = _now()", line,
                      f"_r.add(_labels[{k}], 'cpu', _t, _now(), _info[{k}])"]
            k += 1
        else:
            lines.append(line)
    lines.append(f"_res = {ret}")
    if errstate:
        lines = [f"with {_ERRSTATE}:"] + ["    " + ln for ln in lines]
    lines = ["_t0 = _now()"] + lines + [
        f"_r.add({graph.name!r}, 'plan', _t0, _now(), {{'nodes': {len(graph.nodes)}}})",
        "return _res"]
    return "\n".join([f"def traced(_r, {', '.join(args)}):"] +
                     ["    " + ln for line in lines for ln in line.splitlines()])
