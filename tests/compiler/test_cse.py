"""cse: equal nodes (and equal small constants) merged, as golden listings."""
import numpy as np

import mirax as mx
import mirax.numpy as mnp
from mirax.compiler.cse import cse
from mirax.compiler.dce import dce
from mirax.graph.graph import Graph

from listing import f32, run_graph, show


def _repeated(x, y):
    a = mnp.sin(x) * y
    b = mnp.sin(x) * y
    c = x * 2.0 + x * 2.0
    return a + b + c


def test_cse_golden():
    g = mx.make_graph(_repeated)(f32(3), f32(3))
    assert show(g) == """\
graph _repeated(x: f32[3], y: f32[3]) -> f32[3]
  a: f32[] = const 2.0
  b: f32[] = const 2.0
  c: f32[3] = sin x
  d: f32[3] = mul c, y
  e: f32[3] = sin x
  f: f32[3] = mul e, y
  g: f32[3] = mul x, a
  h: f32[3] = mul x, b
  i: f32[3] = add g, h
  j: f32[3] = add d, f
  k: f32[3] = add j, i
  return k"""
    assert show(cse(g)) == """\
graph _repeated(x: f32[3], y: f32[3]) -> f32[3]
  a: f32[] = const 2.0
  b: f32[3] = sin x
  c: f32[3] = mul b, y
  d: f32[3] = mul x, a
  e: f32[3] = add d, d
  f: f32[3] = add c, c
  g: f32[3] = add f, e
  return g"""
    np.testing.assert_array_equal(run_graph(g, f32(3), f32(3))[0],
                                  run_graph(cse(g), f32(3), f32(3))[0])


def test_params_must_match_with_their_types():
    g = Graph("f")
    x = g.input((2, 3), "float32", "x")
    a = g.add("reduce_sum", x, axes=(0,))
    b = g.add("reduce_sum", x, axes=(1,))
    c = g.add("reduce_sum", x, axes=(0,))
    g.output(a, b, c)
    assert show(dce(cse(g))) == """\
graph f(x: f32[2,3]) -> (f32[3], f32[2], f32[3])
  a: f32[3] = reduce_sum[axes=(0,)] x
  b: f32[2] = reduce_sum[axes=(1,)] x
  return a, b, a"""


def test_graph_params_compare_by_identity():
    inner = mx.make_graph(lambda x: x * 2.0)(f32(3))
    other = mx.make_graph(lambda x: x * 2.0)(f32(3))
    g = Graph("f")
    x = g.input((3,), "float32", "x")
    a = g.add("call", x, graph=inner)
    b = g.add("call", x, graph=inner)
    c = g.add("call", x, graph=other)
    g.output(a[0], b[0], c[0])
    out = cse(g)
    assert len(out.nodes) == 2
    assert out.outputs[0] is out.outputs[1] and out.outputs[2] is not out.outputs[0]
