"""jit: agreement with eager, static arguments, the cache (hits, misses, retracing on
shape / dtype / weak-type changes), pytrees in and out, closures, and composition with
grad and vmap."""
from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp


def _rng():
    return np.random.default_rng(0)


def mlp(params, x):
    h = mnp.tanh(x @ params["w1"] + params["b1"])
    return mnp.sum((h @ params["w2"]) ** 2)


def _params():
    r = _rng()
    return {"w1": mnp.asarray(r.normal(size=(4, 8)).astype(np.float32)),
            "b1": mnp.zeros(8),
            "w2": mnp.asarray(r.normal(size=(8, 2)).astype(np.float32))}


def test_jit_matches_eager():
    p, x = _params(), mnp.ones((3, 4))
    np.testing.assert_allclose(mx.jit(mlp)(p, x), mlp(p, x), rtol=1e-6)
    f = lambda a, b: (mnp.sin(a) * b + 1.0, mnp.max(a, axis=0))
    a, b = mnp.asarray(_rng().normal(size=(3, 2))), mnp.asarray(2.0)
    for got, want in zip(mx.jit(f)(a, b), f(a, b)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
        assert got.dtype == want.dtype and got.shape == want.shape


def test_static_argnums_and_argnames():
    def f(x, n, mode="sum"):
        y = x * n
        return mnp.sum(y) if mode == "sum" else mnp.max(y)
    g = mx.jit(f, static_argnums=(1,), static_argnames=("mode",))
    x = mnp.arange(4.0)
    assert float(g(x, 2)) == 12.0
    assert float(g(x, 3, mode="max")) == 9.0
    assert float(g(x, 3, mode="sum")) == 18.0
    assert g.cache_info().misses == 3
    assert float(g(x, 2)) == 12.0 and g.cache_info().hits == 1
    h = mx.jit(lambda x, shape: mnp.reshape(x, shape), static_argnames="shape")
    assert h(x, shape=(2, 2)).shape == (2, 2)


def test_unhashable_static_raises_type_error():
    g = mx.jit(lambda x, s: x * len(s), static_argnums=1)
    with pytest.raises(TypeError, match="hashable"):
        g(mnp.ones(2), [1, 2])
    assert g(mnp.ones(2), (1, 2)).tolist() == [2.0, 2.0]


def test_cache_hits_misses_and_retracing():
    traces = []

    @mx.jit
    def f(x):
        traces.append(x.shape)
        return x * 2
    f(mnp.ones(3))
    f(mnp.ones(3))
    f(mnp.zeros(3))                              # same aval: hit
    assert len(traces) == 1 and f.cache_info().hits == 2 and f.cache_info().misses == 1
    f(mnp.ones(4))                               # shape change
    f(mnp.ones(3, mnp.float64))                  # dtype change
    f(mnp.ones(3, mnp.int32))
    assert len(traces) == 4
    f(2.0)                                       # weak f32[] ...
    f(mnp.asarray(2.0))                          # ... the same weak f32[]: hit
    f(mnp.asarray(np.float32(2.0)))              # a strong f32[]: retrace
    assert len(traces) == 6
    info = f.cache_info()
    assert info.misses == 6 and info.hits == 3 and info.size == 6


def test_weak_type_retrace_changes_result_dtype():
    f = mx.jit(lambda a, b: a * b)
    half = mnp.ones(2, mnp.float16)
    assert f(half, 2.0).dtype == mnp.float16                   # weak scalar
    assert f(half, np.float32(2.0)).dtype == mnp.float32       # strong NumPy scalar
    assert f.cache_info().misses == 2


def test_cache_eviction():
    f = mx.jit(lambda x: x + 1, cache_size=2)
    for n in (1, 2, 3):
        f(mnp.ones(n))
    info = f.cache_info()
    assert info.size == 2 and info.evictions == 1
    f(mnp.ones(1))                                # evicted: traced again
    assert f.cache_info().misses == 4


Point = namedtuple("Point", "x y")


def test_pytrees_in_and_out():
    @mx.jit
    def f(tree, scale):
        a, (b, c) = tree["a"], tree["bc"]
        return {"sum": a + b, "pair": (c * scale, None), "pt": Point(a, scale)}
    tree = {"a": mnp.ones(2), "bc": (mnp.arange(2.0), mnp.full((2,), 3.0))}
    out = f(tree, 2.0)
    assert set(out) == {"sum", "pair", "pt"} and out["pair"][1] is None
    assert out["sum"].tolist() == [1.0, 2.0] and out["pair"][0].tolist() == [6.0, 6.0]
    assert isinstance(out["pt"], Point) and float(out["pt"].y) == 2.0
    f({"a": mnp.ones(2), "bc": (mnp.zeros(2), mnp.zeros(2))}, 1.0)
    assert f.cache_info().hits == 1
    f({"a": mnp.ones(2), "bc": [mnp.zeros(2), mnp.zeros(2)]}, 1.0)   # list, not tuple
    assert f.cache_info().misses == 2


def test_kwargs_and_numpy_inputs():
    f = mx.jit(lambda x, y=None: x if y is None else x - y)
    assert f(np.ones(3, np.float32), y=np.ones(3, np.float32)).tolist() == [0.0] * 3
    assert f(np.ones(2, np.float64)).dtype == mnp.float64


def test_closures_capture_constants():
    w = mnp.asarray([1.0, 2.0])

    @mx.jit
    def f(x):
        return x * w
    assert f(mnp.ones(2)).tolist() == [1.0, 2.0]
    g = mx.make_graph(lambda x: x * w)(mnp.ones(2))
    assert len(g.consts) == 1


def test_jit_of_grad_and_grad_of_jit():
    p, x = _params(), mnp.ones((3, 4))
    want = mx.grad(mlp)(p, x)
    for got in (mx.jit(mx.grad(mlp))(p, x), mx.grad(mx.jit(mlp))(p, x),
                mx.jit(mx.grad(mx.jit(mlp)))(p, x)):
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6)


