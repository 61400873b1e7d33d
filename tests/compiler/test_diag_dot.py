"""simplify: a product with a diagonal matrix (the identity constant times a vector, as
jacrev's seed becomes after an elementwise op) is a scaling, not a matrix product."""
import numpy as np

import mirax as mx
import mirax.numpy as mnp
from mirax.compiler.simplify import simplify

RNG = np.random.default_rng(0)


def _dots(g):
    return sum(n.prim.name == "dot_general" for n in simplify(g).nodes)


def test_jacrev_drops_the_identity_product():
    w1, w2 = (RNG.standard_normal((32, 32)).astype(np.float32) / 6 for _ in range(2))

    def net(x):
        return mnp.tanh(mnp.tanh(x @ w1) @ w2)
    x = RNG.standard_normal(32).astype(np.float32)
    g = mx.make_graph(mx.jacrev(net))(x)
    assert _dots(g) == 3        # two forward products, one backward (was two)
    got = np.asarray(mx.jit(mx.jacrev(net))(x))
    x64, a, b = (v.astype(np.float64) for v in (x, w1, w2))
    h = np.tanh(x64 @ a)
    y = np.tanh(h @ b)
    want = (1 - y * y)[:, None] * b.T @ ((1 - h * h)[:, None] * a.T)   # J = D2 W2^T D1 W1^T
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_not_an_identity_keeps_the_product():
    m = np.eye(8, dtype=np.float32)
    m[0, 1] = 2.0

    def f(v, b):
        return mnp.reshape(m * v, (8, 1, 8)) @ b
    g = mx.make_graph(f)(np.ones(8, np.float32), np.ones((8, 3), np.float32))
    assert _dots(g) == 1


def test_diagonal_product_values_and_layout():
    def f(v, b):   # diag(v) . b contracting b's axis 1: b's contracted axis moves first
        d = np.eye(6, dtype=np.float32) * v
        return mx.lax.dot_general(mnp.reshape(d, (6, 1, 6)), b, (((2,), (1,)), ((), ())))
    v = RNG.standard_normal(6).astype(np.float32)
    b = RNG.standard_normal((4, 6, 5)).astype(np.float32)
    g = mx.make_graph(f)(v, b)
    assert _dots(g) == 0
    got = np.asarray(mx.jit(f)(v, b))
    want = np.einsum("ij,kjl->ikl", np.diag(v).reshape(6, 6), b).reshape(6, 1, 4, 5)
    np.testing.assert_allclose(got, want, rtol=1e-6)
