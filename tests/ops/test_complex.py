"""Complex numbers: dtypes and promotion (against jax.numpy), values (against NumPy), and
derivatives in JAX's convention (jvp, vjp, grad, second order, holomorphic=) against JAX on
the CPU, with vmap and jit."""
from __future__ import annotations

import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp

jax = pytest.importorskip("jax")
jnp = jax.numpy



def _c(rng, shape, lo=-1.5, hi=1.5):
    return rng.uniform(lo, hi, shape) + 1j * rng.uniform(lo, hi, shape)


def _close(got, want, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


# --- dtypes, promotion, creation, printing -----------------------------------------------------
@pytest.mark.parametrize("a,b", [
    ("float32", "complex64"), ("float64", "complex64"), ("float16", "complex64"),
    ("int32", "complex64"), ("complex64", "complex128"), ("bfloat16", "complex128")])
def test_promote_types(a, b):
    assert mnp.promote_types(a, b) == jnp.promote_types(a, b)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "complex64", "bool"])
@pytest.mark.parametrize("scalar", [2.0, 1j, 3])
def test_weak_python_complex(dtype, scalar):
    # JAX with x64 for a float64 operand, without it otherwise (mirax has no x64 switch:
    # its default complex is complex64, JAX's under x64 is complex128)
    x = np.ones(3, dtype)
    got = (mnp.asarray(x) * scalar).dtype
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", dtype == "float64")
    try:
        want = (jnp.asarray(x) * scalar).dtype
    finally:
        jax.config.update("jax_enable_x64", old)
    assert got == want, (dtype, scalar, got, want)


def test_creation_and_listing():
    x = mnp.array([1 + 2j, 3])
    assert x.dtype == mnp.complex64 and x.weak_type is False
    assert mnp.asarray(np.ones(2, np.complex128)).dtype == mnp.complex128
    assert (1j * mnp.ones(2)).dtype == mnp.complex64
    assert mnp.zeros(3, mnp.complex128).dtype == np.complex128
    g = mx.make_graph(lambda a: mnp.abs(a * 2j))(mnp.ones((3, 4)))
    s = str(g)
    assert "c64[3,4]" in s and "f32[3,4]" in s
    assert "1.+2.j" in repr(x) or "1+2j" in repr(x)


def test_iscomplex_helpers():
    z = mnp.asarray(np.array([1 + 0j, 2j]))
    assert mnp.iscomplexobj(z) and not mnp.isrealobj(z)
    assert not mnp.iscomplexobj(mnp.ones(2)) and mnp.isrealobj(mnp.ones(2))
    np.testing.assert_array_equal(mnp.iscomplex(z), [False, True])
    np.testing.assert_array_equal(mnp.isreal(z), [True, False])
    np.testing.assert_array_equal(mnp.iscomplex(mnp.ones(2)), [False, False])


# --- elementwise values --------------------------------------------------------------------------
UNARY = ["exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "arcsin", "arccos",
         "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "square",
         "reciprocal", "sign", "abs", "real", "imag", "conj", "conjugate", "angle", "exp2",
         "log2", "log10", "negative"]


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_values(name, dtype):
    z = _c(np.random.default_rng(0), (3, 4)).astype(dtype)
    got, want = getattr(mnp, name)(mnp.asarray(z)), getattr(np, name)(z)
    assert np.asarray(got).dtype == want.dtype, name
    tol = 2e-5 if dtype == "complex64" else 1e-12
    _close(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "power", "equal",
                                  "not_equal"])
def test_binary_values(name):
    rng = np.random.default_rng(1)
    a, b = _c(rng, (3, 1)), _c(rng, (1, 4))
    got = getattr(mnp, name)(mnp.asarray(a), mnp.asarray(b))
    _close(got, getattr(np, name)(a, b))


