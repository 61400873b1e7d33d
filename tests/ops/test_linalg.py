"""Linear-algebra primitives and mirax.numpy.linalg: values vs NumPy, derivatives vs float64
central differences (eigh/svd on gauge-invariant functions), grad of grad, vmap vs a loop,
jit vs eager, and norm's zero gradient at 0."""
import numpy as np
import pytest
from fdcheck import fd_check as _fd_check

import mirax as mx
import mirax.numpy as mnp
from mirax.ops import linalg as L

RNG = np.random.RandomState(1)


def fd_check(f, args, **tol):
    _fd_check(f, args, RNG, **tol)


def hvp_check(f, x, rtol=1e-5, atol=1e-7, eps=1e-5):
    """Forward-over-reverse and reverse-over-reverse second derivatives vs differences of grad."""
    x = np.asarray(x, np.float64)
    v = RNG.randn(*x.shape)
    g = mx.grad(f)
    num = (np.asarray(g(mx.asarray(x + eps * v))) - np.asarray(g(mx.asarray(x - eps * v)))) \
        / (2 * eps)
    fwd = np.asarray(mx.jvp(g, (mx.asarray(x),), (mx.asarray(v),))[1])
    rev = np.asarray(mx.grad(lambda z: (g(z) * v).sum())(mx.asarray(x)))
    np.testing.assert_allclose(fwd, num, rtol=rtol, atol=atol)
    np.testing.assert_allclose(rev, num, rtol=rtol, atol=atol)


def _spd(*batch, n=4):
    a = RNG.randn(*batch, n, n)
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _sym_distinct(*batch, n=4):
    q, _ = np.linalg.qr(RNG.randn(*batch, n, n))
    w = np.sort(RNG.randn(*batch, n), -1) + np.arange(n)  # well separated
    return (q * w[..., None, :]) @ np.swapaxes(q, -1, -2)


# --- values -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values(dtype):
    tol = 1e-4 if dtype == np.float32 else 1e-10
    a = RNG.randn(2, 3, 4, 4).astype(dtype)
    b = RNG.randn(2, 3, 4, 2).astype(dtype)
    spd = _spd(2, n=4).astype(dtype)
    close = lambda x, y: np.testing.assert_allclose(np.asarray(x), y, rtol=tol, atol=tol)  # noqa
    close(L.inv(a), np.linalg.inv(a))
    close(L.solve(a, b), np.linalg.solve(a, b))
    close(L.det(a), np.linalg.det(a))
    sign, logdet = L.slogdet(a)
    close(sign, np.linalg.slogdet(a)[0])
    close(logdet, np.linalg.slogdet(a)[1])
    close(L.cholesky(spd), np.linalg.cholesky(spd))
    for out in (L.inv(a), L.cholesky(spd), L.eigh(spd)[1], L.svd(a)[0], L.qr(a)[0]):
        assert out.dtype == dtype
    w, v = L.eigh(spd)
    close(w, np.linalg.eigvalsh(spd))
    close((v * np.asarray(w)[..., None, :]) @ np.swapaxes(v, -1, -2), spd)
    for shape in ((5, 3), (3, 5), (2, 4, 4)):
        m = RNG.randn(*shape).astype(dtype)
        q, r = L.qr(m)
        close(np.asarray(q) @ np.asarray(r), m)
        u, s, vt = L.svd(m)
        close(s, np.linalg.svd(m, compute_uv=False))
        close((np.asarray(u) * np.asarray(s)[..., None, :]) @ np.asarray(vt), m)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a", [True, False])
@pytest.mark.parametrize("unit", [True, False])
def test_triangular_solve(left, lower, transpose_a, unit):
    a = _spd(2, n=4)
    b = RNG.randn(2, 4, 3) if left else RNG.randn(2, 3, 4)
    x = np.asarray(L.triangular_solve(a, b, left, lower, transpose_a, unit))
    m = np.tril(a) if lower else np.triu(a)
    if unit:
        m[..., range(4), range(4)] = 1
    m = np.swapaxes(m, -1, -2) if transpose_a else m
    np.testing.assert_allclose(m @ x if left else x @ m, b, atol=1e-10)
    fd_check(lambda p, q: (L.triangular_solve(p, q, left, lower, transpose_a, unit) ** 2).sum(),
             [a, b])