def test_value_and_grad_of_jit_with_static():
    f = mx.jit(lambda x, p: mnp.sum(mnp.abs(x) ** p), static_argnums=1)
    v, g = mx.value_and_grad(f)(mnp.asarray([1.0, -2.0]), 2)
    assert float(v) == 5.0 and g.tolist() == [2.0, -4.0]


def test_second_order_through_jit():
    f = mx.jit(lambda x: mnp.sum(mnp.sin(x) * x))
    x = mnp.asarray([0.3, 1.2])
    gg = mx.grad(lambda x: mnp.sum(mx.grad(f)(x)))(x)
    xn = np.asarray(x)
    np.testing.assert_allclose(gg, 2 * np.cos(xn) - xn * np.sin(xn), rtol=1e-5)


def test_vmap_of_jit_and_jit_of_vmap():
    f = mx.jit(lambda a, b: mnp.dot(a, b) + mnp.sum(a))
    a = mnp.asarray(_rng().normal(size=(5, 3)).astype(np.float32))
    b = mnp.asarray(_rng().normal(size=(3,)).astype(np.float32))
    want = np.stack([np.asarray(f(a[i], b)) for i in range(5)])
    np.testing.assert_allclose(mx.vmap(f, in_axes=(0, None))(a, b), want, rtol=1e-5)
    np.testing.assert_allclose(mx.jit(mx.vmap(f, in_axes=(0, None)))(a, b), want, rtol=1e-5)
    np.testing.assert_allclose(mx.vmap(f, in_axes=(1, None))(a.T, b), want, rtol=1e-5)


def test_jvp_of_jit():
    f = mx.jit(lambda x: mnp.exp(x) * 2)
    x, t = mnp.asarray([0.0, 1.0]), mnp.asarray([1.0, 0.5])
    out, tout = mx.jvp(f, (x,), (t,))
    np.testing.assert_allclose(tout, 2 * np.exp(np.asarray(x)) * np.asarray(t), rtol=1e-6)


def test_nested_jit_and_python_control_flow_on_static():
    @mx.jit
    def inner(x):
        return x * 3

    @mx.jit
    def outer(x, n):
        for _ in range(n):
            x = inner(x)
        return x
    outer_s = mx.jit(outer.__wrapped__, static_argnums=1)
    assert outer_s(mnp.ones(2), 3).tolist() == [27.0, 27.0]


def test_jit_preserves_name_and_doc():
    def my_fn(x):
        """Doc."""
        return x
    j = mx.jit(my_fn)
    assert j.__name__ == "my_fn" and j.__doc__ == "Doc." and j.__wrapped__ is my_fn


def test_non_array_argument_requires_static():
    with pytest.raises(TypeError, match="static"):
        mx.jit(lambda x, s: x)(mnp.ones(2), "name")
