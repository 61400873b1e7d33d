"""Custom differentiation rules (`custom_jvp`, `custom_vjp`) and `stop_gradient`.

A custom function binds one primitive (`custom_jvp_call` / `custom_vjp_call`, multiple
results) over the flat leaves of its differentiable arguments; its params carry the user's
functions as flat, hashable wrappers (`FlatFn`). What each interpreter does with it:
- eager: the primal body runs (a special bind path skips the buffer-level impl); staged
  (jit, make_graph): one node whose abstract eval traces the body; the impl and the
  `decomposition` (for the compiler) are the body too;
- jvp: custom_jvp applies its rule; custom_vjp goes forward through its rule (beyond JAX,
  which refuses forward mode there): the jvp is the transpose of bwd, which is linear in
  the cotangent, so jacfwd and hessian see the custom derivative, never the body's;
- reverse mode: custom_vjp runs `fwd` on the forward pass and keeps its residuals on the
  tape entry (the special bind path below: the generic tape path would run the primal body
  and lose them; a node met inside a graph without residuals reruns `fwd`); custom_jvp is
  transposed by running reverse mode through its rule, which is linear in the tangents;
- vmap: the body and every rule are batched, and the result is again a custom call.
NOTE: as in JAX, the decorated function must not close over values traced by an enclosing
transform; pass them as arguments.
"""
from __future__ import annotations

import functools
import inspect

from mirax.core import dtypes, tree
from mirax.core.array import Array
from mirax.core.avals import ShapedArray
from mirax.core.primitive import Primitive
from mirax.core.trace import aval_of, busy, find_top_trace, full_raise, state, zeros_like_aval
from mirax.ops.common import operand, short
from mirax.interpreters.jvp import instantiate
from mirax.interpreters.vmap import vmap_flat
from mirax.interpreters.vjp import vjp_flat, Entry, VJPTracer, VJPTrace
from mirax.ops.reduction import reduce_sum
from mirax.ops.shape import moveaxis
from mirax.graph.build import trace_to_graph


class FlatFn:
    """A function of flat operands with a readable name; hashed by identity."""
    __slots__ = ("fn", "name", "_avals")

    def __init__(self, fn, name: str):
        self.fn, self.name, self._avals = fn, name, {}

    def __call__(self, *args):
        return self.fn(*args)

    def __repr__(self):
        return self.name

    def out_avals(self, in_avals) -> list[ShapedArray]:
        """Output avals at `in_avals`, by tracing once per signature."""
        key = tuple(in_avals)
        if key not in self._avals:
            graph, _ = trace_to_graph(self.fn, list(in_avals), self.name)
            self._avals[key] = graph.out_avals
        return self._avals[key]


def _is_float(x) -> bool:
    return dtypes.is_float(aval_of(x).dtype)


def _zeros_for(x):
    """A concrete zero tangent for x (float32 stand-in for integer inputs, as jvp does)."""
    return instantiate(None, x)


class CustomPrimitive(Primitive):
    """A primitive whose `fun` param is its primal body; eager calls run the body."""

    def __init__(self, name):
        super().__init__(name, multiple_results=True)
        self.tape_rule = None  # (trace, tracers, params) -> outputs, for the VJP tape
        self.def_abstract_eval(lambda *avals, fun, **_: fun.out_avals(avals))
        self.def_impl(self._impl)
        self.def_decompose(lambda *xs, fun, **_: fun(*xs))

    @staticmethod
    def _impl(*bufs, fun, **_):
        outs = fun(*[Array(b, False) for b in bufs])
        return [operand(o)._buf for o in outs]

    def bind(self, *args, **params):
        top = find_top_trace(args) if busy[0] and state.active else state.eval_trace
        if top is state.eval_trace:
            return [operand(o) for o in params["fun"](*args)]
        tracers = [full_raise(top, a) for a in args]
        if self.tape_rule is not None and isinstance(top, VJPTrace):
            return self.tape_rule(top, tracers, params)
        return top.process_primitive(self, tracers, params)


def _batch_size(args, dims) -> int:
    return next(aval_of(a).shape[d] for a, d in zip(args, dims) if d is not None)


def _unbatched_aval(x, d) -> ShapedArray:
    a = aval_of(x)
    if d is None:
        return a
    return ShapedArray(a.shape[:d] + a.shape[d + 1:], a.dtype, a.weak_type)


def _batched_fun(fun, dims, size):
    return FlatFn(lambda *xs: vmap_flat(fun, list(xs), list(dims), size), f"vmap({fun})")


# --- custom_jvp_call ------------------------------------------------------------------------
custom_jvp_call_p = CustomPrimitive("custom_jvp_call")


