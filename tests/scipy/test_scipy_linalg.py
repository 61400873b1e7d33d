"""mirax.scipy.linalg against scipy.linalg (values, float64) and jax.scipy.linalg (names,
signatures and conventions; JAX sweeps marked slow), derivatives against central finite
differences, and the LU primitive's rules (jvp, vjp, vmap)."""
import jax
import jax.scipy.linalg as jsl
import numpy as np
import pytest
import scipy.linalg as sl

import mirax as mx
import mirax.scipy.linalg as ml
from mirax.ops.lu import lu as lu_prim

RNG = np.random.default_rng(0)
A = RNG.normal(size=(4, 4))
B = RNG.normal(size=(4, 2))
SPD = A @ A.T + 4 * np.eye(4)


@pytest.fixture
def x64():
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", False)


def _close(got, want, rtol=1e-10, atol=1e-12, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def test_cholesky_family_vs_scipy():
    for lower in (False, True):
        _close(ml.cholesky(SPD, lower=lower), sl.cholesky(SPD, lower=lower))
        c = ml.cho_factor(SPD, lower=lower)
        assert c[1] is lower
        for b in (B, B[:, 0]):
            _close(ml.cho_solve(c, b), sl.cho_solve(sl.cho_factor(SPD, lower=lower), b))


@pytest.mark.parametrize("trans", [0, 1, 2, "N", "T", "C"])
def test_solve_triangular_vs_scipy(trans):
    for lower in (False, True):
        for unit in (False, True):
            for b in (B, B[:, 1]):
                _close(ml.solve_triangular(A, b, trans=trans, lower=lower, unit_diagonal=unit),
                       sl.solve_triangular(A, b, trans=trans, lower=lower,
                                           unit_diagonal=unit), 1e-9, 1e-12)
    with pytest.raises(ValueError):
        ml.solve_triangular(A, B, trans=3)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (1, 1)])
def test_lu_vs_scipy(shape):
    a = RNG.normal(size=shape)
    for got, want in zip(ml.lu(a), sl.lu(a)):
        _close(got, want)
    for got, want in zip(ml.lu(a, permute_l=True), sl.lu(a, permute_l=True)):
        _close(got, want)
    packed, piv = ml.lu_factor(a)
    spacked, spiv = sl.lu_factor(a)
    _close(packed, spacked)
    assert np.array_equal(np.asarray(piv), spiv)


def test_lu_singular_and_batched():
    a = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 2.0], [1.0, 3.0, 0.0]])
    p, lo, up = ml.lu(a)
    _close(np.asarray(p) @ np.asarray(lo) @ np.asarray(up), a, 0, 1e-15)
    stack = RNG.normal(size=(2, 3, 4, 4))
    p, lo, up = (np.asarray(x) for x in ml.lu(stack))
    _close(p @ lo @ up, stack, 1e-12, 1e-12)
    packed, piv = ml.lu_factor(stack)
    for i in range(2):
        for j in range(3):
            _close(np.asarray(packed)[i, j], sl.lu_factor(stack[i, j])[0])


@pytest.mark.parametrize("trans", [0, 1, 2])
def test_lu_solve_vs_scipy(trans):
    for b in (B, B[:, 0]):
        _close(ml.lu_solve(ml.lu_factor(A), b, trans=trans),
               sl.lu_solve(sl.lu_factor(A), b, trans=trans), 1e-10, 1e-12)
    stack = np.stack([A, A.T + np.eye(4)])
    got = ml.lu_solve(ml.lu_factor(stack), B, trans=trans)
    want = np.stack([sl.lu_solve(sl.lu_factor(m), B, trans=trans) for m in stack])
    _close(got, want, 1e-10, 1e-12)
    # traced pivots: the permutation is built with selects
    jitted = mx.jit(lambda a, b: ml.lu_solve(ml.lu_factor(a), b, trans=trans))
    _close(jitted(A, B), sl.lu_solve(sl.lu_factor(A), B, trans=trans), 1e-10, 1e-12)


@pytest.mark.parametrize("scale", [1e-3, 0.1, 1.0, 10.0, 60.0])
def test_expm_vs_scipy(scale):
    want = sl.expm(scale * A)
    # backward stable to ~1e-15 * cond; relative to the largest entry
    _close(ml.expm(scale * A), want, 1e-12, 1e-13 * np.abs(want).max())
    got32 = ml.expm((scale * A).astype(np.float32))
    assert np.asarray(got32).dtype == np.float32
    _close(got32, want, 2e-5, 2e-6 * np.abs(want).max())