def test_lax_complex_and_parts():
    x, y = np.array([1.0, -2.0]), np.array([0.5, 3.0])
    z = mx.lax.complex(mnp.asarray(x), mnp.asarray(y))
    assert z.dtype == np.complex128
    _close(z, x + 1j * y)
    _close(mx.lax.real(z), x)
    _close(mx.lax.imag(z), y)
    _close(mx.lax.conj(z), x - 1j * y)
    with pytest.raises(TypeError, match="floor"):
        mx.lax.floor(z)


# --- derivatives against JAX ---------------------------------------------------------------------
HOLO = ["exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "arcsin", "arccos",
        "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "square",
        "reciprocal"]
NONHOLO = ["abs", "real", "imag", "conj", "angle"]


def _unary_cases():
    return [(n, lambda m, z, n=n: getattr(m, n)(z)) for n in HOLO + NONHOLO] + [
        ("power", lambda m, z: m.power(z, 2.5)),
        ("pow_complex", lambda m, z: z ** (0.5 + 0.25j)),
        ("mul_conj", lambda m, z: z * m.conj(z) + m.exp(z) * z),
        ("div", lambda m, z: (z + 2.0) / (z * z + 1j)),
        ("abs_pow", lambda m, z: m.abs(z) ** 3 + m.real(z) * m.imag(z)),
    ]


_FAST = {"exp", "abs", "mul_conj", "matmul", "solve"}


def _params(cases):
    """Every case; those outside _FAST are marked slow (JAX's eager op-by-op runs dominate)."""
    return [pytest.param(n, f, id=n, marks=() if n in _FAST else pytest.mark.slow)
            for n, f in cases]


@pytest.mark.parametrize("name,f", _params(_unary_cases()))
def test_unary_derivatives(name, f, x64):
    rng = np.random.default_rng(2)
    z, t = _c(rng, (5,)), _c(rng, (5,))
    if name == "arccosh":  # JAX's arccosh derivative has the wrong sign for Re z < 0
        z = np.abs(z.real) + 1j * z.imag  # (see test_arccosh_derivative_all_plane)
    mf, jf = (lambda a: f(mnp, a)), (lambda a: f(jnp, a))
    out, tout = mx.jvp(mf, (mnp.asarray(z),), (mnp.asarray(t),))
    jout, jtout = jax.jvp(jf, (z,), (t,))
    _close(out, jout)
    _close(tout, jtout, rtol=1e-9)
    ct = _c(rng, (5,)) if np.iscomplexobj(jout) else rng.normal(size=5)
    (g,) = mx.vjp(mf, mnp.asarray(z))[1](mnp.asarray(ct))
    (jg,) = jax.vjp(jf, z)[1](ct)
    _close(g, jg, rtol=1e-9)
    # the gradient of a real loss and its second derivative (forward over reverse)
    loss_m = (lambda a: mnp.sum(mnp.abs(mf(a)) ** 2 + mnp.real(mf(a) * (0.3 - 0.7j))))
    loss_j = (lambda a: jnp.sum(jnp.abs(jf(a)) ** 2 + jnp.real(jf(a) * (0.3 - 0.7j))))
    _close(mx.grad(loss_m)(mnp.asarray(z)), jax.grad(loss_j)(z), rtol=1e-9)
    h = mx.jvp(mx.grad(loss_m), (mnp.asarray(z),), (mnp.asarray(t),))[1]
    jh = jax.jvp(jax.grad(loss_j), (z,), (t,))[1]
    _close(h, jh, rtol=1e-8, atol=1e-10)
    # reverse over reverse
    rr = mx.grad(lambda a: mnp.real(mnp.vdot(t, mx.grad(loss_m)(a))))(mnp.asarray(z))
    jrr = jax.grad(lambda a: jnp.real(jnp.vdot(t, jax.grad(loss_j)(a))))(z)
    _close(rr, jrr, rtol=1e-8, atol=1e-10)


def test_arccosh_derivative_all_plane():
    """d acosh(z) = 1 / (sqrt(z - 1) sqrt(z + 1)) on the principal branch: checked against
    central differences of NumPy's arccosh (JAX's rule, rsqrt((z-1)(z+1)), flips sign for
    Re z < 0)."""
    z = _c(np.random.default_rng(8), (20,))
    eps = 1e-7
    fd = (np.arccosh(z + eps) - np.arccosh(z - eps)) / (2 * eps)
    got = mx.jvp(mnp.arccosh, (mnp.asarray(z),), (mnp.ones(20, mnp.complex128),))[1]
    _close(got, fd, rtol=1e-6, atol=1e-7)