@custom_jvp_call_p.def_jvp
def _custom_jvp_call_jvp(primals, tangents, *, fun, jvp):
    # as in JAX, the rule sees instantiated zeros for symbolic-zero tangents
    ts = [_zeros_for(x) if t is None else t for x, t in zip(primals, tangents)]
    return jvp(list(primals), ts)


@custom_jvp_call_p.def_vjp
def _custom_jvp_call_vjp(cts, outs, *primals, fun, jvp):
    """Transpose the rule: reverse mode through t -> jvp(primals, t)[1] (linear in t)."""
    primals = list(primals)
    diff = [i for i, x in enumerate(primals) if _is_float(x)]

    def tangent_map(*ts):
        full = [_zeros_for(x) for x in primals]
        for i, t in zip(diff, ts):
            full[i] = t
        _, t_out = jvp(primals, full)
        return [instantiate(t, o) for t, o in zip(t_out, outs)]

    _, bwd = vjp_flat(tangent_map, [zeros_like_aval(aval_of(primals[i])) for i in diff])
    res = [None] * len(primals)
    for i, c in zip(diff, bwd(list(cts))):
        res[i] = c
    return res


@custom_jvp_call_p.def_vmap
def _custom_jvp_call_vmap(args, dims, *, fun, jvp):
    size = _batch_size(args, dims)
    n = len(args)

    def jvp_batched(primals, tangents):
        def both(*a):
            outs, t_out = jvp(list(a[:n]), list(a[n:]))
            return list(outs) + [instantiate(t, o) for t, o in zip(t_out, outs)]
        res = vmap_flat(both, list(primals) + list(tangents), list(dims) * 2, size)
        m = len(res) // 2
        return res[:m], res[m:]

    outs = custom_jvp_call_p.bind(*args, fun=_batched_fun(fun, dims, size),
                                  jvp=FlatFn(jvp_batched, f"vmap({jvp})"))
    return outs, [0] * len(outs)


# --- custom_vjp_call ------------------------------------------------------------------------
custom_vjp_call_p = CustomPrimitive("custom_vjp_call")


@custom_vjp_call_p.def_jvp
def _custom_vjp_call_jvp(primals, tangents, *, fun, fwd, bwd, res=None):
    """Forward mode through the user's rule (JAX refuses it): bwd is linear in the output
    cotangent, ct -> J^T ct, so reverse mode through bwd in ct (its transpose) maps the
    input tangent t to J t, the jvp the rule defines."""
    outs, r = fwd(*primals) if res is None else (fun(*primals), res)
    ins = [i for i, (x, t) in enumerate(zip(primals, tangents)) if t is not None and _is_float(x)]
    outs_f = [j for j, o in enumerate(outs) if _is_float(o)]
    if not ins or not outs_f:
        return list(outs), [None] * len(outs)

    def transposed(*cts):
        full = [zeros_like_aval(aval_of(o)) for o in outs]
        for j, c in zip(outs_f, cts):
            full[j] = c
        in_cts = bwd(list(r), full)
        return [instantiate(in_cts[i], primals[i]) for i in ins]

    _, back = vjp_flat(transposed, [zeros_like_aval(aval_of(outs[j])) for j in outs_f])
    t_f = back([tangents[i] for i in ins])
    t_out = [None] * len(outs)
    for j, t in zip(outs_f, t_f):
        t_out[j] = t
    return list(outs), t_out


def _custom_vjp_tape(trace, tracers, params):
    """On the tape: run fwd one level down and keep its residuals with the entry."""
    mine = [isinstance(t, VJPTracer) and t._trace is trace for t in tracers]
    ins = [t.primal if m else t for t, m in zip(tracers, mine)]
    in_idx = [t.idx if m and _is_float(t) else None for t, m in zip(tracers, mine)]
    if all(i is None for i in in_idx):
        return custom_vjp_call_p.bind(*ins, **params)
    outs, res = params["fwd"](*ins)
    out_tracers = [trace.new(o) for o in outs]
    trace.tape.append(Entry(custom_vjp_call_p, dict(params, res=tuple(res)), in_idx, ins,
                            list(outs), [t.idx for t in out_tracers]))
    return out_tracers


custom_vjp_call_p.tape_rule = _custom_vjp_tape


@custom_vjp_call_p.def_vjp
def _custom_vjp_call_vjp(cts, outs, *primals, fun, fwd, bwd, res=None):
    if res is None:  # met inside a graph (e.g. grad of jit): recompute the residuals
        _, res = fwd(*primals)
    in_cts = bwd(list(res), list(cts))
    return [c if _is_float(x) else None for c, x in zip(in_cts, primals)]


