"""JAX names at mirax's top level and in mirax.tree / mirax.tree_util, checked against JAX:
jacobian, device_count, make_jaxpr, the jax.tree module, tree_util extras and key paths."""
import collections

import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
import mirax.tree_util as mtu

Point = collections.namedtuple("Point", ["x", "y"])

TREES = [
    {"b": [1, 2.0, (3, None)], "a": Point(4, 5)},
    [(), {"k": 6}, [7, [8]]],
    collections.OrderedDict(z=1, a=(2, 3)),
    9,
]


# --- top-level names -------------------------------------------------------------------------
def test_jacobian_is_jacrev_vs_jax():
    def f(x, y):
        return jnp.sin(x) * y[0] + x ** 2 * y[1] if isinstance(x, jax.Array) else \
            mnp.sin(x) * y[0] + x ** 2 * y[1]
    x = np.array([0.3, -1.2, 2.0], np.float32)
    y = np.array([1.5, -0.5], np.float32)
    for argnums in ((0, 1),):
        got = mx.jacobian(f, argnums=argnums)(x, y)
        want = jax.jacobian(f, argnums=argnums)(jnp.asarray(x), jnp.asarray(y))
        for g, w in zip(mx.tree.leaves(got), jax.tree.leaves(want)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)
    assert mx.jacobian is mx.jacrev


def test_device_counts():
    assert mx.device_count() == len(mx.devices()) >= 1
    assert mx.local_device_count() == len(mx.local_devices())
    assert mx.device_count("cpu") == len(mx.devices("cpu"))
    assert mx.device_count("gpu") == len(mx.devices("cuda"))


# --- make_jaxpr -------------------------------------------------------------------------------
def _prog(np_):
    def f(x, y, *, scale):
        h = np_.tanh(x @ y) * scale
        return {"out": np_.sum(h ** 2), "h": h}
    return f


def test_make_jaxpr_structure():
    x = np.ones((2, 3), np.float32)
    y = np.ones((3, 4), np.float32)
    closed = mx.make_jaxpr(_prog(mnp))(x, y, scale=2.0)
    jclosed = jax.make_jaxpr(_prog(jnp))(x, y, scale=2.0)
    def g(x, y):
        return _prog(mnp)(x, y, scale=2.0)
    assert str(mx.make_jaxpr(g)(x, y)) == str(mx.make_graph(g)(x, y))
    assert "graph f(x: f32[2,3], y: f32[3,4], " in str(closed)
    jaxpr = closed.jaxpr
    assert [v.aval.shape for v in jaxpr.invars] == [v.aval.shape for v in jclosed.jaxpr.invars]
    assert [a.shape for a in closed.out_avals] == [a.shape for a in jclosed.out_avals]
    assert [str(a.dtype) for a in closed.in_avals] == [str(a.dtype) for a in jclosed.in_avals]
    names = [e.primitive.name for e in closed.eqns]
    assert "dot_general" in names and "tanh" in names and "reduce_sum" in names
    # every eqn reads vars defined before it (invars, constvars or earlier outvars)
    defined = set(jaxpr.invars) | set(jaxpr.constvars)
    for e in jaxpr.eqns:
        assert all(v in defined for v in e.invars), e
        assert isinstance(e.params, dict)
        defined.update(e.outvars)
    assert all(v in defined for v in jaxpr.outvars)
    assert len(closed.consts) == len(jaxpr.constvars)
    dot = next(e for e in closed.eqns if e.primitive.name == "dot_general")
    assert [v.aval.shape for v in dot.invars] == [(2, 3), (3, 4)]
    assert dot.outvars[0].aval.shape == (2, 4)


def test_make_jaxpr_static_argnums_and_return_shape():
    def f(x, n):
        for _ in range(n):
            x = mnp.sin(x)
        return x, x.sum()
    closed, shapes = mx.make_jaxpr(f, static_argnums=1, return_shape=True)(
        np.ones(3, np.float32), 3)
    _, jshapes = jax.make_jaxpr(lambda x, n: (x, x.sum()), static_argnums=1,
                                return_shape=True)(np.ones(3, np.float32), 3)
    assert [e.primitive.name for e in closed.eqns].count("sin") == 3
    assert len(closed.jaxpr.invars) == 1
    assert [(s.shape, s.dtype) for s in shapes] == [(s.shape, s.dtype) for s in jshapes]


