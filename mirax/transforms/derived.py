"""Transforms built from the others: jacfwd (vmap of jvp), jacrev (vmap of vjp), hessian
(jacfwd of jacrev) and hvp (forward over reverse)."""
from __future__ import annotations

from mirax.core.errors import check_callable, naming_errors
from mirax.core import dtypes, tree
from mirax.core.trace import aval_of
from mirax.ops.common import operand, short, static_int
from mirax.transforms.api_util import check_argnums, check_float_inputs, split_args
from mirax.transforms.jvp import jvp
from mirax.transforms.vjp import grad, vjp
from mirax.transforms.vmap import vmap
from mirax.ops.elementwise import convert_element_type, eq
from mirax.ops.shape import iota, reshape, slice_in_dim, moveaxis


def _basis(size, dtype):
    return convert_element_type(eq(iota("int32", (size, size), 0), iota("int32", (size, size), 1)),
                                dtype)


def _split_basis(basis, leaves):
    """Rows of an identity basis as per-leaf tangents (each of shape [n, *leaf.shape])."""
    out, start = [], 0
    for x in leaves:
        n = aval_of(x).size
        part = slice_in_dim(basis, start, start + n, axis=1)
        out.append(reshape(part, (basis.shape[0],) + tuple(aval_of(x).shape)))
        start += n
    return out


def _total(leaves):
    return sum(aval_of(x).size for x in leaves)


def _check_chunk(chunk_size, op):
    if chunk_size is not None and static_int(chunk_size, op, "chunk_size") < 1:
        raise ValueError(f"{op}: chunk_size must be a positive int, got {chunk_size}")


def jacfwd(f, argnums=0, has_aux=False, chunk_size=None, holomorphic=False):
    """The Jacobian by forward mode; with has_aux, f returns (out, aux) and the result is
    (jacobian, aux). Complex inputs need holomorphic=True (as JAX): the result is then the
    complex Jacobian df/dz."""
    check_callable(f, "jacfwd")
    _check_chunk(chunk_size, "jacfwd")
    def jac(*args):
        nums = check_argnums("jacfwd", argnums, len(args))
        leaves, treedef, rebuild = split_args(args, nums, "jacfwd", need_leaves=True)
        check_float_inputs("jacfwd", leaves, holomorphic=holomorphic, complex_ok=False)
        n = _total(leaves)
        dtype = leaves[0].dtype

        def push(*ts):
            res = jvp(lambda *xs: f(*rebuild(xs)), tuple(leaves), tuple(ts), has_aux=has_aux)
            return (res[1], res[2]) if has_aux else res[1]

        # the aux output does not depend on the tangent: it comes out unbatched
        cols = vmap(push, out_axes=(0, None) if has_aux else 0,
                    chunk_size=chunk_size)(*_split_basis(_basis(n, dtype), leaves))
        cols, aux = cols if has_aux else (cols, None)
        # cols: outputs with a leading [n]; move it to the end and split per input leaf
        out = _assemble_fwd(cols, leaves, treedef, argnums)
        return (out, aux) if has_aux else out
    return naming_errors(jac, "jacfwd")


def _assemble_fwd(cols, leaves, treedef, argnums):

    def per_out(c):
        c = moveaxis(c, 0, -1)
        out_shape = tuple(c.shape[:-1])
        parts, start = [], 0
        for x in leaves:
            k = aval_of(x).size
            p = slice_in_dim(c, start, start + k, axis=c.ndim - 1)
            parts.append(reshape(p, out_shape + tuple(aval_of(x).shape)))
            start += k
        t = tree.unflatten(treedef, parts)
        return t[0] if isinstance(argnums, int) else tuple(t)
    return tree.map(per_out, cols)


def jacrev(f, argnums=0, has_aux=False, chunk_size=None, holomorphic=False):
    """The Jacobian by reverse mode; with has_aux, f returns (out, aux) and the result is
    (jacobian, aux). Complex outputs need holomorphic=True (as JAX)."""
    check_callable(f, "jacrev")
    _check_chunk(chunk_size, "jacrev")
    def jac(*args):
        nums = check_argnums("jacrev", argnums, len(args))
        leaves, treedef, rebuild = split_args(args, nums, "jacrev", need_leaves=True)
        check_float_inputs("jacrev", leaves, holomorphic=holomorphic)
        out, pullback, *aux = vjp(lambda *xs: f(*rebuild(xs)), *leaves, has_aux=has_aux)
        out_leaves, out_tree = tree.flatten(out)
        out_leaves = [operand(o, "jacrev") for o in out_leaves]
        _check_outputs(out_leaves, holomorphic)
        m = _total(out_leaves)
        cts = _split_basis(_basis(m, out_leaves[0].dtype), out_leaves)
        rows = vmap(lambda *c: pullback(tree.unflatten(out_tree, list(c))),
                    chunk_size=chunk_size)(*cts)  # tuple over input leaves, each [m, *in]
        per_out, start = [], 0
        for o in out_leaves:
            k = aval_of(o).size
            parts = [reshape(slice_in_dim(r, start, start + k, axis=0),
                             tuple(aval_of(o).shape) + tuple(aval_of(x).shape))
                     for r, x in zip(rows, leaves)]
            t = tree.unflatten(treedef, parts)
            per_out.append(t[0] if isinstance(argnums, int) else tuple(t))
            start += k
        out = tree.unflatten(out_tree, per_out)
        return (out, aux[0]) if has_aux else out
    return naming_errors(jac, "jacrev")


def _check_outputs(outs, holomorphic):
    for o in outs:
        if holomorphic and not dtypes.is_complex(o.dtype):
            raise TypeError(f"jacrev(holomorphic=True) requires complex outputs, got "
                            f"{short(o)}")
        if not holomorphic and dtypes.is_complex(o.dtype):
            raise TypeError(f"jacrev requires real outputs, got {short(o)}; for a holomorphic "
                            "function pass holomorphic=True")


def hessian(f, argnums=0, has_aux=False, chunk_size=None):
    """jacfwd of jacrev; with has_aux, f returns (out, aux) and the result is
    (hessian, aux)."""
    check_callable(f, "hessian")
    _check_chunk(chunk_size, "hessian")
    return naming_errors(jacfwd(jacrev(f, argnums, has_aux=has_aux, chunk_size=chunk_size),
                                argnums, has_aux=has_aux, chunk_size=chunk_size), "hessian")


def hvp(f, primals, tangents):
    """Forward-over-reverse Hessian-vector product of a scalar f; returns a tuple shaped
    like primals."""
    check_callable(f, "hvp")
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("hvp: primals and tangents must be tuples (one entry per argument)")
    g = grad(f, argnums=tuple(range(len(primals))))
    return tuple(jvp(g, tuple(primals), tuple(tangents))[1])
