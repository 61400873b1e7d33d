"""Small JAX programs written once against a `jax` namespace and run as written on mirax
(`import mirax as jax`), using jax.scipy.stats / linalg / signal, tree_util, jit, grad,
jacobian and make_jaxpr together. By default mirax's results are checked against scipy /
NumPy references and finite differences; the slow run checks them against JAX itself.
NOTE: constants are written so that they take the data's dtype (math.log, dtype=): mirax has
no x64 switch, so jnp.log(2 * jnp.pi) would be float32, as in JAX without x64."""
import math

import numpy as np
import pytest
import scipy.linalg as sl
import scipy.stats as sst

import mirax
import mirax.numpy

RNG = np.random.default_rng(0)
X = np.sort(RNG.uniform(-2, 2, 12))
Y = np.sin(2 * X) + 0.1 * RNG.normal(size=12)
PARAMS = {"log_amp": np.float64(0.1), "log_len": np.float64(-0.3), "log_noise": np.float64(-2.0)}


def gp_program(jax, jnp):
    """Gaussian-process regression: negative log marginal likelihood, one gradient step."""
    def kernel(params, a, b):
        d = (a[:, None] - b[None, :]) / jnp.exp(params["log_len"])
        return jnp.exp(2 * params["log_amp"]) * jnp.exp(-0.5 * d ** 2)

    def nll(params, x, y):
        k = kernel(params, x, x) + jnp.exp(2 * params["log_noise"]) * jnp.eye(x.shape[0],
                                                                             dtype=x.dtype)
        c = jax.scipy.linalg.cho_factor(k, lower=True)
        alpha = jax.scipy.linalg.cho_solve(c, y)
        logdet = 2 * jnp.sum(jnp.log(jnp.diag(c[0])))
        direct = -jax.scipy.stats.multivariate_normal.logpdf(y, jnp.zeros_like(y), k)
        return 0.5 * y @ alpha + 0.5 * logdet + 0.5 * x.shape[0] * math.log(2 * math.pi), direct

    @jax.jit
    def step(params, x, y):
        (loss, direct), grads = jax.value_and_grad(nll, has_aux=True)(params, x, y)
        new = jax.tree_util.tree_map(lambda p, g: p - 0.05 * g, params, grads)
        return loss, direct, grads, new
    return step


def logistic_program(jax, jnp):
    """Bayesian logistic regression: log posterior, its Jacobian in the weights, a jaxpr."""
    def log_post(w, x, y):
        prior = jnp.sum(jax.scipy.stats.norm.logpdf(w, 0.0, 2.0))
        p = jax.scipy.special.expit(x @ w)
        like = jnp.sum(jax.scipy.stats.bernoulli.logpmf(y, p))
        return prior + like
    jac = jax.jacobian(lambda w, x, y: jax.vmap(lambda xi, yi: log_post(w, xi[None], yi[None]))(
        x, y))
    return log_post, jac, jax.make_jaxpr(log_post)


def smoothing_program(jax, jnp):
    """A Gaussian smoothing of a signal and an image by convolution, and their correlations."""
    def smooth(sig, img):
        t = jnp.linspace(-2.0, 2.0, 5, dtype=sig.dtype)
        k = jax.scipy.stats.norm.pdf(t, 0.0, 1.0)
        k = k / k.sum()
        s = jax.scipy.signal.convolve(sig, k, mode="same")
        im = jax.scipy.signal.convolve2d(img, jnp.outer(k, k), mode="same")
        c = jax.scipy.signal.correlate(s, sig, mode="valid")
        return s, im, c
    return smooth


def _w_xy():
    x = RNG.normal(size=(10, 3))
    y = (RNG.uniform(size=10) < 0.5).astype(np.float64)
    return RNG.normal(size=3), x, y


