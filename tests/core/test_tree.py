# Tests for mirax.core.tree: pytree flatten/unflatten/map, node types, paths, prefixes.
import collections
import dataclasses

import pytest

from mirax.core import tree

Point = collections.namedtuple("Point", ["x", "y"])


@tree.register_dataclass
@dataclasses.dataclass
class Layer:
    w: object
    b: object
    name: str = dataclasses.field(default="layer", metadata={"static": True})


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: object
    k: int


tree.register_dataclass(Frozen, data_fields=["a"], meta_fields=["k"])


class Box:
    def __init__(self, value, tag):
        self.value, self.tag = value, tag

    def __eq__(self, other):
        return isinstance(other, Box) and (self.value, self.tag) == (other.value, other.tag)


tree.register_pytree_node(Box, lambda b: ((b.value,), b.tag), lambda tag, ch: Box(ch[0], tag))


class Opaque:
    pass


def _samples():
    return [
        1,
        None,
        (),
        [],
        {},
        (1,),
        (1, [2, 3], {"b": 4, "a": (5, None)}),
        {"z": 1, "a": [2, {"y": 3, "x": 4}]},
        [Point(1, (2, 3)), None, 4],
        collections.OrderedDict([("b", 1), ("a", 2)]),
        collections.defaultdict(list, {"b": 1, "a": [2]}),
        Layer(w=1, b=[2, 3], name="dense"),
        Frozen(a=(1, 2), k=7),
        Box([1, 2], "t"),
    ]


@pytest.mark.parametrize("x", _samples(), ids=lambda x: type(x).__name__)
def test_roundtrip(x):
    leaves, treedef = tree.flatten(x)
    assert treedef.num_leaves == len(leaves)
    assert tree.leaves(x) == leaves
    assert tree.structure(x) == treedef
    y = tree.unflatten(treedef, leaves)
    assert type(y) is type(x)
    assert y == x
    assert treedef.unflatten(leaves) == x
    assert tree.structure(y) == treedef
    assert hash(tree.structure(y)) == hash(treedef)


def test_leaf_order_and_dict_sorting():
    x = {"b": 1, "a": {"d": 2, "c": 3}, "c": [4, (5, 6)]}
    assert tree.leaves(x) == [3, 2, 1, 4, 5, 6]
    y = tree.unflatten(tree.structure(x), list("abcdef"))
    assert list(y) == ["a", "b", "c"]
    assert list(y["a"]) == ["c", "d"]
    assert y == {"a": {"c": "a", "d": "b"}, "b": "c", "c": ["d", ("e", "f")]}


def test_dict_key_order_does_not_change_structure():
    assert tree.structure({"a": 1, "b": 2}) == tree.structure({"b": 1, "a": 2})
    assert tree.structure({"a": 1}) != tree.structure({"b": 1})


def test_unsortable_dict_keys():
    with pytest.raises(ValueError, match="sortable"):
        tree.flatten({1: 0, "a": 1})


def test_none_is_an_empty_node():
    leaves, treedef = tree.flatten([None, 1, (None,)])
    assert leaves == [1]
    assert treedef.num_leaves == 1
    assert tree.structure(None).num_leaves == 0
    assert tree.structure(None).num_nodes == 1
    assert repr(tree.structure(None)) == "PyTreeDef(None)"
    assert tree.map(lambda v: v + 1, [None, 1]) == [None, 2]


def test_leaves_are_unregistered_objects():
    o = Opaque()
    assert tree.leaves([o, 1.5, "s"]) == [o, 1.5, "s"]
    assert tree.structure(o).num_leaves == 1


def test_namedtuple_keeps_type():
    x = Point(1, [2, 3])
    y = tree.map(lambda v: v * 10, x)
    assert type(y) is Point and y == Point(10, [20, 30])
    Other = collections.namedtuple("Other", ["x", "y"])
    assert tree.structure(Other(1, 2)) != tree.structure(x)
    assert tree.structure((1, 2)) != tree.structure(Point(1, 2))


def test_ordered_dict_keeps_insertion_order():
    x = collections.OrderedDict([("b", 1), ("a", 2)])
    assert tree.leaves(x) == [1, 2]
    y = tree.map(str, x)
    assert type(y) is collections.OrderedDict and list(y) == ["b", "a"]
    assert tree.structure(x) != tree.structure(collections.OrderedDict([("a", 1), ("b", 2)]))
    assert tree.structure(x) != tree.structure({"b": 1, "a": 2})


