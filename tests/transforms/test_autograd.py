"""mx.autograd: the PyTorch-style facade agrees with mx.grad."""
import gc

import numpy as np
import pytest

import mirax as mx
import mirax.autograd as ag
import mirax.numpy as mnp
from mirax.core import trace

W = np.array([[0.5, -1.0], [2.0, 0.3], [-0.7, 1.1]], np.float32)
X = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]], np.float32)


def loss_fn(w, x):
    return mnp.mean(mnp.tanh(x @ w) ** 2) + mnp.sum(mnp.exp(-w * w))


def test_backward_matches_grad_and_accumulates():
    w = ag.tensor(W, requires_grad=True)
    x = ag.tensor(X)
    loss = loss_fn(w, x)
    assert isinstance(loss, ag.Tensor) and loss.requires_grad and not loss.is_leaf
    loss.backward()
    want = mx.grad(loss_fn)(W, X)
    np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-6)
    assert x.grad is None
    loss_fn(w, x).backward()  # accumulates, as in PyTorch
    np.testing.assert_allclose(w.grad.numpy(), 2 * np.asarray(want), rtol=1e-6)
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()


def test_create_graph_second_order():
    w = ag.tensor(np.array([1.0, 2.0, 3.0], np.float32), requires_grad=True)
    (mnp.sum(mnp.sin(w) * w ** 3)).backward(create_graph=True)
    g = w.grad
    assert g.requires_grad
    np.testing.assert_allclose(g.numpy(), mx.grad(lambda v: mnp.sum(mnp.sin(v) * v ** 3))(
        w.data), rtol=1e-6)
    w.grad = None
    g.sum().backward()
    want = mx.grad(lambda v: mnp.sum(mx.grad(lambda u: mnp.sum(mnp.sin(u) * u ** 3))(v)))(
        w.data)
    np.testing.assert_allclose(w.grad.numpy(), want, rtol=1e-5)


def test_no_grad_grad_fn_and_jit_inside():
    w = ag.tensor(W, requires_grad=True)
    with ag.no_grad():
        y = w * 2
    assert not y.requires_grad
    (gw,) = ag.grad(mnp.sum(w * w), w)
    np.testing.assert_allclose(gw.numpy(), 2 * W)
    assert w.grad is None
    jitted = mx.jit(lambda a: mnp.sum(mnp.tanh(a)))
    jitted(w).backward()
    np.testing.assert_allclose(w.grad.numpy(), 1 - np.tanh(W) ** 2, rtol=1e-5)
    with pytest.raises(RuntimeError, match="does not require grad"):
        ag.tensor(W).sum().backward()
    with pytest.raises(RuntimeError, match="scalar"):
        (w * 2).backward()


def test_custom_vjp_through_autograd():
    @mx.custom_vjp
    def f(x):
        return mnp.sin(x)

    f.defvjp(lambda x: (mnp.sin(x), x), lambda x, g: (g * 7.0,))
    w = ag.tensor(np.ones(2, np.float32), requires_grad=True)
    f(w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [7, 7])


def test_interpreter_stack_is_restored():
    w = ag.tensor(W, requires_grad=True)
    (w * w).sum().backward()
    del w
    gc.collect()
    assert len(trace.state.stack) == 1 and not trace.state.active
