"""Argument plumbing shared by the public transforms: argnums, pytrees, aux outputs."""
from __future__ import annotations

from mirax.core import dtypes, tree
from mirax.core.errors import int_tuple
from mirax.core.trace import owned
from mirax.ops.common import operand, short


def check_argnums(name: str, argnums, nargs: int) -> tuple[int, ...]:
    nums = int_tuple(name, "argnums", argnums)
    for a in nums:
        if not -nargs <= a < nargs:
            raise ValueError(f"{name}: argnums {argnums} is out of range for a function "
                             f"called with {nargs} positional arguments")
    out = tuple(a % nargs for a in nums)
    if len(set(out)) != len(out):  # JAX raises too: the gradient would be split between them
        raise ValueError(f"{name}: argnums {argnums} names an argument twice")
    return out


def split_args(args, argnums, name: str = "transform", need_leaves: bool = False):
    """Leaves of args[argnums] (as operands), their tree, and a rebuild(leaves) -> args."""
    diff = [args[i] for i in argnums]
    leaves, treedef = tree.flatten(diff)
    leaves = [operand(x, name) for x in leaves]
    if need_leaves and not leaves:
        raise ValueError(f"{name}: the arguments it differentiates (argnums {tuple(argnums)}) "
                         "hold no arrays")

    def rebuild(new_leaves):
        parts = tree.unflatten(treedef, list(new_leaves))
        out = list(args)
        for i, p in zip(argnums, parts):
            out[i] = p
        return out
    return leaves, treedef, rebuild


def check_float_inputs(name: str, leaves, what="input", holomorphic=False, complex_ok=True):
    """Differentiable inputs: float or complex; with holomorphic=True complex only (as JAX);
    complex_ok=False for the transforms that need real inputs unless holomorphic (jacfwd)."""
    for x in leaves:
        if holomorphic and not dtypes.is_complex(x.dtype):
            raise TypeError(f"{name}(holomorphic=True) requires complex {what}s, got "
                            f"{short(x)}")
        if not holomorphic and not complex_ok and dtypes.is_complex(x.dtype):
            raise TypeError(f"{name} requires real {what}s, got {short(x)}; for a holomorphic "
                            "function pass holomorphic=True")
        if not dtypes.is_inexact(x.dtype):
            raise TypeError(f"{name} requires float {what}s, got {short(x)}; integer and bool "
                            "arguments have no derivative (exclude them with argnums)")


def lower_out(x, trace, attr: str):
    """The value of `x` one level below `trace` (its primal if it is `trace`'s tracer)."""
    return getattr(x, attr) if owned(x, trace) else x


def strip_aux(aux, trace, attr="primal"):
    return tree.map(lambda a: lower_out(a, trace, attr), aux)