def test_make_jaxpr_subgraph_params_and_consts():
    c = np.arange(3.0, dtype=np.float32)

    def f(x):
        return mx.lax.cond(x[0] > 0, lambda v: v * c, lambda v: -v, x)
    closed = mx.make_jaxpr(f)(np.ones(3, np.float32))
    cond = next(e for e in closed.eqns if e.primitive.name == "cond")
    branches = cond.params["branches"]
    assert all(isinstance(b, type(closed)) for b in branches)
    assert {e.primitive.name for b in branches for e in b.eqns} >= {"mul", "neg"}
    consts = [np.asarray(v) for b in branches for v in b.consts] + \
        [np.asarray(v) for v in closed.consts]
    assert any(v.shape == (3,) and np.array_equal(v, c) for v in consts)


# --- mirax.tree is jax.tree -------------------------------------------------------------------
@pytest.mark.parametrize("x", TREES, ids=range(len(TREES)))
def test_tree_module_vs_jax(x):
    leaves, treedef = mx.tree.flatten(x)
    jleaves, jtreedef = jax.tree.flatten(x)
    assert leaves == jleaves and repr(treedef) == repr(jtreedef)
    assert mx.tree.leaves(x) == jax.tree.leaves(x)
    assert repr(mx.tree.structure(x)) == repr(jax.tree.structure(x))
    assert mx.tree.unflatten(treedef, leaves) == x
    assert mx.tree.map(lambda v: v * 2, x) == jax.tree.map(lambda v: v * 2, x)
    pairs, td = mx.tree.flatten_with_path(x)
    jpairs, jtd = jax.tree.flatten_with_path(x)
    assert td == treedef and repr(td) == repr(jtd)
    assert [(mx.tree.keystr(p), v) for p, v in pairs] == \
        [(jtu.keystr(p), v) for p, v in jpairs]
    assert [(mx.tree.keystr(p, simple=True, separator="/"), v)
            for p, v in mx.tree.leaves_with_path(x)] == \
        [(jtu.keystr(p, simple=True, separator="/"), v) for p, v in jax.tree.leaves_with_path(x)]
    got = mx.tree.map_with_path(lambda p, v: (mx.tree.keystr(p), v), x)
    want = jax.tree.map_with_path(lambda p, v: (jtu.keystr(p), v), x)
    assert mx.tree.leaves(got) == jax.tree.leaves(want)
    assert mx.tree.reduce(lambda a, b: a + b, x, 0) == jax.tree.reduce(lambda a, b: a + b, x, 0)
    assert mx.tree.reduce_associative(lambda a, b: a + b, x, identity=0) == \
        jax.tree.reduce_associative(lambda a, b: a + b, x, identity=0)
    assert mx.tree.all(x) == jax.tree.all(x)


def test_key_classes_match_jax():
    x = {"a": [Point(1, 2)]}
    (path, _), = mx.tree.leaves_with_path({"a": [Point(1, None)]})
    (jpath, _), = jax.tree.leaves_with_path({"a": [Point(1, None)]})
    assert [type(k).__name__ for k in path] == [type(k).__name__ for k in jpath]
    assert path[0].key == jpath[0].key and path[1].idx == jpath[1].idx
    assert path[2].name == jpath[2].name
    assert str(mtu.DictKey("w")) == str(jtu.DictKey("w"))
    assert str(mtu.SequenceKey(3)) == str(jtu.SequenceKey(3))
    assert str(mtu.GetAttrKey("b")) == str(jtu.GetAttrKey("b"))
    assert str(mtu.FlattenedIndexKey(2)) == str(jtu.FlattenedIndexKey(2))
    assert mx.tree.all(x) is True and mx.tree.all({"a": [0, 1]}) is False


