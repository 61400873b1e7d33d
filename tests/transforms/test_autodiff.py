"""Transform composition in every order, derivative conventions (API.md), comparisons with
JAX, and mx.testing.check_grads."""
import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax.testing import check_grads, numerical_grad

X = np.array([0.3, -1.2, 2.0], np.float64)


def f(x):
    return mnp.sum(mnp.sin(x) * x ** 3)


def d1(x):  # derivatives of sin(x) x^3
    return np.cos(x) * x ** 3 + 3 * x ** 2 * np.sin(x)


def d2(x):
    return -np.sin(x) * x ** 3 + 6 * x ** 2 * np.cos(x) + 6 * x * np.sin(x)


def d3(x):
    return (-np.cos(x) * x ** 3 - 9 * x ** 2 * np.sin(x) + 18 * x * np.cos(x)
            + 6 * np.sin(x))


def test_grad_of_grad_of_grad():
    g3 = mx.grad(mx.grad(mx.grad(lambda x: mnp.sin(x) * x ** 3)))
    for x in X:
        np.testing.assert_allclose(g3(np.array(x)), d3(x), rtol=1e-10)
    s = lambda x: mnp.sum(mx.grad(f)(x))  # noqa: E731
    np.testing.assert_allclose(mx.grad(s)(X), d2(X), rtol=1e-10)


def test_jvp_of_grad_and_jit_compositions():
    ones = np.ones(3)
    np.testing.assert_allclose(mx.jvp(mx.grad(f), (X,), (ones,))[1], d2(X), rtol=1e-10)
    np.testing.assert_allclose(mx.grad(mx.jit(f))(X), d1(X), rtol=1e-10)
    np.testing.assert_allclose(mx.jit(mx.grad(f))(X), d1(X), rtol=1e-10)
    np.testing.assert_allclose(mx.jit(mx.grad(mx.jit(f)))(X), d1(X), rtol=1e-10)
    np.testing.assert_allclose(mx.grad(lambda x: mnp.sum(mx.jit(mx.grad(f))(x)))(X), d2(X),
                               rtol=1e-10)
    np.testing.assert_allclose(mx.jit(mx.vmap(mx.grad(lambda x: mnp.sin(x) * x ** 3)))(X),
                               d1(X), rtol=1e-10)
    np.testing.assert_allclose(mx.vmap(mx.jit(mx.grad(lambda x: mnp.sin(x) * x ** 3)))(X),
                               d1(X), rtol=1e-10)


