# Pytrees: nested containers whose leaves are arrays (or anything else).
#
# Where it sits: core. Every transform (jit, grad, vmap, ...) flattens its arguments and results
# with `flatten` and rebuilds them with `unflatten`; jit keys its cache on the PyTreeDef.
# Invariant: a PyTreeDef is an immutable preorder tuple of node records `(kind, aux, n_children)`
# (None for a leaf), so hash and == are plain tuple operations. Leaves come out in JAX order:
# dict keys sorted, OrderedDict in insertion order, None is a node with no children.
from __future__ import annotations

import builtins
import collections
import dataclasses
import functools
import operator
from collections.abc import Callable, Hashable, Iterable
from typing import Any

__all__ = [
    "DictKey", "FlattenedIndexKey", "GetAttrKey", "PyTreeDef", "SequenceKey", "all",
    "broadcast", "flatten", "flatten_with_path", "keystr", "leaves", "leaves_with_path", "map",
    "map_with_path", "prefix_broadcast", "reduce", "reduce_associative", "register_dataclass",
    "register_pytree_node", "register_pytree_node_class", "structure", "transpose",
    "unflatten",
]


# --- key entries (one step of a leaf's path) -----------------------------------------------
@dataclasses.dataclass(frozen=True, slots=True)
class SequenceKey:
    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True, slots=True)
class DictKey:
    key: Hashable

    def __str__(self) -> str:
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True, slots=True)
class GetAttrKey:
    name: str

    def __str__(self) -> str:
        return f".{self.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class FlattenedIndexKey:
    key: int

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"


def _simple(k) -> str:
    return str(k.idx if isinstance(k, SequenceKey) else k.key if isinstance(k, DictKey)
               else k.name if isinstance(k, GetAttrKey) else k.key)


def keystr(path: tuple, *, simple: bool = False, separator: str = "") -> str:
    """`(SequenceKey(0), DictKey('w'), GetAttrKey('bias'))` -> `[0]['w'].bias`; with
    simple=True each entry is its bare key (`0`, `w`, `bias`), joined by `separator`."""
    if simple:
        return separator.join(_simple(k) for k in path)
    return separator.join(str(k) for k in path)


# --- node kinds: the type -> handler registry ----------------------------------------------
class _Kind:
    """How one node type flattens: flatten(x) -> (children, aux), unflatten(aux, children) -> x,
    keys(aux, n) -> path entries of the children, show(aux, child_strs) -> repr text."""
    __slots__ = ("flatten", "keys", "show", "type", "unflatten")

    def __init__(self, type_, flatten, unflatten, keys, show):
        self.type, self.flatten, self.unflatten = type_, flatten, unflatten
        self.keys, self.show = keys, show


_MISSING = object()
_kinds: dict[type, _Kind | None] = {}   # None caches "this type is a leaf"
_registered: set[type] = set()


def _seq_keys(aux, n):
    return [SequenceKey(i) for i in range(n)]


def _dict_keys(aux, n):
    return [DictKey(k) for k in aux]


def _custom_show(name: str) -> Callable:
    return lambda aux, ch: f"CustomNode({name}[{aux}], [{', '.join(ch)}])"


def _dict_flatten(x: dict):
    try:
        keys = tuple(sorted(x))
    except TypeError as e:
        raise ValueError(f"tree.flatten: dict keys must be sortable, got {list(x)!r}") from e
    return [x[k] for k in keys], keys


def _defaultdict_flatten(x: collections.defaultdict):
    children, keys = _dict_flatten(x)
    return children, (x.default_factory, keys)


def _add(kind: _Kind) -> None:
    _kinds[kind.type] = kind


def _check_new(cls: type, op: str) -> None:
    if cls in _registered or cls in (tuple, list, dict, type(None)):
        raise ValueError(f"{op}: {cls.__name__} is already a pytree node type")


_add(_Kind(tuple, lambda x: (x, None), lambda aux, ch: tuple(ch), _seq_keys,
           lambda aux, ch: f"({ch[0]},)" if len(ch) == 1 else f"({', '.join(ch)})"))
_add(_Kind(list, lambda x: (x, None), lambda aux, ch: list(ch), _seq_keys,
           lambda aux, ch: f"[{', '.join(ch)}]"))
