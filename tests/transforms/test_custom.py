"""custom_jvp / custom_vjp (JAX semantics, plus forward mode through custom_vjp's rule) and
stop_gradient, in every transform and under jit."""
import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax.interpreters.vjp import vjp_flat

X = np.array([0.3, -1.2, 2.0], np.float32)


# --- custom_jvp -----------------------------------------------------------------------
@mx.custom_jvp
def log1pexp(x):
    return mnp.log(1.0 + mnp.exp(x))


@log1pexp.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log1pexp(x), t * (1.0 - 1.0 / (1.0 + mnp.exp(x)))  # the stable form


def test_custom_jvp_rule_is_used_in_every_mode():
    x = mx.asarray(100.0)
    assert float(mx.grad(log1pexp)(x)) == 1.0          # naive rule gives nan
    assert float(mx.jvp(log1pexp, (x,), (1.0,))[1]) == 1.0
    assert float(mx.jit(mx.grad(log1pexp))(x)) == 1.0
    assert float(mx.grad(mx.jit(log1pexp))(x)) == 1.0
    np.testing.assert_allclose(mx.vmap(mx.grad(log1pexp))(mnp.array([0.0, 100.0])), [0.5, 1])
    np.testing.assert_allclose(mx.grad(mx.grad(log1pexp))(0.0), 0.25, rtol=1e-6)


def test_custom_jvp_rule_only_not_body():
    @mx.custom_jvp
    def f(x):
        return mnp.sin(x)

    f.defjvp(lambda p, t: (f(p[0]), 3.0 * t[0]))
    assert float(f(1.0)) == pytest.approx(np.sin(1.0))
    assert float(mx.grad(f)(1.0)) == 3.0
    assert float(mx.jvp(f, (1.0,), (2.0,))[1]) == 6.0
    np.testing.assert_allclose(mx.jacrev(mx.vmap(f))(mnp.ones(2)), 3 * np.eye(2))
    np.testing.assert_allclose(mx.jacfwd(mx.vmap(f))(mnp.ones(2)), 3 * np.eye(2))
    np.testing.assert_allclose(mx.vmap(mx.grad(f))(mnp.ones(2)), [3, 3])
    assert "custom_jvp_call" in str(mx.make_graph(f)(1.0))


def test_custom_jvp_nondiff_argnums_and_pytrees():
    from functools import partial

    @partial(mx.custom_jvp, nondiff_argnums=(0,))
    def app(fn, xs):
        return {"y": fn(xs["a"]) * xs["b"]}

    @app.defjvp
    def app_jvp(fn, primals, tangents):
        (xs,), (ts,) = primals, tangents
        return app(fn, xs), {"y": 10.0 * ts["a"] + 20.0 * ts["b"]}

    xs = {"a": mnp.array(1.0), "b": mnp.array(2.0)}
    g = mx.grad(lambda xs: app(mnp.sin, xs)["y"])(xs)
    assert float(g["a"]) == 10.0 and float(g["b"]) == 20.0
    out, t = mx.jvp(lambda xs: app(mnp.sin, xs), (xs,), ({"a": 1.0, "b": 0.0},))
    assert float(t["y"]) == 10.0
    assert float(out["y"]) == pytest.approx(2 * np.sin(1.0))


def test_custom_jvp_kwargs_resolved():
    @mx.custom_jvp
    def f(x, scale=2.0):
        return x * scale

    f.defjvp(lambda p, t: (f(*p), t[0] * p[1] + t[1] * p[0]))
    assert float(mx.grad(lambda x: f(x, scale=5.0))(1.0)) == 5.0


def test_custom_jvp_vs_jax():
    jax = pytest.importorskip("jax")

    @jax.custom_jvp
    def jf(x):
        return jax.numpy.sin(x) * x

    jf.defjvp(lambda p, t: (jf(p[0]), jax.numpy.cos(p[0]) ** 2 * t[0]))

    @mx.custom_jvp
    def mf(x):
        return mnp.sin(x) * x

    mf.defjvp(lambda p, t: (mf(p[0]), mnp.cos(p[0]) ** 2 * t[0]))
    for order in range(1, 4):
        jg, mg = jf, mf
        for _ in range(order):
            jg, mg = jax.grad(jg), mx.grad(mg)
        np.testing.assert_allclose(float(mg(0.7)), float(jg(0.7)), rtol=1e-5, atol=1e-6)