@custom_vjp_call_p.def_vmap
def _custom_vjp_call_vmap(args, dims, *, fun, fwd, bwd, res=None):
    size = _batch_size(args, dims)
    n_out = []
    in_avals = [_unbatched_aval(a, d) for a, d in zip(args, dims)]

    def fwd_batched(*xs):
        def both(*ys):
            outs, r = fwd(*ys)
            n_out[:] = [len(outs)]
            return list(outs) + [operand(v) for v in r]
        out = vmap_flat(both, list(xs), list(dims), size)
        return out[:n_out[0]], out[n_out[0]:]

    def bwd_batched(r, cts):
        def inner(*a):
            in_cts = bwd(list(a[:len(r)]), list(a[len(r):]))
            return [zeros_like_aval(av) if c is None else c for c, av in zip(in_cts, in_avals)]
        in_cts = vmap_flat(inner, list(r) + list(cts), [0] * (len(r) + len(cts)), size)
        return [reduce_sum(c, (0,)) if d is None else moveaxis(c, 0, d)
                for c, d in zip(in_cts, dims)]

    if res is not None:
        raise NotImplementedError("custom_vjp: vmap of a recorded tape entry")
    outs = custom_vjp_call_p.bind(*args, fun=_batched_fun(fun, dims, size),
                                  fwd=FlatFn(fwd_batched, f"vmap({fwd})"),
                                  bwd=FlatFn(bwd_batched, f"vmap({bwd})"))
    return outs, [0] * len(outs)


# --- the decorators ---------------------------------------------------------------------
def named_positions(fun, names, what) -> tuple:
    """The positions of fun's parameters named in `names` (JAX's *_argnames options)."""
    names = (names,) if isinstance(names, str) else tuple(names)
    if not names:
        return ()
    params = list(inspect.signature(fun).parameters)
    missing = [n for n in names if n not in params]
    if missing:
        raise ValueError(f"{what}: {', '.join(map(repr, missing))} is not a parameter of "
                         f"{getattr(fun, '__name__', 'the function')}{tuple(params)}")
    return tuple(params.index(n) for n in names)


def _resolve_args(fun, name, args, kwargs) -> tuple:
    """kwargs bound to positions by fun's signature (JAX's resolve_kwargs)."""
    if not kwargs:
        return tuple(args)
    try:
        ba = inspect.signature(fun).bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name}: {e}") from None
    ba.apply_defaults()
    if ba.kwargs:
        raise TypeError(f"{name}: keyword arguments {sorted(ba.kwargs)} could not be resolved "
                        "to positions; pass them positionally")
    return tuple(ba.args)


class _Call:
    """One call's plumbing: static (nondiff) args, flat diff leaves, output structure."""

    def __init__(self, name, args, nondiff_argnums):
        n = len(args)
        for i in nondiff_argnums:
            if not -n <= i < n:
                raise ValueError(f"{name}: nondiff_argnums {tuple(nondiff_argnums)} is out "
                                 f"of range for a call with {n} arguments")
        self.name = name
        self.nondiff = sorted({i % n for i in nondiff_argnums})
        self.args = args
        self.static = [args[i] for i in self.nondiff]
        self.diff = diff = tuple(a for i, a in enumerate(args) if i not in self.nondiff)
        leaves, self.in_tree = tree.flatten(diff)
        self.leaves = [operand(x, name) for x in leaves]
        self.out_tree = None

    def rebuild(self, xs) -> list:
        it = iter(tree.unflatten(self.in_tree, list(xs)))
        return [a if i in self.nondiff else next(it) for i, a in enumerate(self.args)]

    def diff_args(self, xs) -> tuple:
        return tuple(tree.unflatten(self.in_tree, list(xs)))

    def flat_out(self, out, what) -> list:
        leaves, out_tree = tree.flatten(out)
        if self.out_tree is None:
            self.out_tree = out_tree
        elif out_tree != self.out_tree:
            raise TypeError(f"{self.name}: {what} returned an output of structure {out_tree}, "
                            f"but the function returns {self.out_tree}")
        return [operand(o, self.name) for o in leaves]

    def flat_cts(self, in_cts, what) -> list:
        """The cotangent tuple of a bwd rule as flat leaves (None for zeros)."""
        diff = self.diff
        if not isinstance(in_cts, (tuple, list)) or len(in_cts) != len(diff):
            raise TypeError(f"{self.name}: {what} must return a tuple with one cotangent per "
                            f"differentiable argument ({len(diff)}), got "
                            f"{type(in_cts).__name__}"
                            + (f" of length {len(in_cts)}" if isinstance(in_cts, (tuple, list))
                               else ""))
        out, leaves = [], iter(self.leaves)
        for ct, arg in zip(in_cts, diff):
            n = tree.structure(arg).num_leaves
            xs = [next(leaves) for _ in range(n)]
            cs = [None] * n if ct is None else tree.leaves(ct)
            if len(cs) != n:
                raise TypeError(f"{self.name}: {what} returned a cotangent {tree.structure(ct)}"
                                f" for an argument of structure {tree.structure(arg)}")
            for c, x in zip(cs, xs):
                if c is not None:
                    c = operand(c, self.name)
                    if tuple(c.shape) != tuple(x.shape):
                        raise ValueError(f"{self.name}: {what} returned a cotangent {short(c)}"
                                         f" for an input {short(x)}")
                out.append(c)
        return out


