"""plan_memory: which node writes into which dead buffer, as golden listings; and the
lowered code computes the same with and without reuse."""
import numpy as np

import mirax as mx
import mirax.numpy as mnp
from mirax.backends.cpu.lower import lower, writes_into
from mirax.compiler.memory import format_plan, plan_memory
from mirax.core import runtime

from listing import f32, run_graph


def _chain(x, y):
    a = mnp.exp(x)
    b = a * y
    c = mnp.sin(b) + 1.0
    t = mnp.transpose(c)       # a view of c: c's buffer must not be reused
    return c * 3.0, t, mnp.tanh(x + y)


def _plan(g, donated=()):
    text = format_plan(plan_memory(g, donated, writes_into))
    return "\n".join(line.split("  #")[0].rstrip() for line in text.splitlines())


def test_plan_golden_no_donation():
    g = mx.make_graph(_chain)(f32(3, 3), f32(3, 3))
    assert _plan(g) == """\
graph _chain(x: f32[3,3], y: f32[3,3]) -> (f32[3,3], f32[3,3], f32[3,3])
  a: f32[] = const 1.0
  b: f32[] = const 3.0
  c: f32[3,3] = exp x
  d: f32[3,3] = mul c, y  <- writes into c
  e: f32[3,3] = sin d  <- writes into d
  f: f32[3,3] = add e, a  <- writes into e
  g: f32[3,3] = transpose[permutation=(1, 0)] f
  h: f32[3,3] = mul f, b
  i: f32[3,3] = add x, y
  j: f32[3,3] = tanh i  <- writes into i
  return h, g, j"""


def test_plan_golden_donated_input():
    g = mx.make_graph(_chain)(f32(3, 3), f32(3, 3))
    text = _plan(g, donated=(1,))
    assert "  i: f32[3,3] = add x, y  <- writes into y" in text


def test_lowered_reuse_matches_reference():
    x, y = f32(3, 3) / 10, f32(3, 3) / 7
    g = mx.make_graph(_chain)(x, y)
    want = run_graph(g, x, y)
    planned = lower(runtime.backend("cpu"), plan_memory(g, (), writes_into))
    got = planned(np.asarray(x), np.asarray(y))
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)


def test_scalars_and_outputs_never_reused():
    def f(x):
        s = mnp.sum(x)
        return mnp.exp(s) * 2.0, x * 2.0
    g = plan_memory(mx.make_graph(f)(f32(4)), (), writes_into)
    assert g.cache["memory_plan"].reuse == {}


def test_jit_donation_leaves_non_donated_arguments_intact():
    x, y = f32(64), f32(64)
    keep_x, keep_y = np.asarray(x).copy(), np.asarray(y).copy()
    f = mx.jit(lambda x, y: mnp.tanh(mnp.exp(x / 100) + y), donate_argnums=(1,))
    want = np.tanh(np.exp(keep_x / 100) + keep_y)
    for _ in range(3):  # first call (slow path) and cached fast path
        np.testing.assert_allclose(np.asarray(f(x, mx.asarray(keep_y))), want, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(x), keep_x)
    np.testing.assert_array_equal(np.asarray(y), keep_y)
    yn = keep_y.copy()  # a NumPy argument is never overwritten, donated or not
    np.testing.assert_allclose(np.asarray(f(x, yn)), want, rtol=1e-6)
    np.testing.assert_array_equal(yn, keep_y)


def test_jit_donate_argnames_name_positions():
    x, y = f32(64), f32(64)
    keep_y = np.asarray(y).copy()
    f = mx.jit(lambda x, y: mnp.tanh(mnp.exp(x / 100) + y), donate_argnames="y")
    g = mx.jit(lambda x, y: mnp.tanh(mnp.exp(x / 100) + y), donate_argnums=1)
    assert f.donate_argnums == g.donate_argnums == (1,)
    np.testing.assert_allclose(np.asarray(f(x, mx.asarray(keep_y))),
                               np.tanh(np.exp(np.asarray(x) / 100) + keep_y), rtol=1e-6)
