"""Primitives: named operations with slots for every rule, and the registry.

A primitive's whole story (wrapper, abstract eval, NumPy impl, jvp, vjp or transpose, vmap)
is written in one block of its family file under mirax/ops; this file only defines the
slots. `bind` hands the call to the innermost active interpreter (core/trace.py).

NOTE: core/trace.py (the interpreter context) sits beside this file; its names are
imported at the end, the one import of mirax placed there: trace's tracers are made by
primitives' rules, and this file is imported first.
"""
from __future__ import annotations

from typing import Callable

from mirax.core.avals import ShapedArray

registry: dict[str, Primitive] = {}


class Primitive:
    """An operation the interpreters know. Rules are filled by `def_*` decorators.

    - impl(*buffers, **params): the NumPy reference implementation (CPU backend).
    - abstract_eval(*avals, **params) -> ShapedArray | list[ShapedArray].
    - jvp(primals, tangents, **params) -> (out, tangent_out); a tangent of None is zero.
    - vjp(ct, out, *primals, **params) -> one cotangent (or None) per primal.
    - transpose(ct, *primals, **params): for linear primitives; gives vjp and jvp.
    - vmap(args, bdims, **params) -> (out, out_bdim).
    - decompose(*args, **params): the body of a composite in basic primitives.
    """

    def __init__(self, name: str, *, multiple_results: bool = False, keeps_weak: bool = False):
        if name in registry:
            raise ValueError(f"primitive {name!r} is already registered")
        self.name = name
        self.multiple_results = multiple_results
        self.keeps_weak = keeps_weak
        self.impl: Callable | None = None
        self.impls: dict[str, Callable] = {}
        self.abstract_eval_rule: Callable | None = None
        self.jvp_rule: Callable | None = None
        self.vjp_rule: Callable | None = None
        self.transpose_rule: Callable | None = None
        self.vmap_rule: Callable | None = None
        self.decomposition: Callable | None = None
        self.linear = False
        self.format_params: Callable | None = None  # params as the listing shows them
        # a vjp rule that accepts `needs=` (one bool per input) may skip unwanted cotangents
        self.vjp_takes_needs = False
        # a collective over named axes (ops/collective.py): bound through the interpreter
        # of its axis, and its vmap rule is told which trace calls it (`trace=`)
        self.named_axes = False
        registry[name] = self

    def __repr__(self):
        return self.name

    def bind(self, *args, **params):
        return bind(self, args, params)

    # --- rule slots ---------------------------------------------------------------------
    def def_impl(self, fn):
        self.impl = fn
        self.impls["cpu"] = fn
        return fn

    def def_abstract_eval(self, fn):
        self.abstract_eval_rule = fn
        return fn

    def def_jvp(self, fn):
        self.jvp_rule = fn
        return fn

    def def_vjp(self, fn):
        self.vjp_rule = fn
        return fn

    def def_transpose(self, fn):
        """A linear primitive: its transpose gives the vjp, and its jvp is itself."""
        self.linear = True
        self.transpose_rule = fn
        if self.vjp_rule is None:
            self.vjp_rule = lambda ct, out, *xs, **p: fn(ct, *xs, **p)
        if self.jvp_rule is None:
            self.jvp_rule = self._linear_jvp
        return fn

    def def_vmap(self, fn):
        self.vmap_rule = fn
        return fn

    def def_decompose(self, fn):
        self.decomposition = fn
        return fn

    def _linear_jvp(self, primals, tangents, **params):
        out = self.bind(*primals, **params)
        ts = [zeros_like_aval(aval_of(x)) if t is None else t
              for x, t in zip(primals, tangents)]
        return out, self.bind(*ts, **params)

    # --- abstract evaluation ----------------------------------------------------------------
    def abstract_eval(self, *avals: ShapedArray, **params):
        if self.abstract_eval_rule is None:  # (a composite's comes from tracing its body:
            # graph/build.py's traced_abstract_eval, set where the composite is declared)
            raise NotImplementedError(f"{self.name}: no abstract evaluation rule")
        out = self.abstract_eval_rule(*avals, **params)
        if self.keeps_weak and avals and all(a.weak_type for a in avals):
            if self.multiple_results:
                return [o.update(weak_type=True) for o in out]
            return out.update(weak_type=True)
        return out


from mirax.core.trace import aval_of, bind, zeros_like_aval  # noqa: E402  (see NOTE)
