"""Golden listings: how people read graphs. Compared exactly, apart from the source-line
comments (checked separately: each node points at this file) and trailing padding."""
# ruff: noqa: E501  (golden listings are compared verbatim)
from __future__ import annotations

import re

import mirax as mx
import mirax.numpy as mnp

HERE = "test_listing.py"


def _split(graph):
    """(listing without comments, [source comment of each line or None])."""
    text, sources = [], []
    for line in str(graph).splitlines():
        m = re.match(r"^(.*?)\s+# (\S+)$", line)
        text.append((m.group(1) if m else line).rstrip())
        sources.append(m.group(2) if m else None)
    return "\n".join(text), sources


def loss(w, x):
    h = mnp.tanh(x @ w)
    return mnp.sum(h * h)


LOSS = """\
graph loss(w: f32[4,3], x: f32[8,4]) -> f32[]
  a: f32[8,3] = dot_general[contract=((1,), (0,))] x, w
  b: f32[8,3] = tanh a
  c: f32[8,3] = mul b, b
  d: f32[]    = reduce_sum[axes=(0, 1)] c
  return d"""


def test_loss_listing_golden():
    g = mx.make_graph(loss)(mnp.ones((4, 3)), mnp.ones((8, 4)))
    text, sources = _split(g)
    assert text == LOSS
    node_sources = sources[1:-1]
    assert all(s is not None and s.startswith(HERE + ":") for s in node_sources), sources
    lines = [int(s.split(":")[1]) for s in node_sources]
    assert lines[0] == lines[1] < lines[2] == lines[3]   # x @ w and tanh share a line


def mlp_loss(params, x, y):
    (w1, b1), (w2, b2) = params
    h = mnp.tanh(x @ w1 + b1)
    out = h @ w2 + b2
    return mnp.mean((out - y) ** 2)


MLP = """\
graph mlp_loss(a: f32[4,8], b: f32[8], c: f32[8,2], d: f32[2], x: f32[16,4], y: f32[16,2]) -> f32[]
  e: f32[] = const 32.0
  f: f32[16,8] = dot_general[contract=((1,), (0,))] x, a
  g: f32[16,8] = add f, b
  h: f32[16,8] = tanh g
  i: f32[16,2] = dot_general[contract=((1,), (0,))] h, c
  j: f32[16,2] = add i, d
  k: f32[16,2] = sub j, y
  l: f32[16,2] = mul k, k
  m: f32[]     = reduce_sum[axes=(0, 1)] l
  n: f32[]     = div m, e
  return n"""


def _params():
    return ((mnp.ones((4, 8)), mnp.zeros(8)), (mnp.ones((8, 2)), mnp.zeros(2)))


def test_mlp_listing_golden():
    g = mx.make_graph(mlp_loss)(_params(), mnp.ones((16, 4)), mnp.ones((16, 2)))
    text, sources = _split(g)
    assert text == MLP
    assert sources[0] is None and sources[1] is None       # header and const
    assert all(s.startswith(HERE + ":") for s in sources[2:-1])


def test_listing_is_stable():
    """Tracing twice gives the same text; the listing does not depend on object ids."""
    a = str(mx.make_graph(mlp_loss)(_params(), mnp.ones((16, 4)), mnp.ones((16, 2))))
    b = str(mx.make_graph(mlp_loss)(_params(), mnp.ones((16, 4)), mnp.ones((16, 2))))
    assert a == b


def test_listing_columns_align():
    g = mx.make_graph(loss)(mnp.ones((4, 3)), mnp.ones((8, 4)))
    cols = {line.index("#") for line in str(g).splitlines() if "#" in line}
    assert len(cols) == 1


def test_grad_listing_shape():
    g = mx.make_graph(mx.grad(loss))(mnp.ones((4, 3)), mnp.ones((8, 4)))
    text, _ = _split(g)
    header = text.splitlines()[0]
    assert header.startswith("graph grad(loss)(") and header.endswith("-> f32[4,3]")
    ops = [line.split(" = ")[1].split()[0].split("[")[0] for line in text.splitlines()[1:-1]
           if "= const" not in line]
    # the forward product and the one for w's cotangent (x's may be pruned)
    assert ops.count("tanh") == 1 and 2 <= ops.count("dot_general") <= 3
    assert text.splitlines()[-1].startswith("  return ")


def test_jit_listing_names_and_subgraph():
    @mx.jit
    def inner(u):
        return mnp.exp(u) * 2.0

    def outer(v):
        return mnp.sum(inner(v))

    text, _ = _split(mx.make_graph(outer)(mnp.ones(3)))
    assert text.splitlines()[0] == "graph outer(v: f32[3]) -> f32[]"
    assert "exp v" in text and "reduce_sum[axes=(0,)]" in text   # jit inlined when staged
