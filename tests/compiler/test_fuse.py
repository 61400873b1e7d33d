"""fuse: elementwise chains and reductions with their producers become fusion nodes."""
import numpy as np

import mirax as mx
import mirax.numpy as mnp
from mirax.core import runtime
cpu_backend = runtime.backend("cpu")
from mirax.compiler import optimize
from mirax.compiler.fusion import fuse

from listing import f32, run_graph, show


def _mlp_bits(x, w):
    h = mnp.tanh(x @ w)
    m = h.sum(axis=1, keepdims=True)
    return mnp.exp(h - m) * 2.0, (h * h).sum()


GOLDEN = """\
graph _mlp_bits(x: f32[4,3], w: f32[3,5]) -> (f32[4,5], f32[])
  a: f32[] = const 2.0
  b: f32[4,5] = dot_general[contract=((1,), (0,))] x, w
  c: f32[4,5], d: f32[4] = fusion[name=tanh_reduce_sum] b
      graph tanh_reduce_sum(b: f32[4,5]) -> (f32[4,5], f32[4])
        c: f32[4,5] = tanh b
        d: f32[4]   = reduce_sum[axes=(1,)] c
        return c, d
  e: f32[4,1] = reshape[new_sizes=(4, 1)] d
  f: f32[4,5] = fusion[name=sub_exp_mul] c, e, a
      graph sub_exp_mul(c: f32[4,5], e: f32[4,1], a: f32[]) -> f32[4,5]
        h: f32[4,5] = sub c, e
        i: f32[4,5] = exp h
        f: f32[4,5] = mul i, a
        return f
  g: f32[]    = fusion[name=mul_reduce_sum] c
      graph mul_reduce_sum(c: f32[4,5]) -> f32[]
        h: f32[4,5] = mul c, c
        g: f32[]    = reduce_sum[axes=(0, 1)] h
        return g
  return f, g"""  # noqa: E501


def test_fuse_golden():
    g = mx.make_graph(_mlp_bits)(f32(4, 3), f32(3, 5))
    fused = fuse(g)
    assert show(fused) == GOLDEN
    fused.typecheck()


def test_fused_graph_computes_the_same():
    x, w = f32(4, 3) / 10, f32(3, 5) / 10
    g = mx.make_graph(_mlp_bits)(x, w)
    for a, b in zip(run_graph(g, x, w), run_graph(fuse(g), x, w)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_no_cycle_through_an_unfused_node():
    def f(x, w):
        a = mnp.sin(x)
        b = a @ w              # depends on a: mul may not join the sin-cos group
        return mnp.cos(a) * b
    x, w = f32(3, 3) / 10, f32(3, 3) / 10
    g = mx.make_graph(f)(x, w)
    fused = fuse(g)
    fused.typecheck()
    assert [n.prim.name for n in fused.nodes] == ["fusion", "dot_general", "mul"]
    np.testing.assert_allclose(run_graph(fused, x, w)[0], run_graph(g, x, w)[0], rtol=1e-6)


def test_cpu_backend_fuses_only_big_groups():
    g = mx.make_graph(_mlp_bits)(f32(4, 3), f32(3, 5))   # 20 elements: nothing to gain
    assert cpu_backend.fuses is True
    assert all(n.prim.name != "fusion" for n in optimize(g, cpu_backend).nodes)
    big = mx.make_graph(_mlp_bits)(f32(256, 3), f32(3, 512))
    assert [n.prim.name for n in optimize(big, cpu_backend).nodes].count("fusion") >= 1


def test_accept_refuses_a_group_and_retries_without_its_reduction():
    g = mx.make_graph(lambda x: (mnp.exp(mnp.sin(x)) * x).sum())(f32(6))
    seen = []

    def accept(members):
        seen.append([n.prim.name for n in members])
        return members[-1].prim.name != "reduce_sum"
    fused = fuse(g, accept)
    assert seen == [["sin", "exp", "mul", "reduce_sum"], ["sin", "exp", "mul"]]
    assert [n.prim.name for n in fused.nodes] == ["fusion", "reduce_sum"]
    assert not fuse(g, lambda members: False).nodes[0].prim.name == "fusion"


def test_group_joins_past_an_unrelated_node_and_is_reordered():
    def f(x, w):
        a = mnp.sin(x)
        b = x @ w              # independent of the group: a's group may take c
        c = mnp.cos(a) * b
        return c * a
    x, w = f32(3, 3) / 10, f32(3, 3) / 10
    g = mx.make_graph(f)(x, w)
    fused = fuse(g)
    fused.typecheck()
    assert [n.prim.name for n in fused.nodes] == ["dot_general", "fusion"]
    np.testing.assert_allclose(run_graph(fused, x, w)[0], run_graph(g, x, w)[0], rtol=1e-6)


def test_siblings_share_a_group():
    def f(x):
        return mnp.sin(x) * 2.0, mnp.cos(x) + x
    x = f32(5)
    g = mx.make_graph(f)(x)
    assert [n.prim.name for n in fuse(g).nodes].count("fusion") == 2
    fused = fuse(g, siblings=True)
    assert [n.prim.name for n in fused.nodes] == ["fusion"]
    for a, b in zip(run_graph(fused, x), run_graph(g, x)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_fusion_node_under_transforms():
    x = f32(4, 3) / 10
    g = fuse(mx.make_graph(lambda x: mnp.sum(mnp.tanh(x) * x))(x))
    node = g.nodes[0]
    assert node.prim.name == "fusion"

    def f(x):
        return node.prim.bind(x, **node.params)[0]
    want = mx.grad(lambda x: mnp.sum(mnp.tanh(x) * x))(x)
    np.testing.assert_allclose(np.asarray(mx.grad(f)(x)), np.asarray(want), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(mx.jit(f)(x)), np.asarray(f(x)), rtol=1e-6)
