"""mx.random samplers beyond the basics: gamma family, poisson, logistic, ..., keys as data.

Same key, same numbers as jax.random (goldens recorded from jax 0.10, re-checked live under
-m slow: JAX's compiles are slow on the CI machine); distributions checked by a KS statistic
or moments with fixed keys and loose, deterministic thresholds; shapes, dtypes, broadcasting,
determinism under jit / vmap, and derivatives with respect to the parameters."""
import math

import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
import mirax.random as mr

A3 = np.array([0.3, 1.0, 4.5], np.float32)
MU = np.array([1.0, -2.0, 0.5], np.float32)
COV = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]], np.float32)
ALPHA = np.array([0.5, 1.0, 3.0], np.float32)
LAM = np.array([0.0, 0.5, 3.0, 9.9, 10.0, 40.0, 500.0], np.float32)
NB = np.array([0.0, 3.0, 20.0, 100.0, 1000.0, 5.0], np.float32)   # inversion and BTRS
PB = np.array([0.3, 0.9, 0.5, 0.05, 0.7, 0.6], np.float32)
P3 = np.array([0.2, 0.3, 0.5], np.float32)
# name: (sampler(r, key), the same call for mirax.random and jax.random; bit-exact?)
CASES = {
    "cauchy": (lambda r, k: r.cauchy(k, (6,)), False),
    "logistic": (lambda r, k: r.logistic(k, (6,)), False),
    "pareto": (lambda r, k: r.pareto(k, A3 + 1, (2, 3)), False),
    "lognormal": (lambda r, k: r.lognormal(k, 0.5, (6,)), False),
    "weibull_min": (lambda r, k: r.weibull_min(k, 2.0, 1.5, (6,)), False),
    "rayleigh": (lambda r, k: r.rayleigh(k, A3, (2, 3)), False),
    "maxwell": (lambda r, k: r.maxwell(k, (6,)), False),
    "double_sided_maxwell": (lambda r, k: r.double_sided_maxwell(k, 1.0, A3, (2,)), False),
    "rademacher": (lambda r, k: r.rademacher(k, (10,)), True),
    "triangular": (lambda r, k: r.triangular(k, 0.0, A3 / 5, 1.0, (2, 3)), True),
    "wald": (lambda r, k: r.wald(k, A3, (2, 3)), False),
    "geometric": (lambda r, k: r.geometric(k, 0.3, (10,)), True),
    "poisson": (lambda r, k: r.poisson(k, LAM, (2, 7)), True),
    "binomial": (lambda r, k: r.binomial(k, NB, PB, (2, 6)), True),
    "multinomial": (lambda r, k: r.multinomial(k, 10.0, P3, shape=(4, 3)), True),
    "mvn_cholesky": (lambda r, k: r.multivariate_normal(k, MU, COV, (2,)), False),
    "mvn_svd": (lambda r, k: r.multivariate_normal(k, MU, COV, (2,), method="svd"), False),
    "orthogonal": (lambda r, k: r.orthogonal(k, 3, (2,)), False),
    "orthogonal_wide": (lambda r, k: r.orthogonal(k, 2, (), m=4), False),
    "gamma": (lambda r, k: r.gamma(k, A3, (2, 3)), False),
    "gamma_small": (lambda r, k: r.gamma(k, 0.05, (4,)), False),
    "loggamma": (lambda r, k: r.loggamma(k, A3, (2, 3)), False),
    "beta": (lambda r, k: r.beta(k, 0.5, A3, (3,)), False),
    "dirichlet": (lambda r, k: r.dirichlet(k, ALPHA, (2,)), False),
    "chisquare": (lambda r, k: r.chisquare(k, 3.0, (4,)), False),
    "f": (lambda r, k: r.f(k, 3.0, 5.0, (4,)), False),
    "t": (lambda r, k: r.t(k, 4.0, (4,)), False),
    "generalized_normal": (lambda r, k: r.generalized_normal(k, 1.5, (4,)), False),
    "ball": (lambda r, k: r.ball(k, 3, 2, (2,)), False),
}
GAMMA_GRAD_A = np.array([0.2, 0.7, 1.5, 3.0, 20.0], np.float32)