# --- first derivatives --------------------------------------------------------------------
W = RNG.randn(2, 4, 4)


@pytest.mark.parametrize("name,f,make", [
    ("inv", lambda a: (L.inv(a) * W).sum(), lambda: RNG.randn(2, 4, 4)),
    ("solve", lambda a: (L.solve(a, W[..., :2]) ** 2).sum(), lambda: RNG.randn(2, 4, 4)),
    ("det", lambda a: (L.det(a) * np.array([1.0, -2.0])).sum(), lambda: RNG.randn(2, 4, 4)),
    ("slogdet", lambda a: L.slogdet(a)[1].sum(), lambda: RNG.randn(2, 4, 4)),
    ("cholesky", lambda a: (L.cholesky(a) * W).sum(), lambda: _spd(2)),
    ("qr", lambda a: sum((o * W[..., :o.shape[-2], :o.shape[-1]]).sum() for o in L.qr(a)),
     lambda: RNG.randn(2, 4, 3)),
    ("qr_square", lambda a: sum((o * W).sum() for o in L.qr(a)), lambda: RNG.randn(2, 4, 4)),
])
def test_derivatives(name, f, make):
    fd_check(f, [make()])


def test_solve_derivative_in_b():
    a = RNG.randn(3, 3)
    fd_check(lambda a_, b_: (L.solve(a_, b_) ** 3).sum(), [a, RNG.randn(3, 2)])


def _eigh_invariant(a):
    # gauge-invariant: eigenvalues and the spectral projectors v_k v_k^T
    w, v = L.eigh(a)
    proj = (v[..., :, :, None] * v[..., None, :, :])  # [..., i, k, j] = v_ik v_jk
    c = np.arange(1.0, 5.0)
    return (w ** 2).sum() + (proj * W[..., :, None, :] * c[:, None]).sum()


def _svd_invariant(a):
    # gauge-invariant: singular values and u_k v_k^T (pairs of singular vectors)
    u, s, vt = L.svd(a)
    k = s.shape[-1]
    c = np.arange(1.0, k + 1)
    uv = (u * c) @ vt
    return s.sum() + (s ** 2).sum() + (uv * W[..., :uv.shape[-2], :uv.shape[-1]]).sum()


def test_eigh_derivatives():
    fd_check(_eigh_invariant, [_sym_distinct(2)])
    a = RNG.randn(2, 4, 4)  # a non-symmetric input is symmetrized by the wrapper
    fd_check(lambda z: (L.eigh(z)[0] ** 2).sum(), [a])


@pytest.mark.parametrize("shape", [(2, 4, 4), (2, 4, 3), (2, 3, 4)])
def test_svd_derivatives(shape):
    fd_check(_svd_invariant, [RNG.randn(*shape)])


# --- second derivatives -------------------------------------------------------------------
@pytest.mark.parametrize("name,f,make", [
    ("inv", lambda a: (L.inv(a) * W[0]).sum(), lambda: RNG.randn(4, 4) + 3 * np.eye(4)),
    ("slogdet", lambda a: L.slogdet(a)[1], lambda: RNG.randn(4, 4) + 3 * np.eye(4)),
    ("cholesky", lambda a: (L.cholesky(a) * W[0]).sum(), lambda: _spd(n=4)),
    ("eigh", lambda a: (L.eigh(a)[0] ** 3).sum(), lambda: _sym_distinct(n=4)),
    ("svd", lambda a: (L.svd(a)[1] ** 3).sum(), lambda: RNG.randn(4, 3)),
    ("qr", lambda a: (L.qr(a)[1] ** 2 * W[0, :3, :3]).sum(), lambda: RNG.randn(4, 3)),
])
def test_grad_of_grad(name, f, make):
    hvp_check(f, make())