def test_expm_batched_triangular_and_overflow():
    stack = np.stack([A, 0.3 * A, np.triu(A)])
    _close(ml.expm(stack), np.stack([sl.expm(m) for m in stack]), 1e-12, 1e-12)
    _close(ml.expm(np.triu(A), upper_triangular=True), sl.expm(np.triu(A)), 1e-12, 1e-12)
    assert np.isnan(np.asarray(ml.expm(1e8 * A, max_squarings=4))).all()
    e, d = ml.expm_frechet(A, B @ B[:, ::-1].T)
    es, ds = sl.expm_frechet(A, B @ B[:, ::-1].T)
    _close(e, es, 1e-12, 1e-12)
    _close(d, ds, 1e-10, 1e-12)


def test_solvers_and_decompositions_vs_scipy():
    for assume_a in ("gen", "sym", "her", "pos"):
        _close(ml.solve(SPD, B, assume_a=assume_a), sl.solve(SPD, B, assume_a=assume_a))
    _close(ml.solve(np.tril(SPD), B, assume_a="pos", lower=True),
           sl.solve(np.tril(SPD), B, assume_a="pos", lower=True))
    with pytest.raises(ValueError):
        ml.solve(SPD, B, assume_a="banded")
    _close(ml.inv(A), sl.inv(A))
    _close(ml.det(A), sl.det(A))
    for lower in (True, False):
        w, v = ml.eigh(A, lower=lower)
        ws, vs = sl.eigh(A, lower=lower)
        _close(w, ws, 1e-12, 1e-12)
        _close(np.abs(np.asarray(v)), np.abs(vs), 1e-10, 1e-12)
        _close(ml.eigh(A, lower=lower, eigvals_only=True), ws, 1e-12, 1e-12)
    for full in (True, False):
        u, s, vh = ml.svd(A[:, :3], full_matrices=full)
        us, ss, vhs = sl.svd(A[:, :3], full_matrices=full)
        assert np.asarray(u).shape == us.shape and np.asarray(vh).shape == vhs.shape
        _close(s, ss, 1e-12, 1e-12)
    _close(ml.svd(A, compute_uv=False), sl.svd(A, compute_uv=False), 1e-12, 1e-12)
    for mode in ("full", "economic", "r"):
        got, want = ml.qr(A[:, :3], mode=mode), sl.qr(A[:, :3], mode=mode)
        assert len(got) == len(want)
        for g, w in zip(got, want):   # up to the signs of r's rows
            _close(np.abs(np.asarray(g)), np.abs(w), 1e-12, 1e-12)
    for side, a in (("right", A[:, :3]), ("left", A[:3])):
        for g, w in zip(ml.polar(a, side), sl.polar(a, side)):
            _close(g, w, 1e-12, 1e-12)


def test_constructions_vs_scipy():
    _close(ml.block_diag(1.0, [2.0, 3.0], A[:2, :3], np.ones((0, 2))),
           sl.block_diag(1.0, [2.0, 3.0], A[:2, :3], np.ones((0, 2))), 0, 0)
    _close(ml.toeplitz([1.0, 2, 3], [1.0, 4, 5, 6]), sl.toeplitz([1.0, 2, 3], [1.0, 4, 5, 6]))
    _close(ml.toeplitz([1.0, 2, 3]), sl.toeplitz([1.0, 2, 3]))
    _close(ml.hankel([1.0, 2, 3], [3.0, 4, 5, 6]), sl.hankel([1.0, 2, 3], [3.0, 4, 5, 6]))
    _close(ml.hankel([1.0, 2, 3]), sl.hankel([1.0, 2, 3]))
    _close(ml.circulant([1.0, 2, 3]), sl.circulant([1.0, 2, 3]))
    _close(ml.companion([2.0, 2, 3, 4]), sl.companion([2.0, 2, 3, 4]))
    _close(ml.hilbert(4), sl.hilbert(4), 1e-7, 0)
    for kind in (None, "lower", "upper"):
        _close(ml.pascal(5, kind), sl.pascal(5, kind or "symmetric"), 0, 0)
        _close(ml.invpascal(5, kind), sl.invpascal(5, kind or "symmetric"), 0, 0)
    _close(ml.invhilbert(5), sl.invhilbert(5), 0, 0)
    for full in (False, True):
        _close(ml.helmert(5, full), sl.helmert(5, full), 1e-7, 0)   # float32, as JAX
    assert np.asarray(ml.hadamard(8)).dtype == np.int32
    _close(ml.hadamard(8), sl.hadamard(8), 0, 0)
    _close(ml.leslie(np.array([0.1, 2.0, 1.0]), np.array([0.2, 0.8])),
           sl.leslie([0.1, 2.0, 1.0], [0.2, 0.8]), 0, 0)
    _close(ml.fiedler(np.array([1.0, 2, 4])), sl.fiedler([1.0, 2, 4]), 0, 0)
    for a in ([1.0, 2], [1.0, 2, 3], [2.0, 2, 3, 4], [1.0, 2, 3, 4, 5], [3.0, 2, 3, 4, 5, 6, 7]):
        _close(ml.fiedler_companion(np.array(a)), sl.fiedler_companion(np.array(a)), 0, 0)
    for mode in ("full", "same", "valid"):
        for a, n in (([1.0, 2, 3], 5), ([1.0, 2, 3, 4, 5], 3), ([1.0, 2], 2)):
            _close(ml.convolution_matrix(np.array(a), n, mode),
                   sl.convolution_matrix(np.array(a), n, mode), 0, 0)