# jax.random's values for key jax.random.PRNGKey(7): name -> (shape, values)
GOLDEN = {
    'cauchy': ((6,), [0.6088751, 12.513639, -0.71298087, -0.17790125, 0.8865813, 0.43621054]),
    'logistic': ((6,), [0.726742, 3.6479602, -0.8337934, -0.22511172, 0.99912536, 0.53620684]),
    'pareto': ((2, 3), [2.3688643, 6.276644, 1.067789, 1.570621, 1.9276683, 1.1986915]),
    'lognormal': ((6,), [1.2530963, 2.6557455, 0.7725027, 0.9319556, 1.3603586, 1.1819413]),
    'weibull_min': ((6,), [2.158415, 4.7617164, 1.013516, 1.401992, 2.3976724, 1.9956882]),
    'rayleigh': ((2, 3), [0.26644048, 0.22676343, 6.9554887, 0.38231447, 0.7918295, 4.3188796]),
    'maxwell': ((6,), [2.0702868, 0.7144703, 1.4999796, 1.705673, 2.3454835, 0.7757431]),
    'double_sided_maxwell': ((2, 3), [
        0.62842137, -1.5850527, 7.2107754, 1.7308614, 2.2851396, -3.9148078]),
    'rademacher': ((10,), [-1, -1, 1, 1, -1, -1, 1, 1, 1, 1]),
    'triangular': ((2, 3), [0.44650614, 0.8574991, 0.522072, 0.27703458, 0.5360057, 0.75354934]),
    'wald': ((2, 3), [0.5472364, 1.1520158, 1.5618274, 0.2367834, 0.13003707, 0.9317483]),
    'geometric': ((10,), [2, 1, 4, 3, 1, 2, 3, 3, 8, 7]),
    'poisson': ((2, 7), [0, 1, 1, 9, 9, 40, 521, 0, 2, 1, 6, 10, 37, 481]),
    'binomial': ((2, 6), [0.0, 3.0, 7.0, 6.0, 702.0, 4.0, 0.0, 3.0, 9.0, 4.0, 705.0, 2.0]),
    'multinomial': ((4, 3), [2.0, 4.0, 4.0, 3.0, 3.0, 4.0, 1.0, 3.0, 6.0, 1.0, 5.0, 4.0]),
    'mvn_cholesky': ((2, 3), [
        1.6381428, 0.0047137737, -0.24285805, 0.80068034, -1.4284093, 0.578037]),
    'mvn_svd': ((2, 3), [0.86554176, -4.041193, 0.9528875, 1.3115417, -2.4181232, 0.94465005]),
    'orthogonal': ((2, 3, 3), [
        0.9206921, 0.34078068, -0.19024861, -0.28757206, 0.9218923, 0.2596481, -0.26387176,
        0.18434578, -0.9467779, -0.9302523, -0.35838655, -0.078675956, 0.36598876,
        -0.9215807, -0.12938821, -0.026135245, -0.1491582, 0.9884679]),
    'orthogonal_wide': ((2, 4), [
        0.48498118, -0.5548469, 0.6615272, -0.13899633, 0.86730146, 0.36940756, -0.3323052,
        -0.029991727]),
    'gamma': ((2, 3), [5.715881e-07, 0.21791683, 2.9325645, 1.817205, 0.17892723, 3.2068923]),
    'gamma_small': ((4,), [0.0, 0.0010382405, 4.6201524e-24, 0.26521572]),
    'loggamma': ((2, 3), [-14.374847, -1.5236418, 1.0758772, 0.59729964, -1.7207761, 1.1653023]),
    'beta': ((3,), [0.053045664, 0.38676938, 0.00059794856]),
    'dirichlet': ((2, 3), [
        0.000121358964, 0.11317272, 0.88670594, 0.5276351, 0.04035973, 0.4320052]),
    'chisquare': ((4,), [3.0220666, 1.0437909, 1.1556823, 5.7767997]),
    'f': ((4,), [0.4838432, 1.1076066, 1.6477009, 0.65449476]),
    't': ((4,), [1.989271, 0.14646532, -0.49617937, -0.68867284]),
    'generalized_normal': ((4,), [-0.11314882, -0.78606486, 0.058673814, 0.3168769]),
    'ball': ((2, 3), [-0.36388415, 0.3945854, 0.119758196, -0.48726168, 0.1332288, -0.14461814]),
    'gamma_grad': ((5,), [3.731838e-08, 0.9751961, 0.6622835, 1.3502649, 0.901703]),
    'loggamma_grad': ((5,), [107.459274, 2.1991107, 1.1461343, 0.2698849, 0.056155164]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_key_same_numbers_as_jax(name):
    fn, exact = CASES[name]
    out = fn(mr, mr.key(7))
    shape, vals = GOLDEN[name]
    ref = np.array(vals)
    ref = ref.astype(np.int32 if ref.dtype.kind == "i" else np.float32).reshape(shape)
    assert out.shape == shape and out.dtype == ref.dtype
    if exact:
        np.testing.assert_array_equal(np.asarray(out), ref)
    else:   # NumPy's log / exp / tan / QR differ from XLA's by an ulp or two
        np.testing.assert_allclose(np.asarray(out), ref, rtol=2e-5, atol=1e-6)


def test_gamma_gradient_equals_jax():
    k = mr.key(7)
    g = mx.grad(lambda a: mr.gamma(k, a).sum())(GAMMA_GRAD_A)
    np.testing.assert_allclose(np.asarray(g), GOLDEN["gamma_grad"][1], rtol=2e-5)
    g = mx.grad(lambda a: mr.loggamma(k, a).sum())(GAMMA_GRAD_A)
    np.testing.assert_allclose(np.asarray(g), GOLDEN["loggamma_grad"][1], rtol=2e-5)


@pytest.mark.slow
def test_goldens_equal_jax_live():
    jax = pytest.importorskip("jax")
    jr = jax.random
    for name, (fn, exact) in CASES.items():
        shape, vals = GOLDEN[name]
        live = np.asarray(fn(jr, jr.PRNGKey(7))).ravel()
        # JAX's transcendental functions round as the CPU at hand's XLA kernels do
        np.testing.assert_allclose(live, np.array(vals).astype(live.dtype),
                                   rtol=0 if exact else 2e-6, atol=0 if exact else 2e-7)
        out = np.asarray(fn(mr, mr.key(7)))
        ref = np.asarray(fn(jr, jr.PRNGKey(7)))
        np.testing.assert_allclose(out, ref, rtol=0 if exact else 2e-5, atol=0 if exact else 1e-6)
    a = jax.numpy.asarray(GAMMA_GRAD_A)
    g = jax.grad(lambda a: jr.gamma(jr.PRNGKey(7), a).sum())(a)
    np.testing.assert_array_equal(np.asarray(g), np.float32(GOLDEN["gamma_grad"][1]))


# --- distributions: KS statistics and moments with fixed keys --------------------------------
def _ks(x, cdf):
    x = np.sort(np.asarray(x, np.float64).ravel())
    n = len(x)
    c = cdf(x)
    return max(np.max(np.arange(1, n + 1) / n - c), np.max(c - np.arange(n) / n))


def _stats():
    return pytest.importorskip("scipy.stats")


KS = {   # name: (sample(key, n), scipy distribution (frozen))
    "cauchy": (lambda k, n: mr.cauchy(k, (n,)), lambda st: st.cauchy()),
    "logistic": (lambda k, n: mr.logistic(k, (n,)), lambda st: st.logistic()),
    "pareto": (lambda k, n: mr.pareto(k, 3.0, (n,)), lambda st: st.pareto(3.0)),
    "lognormal": (lambda k, n: mr.lognormal(k, 0.7, (n,)), lambda st: st.lognorm(0.7)),
    "weibull_min": (lambda k, n: mr.weibull_min(k, 2.0, 1.5, (n,)),
                    lambda st: st.weibull_min(1.5, scale=2.0)),
    "rayleigh": (lambda k, n: mr.rayleigh(k, 1.5, (n,)), lambda st: st.rayleigh(scale=1.5)),
    "maxwell": (lambda k, n: mr.maxwell(k, (n,)), lambda st: st.maxwell()),
    "triangular": (lambda k, n: mr.triangular(k, -1.0, 0.5, 2.0, (n,)),
                   lambda st: st.triang(0.5, loc=-1.0, scale=3.0)),
    "wald": (lambda k, n: mr.wald(k, 1.5, (n,)), lambda st: st.invgauss(1.5)),
    "gamma_small": (lambda k, n: mr.gamma(k, 0.4, (n,)), lambda st: st.gamma(0.4)),
    "gamma_large": (lambda k, n: mr.gamma(k, 7.0, (n,)), lambda st: st.gamma(7.0)),
    "beta": (lambda k, n: mr.beta(k, 0.6, 2.5, (n,)), lambda st: st.beta(0.6, 2.5)),
    "chisquare": (lambda k, n: mr.chisquare(k, 3.0, (n,)), lambda st: st.chi2(3.0)),
    "f": (lambda k, n: mr.f(k, 4.0, 7.0, (n,)), lambda st: st.f(4.0, 7.0)),
    "t": (lambda k, n: mr.t(k, 3.0, (n,)), lambda st: st.t(3.0)),
    "generalized_normal": (lambda k, n: mr.generalized_normal(k, 1.5, (n,)),
                           lambda st: st.gennorm(1.5)),
}


@pytest.mark.parametrize("name", sorted(KS))
def test_ks_statistic(name):
    st = _stats()
    sample, dist = KS[name]
    n = 1000
    x = np.asarray(sample(mr.key(11), n))
    assert x.shape == (n,) and x.dtype == np.float32 and np.all(np.isfinite(x))
    # the 1e-3 critical value is 1.95 / sqrt(n); the keys are fixed, so this is deterministic
    assert _ks(x, dist(st).cdf) < 1.95 / math.sqrt(n)


def test_loggamma_is_log_of_gamma_and_small_a():
    k = mr.key(3)
    a = np.array([0.01, 0.3, 1.0, 6.0], np.float32)
    np.testing.assert_allclose(np.exp(np.asarray(mr.loggamma(k, a))),
                               np.asarray(mr.gamma(k, a)), rtol=1e-5)
    lg = np.asarray(mr.loggamma(k, 1e-3, (400,)))
    assert np.all(np.isfinite(lg)) and np.mean(lg) < -100   # gamma(1e-3) underflows; log is ok


def test_discrete_moments():
    k = mr.key(5)
    g = np.asarray(mr.geometric(k, 0.25, (4000,)))
    assert g.dtype == np.int32 and g.min() >= 1
    assert abs(g.mean() - 4.0) < 0.15 and abs(g.var() - 12.0) < 1.5
    lam = np.array([0.7, 4.0, 25.0], np.float32)
    p = np.asarray(mr.poisson(k, lam, (3000, 3)))
    assert p.dtype == np.int32 and p.min() >= 0
    np.testing.assert_allclose(p.mean(0), lam, rtol=0.05)
    np.testing.assert_allclose(p.var(0), lam, rtol=0.1)
    n = np.array([4.0, 30.0, 200.0], np.float32)
    q = np.array([0.3, 0.6, 0.97], np.float32)
    b = np.asarray(mr.binomial(k, n, q, (3000, 3)))
    assert b.dtype == np.float32 and np.all(b == np.round(b)) and np.all((b >= 0) & (b <= n))
    np.testing.assert_allclose(b.mean(0), n * q, rtol=0.03)
    np.testing.assert_allclose(b.var(0), n * q * (1 - q), rtol=0.1)
    with np.errstate(invalid="ignore"):   # inf trials: JAX's BTRS runs on inf - inf
        bad = np.asarray(mr.binomial(k, np.array([-1.0, np.inf, 5.0]),
                                     np.array([0.5, 0.5, -0.1])))
    assert np.isnan(bad[0]) and bad[1] == np.inf and np.isnan(bad[2])
    m = np.asarray(mr.multinomial(k, np.array([7.0, 50.0], np.float32), P3, shape=(2000, 2, 3)))
    np.testing.assert_array_equal(m.sum(-1), np.broadcast_to([7.0, 50.0], (2000, 2)))
    np.testing.assert_allclose(m[:, 1].mean(0), 50 * P3, rtol=0.03)
    r = np.asarray(mr.rademacher(k, (4000,), mnp.float32))
    assert r.dtype == np.float32 and set(np.unique(r)) == {-1.0, 1.0} and abs(r.mean()) < 0.05
    assert np.all(np.asarray(mr.poisson(k, 0.0, (5,))) == 0)


def test_dirichlet_and_multivariate_normal_moments():
    k = mr.key(8)
    d = np.asarray(mr.dirichlet(k, ALPHA, (2000,)))
    assert d.shape == (2000, 3)
    np.testing.assert_allclose(d.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(d.mean(0), ALPHA / ALPHA.sum(), atol=0.015)
    for method in ("cholesky", "eigh", "svd"):
        x = np.asarray(mr.multivariate_normal(k, MU, COV, (4000,), method=method))
        assert x.shape == (4000, 3)
        np.testing.assert_allclose(x.mean(0), MU, atol=0.06)
        np.testing.assert_allclose(np.cov(x.T), COV, atol=0.08)
    # a singular covariance works with eigh / svd
    sing = np.array([[1.0, 1.0], [1.0, 1.0]], np.float32)
    x = np.asarray(mr.multivariate_normal(k, np.zeros(2, np.float32), sing, (50,), method="svd"))
    np.testing.assert_allclose(x[:, 0], x[:, 1], atol=1e-5)


def test_orthogonal_and_ball():
    k = mr.key(9)
    q = np.asarray(mr.orthogonal(k, 4, (3,)), np.float64)
    assert q.shape == (3, 4, 4)
    np.testing.assert_allclose(q @ np.swapaxes(q, -1, -2), np.broadcast_to(np.eye(4), q.shape),
                               atol=1e-5)
    w = np.asarray(mr.orthogonal(k, 2, (), mnp.float64, m=5))
    assert w.shape == (2, 5) and w.dtype == np.float64
    np.testing.assert_allclose(w @ w.T, np.eye(2), atol=1e-12)
    for p in (1.0, 2.0):
        b = np.asarray(mr.ball(k, 3, p, (2000,)))
        r = np.sum(np.abs(b) ** p, -1) ** (1 / p)
        assert b.shape == (2000, 3) and r.max() <= 1.0
        # uniform in a 3-d ball: P(r < s) = s^3
        assert _ks(r, lambda s: s ** 3) < 1.95 / math.sqrt(2000)


def test_maxwell_family_moments():
    k = mr.key(10)
    x = np.asarray(mr.double_sided_maxwell(k, 1.0, 2.0, (4000,)))
    assert x.shape == (4000,)
    assert abs(x.mean() - 1.0) < 0.15 and abs(x.var() - 12.0) < 1.0   # var = 3 scale^2
    x = np.asarray(mr.cauchy(k, (3,), mnp.float64))
    assert x.dtype == np.float64


# --- shapes, dtypes, broadcasting, determinism ------------------------------------------------
def test_parameter_broadcasting_and_shapes():
    k = mr.key(0)
    # (element counts kept at 6: the gamma sampler compiles once per count and dtype)
    assert mr.gamma(k, np.ones((2, 1), np.float32), (3, 2, 1)).shape == (3, 2, 1)
    assert mr.gamma(k, np.ones((2, 3), np.float32)).shape == (2, 3)
    assert mr.beta(k, np.ones(3), np.ones((2, 1))).shape == (2, 3)
    assert mr.pareto(k, A3).shape == (3,)
    assert mr.triangular(k, 0.0, A3 / 5, np.ones((2, 1))).shape == (2, 3)
    assert mr.poisson(k, np.ones((2, 3)), (4, 2, 3)).shape == (4, 2, 3)
    assert mr.dirichlet(k, np.ones((2, 3))).shape == (2, 3)
    assert mr.dirichlet(k, np.ones((1, 3)), (2, 1)).shape == (2, 1, 3)
    assert mr.multivariate_normal(k, np.zeros((4, 3)), np.eye(3)).shape == (4, 3)
    assert mr.double_sided_maxwell(k, np.zeros(2), 1.0, (3,)).shape == (3, 2)
    assert mr.weibull_min(k, 1.0, A3, (2, 3)).shape == (2, 3)
    assert mr.gamma(k, 2.0, (0,)).shape == (0,)
    for fn in (lambda: mr.gamma(k, A3, (2,)), lambda: mr.beta(k, A3, np.ones(2)),
               lambda: mr.rayleigh(k, A3, (3, 2))):
        with pytest.raises(ValueError, match=r"random\.\w+: .*f32\[3\]"):
            fn()
    with pytest.raises(ValueError, match="random.multivariate_normal"):
        mr.multivariate_normal(k, np.zeros(3), np.eye(2))
    with pytest.raises(ValueError, match="method"):
        mr.multivariate_normal(k, np.zeros(2), np.eye(2), method="lu")
    with pytest.raises(TypeError, match="random.gamma: expected a key"):
        mr.gamma(np.zeros(3), 1.0)
    with pytest.raises(TypeError, match="floating dtype"):
        mr.beta(k, 1.0, 1.0, dtype=mnp.int32)
    with pytest.raises(TypeError, match="integer dtype"):
        mr.poisson(k, 1.0, dtype=mnp.float32)


def test_dtypes():
    k = mr.key(1)
    for fn in (lambda dt: mr.gamma(k, 2.0, (3,), dt), lambda dt: mr.logistic(k, (3,), dt),
               lambda dt: mr.t(k, 3.0, (3,), dt), lambda dt: mr.wald(k, 1.0, (3,), dt)):
        assert fn(mnp.float64).dtype == np.float64
        assert fn(None).dtype == np.float32
    assert mr.logistic(k, (3,), mnp.float16).dtype == np.float16
    assert mr.poisson(k, 2.0, (3,), mnp.int64).dtype == np.int64
    assert mr.geometric(k, 0.5, (3,), mnp.int8).dtype == np.int8
    assert mr.rademacher(k, (3,)).dtype == np.int32
    assert mr.multivariate_normal(k, np.zeros(2), np.eye(2)).dtype == np.float64  # NumPy f64


DETERMINISM = {
    "gamma": lambda k: mr.gamma(k, A3),
    "poisson": lambda k: mr.poisson(k, np.array([2.0, 30.0], np.float32)),
    "wald": lambda k: mr.wald(k, 1.0, (3,)),
    "multivariate_normal": lambda k: mr.multivariate_normal(k, MU, COV),
    "orthogonal": lambda k: mr.orthogonal(k, 3),
    "geometric": lambda k: mr.geometric(k, 0.4, (4,)),
    "binomial": lambda k: mr.binomial(k, np.array([5.0, 80.0], np.float32), 0.4),
}


@pytest.mark.parametrize("name", sorted(DETERMINISM))
def test_same_key_same_numbers_eager_jit_vmap(name):
    f = DETERMINISM[name]
    keys = mr.split(mr.key(4), 2)
    eager = np.stack([np.asarray(f(keys[i])) for i in range(2)])
    np.testing.assert_allclose(np.asarray(mx.jit(f)(keys[1])), eager[1], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(mx.vmap(f)(keys)), eager, rtol=1e-6)
    assert not np.array_equal(eager[0], eager[1])


def test_keys_as_data():
    k = mr.key(3)
    assert mr.clone(k) is k or np.array_equal(np.asarray(mr.clone(k)), np.asarray(k))
    ks = mr.split(k, 4)
    np.testing.assert_array_equal(np.asarray(mr.key_data(ks)), np.asarray(ks))
    w = mr.wrap_key_data(np.asarray(mr.key_data(k)))
    np.testing.assert_array_equal(np.asarray(mr.normal(w, (3,))), np.asarray(mr.normal(k, (3,))))
    assert mr.wrap_key_data(np.array([0, 5], np.int64)).dtype == np.uint32
    assert mr.wrap_key_data(np.zeros((2, 2), np.uint32), impl="threefry2x32").shape == (2, 2)
    with pytest.raises(ValueError, match="threefry2x32"):
        mr.wrap_key_data(np.zeros(2, np.uint32), impl="rbg")
    with pytest.raises(TypeError, match="random.key_data"):
        mr.key_data(np.zeros(3, np.uint32))


# --- derivatives with respect to the parameters -----------------------------------------------
REPARAM = {   # name: (sample(params...), params in float64) -- samples linear/smooth in them
    "rayleigh": (lambda s: mr.rayleigh(mr.key(2), s, (4,), mnp.float64), (1.3,)),
    "weibull_min": (lambda s, c: mr.weibull_min(mr.key(2), s, c, (4,), mnp.float64),
                    (2.0, 1.5)),
    "pareto": (lambda b: mr.pareto(mr.key(2), b, (4,), mnp.float64), (2.5,)),
    "lognormal": (lambda s: mr.lognormal(mr.key(2), s, (4,), mnp.float64), (0.6,)),
    "double_sided_maxwell": (lambda m, s: mr.double_sided_maxwell(mr.key(2), m, s, (4,),
                                                                  mnp.float64), (0.5, 2.0)),
    "triangular": (lambda a, m, b: mr.triangular(mr.key(2), a, m, b, (4,), mnp.float64),
                   (-1.0, 0.3, 2.0)),
    "wald": (lambda m: mr.wald(mr.key(2), m, (4,), mnp.float64), (1.4,)),
    "multivariate_normal": (lambda m, c: mr.multivariate_normal(
        mr.key(2), m, c @ c.T + np.eye(3), (2,), mnp.float64),
        (MU.astype(np.float64), COV.astype(np.float64))),
}


@pytest.mark.parametrize("name", sorted(REPARAM))
def test_location_scale_gradients(name):
    fn, params = REPARAM[name]
    params = tuple(np.asarray(p, np.float64) for p in params)
    mx.testing.check_grads(fn, params, order=1, modes=("fwd", "rev"))


def _gamma_dx_da_ref(a, x):
    """-(dF/da) / f(x) for the Gamma(a) CDF F and density f, by scipy in float64."""
    sp = pytest.importorskip("scipy.special")
    h = 1e-6 * max(a, 1.0)
    dF = (sp.gammainc(a + h, x) - sp.gammainc(a - h, x)) / (2 * h)
    return -dF / np.exp((a - 1) * np.log(x) - x - sp.gammaln(a))


def test_gamma_implicit_gradient_against_the_cdf():
    # float64 samples on both sides of the series / continued-fraction switch (x > 1, x > a)
    a = np.array([0.15, 0.6, 1.0, 2.5, 9.0, 40.0], np.float64)
    for seed in (0, 1):
        k = mr.key(seed)
        x = np.asarray(mr.gamma(k, a, dtype=mnp.float64))
        g = np.asarray(mx.grad(lambda a: mr.gamma(k, a, dtype=mnp.float64).sum())(a))
        ref = np.array([_gamma_dx_da_ref(ai, xi) for ai, xi in zip(a, x)])
        np.testing.assert_allclose(g, ref, rtol=1e-5)
        lg = np.asarray(mx.grad(lambda a: mr.loggamma(k, a, dtype=mnp.float64).sum())(a))
        np.testing.assert_allclose(lg, ref / x, rtol=1e-5)


def test_gamma_gradient_is_unbiased():
    # E[x] = a, so E[dx/da] = 1; E[log x] = digamma(a), so E[d log x / da] = trigamma(a)
    k = mr.key(12)
    a = np.full(1000, 2.5, np.float32)
    g = np.asarray(mx.grad(lambda a: mr.gamma(k, a).sum())(a))
    assert np.all(np.isfinite(g)) and abs(g.mean() - 1.0) < 0.05
    # beta / t / chisquare are differentiable in their parameters through gamma
    gb = mx.grad(lambda a: mr.beta(k, a, 2.0, (3,)).sum())(1.5)
    gt = mx.grad(lambda d: mr.t(k, d, (3,)).sum())(4.0)
    gc = mx.grad(lambda d: mr.chisquare(k, d, (3,)).sum())(3.0)
    assert all(np.isfinite(float(v)) for v in (gb, gt, gc))
    # jvp agrees with grad, and vmap of grad with a loop
    _, t = mx.jvp(lambda a: mr.gamma(k, a), (np.float32(2.5),), (np.float32(1.0),))
    g1 = mx.grad(lambda a: mr.gamma(k, a))(np.float32(2.5))
    np.testing.assert_allclose(float(t), float(g1), rtol=1e-6)
    gv = mx.vmap(mx.grad(lambda a: mr.gamma(k, a)))(A3)
    np.testing.assert_allclose(np.asarray(gv), [float(mx.grad(lambda a: mr.gamma(k, a))(a))
                                                for a in A3], rtol=1e-6)