def test_real_input_complex_intermediate(x64):
    f = (lambda m, x: m.abs(m.exp(1j * x) * x + x ** 2 * (1 - 2j)))
    x = np.linspace(0.3, 2.0, 4)
    _close(mx.grad(lambda a: mnp.sum(f(mnp, a)))(mnp.asarray(x)),
           jax.grad(lambda a: jnp.sum(f(jnp, a)))(x))
    g = mx.grad(lambda a: mnp.sum(f(mnp, a)))(mnp.asarray(x))
    assert g.dtype == np.float64


def test_grad_conventions(x64):
    z = np.complex128(1.0 + 2.0j)
    _close(mx.grad(lambda a: mnp.abs(a) ** 2)(mnp.asarray(z)), 2 - 4j)
    _close(mx.grad(lambda a: mnp.abs(a) ** 2)(mnp.asarray(z)),
           jax.grad(lambda a: jnp.abs(a) ** 2)(z))
    _close(mx.grad(mnp.sin, holomorphic=True)(mnp.asarray(z)),
           jax.grad(jnp.sin, holomorphic=True)(z))
    with pytest.raises(TypeError, match="holomorphic=True"):
        mx.grad(mnp.sin)(mnp.asarray(z))
    with pytest.raises(TypeError, match="complex"):
        mx.grad(mnp.sin, holomorphic=True)(mnp.asarray(1.0))
    w = np.array([0.5 + 1j, -1 + 0.2j])
    f = (lambda m: (lambda a: m.exp(a) * a[::-1]))
    _close(mx.jacfwd(f(mnp), holomorphic=True)(mnp.asarray(w)),
           jax.jacfwd(f(jnp), holomorphic=True)(w))
    _close(mx.jacrev(f(mnp), holomorphic=True)(mnp.asarray(w)),
           jax.jacrev(f(jnp), holomorphic=True)(w))
    with pytest.raises(TypeError, match="holomorphic"):
        mx.jacfwd(f(mnp))(mnp.asarray(w))
    with pytest.raises(TypeError, match="holomorphic"):
        mx.jacrev(f(mnp))(mnp.asarray(w))
    hv = mx.hvp(lambda a: mnp.sum(mnp.abs(mnp.sin(a)) ** 2), (mnp.asarray(w),),
                (mnp.asarray(w[::-1].copy()),))[0]
    jhv = jax.jvp(jax.grad(lambda a: jnp.sum(jnp.abs(jnp.sin(a)) ** 2)), (w,), (w[::-1],))[1]
    _close(hv, jhv)


# --- reductions, products, linalg ----------------------------------------------------------------
def _binary_cases():
    return [
        ("sum", lambda m, a, b: m.sum(a * b[0, :3], axis=0)),
        ("prod", lambda m, a, b: m.prod(a, axis=1)),
        ("mean", lambda m, a, b: m.mean(a, axis=1)),
        ("cumsum", lambda m, a, b: m.cumsum(a, axis=1)),
        ("cumprod", lambda m, a, b: m.cumprod(a, axis=1)),
        ("var", lambda m, a, b: m.var(a, axis=0)),
        ("std", lambda m, a, b: m.std(a)),
        ("dot", lambda m, a, b: m.dot(a, b[:3])),
        ("matmul", lambda m, a, b: a @ b[:3]),
        ("einsum", lambda m, a, b: m.einsum("ij,jk->ik", a, b[:3])),
        ("tensordot", lambda m, a, b: m.tensordot(a, b[:3], 1)),
        ("vdot", lambda m, a, b: m.vdot(a, b[:3, :3])),
        ("inner", lambda m, a, b: m.inner(a, b[:3, :3])),
        ("outer", lambda m, a, b: m.outer(a[0], b[0])),
        ("kron", lambda m, a, b: m.kron(a[:2, :2], b[:2, :2])),
        ("where", lambda m, a, b: m.where(m.real(a) > 0, a, b[:3, :3] * 2)),
        ("index", lambda m, a, b: a[1:, np.array([0, 2])] * b[0, 0]),
        ("shape", lambda m, a, b: m.concatenate([m.reshape(a, (9,)), m.ravel(b.T)])[::2]),
        ("solve", lambda m, a, b: m.linalg.solve(a + 3 * m.eye(3), b[:3])),
        ("inv", lambda m, a, b: m.linalg.inv(a + 3 * m.eye(3))),
        ("det", lambda m, a, b: m.linalg.det(a + 2 * m.eye(3))),
        ("norm", lambda m, a, b: m.linalg.norm(a) * b[0, 0]),
    ]