# --- vmap and jit -------------------------------------------------------------------------
@pytest.mark.parametrize("name,fn,make", [
    ("inv", L.inv, lambda: RNG.randn(3, 5, 3)),
    ("det", L.det, lambda: RNG.randn(3, 5, 3)),
    ("slogdet", L.slogdet, lambda: RNG.randn(3, 5, 3)),
    ("cholesky", L.cholesky, lambda: np.moveaxis(_spd(5, n=3), 0, 1)),
    ("eigh", L.eigh, lambda: np.moveaxis(_spd(5, n=3), 0, 1)),
    ("svd", lambda a: L.svd(a)[1], lambda: RNG.randn(4, 5, 2)),
    ("qr", L.qr, lambda: RNG.randn(4, 5, 2)),
])
def test_vmap_and_jit(name, fn, make):
    x = make()  # batch along axis 1
    out = mx.vmap(fn, in_axes=1)(x)
    outs = out if isinstance(out, (list, tuple)) else [out]
    loop = [fn(x[:, i]) for i in range(x.shape[1])]
    loop = [[r] if not isinstance(r, (list, tuple)) else r for r in loop]
    for j, o in enumerate(outs):
        np.testing.assert_allclose(np.asarray(o), np.stack([np.asarray(r[j]) for r in loop]),
                                   rtol=1e-10, atol=1e-10)
    jo = mx.jit(fn)(x[:, 0])
    jo = jo if isinstance(jo, (list, tuple)) else [jo]
    for a, b in zip(jo, loop[0]):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-10)


def test_vmap_binary_one_side_batched():
    a = RNG.randn(3, 3)
    b = RNG.randn(5, 3, 2)
    out = mx.vmap(L.solve, in_axes=(None, 0))(a, b)
    np.testing.assert_allclose(np.asarray(out), np.linalg.solve(a, b), rtol=1e-10)
    spd = _spd(5, n=3)
    out = mx.vmap(lambda p, q: L.triangular_solve(p, q, True, True), in_axes=(0, None))(
        spd, b[0])
    want = np.stack([np.linalg.solve(np.tril(m), b[0]) for m in spd])
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-10)
    g = mx.vmap(mx.grad(lambda m: L.slogdet(m)[1]))(spd)
    np.testing.assert_allclose(np.asarray(g), np.swapaxes(np.linalg.inv(spd), -1, -2),
                               rtol=1e-10)


def test_jit_grad():
    a = _spd(n=3)
    f = lambda z: (L.cholesky(z) ** 2).sum() + L.slogdet(z)[1]  # noqa: E731
    np.testing.assert_allclose(np.asarray(mx.jit(mx.grad(f))(a)), np.asarray(mx.grad(f)(a)),
                               rtol=1e-10)


# --- mirax.numpy.linalg -------------------------------------------------------------------
@pytest.mark.parametrize("ord", [None, 1, 2, np.inf, -np.inf, 0, 3, 0.5])
def test_vector_norm(ord):
    x = RNG.randn(3, 5)
    np.testing.assert_allclose(np.asarray(mnp.linalg.norm(x, ord, axis=1)),
                               np.linalg.norm(x, ord, axis=1), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(mnp.linalg.norm(x, ord, axis=0, keepdims=True)),
                               np.linalg.norm(x, ord, axis=0, keepdims=True), rtol=1e-12)
    if ord not in (0,):
        fd_check(lambda z: mnp.linalg.norm(z, ord, axis=1).sum(), [x])


@pytest.mark.parametrize("ord", [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])
def test_matrix_norm(ord):
    x = RNG.randn(2, 4, 3)
    np.testing.assert_allclose(np.asarray(mnp.linalg.norm(x, ord, axis=(1, 2))),
                               np.linalg.norm(x, ord, axis=(1, 2)), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(mnp.linalg.norm(x, ord, axis=(2, 0))),
                               np.linalg.norm(x, ord, axis=(2, 0)), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(mnp.linalg.norm(x[0], ord)),
                               np.linalg.norm(x[0], ord), rtol=1e-10)
    fd_check(lambda z: mnp.linalg.norm(z, ord, axis=(1, 2)).sum(), [x])


def test_norm_gradient_at_zero_is_zero():
    z = mnp.zeros((3, 4))
    for kw in ({}, {"axis": 1}, {"ord": "fro"}, {"ord": 2, "axis": 0}, {"ord": 3, "axis": 1}):
        g = np.asarray(mx.grad(lambda x: mnp.linalg.norm(x, **kw).sum())(z))
        assert np.all(g == 0), kw
    _, t = mx.jvp(lambda x: mnp.linalg.norm(x), (mnp.zeros(3),), (mnp.ones(3),))
    assert float(t) == 0.0
    h = mx.hessian(lambda x: mnp.linalg.norm(x))(mnp.zeros(3))
    assert np.all(np.isfinite(np.asarray(h)))
    # away from 0 the gradient is x / |x|
    x = RNG.randn(5)
    np.testing.assert_allclose(np.asarray(mx.grad(mnp.linalg.norm)(x)), x / np.linalg.norm(x))