def _mlp(params, x):
    h = mnp.tanh(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def _params(rng, dtype=np.float32):
    return {"w1": rng.standard_normal((3, 4)).astype(dtype),
            "b1": rng.standard_normal(4).astype(dtype),
            "w2": rng.standard_normal((4, 2)).astype(dtype),
            "b2": rng.standard_normal(2).astype(dtype)}


def test_per_example_grads_vs_loop():
    rng = np.random.default_rng(0)
    p = _params(rng)
    xs = rng.standard_normal((5, 3)).astype(np.float32)
    loss = lambda p, x: mnp.sum(_mlp(p, x) ** 2)  # noqa: E731
    batched = mx.vmap(mx.grad(loss), in_axes=(None, 0))(p, xs)
    for i in range(5):
        gi = mx.grad(loss)(p, xs[i])
        for k in p:
            np.testing.assert_allclose(batched[k][i], gi[k], rtol=1e-5, atol=1e-6)


def test_mlp_jacobians_vs_jax():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    rng = np.random.default_rng(1)
    p = _params(rng)
    x = rng.standard_normal(3).astype(np.float32)

    def jmlp(params, x):
        return jnp.tanh(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]

    for jac_m, jac_j in ((mx.jacfwd, jax.jacfwd), (mx.jacrev, jax.jacrev)):
        got = jac_m(_mlp, argnums=(0, 1))(p, x)
        want = jax.jit(jac_j(jmlp, argnums=(0, 1)))(p, x)
        for k in p:
            np.testing.assert_allclose(got[0][k], want[0][k], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
    # has_aux on grad, value_and_grad
    loss = lambda p: (mnp.sum(_mlp(p, x) ** 2), {"out": _mlp(p, x)})  # noqa: E731
    (v, aux), g = mx.value_and_grad(loss, has_aux=True)(p)
    jl = lambda p: (jnp.sum(jmlp(p, x) ** 2), {"out": jmlp(p, x)})  # noqa: E731
    (jv, jaux), jg = jax.jit(jax.value_and_grad(jl, has_aux=True))(p)
    np.testing.assert_allclose(v, jv, rtol=1e-5)
    np.testing.assert_allclose(aux["out"], jaux["out"], rtol=1e-5)
    for k in p:
        np.testing.assert_allclose(g[k], jg[k], rtol=1e-5, atol=1e-6)


def test_hessian_and_hvp_vs_jax():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = X.astype(np.float32)

    def jf(x):
        return jnp.sum(jnp.sin(x) * x ** 3) + jnp.prod(jnp.tanh(x))

    def mf(x):
        return f(x) + mnp.prod(mnp.tanh(x))

    np.testing.assert_allclose(mx.hessian(mf)(x), jax.jit(jax.hessian(jf))(x), rtol=1e-5,
                               atol=1e-5)
    v = np.array([1.0, -2.0, 0.5], np.float32)
    want = jax.jit(lambda x, v: jax.jvp(jax.grad(jf), (x,), (v,))[1])(x, v)
    np.testing.assert_allclose(mx.hvp(mf, (x,), (v,))[0], want, rtol=1e-5, atol=1e-5)


# --- derivative conventions (API.md) ------------------------------------------------------
def test_where_sqrt_finite_at_zero_and_negative():
    g = mx.grad(lambda x: mnp.where(x > 0, mnp.sqrt(x), 0.0))
    for x in (0.0, -1.0):
        assert np.isfinite(float(g(x))) and float(g(x)) == 0.0
    assert float(g(4.0)) == pytest.approx(0.25)
    gg = mx.grad(g)
    assert np.isfinite(float(gg(0.0)))


def test_abs_sign_relu_at_zero_and_max_ties():
    assert float(mx.grad(mnp.abs)(0.0)) == 0.0
    assert float(mx.grad(mnp.sign)(0.0)) == 0.0
    assert float(mx.grad(lambda x: mnp.maximum(x, 0.0))(0.0)) == 0.5  # max tie splits
    g = mx.grad(lambda x, y: mnp.maximum(x, y), argnums=(0, 1))(1.0, 1.0)
    assert (float(g[0]), float(g[1])) == (0.5, 0.5)
    g = mx.grad(lambda x, y: mnp.minimum(x, y), argnums=(0, 1))(2.0, 2.0)
    assert (float(g[0]), float(g[1])) == (0.5, 0.5)
    gm = mx.grad(lambda x: mnp.max(x))(mnp.array([1.0, 3.0, 3.0]))
    np.testing.assert_allclose(gm, [0, 0.5, 0.5])


def test_int_inputs_carry_no_tangent():
    fn = lambda x, n: x * n  # noqa: E731
    out, t = mx.jvp(fn, (2.0, 3), (1.0, 0))
    assert float(t) == 3.0
    with pytest.raises(TypeError, match="float"):
        mx.grad(fn, argnums=1)(2.0, 3)
    np.testing.assert_allclose(mx.jacfwd(lambda x: x * mnp.arange(3))(1.0), [0, 1, 2])


# --- mx.testing --------------------------------------------------------------------------
def test_check_grads_passes_up_to_order_3():
    check_grads(f, (X,), order=3)
    check_grads(lambda a, b: {"p": mnp.tanh(a) @ b, "s": a.sum()},
                (X, np.ones((3, 2))), order=2)
    g = numerical_grad(f, (X,))
    np.testing.assert_allclose(g[0], d1(X), rtol=1e-6)


def test_check_grads_failure_names_worst_entry():
    @mx.custom_jvp
    def wrong(x):
        return mnp.sin(x)

    wrong.defjvp(lambda p, t: (wrong(p[0]), mnp.cos(p[0]) * t[0] * mnp.array([1, 1, 1.1])))
    with pytest.raises(AssertionError) as e:
        check_grads(lambda y, x: wrong(x) * y, (2.0, X), order=1, modes=("fwd",))
    msg = str(e.value)
    assert "args[1]" in msg and "input index [2]" in msg and "output index [2]" in msg
    want = 2 * np.cos(X[2])
    assert repr(float(want)) in msg or f"{want:.6}"[:6] in msg
    with pytest.raises(ValueError, match="mode"):
        check_grads(f, (X,), modes=("bwd",))


@pytest.mark.parametrize("name", ["jacfwd", "jacrev", "hessian"])
def test_jacobians_with_aux(name):
    """has_aux: f returns (out, aux); the result is (jacobian, aux), aux not differentiated
    (it used to be ignored, differentiating the pair)."""
    x = np.array([0.3, -1.2, 2.0])

    def f(x):
        out = mnp.sum(mnp.sin(x) * x ** 2) if name == "hessian" else mnp.sin(x) * x ** 2
        return out, {"n": mnp.sum(x ** 2), "twice": x * 2}
    d1 = np.cos(x) * x ** 2 + 2 * x * np.sin(x)
    want = {"jacfwd": np.diag(d1), "jacrev": np.diag(d1),
            "hessian": np.diag(-np.sin(x) * x ** 2 + 4 * x * np.cos(x) + 2 * np.sin(x))}[name]
    for transform in (getattr(mx, name), lambda f, **k: mx.jit(getattr(mx, name)(f, **k))):
        jac, aux = transform(f, has_aux=True)(x)
        np.testing.assert_allclose(np.asarray(jac), want, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(np.asarray(aux["n"]), np.sum(x ** 2))
        np.testing.assert_allclose(np.asarray(aux["twice"]), 2 * x)
    if name != "hessian":
        jac, _ = getattr(mx, name)(f, has_aux=True, chunk_size=2)(x)
        np.testing.assert_allclose(np.asarray(jac), want, rtol=1e-12, atol=1e-12)


def test_linearize_matches_jvp_and_carries_aux():
    x, t = np.array([0.3, -1.2, 2.0]), np.array([1.0, 0.5, -2.0])
    out, f_jvp = mx.linearize(lambda x: mnp.sin(x) * x ** 3, x)
    np.testing.assert_allclose(np.asarray(out), np.sin(x) * x ** 3, rtol=1e-12)
    for tangent in (t, 2 * t):
        np.testing.assert_allclose(np.asarray(f_jvp(tangent)), d1(x) * tangent, rtol=1e-12)
    params = {"w": np.array([1.0, 2.0]), "b": np.array(0.5)}

    def g(p, x):
        y = mnp.sum(p["w"] * x) + p["b"]
        return y ** 2, {"y": y}
    xx = np.array([3.0, -1.0])
    out, g_jvp, aux = mx.linearize(g, params, xx, has_aux=True)
    y = 1.0 * 3.0 + 2.0 * -1.0 + 0.5
    np.testing.assert_allclose(np.asarray(out), y ** 2)
    np.testing.assert_allclose(np.asarray(aux["y"]), y)
    dp = {"w": np.array([1.0, 0.0]), "b": np.array(1.0)}
    np.testing.assert_allclose(np.asarray(g_jvp(dp, np.zeros(2))), 2 * y * (3.0 + 1.0))