@pytest.mark.parametrize("name,f", _params(_binary_cases()))
def test_reductions_products_linalg(name, f, x64):
    rng = np.random.default_rng(3)
    a, b = _c(rng, (3, 3)), _c(rng, (4, 3))
    got, want = f(mnp, mnp.asarray(a), mnp.asarray(b)), f(np, a, b)
    assert np.asarray(got).dtype == np.asarray(want).dtype, name
    _close(got, want, rtol=1e-9)
    loss_m = (lambda x, y: mnp.sum(mnp.abs(f(mnp, x, y)) ** 2 + mnp.real(f(mnp, x, y))))
    loss_j = (lambda x, y: jnp.sum(jnp.abs(f(jnp, x, y)) ** 2 + jnp.real(f(jnp, x, y))))
    g = mx.grad(loss_m, argnums=(0, 1))(mnp.asarray(a), mnp.asarray(b))
    jg = jax.grad(loss_j, argnums=(0, 1))(a, b)
    for u, v in zip(g, jg):
        _close(u, v, rtol=1e-8, atol=1e-10)


def test_at_update_and_sort():
    z = np.array([2 + 1j, 1 + 3j, 2 - 1j, 1 + 0j])
    _close(mnp.sort(mnp.asarray(z)), np.sort(z))
    np.testing.assert_array_equal(mnp.argsort(mnp.asarray(z)), np.argsort(z, kind="stable"))
    got = mnp.asarray(z).at[1].add(1j).at[2].set(0)
    want = z.copy()
    want[1] += 1j
    want[2] = 0
    _close(got, want)


def test_linalg_values():
    rng = np.random.default_rng(4)
    a = _c(rng, (3, 3))
    h = a @ a.conj().T + 3 * np.eye(3)
    _close(mnp.linalg.cholesky(mnp.asarray(h)), np.linalg.cholesky(h), rtol=1e-9)
    _close(mnp.linalg.eigvalsh(mnp.asarray(h)), np.linalg.eigvalsh(h), rtol=1e-9)
    _close(mnp.linalg.svd(mnp.asarray(a), compute_uv=False),
           np.linalg.svd(a, compute_uv=False), rtol=1e-9)
    sign, logdet = mnp.linalg.slogdet(mnp.asarray(a))
    s2, l2 = np.linalg.slogdet(a)
    assert np.asarray(logdet).dtype == np.float64
    _close(sign, s2)
    _close(logdet, l2)
    q, r = mnp.linalg.qr(mnp.asarray(a))
    _close(np.asarray(q) @ np.asarray(r), a)
    w, v = mnp.linalg.eig(mnp.asarray(a))
    _close(np.asarray(a) @ np.asarray(v), np.asarray(v) * np.asarray(w)[None, :], atol=1e-10)
    _close(np.sort_complex(np.asarray(mnp.linalg.eigvals(mnp.asarray(a)))),
           np.sort_complex(np.linalg.eigvals(a)))


