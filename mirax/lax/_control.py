"""lax.map: a scan over the leading axis, with `batch_size` vmapping chunks (a public face
on top of ops' scan and the vmap transform)."""
from __future__ import annotations

from mirax.core import tree
from mirax.core.trace import aval_of
from mirax.ops.common import operand
from mirax.ops.scan import scan
from mirax.ops.shape import concatenate, reshape, slice_in_dim
from mirax.transforms.vmap import vmap

__all__ = ["map"]


def map(f, xs, *, batch_size=None):  # noqa: A001 (lax.map)
    """`stack([f(x) for x in xs])` over the leading axis, as a scan. With batch_size, f is
    vmapped over chunks of that many elements and the scan runs over the chunks (a
    remainder chunk is vmapped on its own), as JAX."""
    if batch_size is None:
        return scan(lambda c, x: (c, f(x)), None, xs)[1]
    leaves, treedef = tree.flatten(xs)
    leaves = [operand(x, "map") for x in leaves]
    b = int(batch_size)
    if b < 1:
        raise ValueError(f"map: batch_size must be positive, got {batch_size}")
    n = aval_of(leaves[0]).shape[0] if leaves else 0
    k, rem = divmod(n, b)
    parts = []
    if k:
        chunks = [
            reshape(slice_in_dim(x, 0, k * b), (k, b) + tuple(aval_of(x).shape[1:]))
            for x in leaves
        ]
        out = map(vmap(f), tree.unflatten(treedef, chunks))
        parts.append(tree.map(lambda y: reshape(y, (k * b,) + tuple(aval_of(y).shape[2:])), out))
    if rem:
        tail = [slice_in_dim(x, k * b, n) for x in leaves]
        parts.append(vmap(f)(tree.unflatten(treedef, tail)))
    if len(parts) == 1:
        return parts[0]
    return tree.map(lambda a, c: concatenate([a, c], 0), parts[0], parts[1])
