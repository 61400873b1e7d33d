"""dce: unused nodes and constants dropped, as golden listings."""
import mirax as mx
import mirax.numpy as mnp
from mirax.compiler.dce import dce

from listing import f32, show


def _dead(x):
    unused = mnp.exp(x) * 3.0  # noqa: F841
    return mnp.sin(x)


def test_dce_golden():
    g = mx.make_graph(_dead)(f32(3))
    assert show(g) == """\
graph _dead(x: f32[3]) -> f32[3]
  a: f32[] = const 3.0
  b: f32[3] = exp x
  c: f32[3] = mul b, a
  d: f32[3] = sin x
  return d"""
    assert show(dce(g)) == """\
graph _dead(x: f32[3]) -> f32[3]
  a: f32[3] = sin x
  return a"""