def test_numpy_linalg_functions():
    a = RNG.randn(2, 3, 3)
    np.testing.assert_allclose(np.asarray(mnp.linalg.solve(a, RNG.randn(3))).shape, (2, 3))
    b = RNG.randn(3, 2)
    np.testing.assert_allclose(np.asarray(mnp.linalg.solve(a, b)), np.linalg.solve(a, b),
                               rtol=1e-10)
    sign, logdet = mnp.linalg.slogdet(a)
    np.testing.assert_allclose(np.asarray(logdet), np.linalg.slogdet(a).logabsdet)
    np.testing.assert_allclose(np.asarray(mnp.linalg.det(a)), np.linalg.det(a))
    np.testing.assert_allclose(np.asarray(mnp.linalg.inv(a)), np.linalg.inv(a), rtol=1e-10)
    for n in (0, 1, 2, 5, -3):
        np.testing.assert_allclose(np.asarray(mnp.linalg.matrix_power(a[0], n)),
                                   np.linalg.matrix_power(a[0], n), rtol=1e-9)
    spd = _spd(n=3)
    np.testing.assert_allclose(np.asarray(mnp.linalg.cholesky(spd, upper=True)),
                               np.linalg.cholesky(spd).T, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(mnp.linalg.eigvalsh(spd)), np.linalg.eigvalsh(spd))
    w, v = mnp.linalg.eigh(spd)
    assert w.shape == (3,) and v.shape == (3, 3)
    m = RNG.randn(4, 3)
    u, s, vh = mnp.linalg.svd(m, full_matrices=False)
    np.testing.assert_allclose(np.asarray(s), np.linalg.svd(m, compute_uv=False))
    assert u.shape == (4, 3) and vh.shape == (3, 3)
    for x in (m, m.T, np.stack([m, 2 * m])):  # tall, wide, batched: full_matrices=True
        u, s, vh = mnp.linalg.svd(x)
        u0, s0, vh0 = np.linalg.svd(x)
        assert u.shape == u0.shape and vh.shape == vh0.shape
        np.testing.assert_allclose(np.asarray(s), s0, rtol=1e-12)
        k = s0.shape[-1]
        np.testing.assert_allclose(np.asarray(u)[..., :k] * np.asarray(s)[..., None, :]
                                   @ np.asarray(vh)[..., :k, :], x, atol=1e-12)
        for o in (np.asarray(u), np.asarray(vh)):
            np.testing.assert_allclose(np.swapaxes(o, -1, -2) @ o, np.broadcast_to(
                np.eye(o.shape[-1]), o.shape[:-2] + (o.shape[-1],) * 2), atol=1e-12)
    vm = mx.vmap(lambda z: mnp.linalg.svd(z)[0])(np.stack([m, 2 * m]))
    assert vm.shape == (2, 4, 4)
    with pytest.raises(NotImplementedError, match="svd: derivatives of the full_matrices"):
        mx.grad(lambda z: mnp.linalg.svd(z)[0].sum())(m)
    g = mx.grad(lambda z: mnp.linalg.svd(z, compute_uv=False).sum())(m)  # s alone: fine
    np.testing.assert_allclose(np.asarray(g), np.asarray(
        mx.grad(lambda z: mnp.linalg.svd(z, full_matrices=False)[1].sum())(m)))
    sq = RNG.randn(3, 3)  # square: the full form is the reduced one, derivatives included
    mx.testing.check_grads(lambda z: mnp.linalg.svd(z)[1].sum(), (sq,), order=1)
    np.testing.assert_allclose(np.asarray(mnp.linalg.pinv(m)), np.linalg.pinv(m), rtol=1e-9)
    low = m @ RNG.randn(3, 5)
    low[:, 0] = low[:, 1]
    assert int(mnp.linalg.matrix_rank(low[:, :2])) == 1
    assert int(mnp.linalg.matrix_rank(m)) == 3
    q, r = mnp.linalg.qr(m)
    np.testing.assert_allclose(np.asarray(q) @ np.asarray(r), m, atol=1e-12)
    for x in (m, m.T):  # complete: q square, r with m rows
        q, r = mnp.linalg.qr(x, mode="complete")
        q0, r0 = np.linalg.qr(x, mode="complete")
        assert q.shape == q0.shape and r.shape == r0.shape
        np.testing.assert_allclose(np.asarray(q) @ np.asarray(r), x, atol=1e-12)
        np.testing.assert_allclose(np.asarray(q).T @ np.asarray(q), np.eye(q0.shape[0]),
                                   atol=1e-12)
    np.testing.assert_allclose(np.asarray(mnp.linalg.qr(m, mode="r")), np.linalg.qr(m, "r"),
                               atol=1e-12)
    with pytest.raises(NotImplementedError, match="qr: derivatives of the full_matrices"):
        mx.grad(lambda z: mnp.linalg.qr(z, mode="complete")[0].sum())(m)
    with pytest.raises(NotImplementedError, match="raw"):
        mnp.linalg.qr(m, mode="raw")
    with pytest.raises(ValueError, match="qr: mode"):
        mnp.linalg.qr(m, mode="full")