_add(_Kind(dict, _dict_flatten, lambda aux, ch: dict(zip(aux, ch)), _dict_keys,
           lambda aux, ch: "{" + ", ".join(f"{k!r}: {c}" for k, c in zip(aux, ch)) + "}"))
_add(_Kind(type(None), lambda x: ((), None), lambda aux, ch: None, lambda aux, n: [],
           lambda aux, ch: "None"))
_add(_Kind(collections.OrderedDict, lambda x: (list(x.values()), tuple(x)),
           lambda aux, ch: collections.OrderedDict(zip(aux, ch)), _dict_keys,
           _custom_show("OrderedDict")))
_add(_Kind(collections.defaultdict, _defaultdict_flatten,
           lambda aux, ch: collections.defaultdict(aux[0], zip(aux[1], ch)),
           lambda aux, n: _dict_keys(aux[1], n), _custom_show("defaultdict")))


def _classify(t: type) -> _Kind | None:
    """First sight of an unregistered type: a namedtuple is a node, anything else a leaf."""
    kind = None
    if issubclass(t, tuple) and hasattr(t, "_fields"):
        kind = _Kind(t, lambda x: (x, None), lambda aux, ch: t(*ch),
                     lambda aux, n: [GetAttrKey(f) for f in t._fields],
                     lambda aux, ch: f"CustomNode(namedtuple[{t.__name__}], [{', '.join(ch)}])")
    _kinds[t] = kind
    return kind


def register_pytree_node(cls: type, flatten_fn: Callable[[Any], tuple[Iterable, Hashable]],
                         unflatten_fn: Callable[[Hashable, tuple], Any]) -> None:
    """Make `cls` a node: flatten_fn(x) -> (children, aux), unflatten_fn(aux, children) -> x.
    aux must be hashable; it is part of the PyTreeDef and compared with ==."""
    _check_new(cls, "register_pytree_node")
    _registered.add(cls)
    _add(_Kind(cls, flatten_fn, lambda aux, ch: unflatten_fn(aux, tuple(ch)),
               lambda aux, n: [FlattenedIndexKey(i) for i in range(n)],
               _custom_show(cls.__name__)))


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: `cls` flattens with its method `tree_flatten() -> (children, aux)`
    and rebuilds with its classmethod `tree_unflatten(aux, children)` (JAX's protocol)."""
    register_pytree_node(cls, operator.methodcaller("tree_flatten"), cls.tree_unflatten)
    return cls


def register_dataclass(cls: type | None = None, data_fields: Iterable[str] | None = None,
                       meta_fields: Iterable[str] | None = None):
    """Register a dataclass (or any class with these attributes) as a node; returns cls.
    Plain `@register_dataclass`: fields with `field(metadata={'static': True})` are meta
    (go into aux, must be hashable), the others are data (children, in field order).
    NOTE: unflatten bypasses __init__/__post_init__ (like equinox), so leaves may be tracers
    or placeholders that a constructor's validation would reject."""
    if cls is None:
        return lambda c: register_dataclass(c, data_fields, meta_fields)
    _check_new(cls, "register_dataclass")
    if data_fields is None and meta_fields is None:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"register_dataclass: {cls.__name__} is not a dataclass; "
                            "pass data_fields and meta_fields explicitly")
        fields = dataclasses.fields(cls)
        data = tuple(f.name for f in fields if not f.metadata.get("static", False))
        meta = tuple(f.name for f in fields if f.metadata.get("static", False))
    else:
        data, meta = tuple(data_fields or ()), tuple(meta_fields or ())
        if set(data) & set(meta):
            raise ValueError(f"register_dataclass: {sorted(set(data) & set(meta))} are both "
                             "data and meta fields")
        if dataclasses.is_dataclass(cls):
            missing = {f.name for f in dataclasses.fields(cls)} - set(data) - set(meta)
            if missing:
                raise ValueError(f"register_dataclass: fields {sorted(missing)} of "
                                 f"{cls.__name__} are neither data nor meta fields")
    get_data, get_meta = _getter(data), _getter(meta)
    new, set_attr = object.__new__, object.__setattr__

    def _unflatten(aux, children):
        obj = new(cls)
        for name, value in zip(data, children):
            set_attr(obj, name, value)
        for name, value in zip(meta, aux):
            set_attr(obj, name, value)
        return obj

    _registered.add(cls)
    _add(_Kind(cls, lambda x: (get_data(x), get_meta(x)), _unflatten,
               lambda aux, n: [GetAttrKey(f) for f in data], _custom_show(cls.__name__)))
    return cls


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple]:
    if len(names) >= 2:
        return operator.attrgetter(*names)
    if len(names) == 1:
        name = names[0]
        return lambda x: (getattr(x, name),)
    return lambda x: ()