class custom_jvp:
    """`@custom_jvp` then `@f.defjvp def f_jvp(*nondiff, primals, tangents)` (JAX)."""

    def __init__(self, fun, nondiff_argnums=(), nondiff_argnames=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums) + named_positions(
            fun, nondiff_argnames, "custom_jvp")
        self.jvp = None

    def defjvp(self, jvp):
        self.jvp = jvp
        return jvp

    def defjvps(self, *tangent_fns):
        """One function per argument: t_out = sum_i fn_i(t_i, out, *primals)."""
        def jvp(primals, tangents):
            out = self.fun(*primals)
            terms = [fn(t, out, *primals) for fn, t in zip(tangent_fns, tangents)
                     if fn is not None]
            t_out = functools.reduce(lambda a, b: tree.map(lambda u, v: u + v, a, b), terms)
            return out, t_out
        self.jvp = jvp
        return jvp

    def __call__(self, *args, **kwargs):
        fname = getattr(self.fun, "__name__", "f")
        name = f"custom_jvp({fname})"
        if self.jvp is None:
            raise AttributeError(f"{name}: no jvp rule defined; decorate one with @f.defjvp")
        c = _Call(name, _resolve_args(self.fun, name, args, kwargs), self.nondiff_argnums)

        def fun(*xs):
            return c.flat_out(self.fun(*c.rebuild(xs)), "the function")

        def jvp(primals, tangents):
            out = self.jvp(*c.static, c.diff_args(primals), c.diff_args(tangents))
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError(f"{name}: the jvp rule must return a pair "
                                "(primal_out, tangent_out)")
            return c.flat_out(out[0], "the jvp rule"), c.flat_out(out[1], "the jvp rule")

        outs = custom_jvp_call_p.bind(*c.leaves, fun=FlatFn(fun, fname),
                                      jvp=FlatFn(jvp, getattr(self.jvp, "__name__", "jvp")))
        return tree.unflatten(c.out_tree, outs)


class custom_vjp:
    """`@custom_vjp`, then `f.defvjp(fwd, bwd)`: fwd(*args) -> (out, residuals);
    bwd(*nondiff, residuals, ct_out) -> one cotangent per differentiable argument (JAX)."""

    def __init__(self, fun, nondiff_argnums=(), nondiff_argnames=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums) + named_positions(
            fun, nondiff_argnames, "custom_vjp")
        self.fwd = self.bwd = None

    def defvjp(self, fwd, bwd):
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args, **kwargs):
        fname = getattr(self.fun, "__name__", "f")
        name = f"custom_vjp({fname})"
        if self.fwd is None:
            raise AttributeError(f"{name}: no vjp rule defined; call f.defvjp(fwd, bwd)")
        c = _Call(name, _resolve_args(self.fun, name, args, kwargs), self.nondiff_argnums)
        res_tree = []

        def fun(*xs):
            return c.flat_out(self.fun(*c.rebuild(xs)), "the function")

        def fwd(*xs):
            out = self.fwd(*c.rebuild(xs))
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError(f"{name}: fwd must return a pair (output, residuals)")
            res, rt = tree.flatten(out[1])
            res_tree[:] = [rt]
            return c.flat_out(out[0], "fwd"), res

        def bwd(res, cts):
            r = tree.unflatten(res_tree[0], list(res))
            ct = tree.unflatten(c.out_tree, list(cts))
            return c.flat_cts(self.bwd(*c.static, r, ct), "bwd")

        outs = custom_vjp_call_p.bind(*c.leaves, fun=FlatFn(fun, fname),
                                      fwd=FlatFn(fwd, getattr(self.fwd, "__name__", "fwd")),
                                      bwd=FlatFn(bwd, getattr(self.bwd, "__name__", "bwd")))
        return tree.unflatten(c.out_tree, outs)
