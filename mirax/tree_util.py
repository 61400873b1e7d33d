"""`mx.tree_util`: jax.tree_util's names for mirax.core.tree (same functions)."""
from __future__ import annotations

import functools

from mirax.core.tree import (  # noqa: F401
    DictKey, FlattenedIndexKey, GetAttrKey, PyTreeDef, SequenceKey, keystr, register_dataclass,
    register_pytree_node)
from mirax.core.tree import flatten as tree_flatten  # noqa: F401
from mirax.core.tree import flatten_with_path as tree_flatten_with_path  # noqa: F401
from mirax.core.tree import leaves as tree_leaves  # noqa: F401
from mirax.core.tree import map as tree_map  # noqa: F401
from mirax.core.tree import map_with_path as tree_map_with_path  # noqa: F401
from mirax.core.tree import structure as tree_structure  # noqa: F401
from mirax.core.tree import unflatten as tree_unflatten  # noqa: F401

_MISSING = object()


def tree_reduce(function, tree, initializer=_MISSING, is_leaf=None):
    leaves = tree_leaves(tree, is_leaf=is_leaf)
    if initializer is _MISSING:
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_all(tree, is_leaf=None):
    return all(tree_leaves(tree, is_leaf=is_leaf))
