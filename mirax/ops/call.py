"""The primitives that carry a sub-graph: `call` (a jitted function's graph) and `fusion`
(a chain of elementwise ops and reductions that the compiler's `fuse` pass grouped).

`call` runs the backend's executable of its graph (core/runtime.py: optimized and
compiled once per platform); under a transform its rules transform the graph itself
(jvp / vjp / vmap of `eval_graph`, staged into a new graph and cached on it), so grad of
jit and vmap of jit stay compiled; staged inside another jit it is inlined. `fusion` runs
its already-optimized body compiled as it is; its rules are call's.
"""
from __future__ import annotations

from mirax.core import dtypes
from mirax.core.primitive import Primitive
from mirax.core.runtime import executable, platform_of
from mirax.core.trace import aval_of
from mirax.graph.build import trace_to_graph
from mirax.graph.interpret import eval_graph
from mirax.interpreters.jvp import instantiate, jvp_flat
from mirax.interpreters.vjp import vjp_flat
from mirax.interpreters.vmap import vmap_flat


# --- call -------------------------------------------------------------------
call_p = Primitive("call", multiple_results=True)


call_p.def_impl(lambda *bufs, graph: executable(graph, platform_of(bufs))(*bufs))
call_p.def_abstract_eval(lambda *avals, graph: graph.out_avals)
call_p.inline_when_staged = lambda *args, graph: eval_graph(graph, *args)


def _cached_graph(graph, key, fn, in_avals):
    g = graph.cache.get(key)
    if g is None:
        g, captured = trace_to_graph(fn, in_avals, f"{key[0]}_{graph.name}")
        assert not captured
        g = graph.cache.setdefault(key, g)  # a concurrent trace of the same: first wins
    return g


@call_p.def_jvp
def _call_jvp(primals, tangents, *, graph):
    nz = tuple(t is not None for t in tangents)
    n = len(primals)

    def fn(*args):
        xs, ts = list(args[:n]), iter(args[n:])
        ts = [next(ts) if z else None for z in nz]
        outs, touts = jvp_flat(lambda *ys: eval_graph(graph, *ys), xs, ts)
        return outs + [instantiate(t, o) for t, o in zip(touts, outs)]

    avals = [aval_of(x) for x in primals] + [aval_of(t) for t in tangents if t is not None]
    jg = _cached_graph(graph, ("jvp", nz), fn, avals)
    res = call_p.bind(*primals, *[t for t in tangents if t is not None], graph=jg)
    m = len(graph.outputs)
    return res[:m], res[m:]


@call_p.def_vjp
def _call_vjp(cts, outs, *primals, graph):
    n = len(primals)

    def fn(*args):
        xs, cs = list(args[:n]), list(args[n:])
        _, bwd = vjp_flat(lambda *ys: eval_graph(graph, *ys), xs)
        return [instantiate(c, x) for c, x in zip(bwd(cs), xs)]

    avals = [aval_of(x) for x in primals] + [aval_of(c) for c in cts]
    bg = _cached_graph(graph, ("vjp",), fn, avals)
    res = call_p.bind(*primals, *cts, graph=bg)
    return [r if dtypes.is_float(aval_of(x).dtype) else None for r, x in zip(res, primals)]


@call_p.def_vmap
def _call_vmap(args, dims, *, graph):
    size = next(aval_of(a).shape[d] for a, d in zip(args, dims) if d is not None)
    m = len(graph.outputs)
    avals = [aval_of(a) for a in args]
    vg = _cached_graph(graph, ("vmap", tuple(dims), size),
                       lambda *xs: vmap_flat(lambda *ys: eval_graph(graph, *ys), list(xs),
                                             list(dims), size, [0] * m), avals)
    return call_p.bind(*args, graph=vg), [0] * m


# --- fusion ------------------------------------------------------------------
fusion_p = Primitive("fusion", multiple_results=True)
fusion_p.def_abstract_eval(lambda *avals, graph, name: graph.out_avals)


@fusion_p.def_impl
def _fusion_impl(*bufs, graph, name):
    return executable(graph, "cpu", optimized=True)(*bufs)


def _via_call(rule):
    def apply(*args, graph, name):
        return getattr(call_p, rule)(*args, graph=graph)
    return apply


fusion_p.def_jvp(_via_call("jvp_rule"))
fusion_p.def_vjp(_via_call("vjp_rule"))
fusion_p.def_vmap(_via_call("vmap_rule"))
fusion_p.def_decompose(lambda *xs, graph, name: _eval(graph, xs))
fusion_p.inline_when_staged = lambda *xs, graph, name: _eval(graph, xs)


def _eval(graph, xs):
    return eval_graph(graph, *xs)
