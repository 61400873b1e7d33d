"""cumsum/cumprod/cummax/cummin, sort/argsort and the along-axis gather/scatter: values vs
NumPy, derivatives vs float64 central differences, grad of grad, vmap vs a loop, jit."""
import numpy as np
import pytest
from fdcheck import fd_check as _fd_check

import mirax as mx
import mirax.numpy as mnp
from mirax.ops import cumulative as C
from mirax.ops import sort as S

RNG = np.random.RandomState(0)


def _np_cum(fn, x, axis, reverse):
    if reverse:
        return np.flip(fn(np.flip(x, axis), axis=axis), axis)
    return fn(x, axis=axis)


NP_CUM = {C.cumsum: np.cumsum, C.cumprod: np.cumprod,
          C.cummax: np.maximum.accumulate, C.cummin: np.minimum.accumulate}


def fd_check(f, args, **tol):
    _fd_check(f, args, RNG, **tol)


@pytest.mark.parametrize("op", list(NP_CUM), ids=lambda o: o.__name__)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cumulative_values(op, reverse, axis):
    x = RNG.randn(3, 4, 2).astype(np.float32)
    np.testing.assert_allclose(np.asarray(op(x, axis, reverse)),
                               _np_cum(NP_CUM[op], x, axis, reverse), rtol=1e-6)
    xi = RNG.randint(-3, 4, (5, 3)).astype(np.int32)
    out = op(xi, 0, reverse)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), _np_cum(NP_CUM[op], xi, 0, reverse))


@pytest.mark.parametrize("op", list(NP_CUM), ids=lambda o: o.__name__)
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative_derivatives(op, reverse):
    x = RNG.randn(3, 5) + 0.1 * np.arange(5)  # no ties
    w = RNG.randn(3, 5)
    fd_check(lambda z: (op(z, 1, reverse) * w).sum(), [x])


@pytest.mark.parametrize("reverse", [False, True])
def test_cumprod_zeros_exact(reverse):
    x = np.array([2.0, 0.0, 3.0, 0.0, 0.5, -1.5])
    g = np.asarray(mx.grad(lambda z: C.cumprod(z, 0, reverse).sum())(mx.asarray(x)))
    # exact gradient: d/dx_j sum_i prod_{k<=i} x_k = sum_{i>=j} prod_{k<=i, k!=j} x_k
    n = len(x)
    want = np.zeros(n)
    for j in range(n):
        for i in range(n):
            rng = range(i, n) if reverse else range(i + 1)
            if j in rng:
                want[j] += np.prod([x[k] for k in rng if k != j])
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, want, rtol=1e-12)
    fd_check(lambda z: (C.cumprod(z, 0, reverse) * np.arange(1.0, 7.0)).sum(), [x])


def test_cumprod_grad_of_grad_with_zeros():
    x = np.array([[1.5, 0.0, -2.0, 0.7], [0.0, 0.0, 1.2, 3.0]])
    w = RNG.randn(2, 4)

    def f(z):
        return (C.cumprod(z, 1) * w).sum()
    g = mx.grad(f)
    v = RNG.randn(2, 4)
    hv = np.asarray(mx.jvp(g, (mx.asarray(x),), (mx.asarray(v),))[1])
    eps = 1e-6
    num = (np.asarray(g(mx.asarray(x + eps * v))) - np.asarray(g(mx.asarray(x - eps * v)))) \
        / (2 * eps)
    np.testing.assert_allclose(hv, num, rtol=1e-6, atol=1e-8)
    hv2 = np.asarray(mx.grad(lambda z: (g(z) * v).sum())(mx.asarray(x)))  # reverse over reverse
    np.testing.assert_allclose(hv2, num, rtol=1e-6, atol=1e-8)


def test_cummax_ties_split_evenly():
    x = mx.asarray(np.array([1.0, 1.0, 0.0, 2.0, 2.0]))
    g = np.asarray(mx.grad(lambda z: C.cummax(z, 0).sum())(x))
    # out = [1, 1, 1, 2, 2]: out_0 <- x0; out_1, out_2 <- (x0 + x1)/2; out_3 <- x3;
    # out_4 <- (x3 + x4)/2
    np.testing.assert_allclose(g, [2.0, 1.0, 0.0, 1.5, 0.5])
    _, t = mx.jvp(lambda z: C.cummax(z, 0), (x,), (mx.asarray(np.arange(5.0)),))
    np.testing.assert_allclose(np.asarray(t), [0.0, 0.5, 0.5, 3.0, 3.5])