def test_register_dataclass_decorator_static_field():
    x = Layer(w=1, b=2, name="a")
    leaves, treedef = tree.flatten(x)
    assert leaves == [1, 2]
    assert treedef != tree.structure(Layer(w=1, b=2, name="b"))  # meta field is in the treedef
    y = treedef.unflatten([10, 20])
    assert isinstance(y, Layer) and y == Layer(w=10, b=20, name="a")


def test_register_dataclass_explicit_and_frozen():
    y = tree.map(lambda v: -v, Frozen(a=(1, 2), k=3))
    assert y == Frozen(a=(-1, -2), k=3)


def test_register_dataclass_skips_init():
    @tree.register_dataclass
    @dataclasses.dataclass
    class Checked:
        x: object

        def __post_init__(self):
            if not isinstance(self.x, int):
                raise TypeError("x must be an int")

    y = tree.map(lambda v: object(), Checked(1))  # a placeholder leaf is fine
    assert not isinstance(y.x, int)


def test_register_dataclass_validates_fields():
    @dataclasses.dataclass
    class Two:
        a: int
        b: int

    with pytest.raises(ValueError, match="neither data nor meta"):
        tree.register_dataclass(Two, data_fields=["a"], meta_fields=[])
    with pytest.raises(ValueError, match="already"):
        tree.register_dataclass(Layer)


def test_register_pytree_node():
    x = Box([1, 2], "t")
    leaves, treedef = tree.flatten(x)
    assert leaves == [1, 2]
    assert repr(treedef) == "PyTreeDef(CustomNode(Box[t], [[*, *]]))"
    assert tree.map(lambda v: v + 1, x) == Box([2, 3], "t")
    assert tree.structure(Box(1, "u")) != tree.structure(Box(1, "t"))
    with pytest.raises(ValueError, match="already"):
        tree.register_pytree_node(Box, lambda b: ((), None), lambda a, c: Box(None, None))


def test_repr_like_jax():
    assert repr(tree.structure((1, {"a": 2}))) == "PyTreeDef((*, {'a': *}))"
    assert repr(tree.structure((1,))) == "PyTreeDef((*,))"
    assert repr(tree.structure(5)) == "PyTreeDef(*)"
    assert repr(tree.structure(Point(1, 2))) == "PyTreeDef(CustomNode(namedtuple[Point], [*, *]))"
    assert repr(tree.structure(Frozen(1, 2))) == "PyTreeDef(CustomNode(Frozen[(2,)], [*]))"


def test_num_nodes_and_children():
    treedef = tree.structure((1, [2, 3], None))
    assert treedef.num_nodes == 6
    assert treedef.children() == [
        tree.structure(0), tree.structure([0, 0]), tree.structure(None)]
    assert tree.structure(1).children() == []


def test_is_leaf():
    x = {"a": (1, 2), "b": [3, (4, 5)]}
    leaves = tree.leaves(x, is_leaf=lambda v: isinstance(v, tuple))
    assert leaves == [(1, 2), 3, (4, 5)]
    y = tree.map(lambda t: len(t) if isinstance(t, tuple) else -t, x,
                 is_leaf=lambda v: isinstance(v, tuple))
    assert y == {"a": 2, "b": [-3, 2]}
    assert tree.leaves((1, 2), is_leaf=lambda v: True) == [(1, 2)]
    leaves, treedef = tree.flatten(x, is_leaf=lambda v: isinstance(v, tuple))
    assert treedef.num_leaves == 3


def test_map_multiple_trees():
    a = {"w": 1, "b": (2, 3)}
    b = {"w": 10, "b": (20, 30)}
    c = {"w": 100, "b": (200, 300)}
    assert tree.map(lambda x, y, z: x + y + z, a, b, c) == {"w": 111, "b": (222, 333)}


def test_map_rest_may_be_deeper():
    out = tree.map(lambda x, y: (x, y), (1, 2), ([5, 6], {"a": 3}))
    assert out == ((1, [5, 6]), (2, {"a": 3}))


@pytest.mark.parametrize("other, where", [
    ((1, 2, 3), "the root"),
    ({"w": 1, "b": (2, 3)}, "the root"),
    ([1, {"b": 2}], "[1]"),
    ([1, {"a": 2, "c": 3}], "[1]"),
    ([1, None], "[1]"),
])
def test_map_structure_mismatch(other, where):
    with pytest.raises(ValueError) as info:
        tree.map(lambda x, y: x, [1, {"a": 2}], other)
    msg = str(info.value)
    assert msg.startswith(f"tree.map: tree structures differ at {where}")
    assert repr(tree.structure([1, {"a": 2}])) in msg
    assert repr(tree.structure(other)) in msg


