"""mx.ir.grad / jvp / hvp / vmap / nth_order_grad: graph -> graph transforms."""
import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax.ir import eval_graph

X = np.array([0.5, 1.0, 2.0], np.float32)


def _graph():
    return mx.make_graph(lambda x: mnp.sum(mnp.sin(x) * x ** 3))(X)


def test_grad_jvp_hvp_graphs_match_function_transforms():
    g = _graph()
    f = lambda x: mnp.sum(mnp.sin(x) * x ** 3)  # noqa: E731
    gg = mx.ir.grad(g)
    assert isinstance(gg, mx.ir.Graph) and gg.typecheck() is gg
    np.testing.assert_allclose(eval_graph(gg, X)[0], mx.grad(f)(X), rtol=1e-6)
    v = np.array([1.0, -1.0, 0.5], np.float32)
    out, t = eval_graph(mx.ir.jvp(g), X, v)
    want = mx.jvp(f, (X,), (v,))
    np.testing.assert_allclose(out, want[0], rtol=1e-6)
    np.testing.assert_allclose(t, want[1], rtol=1e-6)
    (hv,) = eval_graph(mx.ir.hvp(g), X, v)
    np.testing.assert_allclose(hv, mx.hvp(f, (X,), (v,))[0], rtol=1e-5)
    np.testing.assert_allclose(mx.ir.compile(gg)(X)[0], mx.grad(f)(X), rtol=1e-6)


def test_grad_wrt_subset_and_errors():
    g = mx.make_graph(lambda a, b, n: mnp.sum(a * b) * n)(X, X, 2)
    gb = mx.ir.grad(g, wrt=[1])
    assert len(gb.outputs) == 1
    np.testing.assert_allclose(eval_graph(gb, X, 2 * X, 3)[0], 3 * X, rtol=1e-6)
    assert len(mx.ir.grad(g).outputs) == 2  # float inputs only
    with pytest.raises(ValueError, match="float"):
        mx.ir.grad(g, wrt=[2])
    with pytest.raises(ValueError, match="scalar"):
        mx.ir.grad(mx.make_graph(lambda x: x * 2)(X))


def test_vmap_graph():
    g = mx.make_graph(lambda x, w: mnp.tanh(x @ w))(np.ones(3, np.float32),
                                                      np.ones((3, 2), np.float32))
    vg = mx.ir.vmap(g, in_axes=(0, None), axis_size=4)
    assert vg.in_avals[0].shape == (4, 3) and vg.out_avals[0].shape == (4, 2)
    xs = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    w = np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_allclose(eval_graph(vg, xs, w)[0], np.tanh(xs @ w), rtol=1e-6)
    with pytest.raises(ValueError, match="axis_size"):
        mx.ir.vmap(g, 0)


def test_nth_order_grad_values_and_sizes():
    g = _graph()
    x = X.astype(np.float64)
    want = {
        1: np.cos(x) * x ** 3 + 3 * x ** 2 * np.sin(x),
        2: -np.sin(x) * x ** 3 + 6 * x ** 2 * np.cos(x) + 6 * x * np.sin(x),
        3: -np.cos(x) * x ** 3 - 9 * x ** 2 * np.sin(x) + 18 * x * np.cos(x) + 6 * np.sin(x),
        4: (np.sin(x) * x ** 3 - 12 * x ** 2 * np.cos(x) - 36 * x * np.sin(x)
            + 24 * np.cos(x)),
    }
    sizes = []
    for k in range(1, 5):
        gk = mx.ir.nth_order_grad(g, k)
        sizes.append(len(gk.nodes))
        np.testing.assert_allclose(eval_graph(gk, X)[0], want[k], rtol=2e-5, atol=1e-4)
    assert sizes == sorted(sizes) and sizes[-1] < 80  # simplified layer by layer
    with pytest.raises(ValueError, match="order"):
        mx.ir.nth_order_grad(g, 0)