# --- custom_vjp -----------------------------------------------------------------------
@mx.custom_vjp
def clip_gradient(lo, hi, x):
    return x


def _clip_fwd(lo, hi, x):
    return x, (lo, hi)


def _clip_bwd(res, g):
    lo, hi = res
    return (None, None, mnp.clip(g, lo, hi))


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


def test_custom_vjp_clip_gradient_vs_jax():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    @jax.custom_vjp
    def jclip(lo, hi, x):
        return x
    jclip.defvjp(lambda lo, hi, x: (x, (lo, hi)),
                 lambda res, g: (None, None, jnp.clip(g, *res)))

    f_m = lambda x: mnp.sum(clip_gradient(-0.5, 0.5, x * 3.0) ** 2)  # noqa: E731
    f_j = lambda x: jnp.sum(jclip(-0.5, 0.5, x * 3.0) ** 2)  # noqa: E731
    np.testing.assert_allclose(mx.grad(f_m)(X), jax.grad(f_j)(X), rtol=1e-6)
    np.testing.assert_allclose(mx.jit(mx.grad(f_m))(X), jax.grad(f_j)(X), rtol=1e-6)
    np.testing.assert_allclose(mx.grad(mx.jit(f_m))(X), jax.grad(f_j)(X), rtol=1e-6)
    np.testing.assert_allclose(mx.vmap(mx.grad(f_m))(np.stack([X, -X])),
                               jax.vmap(jax.grad(f_j))(np.stack([X, -X])), rtol=1e-6)


def test_custom_vjp_residuals_from_fwd_and_nondiff_argnums():
    from functools import partial
    calls = []

    @partial(mx.custom_vjp, nondiff_argnums=(1,))
    def scale(x, k):
        calls.append("fun")
        return x * k

    def fwd(x, k):
        calls.append("fwd")
        return x * k, mnp.cos(x)

    def bwd(k, res, g):
        calls.append("bwd")
        return (g * res * k,)

    scale.defvjp(fwd, bwd)
    assert float(scale(1.0, 2)) == 2.0 and calls == ["fun"]
    calls.clear()
    g = mx.grad(lambda x: scale(x, 2))(0.5)
    assert calls == ["fwd", "bwd"]
    assert float(g) == pytest.approx(2 * np.cos(0.5))


def test_custom_vjp_forward_mode_exact_rule():
    @mx.custom_vjp
    def f(x, y):
        return mnp.sin(x) * y

    f.defvjp(lambda x, y: (f(x, y), (x, y)),
             lambda r, g: (g * mnp.cos(r[0]) * r[1], g * mnp.sin(r[0])))
    _, t = mx.jvp(f, (0.4, 2.0), (1.0, 0.0))
    assert float(t) == pytest.approx(2 * np.cos(0.4), rel=1e-6)
    h = mx.hessian(lambda x: f(x, 2.0))(0.4)
    assert float(h) == pytest.approx(-2 * np.sin(0.4), rel=1e-5)
    hv = mx.hvp(lambda x: f(x, 2.0), (0.4,), (1.0,))
    assert float(hv[0]) == pytest.approx(-2 * np.sin(0.4), rel=1e-5)
    np.testing.assert_allclose(mx.jacfwd(mx.vmap(f))(mnp.ones(2), 2 * mnp.ones(2)),
                               2 * np.cos(1.0) * np.eye(2), rtol=1e-6)


def test_custom_vjp_pytree_output_and_bad_bwd():
    @mx.custom_vjp
    def f(x):
        return {"a": x * 2.0, "b": x}

    f.defvjp(lambda x: (f(x), None), lambda r, g: (g["a"] * 2.0 + g["b"],))
    assert float(mx.grad(lambda x: f(x)["a"] + f(x)["b"])(1.0)) == 3.0

    @mx.custom_vjp
    def bad(x):
        return x

    bad.defvjp(lambda x: (x, None), lambda r, g: g)  # not a tuple
    with pytest.raises(TypeError, match="bwd must return a tuple"):
        mx.grad(bad)(1.0)
    nodef = mx.custom_vjp(lambda x: x)
    with pytest.raises(AttributeError, match="defvjp"):
        nodef(1.0)