def _linalg_cases(rng):
    """Real losses of complex factorizations, invariant under the factors' phase freedom
    (where there is one) so that they are functions of the matrix."""
    def svd_loss(m, x, w, wn):
        u, s, vt = m.linalg.svd(x, full_matrices=False)
        k = s.shape[0]
        return (m.sum(s ** 3) + m.sum(m.real((u * s[None, :]) @ vt * w))
                + m.sum(m.abs(u) ** 4 * m.real(w[:, :k]))
                + m.sum(m.real(m.conj(vt).T @ m.diag(m.arange(k) + 1.0) @ vt * wn)))

    def eigh_loss(m, x, w, wn):
        lam, v = m.linalg.eigh(x)
        return (m.sum(lam ** 3) + m.sum(m.abs(v) ** 4 * m.real(w))
                + m.sum(m.real(v @ m.diag(m.arange(3) + 1.0) @ m.conj(v).T * w)))

    def qr_loss(m, x, w, wn):
        q, r = m.linalg.qr(x)
        return m.sum(m.real(q * w)) + m.sum(m.abs(r) ** 2) + m.sum(m.real(r * wn))

    def chol_loss(m, x, w, wn):
        lo = m.linalg.cholesky(x)
        return m.sum(m.real(lo * w)) + m.sum(m.abs(lo) ** 2 * m.real(w))

    def slogdet_loss(m, x, w, wn):
        sign, logdet = m.linalg.slogdet(x)
        return 2 * logdet + m.real(sign * (0.3 + 0.8j))

    return [("cholesky", chol_loss, (3, 3), True), ("eigh", eigh_loss, (3, 3), True),
            ("qr", qr_loss, (4, 3), False), ("qr_square", qr_loss, (3, 3), False),
            ("svd_tall", svd_loss, (4, 3), False), ("svd_wide", svd_loss, (3, 4), False),
            ("slogdet", slogdet_loss, (3, 3), False)]


@pytest.mark.parametrize("k", [
    pytest.param(k, id=c[0], marks=() if c[0] in ("cholesky", "qr") else pytest.mark.slow)
    for k, c in enumerate(_linalg_cases(None))])