# --- flatten / unflatten -------------------------------------------------------------------
class PyTreeDef:
    """The structure of a pytree without its leaves; hashable, compared with ==."""
    __slots__ = ("_hash", "_nodes", "num_leaves")

    def __init__(self, nodes: tuple, num_leaves: int):
        self._nodes, self.num_leaves, self._hash = nodes, num_leaves, None

    @property
    def num_nodes(self) -> int:
        return len(self._nodes)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PyTreeDef) and self._nodes == other._nodes

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self._nodes)
        return self._hash

    def __repr__(self) -> str:
        return f"PyTreeDef({_show(self._nodes, 0)[0]})"

    def unflatten(self, leaves: Iterable) -> Any:
        return unflatten(self, leaves)

    def flatten_up_to(self, tree: Any) -> list:
        """The subtrees of `tree` at this treedef's leaves (`tree` may be deeper)."""
        return _up_to_checked(self, tree, lambda where, detail: (
            f"tree.flatten_up_to: structure mismatch at {where}: {detail}; "
            f"expected a tree with prefix {self}, got {structure(tree)}"))

    def children(self) -> list[PyTreeDef]:
        out, pos, rec = [], 1, self._nodes[0]
        for _ in range(rec[2] if rec is not None else 0):
            end = _skip(self._nodes, pos)
            sub = self._nodes[pos:end]
            out.append(PyTreeDef(sub, sub.count(None)))
            pos = end
        return out


def _show(nodes: tuple, pos: int) -> tuple[str, int]:
    rec = nodes[pos]
    if rec is None:
        return "*", pos + 1
    kind, aux, n = rec
    pos, parts = pos + 1, []
    for _ in range(n):
        s, pos = _show(nodes, pos)
        parts.append(s)
    return kind.show(aux, parts), pos


def _skip(nodes: tuple, pos: int) -> int:
    """Index just past the subtree that starts at `pos`."""
    pending = 1
    while pending:
        rec = nodes[pos]
        pos += 1
        pending += (rec[2] if rec is not None else 0) - 1
    return pos


def _flatten(x: Any, is_leaf: Callable | None, leaves: list, nodes: list) -> None:
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        nodes.append(None)
        return
    kind = _kinds.get(type(x), _MISSING)
    if kind is _MISSING:
        kind = _classify(type(x))
    if kind is None:
        leaves.append(x)
        nodes.append(None)
        return
    children, aux = kind.flatten(x)
    i, n = len(nodes), 0
    nodes.append(None)
    for c in children:
        _flatten(c, is_leaf, leaves, nodes)
        n += 1
    nodes[i] = (kind, aux, n)


def _leaves(x: Any, is_leaf: Callable | None, out: list) -> None:
    if is_leaf is not None and is_leaf(x):
        out.append(x)
        return
    kind = _kinds.get(type(x), _MISSING)
    if kind is _MISSING:
        kind = _classify(type(x))
    if kind is None:
        out.append(x)
        return
    for c in kind.flatten(x)[0]:
        _leaves(c, is_leaf, out)


def flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list, PyTreeDef]:
    leaves_, nodes = [], []
    _flatten(tree, is_leaf, leaves_, nodes)
    return leaves_, PyTreeDef(tuple(nodes), len(leaves_))


def leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list:
    out: list = []
    _leaves(tree, is_leaf, out)
    return out


def structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    return flatten(tree, is_leaf)[1]


