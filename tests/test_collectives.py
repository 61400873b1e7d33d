"""Collectives over named axes (mirax/ops/collective.py) under vmap(axis_name=): values,
jvp, grad outside and inside the map, jit in both orders, several axis names; JAX's
vmap(axis_name=) on the CPU is the oracle (its rules are the contract), NumPy where JAX
cannot say."""
import numpy as np
import pytest

import mirax as mx

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

N = 4


@pytest.fixture(autouse=True)
def _x64():
    jax.config.update("jax_enable_x64", True)   # (conftest restores it after each test)
    yield
PERM = ((0, 1), (1, 2), (2, 3), (3, 0))
PARTIAL = ((0, 1), (1, 2), (2, 0))   # member 3 receives nothing (zeros); JAX's vmap wants
# a full permutation, so partial ones are checked against NumPy
NO_JAX_GRAD = {"pmax", "pmin"}        # JAX has no derivative for them: finite differences
NO_JAX_INSIDE = {"all_to_all", "all_to_all_tiled"}   # JAX's vmap-of-grad fails on them

CASES = {
    "psum": lambda lax, a: lax.psum(a, "i"),
    "pmean": lambda lax, a: lax.pmean(a, "i"),
    "pmax": lambda lax, a: lax.pmax(a, "i"),
    "pmin": lambda lax, a: lax.pmin(a, "i"),
    "psum_mixed": lambda lax, a: lax.psum(a, "i") * a,
    "all_gather": lambda lax, a: lax.all_gather(a, "i"),
    "all_gather_axis1": lambda lax, a: lax.all_gather(a, "i", axis=1),
    "all_gather_tiled": lambda lax, a: lax.all_gather(a, "i", axis=1, tiled=True),
    "psum_scatter": lambda lax, a: lax.psum_scatter(a, "i"),
    "psum_scatter_tiled": lambda lax, a: lax.psum_scatter(a, "i", scatter_dimension=1,
                                                          tiled=True),
    "ppermute": lambda lax, a: lax.ppermute(a, "i", PERM),
    "all_to_all": lambda lax, a: lax.all_to_all(a, "i", 0, 1),
    "all_to_all_tiled": lambda lax, a: lax.all_to_all(a, "i", 1, 0, tiled=True),
    "axis_index": lambda lax, a: a * lax.axis_index("i"),
}


def _x(seed=0):
    return np.random.RandomState(seed).randn(N, 4, 8)


def _both(name):
    f = CASES[name]
    return (mx.vmap(lambda a: f(mx.lax, a), axis_name="i"),
            jax.vmap(lambda a: f(jax.lax, a), axis_name="i"))