@pytest.mark.slow
def test_jax_oracle_gradients():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    a = _sym_distinct(n=4)
    m = RNG.randn(5, 3)
    cases = [
        (lambda z: (mnp.linalg.eigh(z)[0] ** 2).sum(),
         lambda z: (jnp.linalg.eigh(z)[0] ** 2).sum(), a),
        (lambda z: mnp.linalg.svd(z, full_matrices=False)[1].sum(),
         lambda z: jnp.linalg.svd(z, full_matrices=False)[1].sum(), m),
        (lambda z: mnp.linalg.norm(z, "nuc"), lambda z: jnp.linalg.norm(z, "nuc"), m),
        (lambda z: mnp.linalg.slogdet(z)[1], lambda z: jnp.linalg.slogdet(z)[1], a),
    ]
    with jax.enable_x64(True):  # scoped: other tests see JAX's defaults
        for f, jf, x in cases:
            np.testing.assert_allclose(np.asarray(mx.grad(f)(x)), np.asarray(jax.grad(jf)(x)),
                                       rtol=1e-8, atol=1e-10)


def test_errors():
    with pytest.raises(ValueError, match="inv"):
        L.inv(np.ones((2, 3)))
    with pytest.raises(ValueError, match="solve"):
        L.solve(np.eye(3), np.ones((4, 1)))
    with pytest.raises(ValueError, match="norm"):
        mnp.linalg.norm(np.ones((2, 2)), "nuc", axis=0)
    nan_chol = np.asarray(L.cholesky(-np.eye(2)))
    assert np.isnan(nan_chol).all()


def _array_api_cases():
    a, b, v = RNG.randn(2, 4, 3), RNG.randn(5, 3), RNG.randn(3)
    sq = RNG.randn(4, 4) + 4 * np.eye(4)
    return sq, [
        ("matrix_transpose", (a,), {}), ("vector_norm", (a,), {}),
        ("vector_norm", (a,), {"axis": 1, "ord": 1, "keepdims": True}),
        ("matrix_norm", (a,), {}), ("matrix_norm", (a,), {"ord": "nuc"}),
        ("matrix_norm", (a,), {"ord": np.inf, "keepdims": True}),
        ("trace", (a,), {"offset": 1}), ("diagonal", (a,), {"offset": -1}),
        ("outer", (v, RNG.randn(4)), {}), ("cross", (b, RNG.randn(5, 3)), {}),
        ("vecdot", (b, RNG.randn(5, 3)), {"axis": 0}),
        ("tensordot", (a, RNG.randn(4, 3, 2)), {"axes": 2}),
        ("cond", (sq,), {}), ("cond", (sq,), {"p": -2}), ("cond", (sq,), {"p": "fro"}),
        ("cond", (sq,), {"p": 1}),
        ("tensorinv", (RNG.randn(6, 2, 3) + np.eye(6).reshape(6, 2, 3) * 3,), {"ind": 1}),
        ("tensorsolve", (RNG.randn(2, 3, 6) + np.eye(6).reshape(2, 3, 6) * 3,
                         RNG.randn(2, 3)), {}),
    ]


_LSTSQ = [(RNG.randn(6, 3), RNG.randn(6)), (RNG.randn(6, 3), RNG.randn(6, 2)),
          (RNG.randn(3, 5), RNG.randn(3)),
          (np.repeat(RNG.randn(3, 2), 2, axis=1), RNG.randn(3))]  # rank 2 of 4