def test_gp_program_on_mirax():
    step = gp_program(mirax, mirax.numpy)
    # float64 parameters: NumPy scalars are weakly typed (as Python floats), so the program
    # gets them as float64 arrays
    loss, direct, grads, new = step({k: mirax.numpy.asarray(v, dtype=mirax.numpy.float64)
                                     for k, v in PARAMS.items()}, X, Y)
    amp2, ell, noise2 = (np.exp(2 * PARAMS["log_amp"]), np.exp(PARAMS["log_len"]),
                         np.exp(2 * PARAMS["log_noise"]))
    k = amp2 * np.exp(-0.5 * ((X[:, None] - X[None, :]) / ell) ** 2) + noise2 * np.eye(12)
    want = -sst.multivariate_normal.logpdf(Y, np.zeros(12), k)
    np.testing.assert_allclose(float(loss), want, rtol=1e-10)
    np.testing.assert_allclose(float(direct), want, rtol=1e-10)
    # the gradient against central differences of the scipy value
    for name in PARAMS:
        def f(v, name=name):
            p = dict(PARAMS, **{name: v})
            a2, e, n2 = np.exp(2 * p["log_amp"]), np.exp(p["log_len"]), np.exp(2 * p["log_noise"])
            kk = a2 * np.exp(-0.5 * ((X[:, None] - X[None, :]) / e) ** 2) + n2 * np.eye(12)
            return -sst.multivariate_normal.logpdf(Y, np.zeros(12), kk)
        h = 1e-6
        fd = (f(PARAMS[name] + h) - f(PARAMS[name] - h)) / (2 * h)
        np.testing.assert_allclose(float(grads[name]), fd, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(float(new[name]), PARAMS[name] - 0.05 * float(grads[name]))
    assert sl.cho_factor is not None


def test_logistic_program_on_mirax():
    log_post, jac, jaxpr = logistic_program(mirax, mirax.numpy)
    w, x, y = _w_xy()
    p = 1 / (1 + np.exp(-x @ w))
    want = sst.norm.logpdf(w, 0, 2).sum() + sst.bernoulli.logpmf(y, p).sum()
    np.testing.assert_allclose(float(log_post(w, x, y)), want, rtol=1e-12)
    j = np.asarray(jac(w, x, y))                   # d log_post(w, x_i, y_i) / dw, (10, 3)
    prior_grad = -w / 4.0
    np.testing.assert_allclose(j, prior_grad + (y - p)[:, None] * x, rtol=1e-10, atol=1e-12)
    closed = jaxpr(w, x, y)
    names = [e.primitive.name for e in closed.eqns]
    assert "dot_general" in names and len(closed.jaxpr.invars) == 3
    assert [a.shape for a in closed.out_avals] == [()]


def test_smoothing_program_on_mirax():
    import scipy.signal as ss
    smooth = smoothing_program(mirax, mirax.numpy)
    sig, img = RNG.normal(size=20), RNG.normal(size=(6, 7))
    s, im, c = smooth(sig, img)
    t = np.linspace(-2, 2, 5)
    k = sst.norm.pdf(t) / sst.norm.pdf(t).sum()
    ws = ss.convolve(sig, k, mode="same")
    np.testing.assert_allclose(np.asarray(s), ws, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.asarray(im), ss.convolve2d(img, np.outer(k, k), mode="same"),
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.asarray(c), ss.correlate(ws, sig, mode="valid"), rtol=1e-12)


@pytest.mark.slow
def test_programs_vs_jax():
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    try:
        m = gp_program(mirax, mirax.numpy)(PARAMS, X, Y)
        j = gp_program(jax, jnp)(PARAMS, X, Y)
        for a, b in zip(mirax.tree.leaves(m), jax.tree.leaves(j)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-9, atol=1e-12)
        w, x, y = _w_xy()
        for fm, fj in zip(logistic_program(mirax, mirax.numpy)[:2],
                          logistic_program(jax, jnp)[:2]):
            np.testing.assert_allclose(np.asarray(fm(w, x, y)), np.asarray(fj(w, x, y)),
                                       rtol=1e-10, atol=1e-12)
        sig, img = RNG.normal(size=20), RNG.normal(size=(6, 7))
        for a, b in zip(smoothing_program(mirax, mirax.numpy)(sig, img),
                        smoothing_program(jax, jnp)(sig, img)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)
    finally:
        jax.config.update("jax_enable_x64", False)
