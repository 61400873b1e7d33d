"""simplify: constant folding and algebraic identities, as golden listings."""
import numpy as np

import mirax as mx
import mirax.numpy as mnp
from mirax.compiler.dce import dce
from mirax.compiler.simplify import simplify

from listing import f32, run_graph, show


def _identities(x):
    a = x * 1.0 + 0.0 - 0.0
    b = mnp.negative(mnp.negative(a)) / 1.0
    c = mnp.transpose(mnp.transpose(b, (1, 0)), (1, 0))
    d = mnp.reshape(mnp.reshape(c, (6,)), (3, 2))
    e = mnp.broadcast_to(mnp.broadcast_to(mnp.asarray(2.0), (2,)), (3, 2))
    return d * e + (mx.asarray(np.float32(3)) * 2.0)


def test_identities_and_folding_golden():
    g = mx.make_graph(_identities)(f32(2, 3))
    assert show(g) == """\
graph _identities(x: f32[2,3]) -> f32[3,2]
  a: f32[] = const 1.0
  b: f32[] = const 0.0
  c: f32[] = const 0.0
  d: f32[] = const 1.0
  e: f32[] = const 2.0
  f: f32[] = const 3.0
  g: f32[] = const 2.0
  h: f32[2,3] = mul x, a
  i: f32[2,3] = add h, b
  j: f32[2,3] = sub i, c
  k: f32[2,3] = neg j
  l: f32[2,3] = neg k
  m: f32[2,3] = div l, d
  n: f32[3,2] = transpose[permutation=(1, 0)] m
  o: f32[2,3] = transpose[permutation=(1, 0)] n
  p: f32[6]   = reshape[new_sizes=(6,)] o
  q: f32[3,2] = reshape[new_sizes=(3, 2)] p
  r: f32[2]   = broadcast_in_dim[shape=(2,), broadcast_dimensions=()] e
  s: f32[3,2] = broadcast_in_dim[shape=(3, 2), broadcast_dimensions=(1,)] r
  t: f32[3,2] = mul q, s
  u: f32[]    = mul f, g
  v: f32[3,2] = add t, u
  return v"""
    assert show(dce(simplify(g))) == """\
graph _identities(x: f32[2,3]) -> f32[3,2]
  a: f32[3,2] = const ...
  b: f32[] = const 6.0
  c: f32[3,2] = reshape[new_sizes=(3, 2)] x
  d: f32[3,2] = mul c, a
  e: f32[3,2] = add d, b
  return e"""


def _chains(x, y):
    a = mnp.broadcast_to(mnp.broadcast_to(y, (3, 2)), (4, 3, 2))
    c = mnp.where(True, x, mnp.broadcast_to(y, (3, 2)))
    d = mnp.transpose(mnp.transpose(mnp.reshape(x, (1, 3, 2)), (2, 0, 1)), (0, 2, 1))
    return a, c, d


def test_chains_golden():
    g = mx.make_graph(_chains)(f32(3, 2), f32(2))
    assert show(dce(simplify(g))) == """\
graph _chains(x: f32[3,2], y: f32[2]) -> (f32[4,3,2], f32[3,2], f32[2,3,1])
  a: f32[4,3,2] = broadcast_in_dim[shape=(4, 3, 2), broadcast_dimensions=(2,)] y
  b: f32[1,3,2] = reshape[new_sizes=(1, 3, 2)] x
  c: f32[2,3,1] = transpose[permutation=(2, 1, 0)] b
  return a, x, c"""


def test_simplified_graph_computes_the_same():
    for fn, args in [(_identities, (f32(2, 3),)), (_chains, (f32(3, 2), f32(2)))]:
        g = mx.make_graph(fn)(*args)
        want = run_graph(g, *args)
        got = run_graph(dce(simplify(g)), *args)
        for a, b in zip(want, got):
            np.testing.assert_array_equal(a, b)


def test_no_folding_of_big_constants_or_mismatched_shapes():
    def f(x):
        return x + mnp.zeros((4, 3))  # x: f32[3] broadcasts: not an identity
    g = dce(simplify(mx.make_graph(f)(f32(3))))
    assert [n.prim.name for n in g.nodes] == ["add"]
    assert show(g).splitlines()[1] == "  a: f32[4,3] = const ..."

    def h(x):
        return x + mnp.zeros((100, 100))  # a big zero: the broadcast stays, add disappears
    g = dce(simplify(mx.make_graph(h)(f32(100, 100))))
    assert g.nodes == [] and g.outputs == g.inputs


