"""checkpoint (remat): trade compute for memory in reverse mode.

`checkpoint(f)` binds one `checkpoint` primitive (multiple results) whose `fun` param is
f's flat body. On the tape it is one entry that keeps only f's inputs: the forward pass
inside f runs one level down and is not recorded; its vjp rule reruns f's forward on a
fresh tape and walks it back. jvp differentiates the body, vmap batches it (the result is
again a checkpoint), and staged it is one node the compiler may inline (`decomposition`).
`policy` (JAX's saveable-residual policies) is accepted but only None (save nothing) is
implemented.
"""
from __future__ import annotations

import functools

from mirax.core.errors import check_callable
from mirax.core import tree
from mirax.ops.common import operand
from mirax.transforms.custom import (CustomPrimitive, FlatFn, _batch_size, _batched_fun,
                                     _is_float, named_positions)
from mirax.interpreters.jvp import jvp_flat
from mirax.interpreters.vjp import vjp_flat

checkpoint_p = CustomPrimitive("checkpoint")


@checkpoint_p.def_jvp
def _checkpoint_jvp(primals, tangents, *, fun, prevent_cse=True):
    return jvp_flat(fun, list(primals), list(tangents))


@checkpoint_p.def_vjp
def _checkpoint_vjp(cts, outs, *primals, fun, prevent_cse=True):
    _, bwd = vjp_flat(fun, list(primals))  # recompute the forward pass, on a fresh tape
    return [c if _is_float(x) else None for c, x in zip(bwd(list(cts)), primals)]


@checkpoint_p.def_vmap
def _checkpoint_vmap(args, dims, *, fun, prevent_cse=True):
    size = _batch_size(args, dims)
    outs = checkpoint_p.bind(*args, fun=_batched_fun(fun, dims, size), prevent_cse=prevent_cse)
    return outs, [0] * len(outs)


def checkpoint(f=None, *, prevent_cse: bool = True, policy=None, static_argnums=(),
               static_argnames=()):
    """f, recomputed in the backward pass instead of storing its intermediates."""
    if f is None:
        return lambda g: checkpoint(g, prevent_cse=prevent_cse, policy=policy,
                                    static_argnums=static_argnums,
                                    static_argnames=static_argnames)
    check_callable(f, "checkpoint")
    if policy is not None:
        raise NotImplementedError("checkpoint: only policy=None (save nothing) is implemented")
    static_argnums = ((static_argnums,) if isinstance(static_argnums, int) else
                      tuple(static_argnums)) + named_positions(f, static_argnames, "checkpoint")
    fname = getattr(f, "__name__", "f")

    @functools.wraps(f)
    def remat_f(*args):
        static = {i % len(args) for i in static_argnums}
        dyn = [a for i, a in enumerate(args) if i not in static]
        leaves, in_tree = tree.flatten(dyn)
        leaves = [operand(x, "checkpoint") for x in leaves]
        box = []

        def body(*xs):
            it = iter(tree.unflatten(in_tree, list(xs)))
            out = f(*[a if i in static else next(it) for i, a in enumerate(args)])
            out_leaves, out_tree = tree.flatten(out)
            box[:] = [out_tree]
            return [operand(o, "checkpoint") for o in out_leaves]

        outs = checkpoint_p.bind(*leaves, fun=FlatFn(body, fname), prevent_cse=prevent_cse)
        return tree.unflatten(box[0], outs)
    return remat_f


remat = checkpoint