def test_unflatten_wrong_leaf_count():
    treedef = tree.structure((1, 2))
    with pytest.raises(ValueError, match="tree.unflatten: expected 2 leaves, got 1"):
        tree.unflatten(treedef, [1])
    with pytest.raises(ValueError, match="tree.unflatten: expected 2 leaves, got 3"):
        tree.unflatten(treedef, iter([1, 2, 3]))


def test_flatten_with_path_and_keystr():
    x = [{"w": Layer(w=1, b=2)}, Point(3, 4), collections.OrderedDict(z=5), Box(6, "t")]
    pairs, treedef = tree.flatten_with_path(x)
    assert treedef == tree.structure(x)
    assert pairs == tree.leaves_with_path(x)
    assert [leaf for _, leaf in pairs] == tree.leaves(x)
    assert [tree.keystr(p) for p, _ in pairs] == [
        "[0]['w'].w", "[0]['w'].b", "[1].x", "[1].y", "[2]['z']", "[3][<flat index 0>]"]
    assert pairs[0][0] == (tree.SequenceKey(0), tree.DictKey("w"), tree.GetAttrKey("w"))
    assert tree.keystr(()) == ""


def test_map_with_path():
    x = {"a": [1, 2], "b": 3}
    y = tree.map_with_path(lambda p, v, r: (tree.keystr(p), v + r), x, {"a": [10, 20], "b": 30})
    assert y == {"a": [("['a'][0]", 11), ("['a'][1]", 22)], "b": ("['b']", 33)}


def test_prefix_broadcast():
    full = (1, (2, 3), {"a": [4, 5], "b": 6})
    assert tree.prefix_broadcast(0, full, "vmap in_axes") == [0] * 6
    assert tree.prefix_broadcast(None, full, "vmap in_axes") == [None] * 6
    assert tree.prefix_broadcast((0, None, {"a": 1, "b": None}), full, "vmap in_axes") == [
        0, None, None, 1, 1, None]
    assert tree.prefix_broadcast((1, (0, None), 2), full, "x") == [1, 0, None, 2, 2, 2]
    assert tree.prefix_broadcast((0, 1), (None, 5), "x") == [1]  # None subtree has no leaves


def test_prefix_broadcast_mismatch():
    with pytest.raises(ValueError) as info:
        tree.prefix_broadcast((0, None), (1, 2, 3), "vmap in_axes")
    msg = str(info.value)
    assert msg.startswith("vmap in_axes:")
    assert "PyTreeDef((*, *))" in msg and "PyTreeDef((*, *, *))" in msg
    with pytest.raises(ValueError, match=r"vmap in_axes: .* at \[1\]"):
        tree.prefix_broadcast((0, {"a": 0}), (1, {"b": 2}), "vmap in_axes")
    with pytest.raises(ValueError, match="expected list"):
        tree.prefix_broadcast([0, 1], (1, 2), "vmap in_axes")


def test_treedef_hash_as_cache_key():
    cache = {tree.structure((1, {"a": 2})): "hit"}
    assert tree.structure((1, {"a": None})) not in cache
    assert cache[tree.structure(("x", {"a": Opaque()}))] == "hit"


# --- JAX as an oracle ----------------------------------------------------------------------
def test_matches_jax():
    jtu = pytest.importorskip("jax").tree_util
    trees = [
        (1, [2, 3], {"b": 4, "a": (5, None)}),
        {"z": 1, "a": [2, {"y": 3, "x": 4}], "m": None},
        [Point(1, (2, 3)), None, 4, ()],
        collections.OrderedDict([("b", 1), ("a", {"d": 2, "c": 3})]),
        None,
        7,
    ]
    for x in trees:
        j_leaves, j_treedef = jtu.tree_flatten(x)
        leaves, treedef = tree.flatten(x)
        assert leaves == j_leaves
        assert treedef.num_leaves == j_treedef.num_leaves
        assert treedef.num_nodes == j_treedef.num_nodes
        assert repr(treedef) == repr(j_treedef)
        j_paths = [jtu.keystr(p) for p, _ in jtu.tree_flatten_with_path(x)[0]]
        assert [tree.keystr(p) for p, _ in tree.flatten_with_path(x)[0]] == j_paths
