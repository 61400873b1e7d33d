"""checkpoint / remat: same values and derivatives, fewer entries on the outer tape."""
import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax.interpreters.vjp import vjp_flat

X = np.array([0.3, -1.2, 2.0], np.float32)


def block(x):
    for _ in range(5):
        x = mnp.sin(x) * 1.5 + x
    return x


def loss(x):
    return mnp.sum(block(x) ** 2)


def loss_remat(x):
    return mnp.sum(mx.checkpoint(block)(x) ** 2)


def test_values_and_grads_match():
    np.testing.assert_allclose(loss_remat(X), loss(X), rtol=1e-6)
    np.testing.assert_allclose(mx.grad(loss_remat)(X), mx.grad(loss)(X), rtol=1e-6)
    np.testing.assert_allclose(mx.jit(mx.grad(loss_remat))(X), mx.grad(loss)(X), rtol=1e-5)
    np.testing.assert_allclose(mx.grad(mx.jit(loss_remat))(X), mx.grad(loss)(X), rtol=1e-5)
    np.testing.assert_allclose(mx.hessian(loss_remat)(X), mx.hessian(loss)(X), rtol=1e-5)
    np.testing.assert_allclose(mx.vmap(mx.grad(loss_remat))(np.stack([X, -X])),
                               mx.vmap(mx.grad(loss))(np.stack([X, -X])), rtol=1e-6)
    np.testing.assert_allclose(mx.jvp(loss_remat, (X,), (np.ones(3, np.float32),))[1],
                               mx.jvp(loss, (X,), (np.ones(3, np.float32),))[1], rtol=1e-6)
    assert mx.remat is mx.checkpoint


def _tape_len(fn):
    box = []
    outs, bwd = vjp_flat(lambda x: [fn(x)], [mnp.asarray(X)], box)
    return len(box[0].tape), bwd


def test_saved_residuals_drop():
    plain, _ = _tape_len(loss)
    remat, bwd = _tape_len(loss_remat)
    assert plain == 5 * 3 + 2      # sin, mul, add per layer; pow, sum
    assert remat == 1 + 2          # one checkpoint entry keeps only its input
    np.testing.assert_allclose(bwd([mnp.asarray(1.0)])[0], mx.grad(loss)(X), rtol=1e-6)


def test_static_argnums_and_pytrees():
    def f(p, n):
        y = p["w"] * p["x"]
        for _ in range(n):
            y = mnp.tanh(y)
        return {"y": y}

    g = mx.checkpoint(f, static_argnums=(1,))
    p = {"w": mnp.asarray(0.5), "x": mnp.asarray(2.0)}
    ref = mx.grad(lambda p: f(p, 3)["y"])(p)
    got = mx.grad(lambda p: g(p, 3)["y"])(p)
    np.testing.assert_allclose(got["w"], ref["w"], rtol=1e-6)
    np.testing.assert_allclose(got["x"], ref["x"], rtol=1e-6)
    assert "checkpoint" in str(mx.make_graph(lambda p: g(p, 2)["y"])(p))


def test_static_argnames():
    def f(p, n):
        y = p
        for _ in range(n):
            y = mnp.tanh(y)
        return y
    g = mx.checkpoint(f, static_argnames="n")
    x = mnp.asarray(0.7)
    np.testing.assert_allclose(mx.grad(lambda x: g(x, 3))(x), mx.grad(lambda x: f(x, 3))(x),
                               rtol=1e-6)
    with pytest.raises(ValueError, match="'m' is not a parameter"):
        mx.checkpoint(f, static_argnames="m")