@pytest.mark.parametrize("op", list(NP_CUM), ids=lambda o: o.__name__)
def test_cumulative_vmap_and_jit(op):
    x = RNG.randn(4, 3, 5).astype(np.float32)
    out = mx.vmap(lambda z: op(z, 1, True), in_axes=1)(x)
    want = np.stack([np.asarray(op(x[:, i], 1, True)) for i in range(3)])
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)
    jitted = mx.jit(lambda z: op(z, 2))
    np.testing.assert_allclose(np.asarray(jitted(x)), np.asarray(op(x, 2)), rtol=1e-6)
    gv = mx.vmap(mx.grad(lambda z: op(z, 0).sum()))(x)
    gl = np.stack([np.asarray(mx.grad(lambda z: op(z, 0).sum())(x[i])) for i in range(4)])
    np.testing.assert_allclose(np.asarray(gv), gl, rtol=1e-6)


def test_numpy_cumsum_semantics():
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int8)
    out = mnp.cumsum(x)
    assert out.dtype == np.int8 and out.shape == (6,)  # as JAX (NumPy would give int64)
    np.testing.assert_array_equal(np.asarray(out), np.cumsum(x))
    assert mnp.cumsum(np.array([True, False, True])).dtype == np.int32
    assert mnp.cumprod(np.array([1, 2], np.uint8)).dtype == np.uint8
    assert mnp.cumsum(x, axis=1, dtype=mnp.float32).dtype == np.float32
    np.testing.assert_array_equal(np.asarray(mnp.cumprod(x, axis=0)), np.cumprod(x, axis=0))
    assert mnp.cumsum(mnp.ones(3, mnp.float32)).dtype == np.float32
    np.testing.assert_array_equal(
        np.asarray(mnp.cumulative_sum(np.arange(3.0), include_initial=True)), [0, 0, 1, 3])


@pytest.mark.slow
def test_numpy_cumsum_dtypes_match_jax():
    jnp = pytest.importorskip("jax.numpy")
    for dt in (np.int8, np.int16, np.uint8, np.bool_, np.float16, np.float32):
        a = np.ones((2, 3), dt)
        assert mnp.cumsum(a, 1).dtype == jnp.cumsum(a, 1).dtype


# --- sort -----------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_sort_values(axis):
    x = RNG.randint(0, 4, (5, 6)).astype(np.float32)  # many ties: stability matters
    np.testing.assert_array_equal(np.asarray(S.sort(x, axis)), np.sort(x, axis))
    np.testing.assert_array_equal(np.asarray(S.argsort(x, axis)),
                                  np.argsort(x, axis, kind="stable"))
    np.testing.assert_array_equal(np.asarray(S.sort(x, axis, descending=True)),
                                  np.flip(np.sort(x, axis), axis))


def test_argsort_descending_stable():
    x = np.array([3.0, 1.0, 3.0, 2.0, 1.0])
    want = sorted(range(5), key=lambda i: -x[i])  # Python's sort is stable
    np.testing.assert_array_equal(np.asarray(S.argsort(x, descending=True)), want)
    np.testing.assert_array_equal(np.asarray(mnp.argsort(x, descending=True)), want)


def test_sort_multi_operand():
    k1 = RNG.randint(0, 3, (4, 7))
    k2 = RNG.randn(4, 7)
    v = RNG.randn(4, 7)
    a, b, c = S.sort([k1, k2, v], axis=1, num_keys=2)
    perm = np.lexsort((k2, k1), axis=1)
    for got, arr in zip((a, b, c), (k1, k2, v)):
        np.testing.assert_array_equal(np.asarray(got), np.take_along_axis(arr, perm, 1))