_CHAINS = [RNG.randn(3, 7), RNG.randn(7, 2), RNG.randn(2, 9), RNG.randn(9, 4)]


def test_array_api_linalg_names():
    """jnp.linalg's array-API names and multi_dot / cond / lstsq / tensorinv /
    tensorsolve: values as NumPy's (float64; lstsq's residuals as NumPy's with
    numpy_resid=True), first derivatives against finite differences."""
    sq, cases = _array_api_cases()
    for name, args, kw in cases:
        got = getattr(mnp.linalg, name)(*args, **kw)
        np.testing.assert_allclose(np.asarray(got), getattr(np.linalg, name)(*args, **kw),
                                   rtol=1e-9, atol=1e-12, err_msg=name)
    for xs in (_CHAINS, [RNG.randn(3)] + _CHAINS, _CHAINS + [RNG.randn(4)], _CHAINS[:2]):
        np.testing.assert_allclose(np.asarray(mnp.linalg.multi_dot(xs)),
                                   np.linalg.multi_dot(xs), rtol=1e-9)
    for aa, bb in _LSTSQ:
        x, resid, rank, s = mnp.linalg.lstsq(aa, bb, numpy_resid=True)
        x0, resid0, rank0, s0 = np.linalg.lstsq(aa, bb, rcond=None)
        np.testing.assert_allclose(np.asarray(x), x0, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(np.asarray(resid), resid0, rtol=1e-8, atol=1e-10)
        assert int(rank) == rank0
        np.testing.assert_allclose(np.asarray(s), s0, rtol=1e-10, atol=1e-14)
    b = RNG.randn(5)
    for f, x in ((lambda z: mnp.linalg.cond(z), sq),
                 (lambda z: mnp.linalg.lstsq(z, b)[0].sum(), RNG.randn(5, 3)),
                 (lambda z: mnp.linalg.multi_dot([z, z.T, z]).sum(), RNG.randn(3, 4)),
                 (lambda z: mnp.linalg.vector_norm(z, ord=3), RNG.randn(2, 3))):
        mx.testing.check_grads(f, (x,), order=1, modes=("rev",))
    with pytest.raises(ValueError, match="multi_dot"):
        mnp.linalg.multi_dot([RNG.randn(2, 3), RNG.randn(4, 2)])
    with pytest.raises(ValueError, match="lstsq"):
        mnp.linalg.lstsq(RNG.randn(4, 3), RNG.randn(5))
    with pytest.raises(ValueError, match="matrix_transpose"):
        mnp.linalg.matrix_transpose(RNG.randn(3))


@pytest.mark.slow
def test_array_api_linalg_names_against_jax():
    """The same names against jnp.linalg (values, lstsq's JAX-style residuals, gradients)."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    sq, cases = _array_api_cases()
    with jax.enable_x64(True):
        for name, args, kw in cases:
            np.testing.assert_allclose(np.asarray(getattr(mnp.linalg, name)(*args, **kw)),
                                       np.asarray(getattr(jnp.linalg, name)(*args, **kw)),
                                       rtol=1e-9, atol=1e-12, err_msg=name)
        for aa, bb in _LSTSQ:
            for npr in (False, True):
                got = mnp.linalg.lstsq(aa, bb, numpy_resid=npr)
                want = jnp.linalg.lstsq(aa, bb, numpy_resid=npr)
                for g, w in zip(got, want):
                    assert np.shape(g) == np.shape(w)
                    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-8,
                                               atol=1e-10)
        b = RNG.randn(5)
        for f, jf, x in (
                (lambda z: mnp.linalg.cond(z), lambda z: jnp.linalg.cond(z), sq),
                (lambda z: mnp.linalg.lstsq(z, b)[0].sum(),
                 lambda z: jnp.linalg.lstsq(z, b)[0].sum(), RNG.randn(5, 3)),
                (lambda z: mnp.linalg.multi_dot([z, z.T, z]).sum(),
                 lambda z: jnp.linalg.multi_dot([z, z.T, z]).sum(), RNG.randn(3, 4))):
            np.testing.assert_allclose(np.asarray(mx.grad(f)(x)), np.asarray(jax.grad(jf)(x)),
                                       rtol=1e-7, atol=1e-9)