def test_complex_linalg_derivatives(k, x64):
    """grad and forward-over-reverse second derivatives of complex cholesky, eigh, qr, svd
    and slogdet against JAX."""
    rng = np.random.default_rng(10 + k)
    name, loss, shape, hermitian = _linalg_cases(rng)[k]
    a = _c(rng, shape)
    if hermitian:
        a = a @ a.conj().T + 3 * np.eye(shape[0])
    w, t = _c(rng, a.shape), _c(rng, a.shape)
    wn = _c(rng, (a.shape[1], a.shape[1]) if name.startswith("svd") else (3, a.shape[1]))
    lm, lj = (lambda x: loss(mnp, x, w, wn)), (lambda x: loss(jnp, x, w, wn))
    _close(mx.grad(lm)(mnp.asarray(a)), jax.grad(lj)(a), rtol=1e-9, atol=1e-10)
    _close(mx.jvp(mx.grad(lm), (mnp.asarray(a),), (mnp.asarray(t),))[1],
           jax.jvp(jax.grad(lj), (a,), (t,))[1], rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("complex_input", [False, True])
def test_eigvals_grad(complex_input, x64):
    rng = np.random.default_rng(5)
    a = rng.normal(size=(3, 3)) + (1j * rng.normal(size=(3, 3)) if complex_input else 0)
    f = (lambda m: (lambda x: m.sum(m.real(m.linalg.eigvals(x) ** 2 * (1 - 0.5j)))))
    _close(mx.grad(f(mnp))(mnp.asarray(a)), jax.grad(f(jnp))(a), rtol=1e-8)


# --- vmap and jit --------------------------------------------------------------------------------
def test_vmap_and_jit(x64):
    rng = np.random.default_rng(6)
    z = _c(rng, (4, 5))

    def f(m, a):
        return m.sum(m.abs(m.exp(a) * m.conj(a) + m.sqrt(a)) ** 2) + m.real(m.prod(a))

    _close(mx.vmap(lambda a: f(mnp, a))(mnp.asarray(z)), [f(np, r) for r in z])
    _close(mx.jit(mx.vmap(mx.grad(lambda a: f(mnp, a))))(mnp.asarray(z)),
           jax.vmap(jax.grad(lambda a: f(jnp, a)))(z), rtol=1e-9)


def test_jit_large_complex_chain():
    """A chain long and large enough for the CPU backend's fusion passes."""
    rng = np.random.default_rng(7)
    z = _c(rng, (64, 128)).astype(np.complex64)

    def f(a):
        return mnp.abs(mnp.exp(a * 0.5) * a + a * a - 1j) * 2.0 + mnp.real(a * mnp.conj(a))

    want = np.abs(np.exp(z * 0.5) * z + z * z - 1j) * 2.0 + np.real(z * np.conj(z))
    got = mx.jit(f)(mnp.asarray(z))
    assert got.dtype == np.float32
    _close(got, want, rtol=2e-5, atol=2e-5)
    g = mx.jit(mx.grad(lambda a: mnp.sum(f(a))))(mnp.asarray(z))
    _close(g, mx.grad(lambda a: mnp.sum(f(a)))(mnp.asarray(z)), rtol=1e-5, atol=1e-5)


# --- mx.testing.check_grads with complex arguments ------------------------------------------------
def test_check_grads_complex():
    z, r = np.array([1 + 2j, -0.5 + 0.3j]), np.array([0.3, 1.2])
    mx.testing.check_grads(lambda a, b: mnp.exp(a) * b + mnp.abs(a) ** 2, (z, r), order=2)
    mx.testing.check_grads(lambda a: mnp.fft.fft(a) * mnp.conj(a), (z,), order=2)
    mx.testing.check_grads(lambda a: mnp.fft.irfft(a, n=3), (z,), order=2)
    g = mx.testing.numerical_grad(lambda a: mnp.sum(mnp.abs(a) ** 2), (z,))[0]
    _close(g, 2 * np.conj(z), rtol=1e-8)


def test_check_grads_catches_a_conjugation_error(monkeypatch):
    """A vjp missing the conjugate that JAX's transpose of conj needs is reported."""
    from mirax.ops import elementwise as ew
    monkeypatch.setattr(ew.conj_p, "vjp_rule", lambda ct, out, x, needs=None: [ct])
    with pytest.raises(AssertionError, match="rev-mode"):
        mx.testing.check_grads(lambda a: mnp.conj(a) * 2, (np.array([1 + 2j]),), order=1,
                               modes="rev")


def test_array_methods_and_eig_refusal():
    z = np.array([[1 + 2j, 3 - 1j], [0.5j, 2.0]])
    a = mnp.asarray(z)
    _close(a.real, z.real)
    _close(a.imag, z.imag)
    _close(a.conj(), z.conj())
    _close(a.conjugate(), z.conj())
    _close(mnp.ones(2).imag, [0.0, 0.0])
    _close(mx.grad(lambda x: mnp.sum(x.real * x.imag))(a),
           np.conj(z.imag + 1j * z.real))   # d/dx - i d/dy of x y is y - i x
    with pytest.raises(NotImplementedError, match="eigenvectors"):
        mx.grad(lambda x: mnp.sum(mnp.abs(mnp.linalg.eig(x)[1])))(a)


def test_isclose_can_cast_nan_to_num():
    a = np.array([1 + 1j, 2 + 1e-9j, np.inf + 0j, 1 + 2j])
    b = np.array([1 + 1j, 2 + 0j, np.inf + 0j, 1 + 2.1j])
    np.testing.assert_array_equal(mnp.isclose(a, b), np.isclose(a, b))
    for f, t in (("float32", "complex64"), ("complex64", "float32"), ("complex128", "complex64")):
        for casting in ("safe", "same_kind"):
            assert mnp.can_cast(f, t, casting) == np.can_cast(f, t, casting), (f, t, casting)
    v = np.array([np.nan + 1j, np.inf - np.inf * 1j], np.complex64)
    np.testing.assert_array_equal(np.asarray(mnp.nan_to_num(mnp.asarray(v))), np.nan_to_num(v))