def test_numpy_sort_flatten_and_nan():
    x = np.array([[3.0, np.nan], [1.0, 2.0]])
    np.testing.assert_array_equal(np.asarray(mnp.sort(x, axis=None)), np.sort(x, axis=None))
    np.testing.assert_array_equal(np.asarray(mnp.argsort(x, axis=None)),
                                  np.argsort(x, axis=None, kind="stable"))
    v = np.array([0.5, 2.0, 9.0])
    a = np.array([1.0, 2.0, 3.0])
    for side in ("left", "right"):
        np.testing.assert_array_equal(np.asarray(mnp.searchsorted(a, v, side=side)),
                                      np.searchsorted(a, v, side=side))


@pytest.mark.parametrize("descending", [False, True])
def test_sort_derivatives(descending):
    x = RNG.randn(3, 6)
    w = RNG.randn(3, 6)
    fd_check(lambda z: (S.sort(z, 1, descending=descending) * w).sum(), [x])
    # carried operand: the values follow the keys' permutation
    keys = RNG.randn(3, 6)
    fd_check(lambda z: (S.sort([keys, z], 1)[1] * w).sum(), [x])
    # grad of grad: sort is piecewise linear, so d2 of sum(sort(x)^2 * w) = 2 w (permuted)
    g = mx.grad(lambda z: (S.sort(z, 1) ** 2 * w).sum())
    h = np.asarray(mx.grad(lambda z: g(z).sum())(mx.asarray(x)))
    perm = np.argsort(x, 1, kind="stable")
    want = np.zeros_like(x)
    np.put_along_axis(want, perm, 2 * w, 1)
    np.testing.assert_allclose(h, want, rtol=1e-12)


def test_sort_vmap_and_jit():
    x = RNG.randn(4, 3, 5).astype(np.float32)
    out = mx.vmap(lambda z: S.sort(z, 0), in_axes=2)(x)
    np.testing.assert_array_equal(np.asarray(out),
                                  np.stack([np.sort(x[:, :, i], 0) for i in range(5)]))
    idx = mx.vmap(lambda z: S.argsort(z, 1), in_axes=0, out_axes=1)(x)
    np.testing.assert_array_equal(np.asarray(idx),
                                  np.stack([np.argsort(x[i], 1, kind="stable")
                                            for i in range(4)], 1))
    np.testing.assert_array_equal(np.asarray(mx.jit(lambda z: S.sort(z, 1))(x)), np.sort(x, 1))
    gv = mx.vmap(mx.grad(lambda z: (S.sort(z, 0) * np.arange(3.0)[:, None]).sum()))(x)
    assert gv.shape == x.shape


def test_gather_scatter_adjoint_and_vmap():
    x = RNG.randn(4, 5)
    idx = RNG.randint(0, 5, (4, 7)).astype(np.int32)
    out = S.gather_along_axis(x, idx, 1)
    np.testing.assert_array_equal(np.asarray(out), np.take_along_axis(x, idx, 1))
    u = RNG.randn(4, 7)
    sc = np.asarray(S.scatter_add_along_axis(u, idx, 1, 5))
    # <gather(x), u> == <x, scatter(u)>
    np.testing.assert_allclose((np.asarray(out) * u).sum(), (x * sc).sum(), rtol=1e-12)
    fd_check(lambda z: (S.gather_along_axis(z, idx, 1) * u).sum(), [x])
    fd_check(lambda z: (S.scatter_add_along_axis(z, idx, 1, 5) * x).sum(), [u])
    vm = mx.vmap(lambda a, i: S.gather_along_axis(a, i, 0))(x, idx)
    np.testing.assert_array_equal(np.asarray(vm), np.take_along_axis(x, idx, 1))
    vm2 = mx.vmap(lambda i: S.scatter_add_along_axis(u[0], i, 0, 5))(idx)
    np.testing.assert_allclose(np.asarray(vm2),
                               [np.asarray(S.scatter_add_along_axis(u[0], i, 0, 5))
                                for i in idx])


def test_errors():
    with pytest.raises(ValueError, match="cumsum"):
        C.cumsum(np.ones((2, 3)), 2)
    with pytest.raises(ValueError, match="sort"):
        S.sort([np.ones(3), np.ones(4)])
    with pytest.raises(TypeError, match="gather_along_axis"):
        S.gather_along_axis(np.ones(3), np.ones(3), 0)
