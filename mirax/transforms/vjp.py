"""mx.grad, mx.value_and_grad and mx.vjp: reverse mode on pytrees, over the tape of
interpreters/vjp.py."""
from __future__ import annotations

from mirax.core import dtypes, tree
from mirax.core.errors import check_callable, naming_errors
from mirax.core.trace import aval_of, set_source
from mirax.interpreters.vjp import source_of, vjp_flat
from mirax.ops.common import operand, short
from mirax.ops.shape import full
from mirax.transforms.api_util import (check_argnums, check_float_inputs, split_args,
                                       strip_aux)


def _scalar_check(name, out, holomorphic=False):
    a = aval_of(out)
    if a.shape != ():
        raise TypeError(f"{name}: the function must return a scalar (shape ()), got "
                        f"{short(a)}; use mx.vjp or mx.jacrev for non-scalar outputs")
    if holomorphic:
        if not dtypes.is_complex(a.dtype):
            raise TypeError(f"{name}(holomorphic=True): the function must return a complex "
                            f"scalar, got {short(a)}")
    elif dtypes.is_complex(a.dtype):
        raise TypeError(f"{name}: the function must return a real scalar, got {short(a)}; "
                        "for a holomorphic function pass holomorphic=True, otherwise take "
                        "mnp.real / mnp.abs of the output")
    elif not dtypes.is_inexact(a.dtype):
        raise TypeError(f"{name}: the function must return a float scalar, got {short(a)}")


def value_and_grad(f, argnums=0, has_aux=False, holomorphic=False):
    return _value_and_grad(f, argnums, has_aux, "value_and_grad", holomorphic)


def _value_and_grad(f, argnums, has_aux, _name, holomorphic=False):
    """value_and_grad, its errors naming `_name` (grad is built on it)."""
    check_callable(f, _name)

    def value_and_grad_f(*args, **kwargs):
        nums = check_argnums(_name, argnums, len(args))
        leaves, treedef, rebuild = split_args(args, nums, _name)
        check_float_inputs(_name, leaves, holomorphic=holomorphic)
        aux_box = []

        def flat_fn(*xs):
            out = f(*rebuild(xs), **kwargs)
            if has_aux:
                if not (isinstance(out, (tuple, list)) and len(out) == 2):
                    raise TypeError(f"{_name}(has_aux=True): the function must return a "
                                    "pair (output, aux)")
                out, aux = out
                aux_box.append(aux)
            out = operand(out, _name)
            _scalar_check(_name, out, holomorphic)
            return [out]

        trace_box = []
        (value,), bwd = vjp_flat(flat_fn, leaves, trace_box)
        with set_source(source_of(trace_box[0], trace_box[0].out_idx[0])):
            seed = _ones_like(value)  # (in a listing: on the line computing the value)
        grads = bwd([seed])
        g = tree.unflatten(treedef, grads)
        g = g[0] if isinstance(argnums, int) else tuple(g)
        if has_aux:
            return (value, strip_aux(aux_box[0], trace_box[0])), g
        return value, g
    value_and_grad_f.__name__ = f"value_and_grad({getattr(f, '__name__', 'f')})"
    value_and_grad_f.__wrapped__ = f  # signature (argument names) for listings and errors
    return naming_errors(value_and_grad_f, _name)


def grad(f, argnums=0, has_aux=False, holomorphic=False):
    """The gradient of a real scalar f. For complex inputs it is JAX's convention: the
    conjugate of the steepest-ascent direction, df/dx - i df/dy (z = x + iy). With
    holomorphic=True, f is complex-valued and holomorphic in complex inputs and the result
    is the complex derivative f'(z)."""
    check_callable(f, "grad")
    vg = _value_and_grad(f, argnums, has_aux, "grad", holomorphic)

    def grad_f(*args, **kwargs):
        out = vg(*args, **kwargs)
        if has_aux:
            (_, aux), g = out
            return g, aux
        return out[1]
    grad_f.__name__ = f"grad({getattr(f, '__name__', 'f')})"
    grad_f.__wrapped__ = f
    return grad_f


def _ones_like(x):
    a = aval_of(x)
    return full(a.shape, 1, a.dtype)


def vjp(f, *primals, has_aux=False):
    """(out, vjp_fn) or (out, vjp_fn, aux); vjp_fn(ct) returns a tuple, one per primal."""
    check_callable(f, "vjp")
    leaves, in_tree = tree.flatten(list(primals))
    leaves = [operand(x, "vjp") for x in leaves]
    box, aux_box, trace_box = [], [], []

    def flat_fn(*xs):
        out = f(*tree.unflatten(in_tree, list(xs)))
        if has_aux:
            out, aux = out
            aux_box.append(aux)
        out_leaves, out_tree = tree.flatten(out)
        box.append(out_tree)
        return [operand(o, "vjp") for o in out_leaves]

    outs, bwd = vjp_flat(flat_fn, leaves, trace_box)
    out_tree = box[0]

    def vjp_fn(ct):
        ct_leaves, ct_tree = tree.flatten(ct)
        if ct_tree != out_tree:
            raise ValueError(f"vjp_fn: cotangent structure {ct_tree} does not match the "
                             f"output structure {out_tree}")
        cts = []
        for c, o in zip(ct_leaves, outs):
            c = operand(c, "vjp_fn")
            if tuple(c.shape) != tuple(aval_of(o).shape):
                raise ValueError(f"vjp_fn: cotangent {short(c)} does not match output "
                                 f"{short(aval_of(o))}")
            cts.append(c)
        return tuple(tree.unflatten(in_tree, bwd(cts)))

    out = tree.unflatten(out_tree, outs)
    if has_aux:
        return out, vjp_fn, strip_aux(aux_box[0], trace_box[0])
    return out, vjp_fn