@pytest.mark.parametrize("name", list(CASES))
def test_values_match_jax(name):
    m, j = _both(name)
    x = _x()
    np.testing.assert_allclose(np.asarray(m(x)), np.asarray(j(x)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(set(CASES) - NO_JAX_GRAD))
def test_jvp_and_grad_outside_match_jax(name):
    m, j = _both(name)
    x, t = _x(1), _x(2)
    w = np.random.RandomState(3).randn(*np.shape(j(x)))
    mo, mt = mx.jvp(m, (x,), (t,))
    jo, jt = jax.jvp(j, (x,), (t,))
    np.testing.assert_allclose(np.asarray(mt), np.asarray(jt), rtol=1e-12, atol=1e-12)
    gm = mx.grad(lambda x: (m(x) * w).sum())(x)
    gj = jax.grad(lambda x: (j(x) * w).sum())(x)
    np.testing.assert_allclose(np.asarray(gm), np.asarray(gj), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(set(CASES) - NO_JAX_GRAD - NO_JAX_INSIDE))
def test_grad_inside_matches_jax(name):
    """grad inside the map: psum's transpose is psum, all_gather's is psum_scatter, ...
    (JAX's conventions)."""
    f = CASES[name]
    w = np.random.RandomState(4).randn(*np.shape(jax.vmap(lambda a: f(jax.lax, a),
                                                          axis_name="i")(_x()))[1:])
    gm = mx.vmap(mx.grad(lambda a: (f(mx.lax, a) * w).sum()), axis_name="i")(_x())
    gj = jax.vmap(jax.grad(lambda a: (f(jax.lax, a) * w).sum()), axis_name="i")(_x())
    np.testing.assert_allclose(np.asarray(gm), np.asarray(gj), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["pmax", "pmin"])
def test_pmax_pmin_derivatives_vs_central_differences(name):
    """pmax's tangent is the attaining member's (no ties in random data)."""
    m = mx.vmap(lambda a: CASES[name](mx.lax, a) * a, axis_name="i")
    x, t = _x(7), _x(8)
    w = np.random.RandomState(9).randn(*x.shape)
    loss = lambda x: float((np.asarray(m(x)) * w).sum())  # noqa: E731
    eps = 1e-6
    fd = (loss(x + eps * t) - loss(x - eps * t)) / (2 * eps)
    g = np.asarray(mx.grad(lambda x: (m(x) * w).sum())(x))
    _, jt = mx.jvp(lambda x: (m(x) * w).sum(), (x,), (t,))
    np.testing.assert_allclose((g * t).sum(), fd, rtol=1e-6)
    np.testing.assert_allclose(float(jt), fd, rtol=1e-6)
    # inside the map, with the psum-transpose convention: the members' cotangents summed
    gi = mx.vmap(mx.grad(lambda a: (CASES[name](mx.lax, a) * w[0]).sum()), axis_name="i")(x)
    ext = x.max(0) if name == "pmax" else x.min(0)
    np.testing.assert_allclose(np.asarray(gi), (x == ext) * N * w[0])


@pytest.mark.parametrize("name", sorted(NO_JAX_INSIDE) + ["ppermute_partial"])
def test_linear_grad_inside_is_the_transpose(name):
    """For a linear collective, grad inside the map of <w, f(a)> is the transpose applied
    to w on every member: the grad outside of the members' summed losses."""
    f = CASES.get(name) or (lambda lax, a: lax.ppermute(a, "i", PARTIAL))
    m = mx.vmap(lambda a: f(mx.lax, a), axis_name="i")
    w = np.random.RandomState(10).randn(*np.shape(m(_x()))[1:])
    gi = mx.vmap(mx.grad(lambda a: (f(mx.lax, a) * w).sum()), axis_name="i")(_x())
    go = mx.grad(lambda x: (m(x) * w).sum())(_x())
    np.testing.assert_allclose(np.asarray(gi), np.asarray(go), rtol=1e-12)


@pytest.mark.parametrize("name", ["psum", "all_gather_tiled", "psum_scatter", "ppermute",
                                  "all_to_all", "axis_index"])
def test_jit_in_both_orders(name):
    f = CASES[name]
    ref = mx.vmap(lambda a: f(mx.lax, a), axis_name="i")(_x())
    a = mx.jit(mx.vmap(lambda a: f(mx.lax, a), axis_name="i"))(_x())
    b = mx.vmap(mx.jit(lambda a: f(mx.lax, a)), axis_name="i")(_x())
    np.testing.assert_allclose(np.asarray(a), np.asarray(ref), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(b), np.asarray(ref), rtol=1e-12)


def test_numpy_references():
    x = _x()
    v = lambda f: np.asarray(mx.vmap(f, axis_name="i")(x))  # noqa: E731
    np.testing.assert_allclose(v(lambda a: mx.lax.psum(a, "i")),
                               np.broadcast_to(x.sum(0), x.shape))
    np.testing.assert_allclose(v(lambda a: mx.lax.all_gather(a, "i")),
                               np.broadcast_to(x, (N,) + x.shape))
    want = np.zeros_like(x)
    for s, d in PARTIAL:
        want[d] = x[s]
    np.testing.assert_allclose(v(lambda a: mx.lax.ppermute(a, "i", PARTIAL)), want)
    # all_to_all untiled: out[j][k] = x[k][j] (split axis 0 -> new concat axis 0)
    np.testing.assert_allclose(v(lambda a: mx.lax.all_to_all(a, "i", 0, 0)),
                               x.transpose(1, 0, 2))
    np.testing.assert_allclose(v(lambda a: mx.lax.psum_scatter(a, "i")), x.sum(0))


def test_unmapped_operands_and_constants():
    x = _x()
    out = mx.vmap(lambda a: mx.lax.psum(1, "i") + 0 * a.sum(), axis_name="i")(x)
    np.testing.assert_array_equal(np.asarray(out), np.full(N, N))
    c = np.arange(3.0)
    out = mx.vmap(lambda a: mx.lax.psum(c, "i"), in_axes=0, axis_name="i")(x)
    np.testing.assert_allclose(np.asarray(out), np.broadcast_to(N * c, (N, 3)))


def test_two_axis_names():
    w = np.random.RandomState(5).randn(2, 3, 4)

    def both(f):
        m = mx.vmap(mx.vmap(lambda a: f(mx.lax, a), axis_name="b"), axis_name="a")(w)
        j = jax.vmap(jax.vmap(lambda a: f(jax.lax, a), axis_name="b"), axis_name="a")(w)
        np.testing.assert_allclose(np.asarray(m), np.asarray(j), rtol=1e-12)
    both(lambda lax, a: lax.psum(a, ("a", "b")))
    both(lambda lax, a: lax.pmax(a, ("b", "a")))
    both(lambda lax, a: lax.pmean(a, ("a", "b")) * a)
    both(lambda lax, a: a * lax.axis_index(("a", "b")))
    both(lambda lax, a: lax.psum(a, "a") - lax.psum(a, "b"))
    m = mx.vmap(mx.vmap(lambda a: mx.lax.all_gather(a, ("a", "b")), axis_name="b"),
                axis_name="a")(w)
    np.testing.assert_allclose(np.asarray(m), np.broadcast_to(w.reshape(6, 4), (2, 3, 6, 4)))
    z = np.random.RandomState(6).randn(2, 3, 12)
    m = mx.vmap(mx.vmap(lambda a: mx.lax.psum_scatter(a, ("a", "b"), tiled=True),
                        axis_name="b"), axis_name="a")(z)
    np.testing.assert_allclose(np.asarray(m), z.sum((0, 1)).reshape(2, 3, 2), rtol=1e-12)


def test_inside_scan_and_cond():
    x = np.arange(12.0).reshape(4, 3)

    def body(c, a):
        return c + mx.lax.psum(a, "i"), c
    out = mx.vmap(lambda a: mx.lax.scan(body, 0.0, a)[0], axis_name="i")(x)
    np.testing.assert_allclose(np.asarray(out), np.full(4, x.sum()))
    out = mx.vmap(lambda a: mx.lax.cond(a > 1, lambda v: mx.lax.psum(v, "i"), lambda v: v, a),
                  axis_name="i")(np.arange(4.0))
    np.testing.assert_allclose(np.asarray(out), [0.0, 1.0, 6.0, 6.0])


def test_second_derivative_through_psum():
    x = _x()[:, 0, :3]
    f = mx.vmap(lambda a: (mx.lax.psum(a ** 2, "i") * a).sum(), axis_name="i")
    g = jax.vmap(lambda a: (jax.lax.psum(a ** 2, "i") * a).sum(), axis_name="i")
    hm = mx.jacfwd(mx.grad(lambda x: f(x).sum()))(x)
    hj = jax.jacfwd(jax.grad(lambda x: g(x).sum()))(x)
    np.testing.assert_allclose(np.asarray(hm), np.asarray(hj), rtol=1e-10, atol=1e-12)


def test_errors_name_the_collective():
    with pytest.raises(NameError, match="psum: unbound axis name 'j'"):
        mx.vmap(lambda a: mx.lax.psum(a, "j"), axis_name="i")(_x())
    with pytest.raises(ValueError, match=r"psum_scatter: dimension 1 of f64\[4,8\] must be 4"):
        mx.vmap(lambda a: mx.lax.psum_scatter(a, "i", scatter_dimension=1), axis_name="i")(_x())
    with pytest.raises(ValueError, match="ppermute: perm"):
        mx.vmap(lambda a: mx.lax.ppermute(a, "i", [(0, 1), (1, 1)]), axis_name="i")(_x())
    with pytest.raises(ValueError, match="all_to_all: split axis 1"):
        mx.vmap(lambda a: mx.lax.all_to_all(a, "i", 1, 0), axis_name="i")(np.ones((4, 3, 5)))