def unflatten(treedef: PyTreeDef, leaves: Iterable) -> Any:
    leaves = leaves if isinstance(leaves, list | tuple) else list(leaves)
    if len(leaves) != treedef.num_leaves:
        raise ValueError(f"tree.unflatten: expected {treedef.num_leaves} leaves, "
                         f"got {len(leaves)}")
    # Walk the preorder records backwards with a stack: each node pops its n children.
    stack: list = []
    push, li = stack.append, len(leaves)
    for rec in reversed(treedef._nodes):
        if rec is None:
            li -= 1
            push(leaves[li])
        else:
            kind, aux, n = rec
            if n:
                children = stack[:-n - 1:-1]
                del stack[-n:]
            else:
                children = []
            push(kind.unflatten(aux, children))
    return stack[0]


# --- matching a second tree against a treedef (map, prefixes) ------------------------------
class _Mismatch(Exception):
    def __init__(self, detail: str):
        self.detail, self.steps = detail, []   # steps: (kind, aux, n, child index), innermost 1st


def _describe(kind: _Kind, aux: Any, n: int) -> str:
    if kind.type is type(None):
        return "None"
    if kind.keys is _dict_keys:
        return f"{kind.type.__name__} with keys {list(aux)}"
    if kind.keys is _seq_keys:
        return f"{kind.type.__name__} of length {n}"
    return f"{kind.type.__name__} of {n} children" + ("" if aux is None else f" (aux {aux!r})")


def _up_to(nodes: tuple, pos: int, x: Any, out: list) -> int:
    rec = nodes[pos]
    if rec is None:
        out.append(x)
        return pos + 1
    kind, aux, n = rec
    if type(x) is not kind.type:
        raise _Mismatch(f"expected {_describe(kind, aux, n)}, got {type(x).__name__}")
    children, aux2 = kind.flatten(x)
    children = list(children)
    if aux2 != aux or len(children) != n:
        raise _Mismatch(f"expected {_describe(kind, aux, n)}, "
                        f"got {_describe(kind, aux2, len(children))}")
    pos += 1
    for i, c in enumerate(children):
        try:
            pos = _up_to(nodes, pos, c, out)
        except _Mismatch as e:
            e.steps.append((kind, aux, n, i))
            raise
    return pos


def _up_to_checked(treedef: PyTreeDef, tree: Any, message: Callable[[str, str], str]) -> list:
    out: list = []
    try:
        _up_to(treedef._nodes, 0, tree, out)
    except _Mismatch as e:
        path = tuple(kind.keys(aux, n)[i] for kind, aux, n, i in reversed(e.steps))
        raise ValueError(message(keystr(path) or "the root", e.detail)) from None
    return out


def _zip_rest(op: str, leaves_: list, treedef: PyTreeDef, rest: tuple) -> Iterable[tuple]:
    """Each leaf of the first tree with the subtrees at the same place in the `rest` trees."""
    others = []
    for j, r in enumerate(rest):
        others.append(_up_to_checked(treedef, r, lambda where, detail, j=j, r=r: (
            f"{op}: tree structures differ at {where}: {detail}; the first tree is {treedef}, "
            f"rest[{j}] is {structure(r)}")))
    return zip(leaves_, *others)


