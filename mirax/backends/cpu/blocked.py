"""Cache-blocked execution of fusion nodes on the CPU.

NumPy has no fused loops, but a chain of ufuncs run over chunks of a few thousand
elements, each chunk's temporaries in small preallocated buffers, keeps the whole chain in
L1/L2: every op reads and writes cache instead of memory, and the only big allocations
are the group's outputs (fresh big arrays cost page faults on every call). This is what
XLA's loop fusion gets on the CPU. Per chunk each op still costs one ufunc call, so the
backend claims a group (`accepts`) only where blocking wins: enough ops on enough
elements.

Layout (layout.py): in flat mode arrays are viewed 1-d and chunked by elements;
otherwise (row mode) as (L, R), chunked along axis 0, BLOCK // R rows per chunk, an
outside input with S's leading dimension sliced while any other (a bias row, a scalar)
broadcasts whole, exactly as in the unchunked op.
Reductions accumulate chunk partials (same ufunc, e.g. sums of chunk sums: equal to the
unfused sum up to rounding); a reduction keeping axis 0 writes its rows directly.
Elementwise values are bitwise those of the unfused plan.
Threads: the chunks are grouped into parts that run on the thread pool (threads.py), each
part with its own temporaries and partial reductions. With reductions the parts have PART
elements and the partials are combined in part order, so values do not depend on the
thread count; without, the chunks are spread evenly over the call's threads.
"""
from __future__ import annotations

import functools
import math
import sys

import numpy as np
from mirax.backends.cpu import kernels
from mirax.backends.cpu.layout import REDUCE, externals, group_shape, layout
from mirax.compiler.pipeline import debug_level

from mirax.backends.cpu.threads import chain_threads, pool

BLOCK = 1 << 14      # elements per chunk (f32: 64 KiB per temporary; measured best)
PART = 1 << 16       # elements per part run by one thread (whole chunks)
MIN_SIZE = 1 << 15   # claim only groups with at least this many elements ...
MIN_OPS = 3          # ... and this many elementwise ops
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_ERRSTATE = "_np.errstate(divide='ignore', invalid='ignore', over='ignore')"


def _dtype_ref(env: dict, dtype) -> str:
    """A name in the generated code's namespace bound to `dtype` (bfloat16 is not np.*)."""
    name = f"_dt_{np.dtype(dtype).name}"
    env[name] = np.dtype(dtype)
    return name


def accepts(members) -> bool:
    """Whether the group runs blocked: enough elements and ops and values passed between
    members (else nothing stays in cache)."""
    shape = group_shape(members)
    if math.prod(shape) < MIN_SIZE:
        return False
    if sum(n.prim.name not in REDUCE for n in members) < MIN_OPS:
        return False
    made = {n.outputs[0] for n in members}
    if sum(v in made for n in members for v in n.inputs) < MIN_OPS - 1:
        return False
    for n in members:
        if n.prim.name in REDUCE and (np.dtype(n.inputs[0].aval.dtype) not in _FLOATS
                                      or tuple(n.inputs[0].aval.shape) != shape):
            return False
    return layout(members, externals(members)) is not None


def _einsum_muls(members, outs, lay) -> dict:
    """reduce_sum member index -> its mul member, where the product is read by nothing
    else and both factors are whole chunks: the pair runs as one einsum per chunk."""
    uses: dict = {}
    for n in members:
        for v in n.inputs:
            uses[v] = uses.get(v, 0) + 1
    made = {n.outputs[0]: n for n in members}
    pairs = {}
    for j, n in enumerate(members):
        m = made.get(n.inputs[0]) if n.prim.name == "reduce_sum" else None
        if m is None or m.prim.name != "mul" or uses[m.outputs[0]] != 1 or \
                m.outputs[0] in outs or np.dtype(m.outputs[0].aval.dtype) not in _FLOATS:
            continue
        if all(v in made or lay.ins.get(v) == "full" for v in m.inputs):
            pairs[j] = m
    return pairs


