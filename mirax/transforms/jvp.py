"""mx.jvp and mx.linearize: forward mode on pytrees, over interpreters/jvp.py's driver."""
from __future__ import annotations

from mirax.core import dtypes, tree
from mirax.core.errors import check_callable
from mirax.core.trace import aval_of, zeros_like_aval
from mirax.interpreters.jvp import instantiate, jvp_flat
from mirax.ops.common import operand, short
from mirax.ops.elementwise import convert_element_type
from mirax.transforms.api_util import strip_aux


def jvp(f, primals, tangents, has_aux=False):
    """(f(*primals), directional derivative along tangents); both are tuples as in JAX."""
    check_callable(f, "jvp")
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp: primals and tangents must be tuples (one entry per argument)")
    p_leaves, p_tree = tree.flatten(list(primals))
    t_leaves, t_tree = tree.flatten(list(tangents))
    if p_tree != t_tree:
        raise ValueError(f"jvp: tangent structure {t_tree} does not match primals {p_tree}")
    p_leaves = [operand(x, "jvp") for x in p_leaves]
    ts = []
    for p, t in zip(p_leaves, t_leaves):
        t = operand(t, "jvp")
        if tuple(t.shape) != tuple(p.shape):
            raise ValueError(f"jvp: tangent {short(t)} does not match primal {short(p)}")
        if dtypes.is_inexact(p.dtype) and t.dtype != p.dtype:
            t = convert_element_type(t, p.dtype)
        ts.append(t)
    box, aux_box = [], []

    def flat_fn(*xs):
        out = f(*tree.unflatten(p_tree, list(xs)))
        if has_aux:
            out, aux = out
            aux_box.append(aux)
        leaves, out_tree = tree.flatten(out)
        box.append(out_tree)
        return [operand(o, "jvp") for o in leaves]

    trace_box = []
    outs, touts = jvp_flat(flat_fn, p_leaves, ts, trace_box)
    touts = [instantiate(t, o) for t, o in zip(touts, outs)]
    res = tree.unflatten(box[0], outs), tree.unflatten(box[0], touts)
    if has_aux:
        return res + (strip_aux(aux_box[0], trace_box[0]),)
    return res


def linearize(f, *primals, has_aux=False):
    """(f(*primals), f_jvp) where f_jvp(*tangents) is the jvp at primals; with has_aux, f
    returns (out, aux) and so does this: (out, f_jvp, aux).

    NOTE: f_jvp re-runs the forward pass with tangents (JAX instead stages a linear
    graph once); the values are identical."""
    check_callable(f, "linearize")
    res = jvp(f, primals, tuple(_zeros_like_tree(p) for p in primals), has_aux=has_aux)

    def f_jvp(*tangents):
        return jvp(f, primals, tangents, has_aux=has_aux)[1]
    return (res[0], f_jvp, res[2]) if has_aux else (res[0], f_jvp)


def _zeros_like_tree(t):
    return tree.map(lambda x: zeros_like_aval(aval_of(operand(x, "linearize"))), t)