# --- derivatives -------------------------------------------------------------------------------
DERIVS = [
    ("cholesky", lambda a: ml.cholesky(a @ a.T + 4 * np.eye(4)), (A,)),
    ("cho_solve", lambda a, b: ml.cho_solve(ml.cho_factor(a @ a.T + 4 * np.eye(4), True), b),
     (A, B)),
    ("solve_triangular", lambda a, b: ml.solve_triangular(a + 4 * np.eye(4), b, trans=1,
                                                          lower=True), (A, B)),
    ("lu", lambda a: ml.lu(a)[1] + ml.lu(a)[2], (A,)),
    ("lu_solve", lambda a, b: ml.lu_solve(ml.lu_factor(a), b), (A, B)),
    ("lu_solve_T", lambda a, b: ml.lu_solve(ml.lu_factor(a), b, trans=1), (A, B)),
    ("expm", lambda a: ml.expm(0.7 * a), (A[:3, :3],)),
    ("solve_pos", lambda a, b: ml.solve(a @ a.T + 4 * np.eye(4), b, assume_a="pos"), (A, B)),
    ("det", lambda a: ml.det(a), (A,)),
    ("polar", lambda a: ml.polar(a)[0], (A[:, :3],)),
]


@pytest.mark.parametrize("name,f,args", DERIVS, ids=[d[0] for d in DERIVS])
def test_derivatives_vs_finite_differences(name, f, args):
    mx.testing.check_grads(f, args, order=1, modes=("fwd", "rev"), rtol=1e-6)
    if name in ("lu", "lu_solve", "cho_solve"):
        mx.testing.check_grads(f, args, order=2, modes=("rev",), rtol=1e-4)


def test_lu_primitive_rules():
    a = RNG.normal(size=(3, 3, 3))
    packed = np.asarray(mx.vmap(lambda m: lu_prim(m)[0])(a))
    _close(packed, np.stack([sl.lu_factor(m)[0] for m in a]))
    # the vjp is the adjoint of the jvp: <ct, J t> = <J^T ct, t>
    t, ct = RNG.normal(size=(3, 3)), RNG.normal(size=(3, 3))
    _, jt = mx.jvp(lambda m: lu_prim(m)[0], (a[0],), (t,))
    _, pull = mx.vjp(lambda m: lu_prim(m)[0], a[0])
    np.testing.assert_allclose(np.sum(np.asarray(jt) * ct),
                               np.sum(np.asarray(pull(ct)[0]) * t), rtol=1e-12)
    with pytest.raises(NotImplementedError):
        mx.grad(lambda m: lu_prim(m)[0].sum())(RNG.normal(size=(3, 4)))


@pytest.mark.slow
def test_vs_jax(x64):
    checks = [
        (ml.cholesky(SPD), jsl.cholesky(SPD)),
        (ml.cho_solve(ml.cho_factor(SPD), B), jsl.cho_solve(jsl.cho_factor(SPD), B)),
        (ml.solve_triangular(A, B, trans="T", lower=True), jsl.solve_triangular(A, B, trans="T",
                                                                               lower=True)),
        (ml.lu_solve(ml.lu_factor(A), B, trans=1), jsl.lu_solve(jsl.lu_factor(A), B, trans=1)),
        (ml.expm(A), jsl.expm(A)), (ml.block_diag(A[:2], 3.0), jsl.block_diag(A[:2], 3.0)),
        (ml.solve(SPD, B, assume_a="pos"), jsl.solve(SPD, B, assume_a="pos")),
        (ml.det(A), jsl.det(A)), (ml.inv(A), jsl.inv(A)),
        (ml.toeplitz([1.0, 2.0], [1.0, 3.0, 4.0]), jsl.toeplitz(np.array([1.0, 2.0]),
                                                               np.array([1.0, 3.0, 4.0]))),
    ]
    checks += list(zip(ml.lu(A), jsl.lu(A))) + list(zip(ml.lu_factor(A), jsl.lu_factor(A)))
    for got, want in checks:
        _close(got, want, 1e-9, 1e-12)
    g = mx.grad(lambda a: ml.expm(a).sum() + ml.lu(a)[2].sum())(A)
    jg = jax.grad(lambda a: jsl.expm(a).sum() + jsl.lu(a)[2].sum())(A)
    _close(g, jg, 1e-8, 1e-10)