def compile_fusion(node):
    """The kernel of one fusion node: a generated function of the node's inputs."""
    sub = node.params["graph"]
    members, ins, outs = sub.nodes, list(sub.inputs), list(sub.outputs)
    lay = layout(members, ins)
    shape, n = lay.shape, lay.L
    step = BLOCK if lay.flat else max(1, BLOCK // lay.R)   # rows a chunk
    chunk = (step,) if lay.flat else (step, lay.R)
    full_view = "(-1)" if lay.flat else f"({lay.L}, {lay.R})"
    env: dict = {"_np": np}
    head, phead, loop = [], [], []   # once per call; once per part; once per chunk
    partial: list = []               # (reduction result, its ufunc) accumulated per part
    names: dict = {v: f"i{j}" for j, v in enumerate(ins)}
    chunk_of: dict = {}
    for v in ins:   # how each outside input enters a chunk: sliced, or whole
        x, kind = names[v], lay.ins[v]
        chunk_of[v] = x
        if kind == "one":
            head.append(f"{x} = {x}.reshape(())")
        elif kind == "lead":
            head.append(f"{x} = {x}.reshape({lay.R})")
        else:
            head.append(f"{x} = {x}.reshape({full_view if kind == 'full' else (lay.L, 1)})")
            chunk_of[v] = f"x{x[1:]}"
            loop.append(f"{chunk_of[v]} = {x}[s:e]")
    last: dict = {}
    for k, m in enumerate(members):
        for v in m.inputs:
            last[v] = k
    out_set = set(outs)
    pairs = _einsum_muls(members, out_set, lay)
    skipped = {id(m) for m in pairs.values()}
    free: dict = {}     # dtype -> free temporaries
    temps: list[str] = []
    results = {}

    def temp(dtype):
        lst = free.setdefault(np.dtype(dtype), [])
        if lst:
            return lst.pop()
        t = f"t{len(temps)}"
        temps.append(t)
        phead.append(f"{t} = _np.empty({chunk}, {_dtype_ref(env, dtype)})")
        return t

    for k, m in enumerate(members):
        if id(m) in skipped:
            continue
        ins_k = pairs[k].inputs if k in pairs else m.inputs
        args = [chunk_of[v] for v in ins_k]
        for v in dict.fromkeys(ins_k):  # temporaries dying here may take this result
            if last.get(v) == k and names.get(v, "").startswith("t"):
                free.setdefault(np.dtype(v.aval.dtype), []).append(names[v])
        name, o = m.prim.name, m.outputs[0]
        if name in REDUCE:
            r = f"r{len(results)}"
            kind = lay.reds[o]
            size = {"all": (), "lead": (lay.R,), "trail": (lay.L,)}[kind]
            (head if kind == "trail" else phead).append(
                f"{r} = _np.empty({size}, {_dtype_ref(env, o.aval.dtype)})")
            results[o] = f"{r}.reshape({tuple(o.aval.shape)})"
            u = REDUCE[name]
            env[f"_{u.__name__}"] = u
            if kind != "trail":
                partial.append((r, u))
            if k in pairs:
                ij = "i" if lay.flat else "ij"
                sub_out = {"all": "", "lead": "j", "trail": "i"}[kind]
                call = f"_np.einsum('{ij},{ij}->{sub_out}', {', '.join(args)}"
            else:
                ax = {"all": None, "lead": 0, "trail": 1}[kind]
                call = f"_{u.__name__}.reduce({args[0]}, axis={ax}"
            if kind == "trail":
                loop.append(f"{call}, out={r}[s:e])")
            else:
                loop.append(f"p = {call})")
                loop.append(f"if s > s0:\n    _{u.__name__}({r}, p, out={r})\n"
                            f"else:\n    {r}[...] = p")
            continue
        if o in out_set:
            oname = f"o{len(results)}"
            head.append(f"{oname} = _np.empty({shape}, {_dtype_ref(env, o.aval.dtype)})")
            head.append(f"{oname}v = {oname}.reshape{full_view}")
            results[o] = oname
            loop.append(f"c{oname} = {oname}v[s:e]")
            dest = f"c{oname}"
        else:
            dest = temp(o.aval.dtype)
        names[o] = dest
        chunk_of[o] = dest
        u, _err = kernels.ufunc_of(m.prim, m) if not m.params else (None, False)
        if u is not None:
            env[f"_{u.__name__}"] = u
            loop.append(f"_{u.__name__}({', '.join(args)}, out={dest})")
        elif name == "convert_element_type":
            loop.append(f"_np.copyto({dest}, {args[0]}, casting='unsafe')")
        else:
            fn = kernels.impl_of(m.prim)
            env[f"_k{k}"] = functools.partial(fn, **m.params) if m.params else fn
            loop.append(f"{dest}[...] = _k{k}({', '.join(args)})")
    # parts of `per` chunks run on the thread pool; each has its own temporaries and
    # partial reductions, combined in part order (the same at every thread count)
    # (without partial reductions every element is computed alone: then the parts are
    # spread evenly over the threads of the call, at least PART / 2 elements each)
    per = max(1, PART // BLOCK) * step
    n_parts = -(-n // per)
    chunks = -(-n // step)
    even = not partial and n_parts > 1
    part = ["s0 = pi * per", "s1 = s0 + per", f"if s1 > {n}:", f"    s1 = {n}", *phead,
            f"for s in range(s0, s1, {step}):", f"    e = s + {step}", "    if e > s1:",
            "        e = s1"]
    part.extend(f"        {t} = {t}[:e - s]" for t in temps)
    for line in loop:
        part.extend("    " + ln for ln in line.splitlines())
    part.append(f"return ({''.join(r + ', ' for r, _ in partial)})")
    body = list(head)
    body.append("def part(pi):")
    body.append(f"    with {_ERRSTATE}:")
    body.extend("        " + ln for ln in part)
    if n_parts == 1:
        body.append(f"per = {per}")
        body.append("ps = [part(0)]")
    elif even:
        env["_map"], env["_threads"] = pool.map, chain_threads
        most = max(1, n // max(1, PART // 2))   # parts of at least PART / 2 elements
        body.append(f"k = min(_threads(), {most})")
        body.append(f"per = -(-{chunks} // k) * {step}")
        body.append(f"ps = _map(part, -(-{n} // per), k)")
    else:
        env["_map"], env["_threads"] = pool.map, chain_threads
        body.append(f"per = {per}")
        body.append(f"ps = _map(part, {n_parts}, _threads())")
    for j, (r, u) in enumerate(partial):
        body.append(f"{r} = ps[0][{j}]")
        if n_parts > 1:
            body.append(f"for q in ps[1:]:\n    _{u.__name__}({r}, q[{j}], out={r})")
    body.append(f"return [{', '.join(results[v] for v in outs)}]")
    body = [f"with {_ERRSTATE}:"] + ["    " + ln for b in body for ln in b.splitlines()]
    args = ", ".join(f"i{j}" for j in range(len(ins)))
    src = "\n".join([f"def fused({args}):"] + ["    " + ln for ln in body])
    if debug_level() >= 3:
        print(f"# --- blocked CPU kernel {node.params['name']} ---\n{src}", file=sys.stderr)
    env["__name__"] = "mirax.plan"  # (NumPy's RuntimeWarnings from mirax code are ignored)
    exec(compile(src, f"<mirax blocked {node.params['name']}>", "exec"), env)
    return env["fused"]