def map(f: Callable, tree: Any, *rest: Any, is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """f over the leaves of `tree`; a leaf of `tree` is matched with the subtree at the same
    place in each of `rest` (so they share `tree`'s structure, and may be deeper)."""
    leaves_, treedef = flatten(tree, is_leaf)
    if not rest:
        return unflatten(treedef, [f(x) for x in leaves_])
    return unflatten(treedef, [f(*xs) for xs in _zip_rest("tree.map", leaves_, treedef, rest)])


def _paths(nodes: tuple) -> list[tuple]:
    out: list[tuple] = []

    def walk(pos: int, path: tuple) -> int:
        rec = nodes[pos]
        if rec is None:
            out.append(path)
            return pos + 1
        kind, aux, n = rec
        pos += 1
        for key in kind.keys(aux, n):
            pos = walk(pos, path + (key,))
        return pos

    walk(0, ())
    return out


def flatten_with_path(tree: Any, is_leaf: Callable[[Any], bool] | None = None
                      ) -> tuple[list[tuple[tuple, Any]], PyTreeDef]:
    """`([(path, leaf), ...], treedef)`, as jax.tree.flatten_with_path."""
    leaves_, treedef = flatten(tree, is_leaf)
    return list(zip(_paths(treedef._nodes), leaves_)), treedef


def leaves_with_path(tree: Any, is_leaf: Callable[[Any], bool] | None = None
                     ) -> list[tuple[tuple, Any]]:
    """`[(path, leaf), ...]`: flatten_with_path without the treedef."""
    return flatten_with_path(tree, is_leaf)[0]


def map_with_path(f: Callable, tree: Any, *rest: Any,
                  is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """Like map, but calls f(path, leaf, *rest_subtrees)."""
    leaves_, treedef = flatten(tree, is_leaf)
    pairs = zip(_paths(treedef._nodes), _zip_rest("tree.map_with_path", leaves_, treedef, rest))
    return unflatten(treedef, [f(path, *xs) for path, xs in pairs])


def _is_none(x: Any) -> bool:
    return x is None


def prefix_broadcast(prefix_tree: Any, full_tree: Any, what: str) -> list:
    """One prefix value per leaf of `full_tree`: a leaf of the prefix (None included, as in
    vmap's in_axes) applies to the whole subtree at its place."""
    prefixes, treedef = flatten(prefix_tree, is_leaf=_is_none)
    if treedef.num_nodes == 1 and treedef.num_leaves == 1:   # the common `in_axes=0` case
        return [prefix_tree] * len(leaves(full_tree))
    subtrees = _up_to_checked(treedef, full_tree, lambda where, detail: (
        f"{what}: the prefix does not match the tree at {where}: {detail}; prefix structure "
        f"{treedef} is not a prefix of {structure(full_tree)}"))
    out: list = []
    for p, sub in zip(prefixes, subtrees):
        out.extend([p] * len(leaves(sub)))
    return out


# --- reductions and restructuring (jax.tree.reduce / all / transpose / broadcast) ----------
def reduce(function: Callable, tree: Any, initializer: Any = _MISSING,
           is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """functools.reduce of `function` over the leaves (left to right)."""
    leaves_ = leaves(tree, is_leaf)
    if initializer is _MISSING:
        return functools.reduce(function, leaves_)
    return functools.reduce(function, leaves_, initializer)


def reduce_associative(operation: Callable, tree: Any, *, identity: Any = _MISSING,
                       is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """Reduce with an associative `operation` by pairs (logarithmic depth); `identity` is
    the result of an empty tree."""
    level = leaves(tree, is_leaf)
    if not level:
        if identity is _MISSING:
            raise TypeError("tree.reduce_associative: an empty tree needs an identity")
        return identity
    while len(level) > 1:
        pairs = [operation(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        level = pairs + level[len(level) - len(level) % 2:]
    return level[0]


def all(tree: Any, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:  # noqa: A001
    """True when every leaf is truthy (Python's all over the leaves)."""
    return builtins.all(leaves(tree, is_leaf))


def transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None,
              pytree_to_transpose: Any) -> Any:
    """An outer tree of inner trees -> the inner tree of outer trees (jax.tree.transpose);
    inner_treedef None takes the structure of the first outer leaf."""
    subtrees = outer_treedef.flatten_up_to(pytree_to_transpose)
    if inner_treedef is None:
        if not subtrees:
            raise ValueError("tree.transpose: cannot infer inner_treedef of an empty outer "
                             "tree; pass it")
        inner_treedef = structure(subtrees[0])
    rows = [inner_treedef.flatten_up_to(s) for s in subtrees]
    columns = [[row[j] for row in rows] for j in range(inner_treedef.num_leaves)]
    return unflatten(inner_treedef, [unflatten(outer_treedef, c) for c in columns])


def broadcast(prefix_tree: Any, full_tree: Any,
              is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """`prefix_tree` with each of its leaves repeated over the subtree of `full_tree` at its
    place: a tree of full_tree's structure."""
    prefixes, treedef = flatten(prefix_tree, is_leaf)
    subtrees = _up_to_checked(treedef, full_tree, lambda where, detail: (
        f"tree.broadcast: the prefix does not match the tree at {where}: {detail}"))
    return unflatten(treedef, [map(lambda _, p=p: p, sub, is_leaf=is_leaf)
                               for p, sub in zip(prefixes, subtrees)])