def test_transpose_and_broadcast_vs_jax():
    outer = [0, {"p": 0}]
    inner = (0, 0, 0)
    x = [(1, 2, 3), {"p": (4, 5, 6)}]
    got = mx.tree.transpose(mx.tree.structure(outer), mx.tree.structure(inner), x)
    want = jax.tree.transpose(jax.tree.structure(outer), jax.tree.structure(inner), x)
    assert got == want
    assert mtu.tree_transpose(mx.tree.structure(outer), None, x) == want
    with pytest.raises(ValueError):
        mx.tree.transpose(mx.tree.structure(outer), mx.tree.structure((0, 0)), x)
    for prefix, full in [([1, {"a": 2}], [[1, 2], {"a": (3, 4)}]), ([1, None], [[1, 2], None]),
                         (7, {"u": [1, 2]})]:
        assert mx.tree.broadcast(prefix, full) == jax.tree.broadcast(prefix, full)


def test_tree_util_names_vs_jax():
    x = TREES[0]
    pairs, treedef = mtu.tree_flatten_with_path(x)
    jpairs, jtreedef = jtu.tree_flatten_with_path(x)
    assert [v for _, v in pairs] == [v for _, v in jpairs] and repr(treedef) == repr(jtreedef)
    assert [jtu.keystr(p) for p, _ in jpairs] == [mtu.keystr(p) for p, _ in pairs]
    assert [v for _, v in mtu.tree_leaves_with_path(x)] == jtu.tree_leaves(x)
    assert mtu.tree_reduce(max, x) == jtu.tree_reduce(max, x)
    assert mtu.tree_all([1, (2,)]) == jtu.tree_all([1, (2,)])
    assert mtu.all_leaves([1, 2.0]) == jtu.all_leaves([1, 2.0])
    assert mtu.all_leaves([1, (2,)]) == jtu.all_leaves([1, (2,)])
    assert mtu.treedef_is_leaf(mtu.tree_structure(1)) == jtu.treedef_is_leaf(
        jtu.tree_structure(1))
    assert [repr(c) for c in mtu.treedef_children(treedef)] == \
        [repr(c) for c in jtu.treedef_children(jtreedef)]


@mtu.register_pytree_node_class
class Scaled:
    def __init__(self, value, factor):
        self.value, self.factor = value, factor

    def tree_flatten(self):
        return (self.value,), self.factor

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(children[0], aux)


def test_register_pytree_node_class_and_partial():
    s = Scaled(np.array([1.0, 2.0], np.float32), 3.0)
    leaves, treedef = mx.tree.flatten(s)
    assert len(leaves) == 1 and treedef.num_leaves == 1
    g = mx.grad(lambda s: mnp.sum(s.value ** 2) * s.factor)(s)
    assert isinstance(g, Scaled) and g.factor == 3.0
    np.testing.assert_allclose(np.asarray(g.value), 2 * 3.0 * np.array([1.0, 2.0]))
    (path, _), = mx.tree.leaves_with_path(s)
    assert mx.tree.keystr(path) == "[<flat index 0>]"

    p = mtu.Partial(lambda a, b: a * b, np.float32(2.0))
    jp = jtu.Partial(lambda a, b: a * b, np.float32(2.0))
    assert len(mx.tree.leaves(p)) == len(jax.tree.leaves(jp)) == 1
    assert float(mx.jit(lambda p, x: p(x))(p, 3.0)) == 6.0


def test_scipy_namespaces_import_as_jax_does():
    import mirax.scipy.linalg as linalg
    import mirax.scipy.signal as signal
    import mirax.scipy.special as special
    import mirax.scipy.stats as stats
    from mirax.scipy.stats import norm
    assert mx.scipy.stats is stats and mx.scipy.linalg is linalg and mx.scipy.signal is signal
    assert stats.norm is norm and mx.scipy.special is special
    jax_like = mx   # `import mirax as jax`
    x = np.array([0.3, -1.0], np.float32)
    np.testing.assert_allclose(np.asarray(jax_like.scipy.stats.norm.logpdf(x)),
                               np.asarray(jax.scipy.stats.norm.logpdf(x)), rtol=1e-6)
    for mod in ("stats", "linalg", "signal", "special"):
        missing = [n for n in getattr(getattr(mx.scipy, mod), "__all__", [])
                   if not hasattr(getattr(mx.scipy, mod), n)]
        assert not missing, (mod, missing)
