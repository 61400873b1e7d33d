"""`mx.tree_util`: jax.tree_util's names for mirax.core.tree (same functions)."""
from __future__ import annotations

import functools

from mirax.core.tree import (  # noqa: F401
    DictKey, FlattenedIndexKey, GetAttrKey, PyTreeDef, SequenceKey, keystr, register_dataclass,
    register_pytree_node, register_pytree_node_class)
from mirax.core.tree import all as tree_all  # noqa: F401
from mirax.core.tree import broadcast as tree_broadcast  # noqa: F401
from mirax.core.tree import flatten as tree_flatten  # noqa: F401
from mirax.core.tree import flatten_with_path as tree_flatten_with_path  # noqa: F401
from mirax.core.tree import leaves as tree_leaves  # noqa: F401
from mirax.core.tree import leaves_with_path as tree_leaves_with_path  # noqa: F401
from mirax.core.tree import map as tree_map  # noqa: F401
from mirax.core.tree import map_with_path as tree_map_with_path  # noqa: F401
from mirax.core.tree import reduce as tree_reduce  # noqa: F401
from mirax.core.tree import structure as tree_structure  # noqa: F401
from mirax.core.tree import transpose as tree_transpose  # noqa: F401
from mirax.core.tree import unflatten as tree_unflatten  # noqa: F401


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    return treedef.num_nodes == 1 and treedef.num_leaves == 1


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    return treedef.children()


def all_leaves(iterable, is_leaf=None) -> bool:
    """True when every element of `iterable` is a leaf (flattens to itself)."""
    for x in iterable:
        leaves = tree_leaves(x, is_leaf)
        if len(leaves) != 1 or leaves[0] is not x:
            return False
    return True


class Partial(functools.partial):
    """functools.partial as a pytree: the bound arguments are its children, the function its
    static part, so a Partial can be passed through jit / vmap / grad (jax.tree_util.Partial)."""


register_pytree_node(
    Partial, lambda p: ((p.args, p.keywords), p.func),
    lambda func, children: Partial(func, *children[0], **children[1]))