def test_convert_to_same_dtype_dropped():
    from mirax.graph.graph import Graph
    g = Graph("f")
    x = g.input((3,), "float32", "x")
    y = g.add("convert_element_type", x, new_dtype=np.dtype("float32"), weak_type=False)
    g.output(g.add("neg", y))
    assert show(dce(simplify(g))) == """\
graph f(x: f32[3]) -> f32[3]
  a: f32[3] = neg x
  return a"""


def _seeds(x):   # bigger than SMALL: the broadcasts are not folded into constants
    one = mnp.broadcast_to(mnp.asarray(1.0), (2048,))    # a grad seed
    two = one + one                                       # its fan-out sum
    return two * x, mnp.negative(one), mnp.sin(x) * mnp.broadcast_to(x[0], (2048,))


def test_broadcast_scalars_stay_scalars_golden():
    g = mx.make_graph(_seeds)(f32(2048))
    assert show(dce(simplify(g))) == """\
graph _seeds(x: f32[2048]) -> (f32[2048], f32[2048], f32[2048])
  a: f32[] = const 2.0
  b: f32[] = const -1.0
  c: f32[2048] = mul a, x
  d: f32[2048] = broadcast_in_dim[shape=(2048,), broadcast_dimensions=()] b
  e: f32[2048] = sin x
  f: f32[1]    = slice[start_indices=(0,), limit_indices=(1,), strides=(1,)] x
  g: f32[]     = reshape[new_sizes=()] f
  h: f32[2048] = mul e, g
  return c, d, h"""
    for a, b in zip(run_graph(g, f32(2048)), run_graph(dce(simplify(g)), f32(2048))):
        np.testing.assert_array_equal(a, b)


def test_folds_iota_masks_up_to_fold_max():
    from mirax.compiler import simplify as simplify_mod

    def eye_times(x):
        i = mx.lax.iota(np.int32, 64)
        return (i[:, None] == i[None, :]).astype(np.float32) * x
    g = mx.make_graph(eye_times)(f32(64))
    names = [n.prim.name for n in dce(simplify(g)).nodes]
    assert names == ["mul"]                # the 64x64 identity is a constant
    np.testing.assert_array_equal(run_graph(dce(simplify(g)), f32(64))[0],
                                  np.eye(64, dtype=np.float32) * np.asarray(f32(64)))
    old = simplify_mod.FOLD_MAX
    try:
        simplify_mod.FOLD_MAX = 1024
        assert "mul" in [n.prim.name for n in dce(simplify(g)).nodes]
        assert len(dce(simplify(g)).nodes) > 1
    finally:
        simplify_mod.FOLD_MAX = old


def test_sum_of_adjacent_pads_is_a_concatenate():
    """jnp.split's transpose (a zero pad per piece, summed) becomes one concatenate of the
    pieces' cotangents; pieces that are not side by side (a gap between them) or padded
    with something other than zeros keep their pads and sum. Values as before the rewrite,
    bit for bit (the sums only ever added zeros)."""
    rng = np.random.default_rng(0)
    y = rng.standard_normal((4, 5, 12)).astype(np.float32)

    def split3(y):
        q, k, v = mnp.split(y, 3, axis=-1)
        return mnp.sum(mnp.tanh(q * k) + v ** 2)

    def gap(y):
        return mnp.sum(y[..., :3] ** 2) + mnp.sum(y[..., 6:] ** 3)

    def nonzero(a, b):
        return mx.lax.pad(a, 1.0, ((0, 3, 0),)) + mx.lax.pad(b, 1.0, ((2, 0, 0),))

    # the gradients are the summed pads themselves (no product after them, whose sums a
    # different buffer may order otherwise)
    for f, args, cats in ((mx.grad(split3), (y,), 1), (mx.grad(gap), (y,), 0),
                          (nonzero, (f32(2), f32(3)), 0)):
        g = dce(simplify(mx.make_graph(f)(*args)))
        names = [n.prim.name for n in g.nodes]
        assert names.count("concatenate") == cats, names
        if cats:
            assert "pad" not in names and \
                [len(n.inputs) for n in g.nodes if n.prim.name == "concatenate"] == [3]
        got = run_graph(g, *args)
        np.testing.assert_array_equal(got[0] if isinstance(got, list) else got,
                                      np.asarray(f(*args)))