def test_custom_vjp_forward_mode_uses_the_rule():
    """jvp / jacfwd of a custom_vjp function follow its bwd rule (here deliberately not the
    body's derivative), equal to JAX's jacrev of the same function (JAX has no forward mode
    there)."""
    import jax

    def make(np_, custom_vjp):
        @custom_vjp
        def f(x, y):
            return np_.sin(x) * y

        f.defvjp(lambda x, y: (f(x, y), (x, y)), lambda r, g: (2.0 * g * r[1], 3.0 * g * r[0]))
        return f

    fm, fj = make(mnp, mx.custom_vjp), make(jax.numpy, jax.custom_vjp)
    x, y = np.array([0.5, 1.0], np.float32), np.array([2.0, -1.0], np.float32)
    for argnums in (0, 1, (0, 1)):
        want = jax.jacrev(fj, argnums)(x, y)
        for jac in (mx.jacfwd(fm, argnums), mx.jit(mx.jacfwd(fm, argnums))):
            np.testing.assert_allclose(np.asarray(jac(x, y)), np.asarray(want), rtol=1e-6)
    _, t = mx.jvp(fm, (x, y), (np.ones(2, np.float32), np.zeros(2, np.float32)))
    np.testing.assert_allclose(t, 2 * y, rtol=1e-6)
    loss_m = lambda v: mnp.sum(fm(v, y) ** 2)  # noqa: E731
    loss_j = lambda v: jax.numpy.sum(fj(v, y) ** 2)  # noqa: E731
    want = jax.jacrev(jax.jacrev(loss_j))(x)
    np.testing.assert_allclose(mx.jacfwd(mx.jacrev(loss_m))(x), want, rtol=1e-6)
    np.testing.assert_allclose(mx.hessian(loss_m)(x), want, rtol=1e-6)


# --- stop_gradient ----------------------------------------------------------------------
def test_stop_gradient_every_mode_and_pytree():
    f = lambda x: mnp.sum(mx.stop_gradient(x) * x)  # noqa: E731
    np.testing.assert_allclose(mx.grad(f)(X), X)
    np.testing.assert_allclose(mx.jvp(f, (X,), (np.ones(3, np.float32),))[1], X.sum())
    np.testing.assert_allclose(mx.jit(mx.grad(f))(X), X)
    np.testing.assert_allclose(mx.vmap(mx.grad(f))(np.stack([X, X])), np.stack([X, X]))
    assert float(mx.grad(mx.grad(f))(1.0)) == 0.0  # grad f = stop(x): constant (as JAX)
    t = mx.stop_gradient({"a": mnp.ones(2), "n": mnp.arange(3)})
    assert t["n"].dtype == mnp.int32
    _, bwd = vjp_flat(lambda x: [mx.stop_gradient(x)], [mnp.ones(2)])
    np.testing.assert_array_equal(bwd([mnp.ones(2)])[0], [0, 0])


def test_nondiff_argnames_name_positions():
    from functools import partial

    @partial(mx.custom_vjp, nondiff_argnames=("k",))
    def scale(x, k):
        return x * k

    scale.defvjp(lambda x, k: (x * k, mnp.cos(x)), lambda k, res, g: (g * res * k,))
    assert scale.nondiff_argnums == (1,)
    g = mx.grad(lambda x: scale(x, 2))(0.5)
    assert float(g) == pytest.approx(2 * np.cos(0.5))

    @partial(mx.custom_jvp, nondiff_argnames="fn")
    def app(fn, x):
        return fn(x)

    app.defjvp(lambda fn, p, t: (app(fn, *p), 3.0 * t[0]))
    assert float(mx.grad(lambda x: app(mnp.sin, x))(1.0)) == 3.0
    with pytest.raises(ValueError, match="'q' is not a parameter"):
        mx.custom_vjp(lambda x, k: x, nondiff_argnames=("q",))
