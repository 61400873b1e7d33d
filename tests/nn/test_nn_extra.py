"""mx.nn: identity, log1mexp, logmeanexp, sparse_plus, sparse_sigmoid, squareplus (values and
derivatives against jax.nn, kinks included) and mx.nn.initializers (against
jax.nn.initializers: the same key gives the same numbers)."""
import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
import mirax.random as mr
from mirax import nn


# the kinks of sparse_plus / sparse_sigmoid at -1 and 1 are in the grid
X = np.array([-3.0, -1.0, -0.999, -0.5, 0.0, 0.25, 0.999, 1.0, 1.5, 4.0], np.float32)
XPOS = np.array([1e-6, 0.01, 0.3, np.log(2.0), 0.7, 1.0, 5.0, 30.0], np.float32)


def _sp(x):
    return np.where(x <= -1, 0.0, np.where(x >= 1, x, (x + 1) ** 2 / 4))


def _sp_d(x):
    return np.where(x <= -1, 0.0, np.where(x >= 1, 1.0, (x + 1) / 2))


def _ss(x):
    return 0.5 * np.clip(x + 1, 0, 2)


def _ss_d(x):   # clip's ties split evenly (jax.nn's convention): 1/4 at the kinks
    return np.where((x == -1) | (x == 1), 0.25, np.where(np.abs(x) < 1, 0.5, 0.0))


# name: (mirax fn, jax.nn name, inputs, f, f', f'') with NumPy references in float64
ACTIVATIONS = {
    "identity": (nn.identity, "identity", X, lambda x: x, np.ones_like, np.zeros_like),
    "sparse_plus": (nn.sparse_plus, "sparse_plus", X, _sp, _sp_d,
                    lambda x: np.where(np.abs(x) < 1, 0.5, 0.0)),
    "sparse_sigmoid": (nn.sparse_sigmoid, "sparse_sigmoid", X, _ss, _ss_d, np.zeros_like),
    "squareplus": (nn.squareplus, "squareplus", X, lambda x: (x + np.sqrt(x * x + 4)) / 2,
                   lambda x: (1 + x / np.sqrt(x * x + 4)) / 2,
                   lambda x: 4 / (2 * (x * x + 4) ** 1.5)),
    "log1mexp": (nn.log1mexp, "log1mexp", XPOS, lambda x: np.log(-np.expm1(-x)),
                 lambda x: 1 / np.expm1(x), lambda x: -np.exp(x) / np.expm1(x) ** 2),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_values_and_derivatives(name):
    f, _, x, ref, d_ref, dd_ref = ACTIVATIONS[name]
    x64 = x.astype(np.float64)
    out = f(x)
    assert out.dtype == np.float32 and out.shape == x.shape
    np.testing.assert_allclose(np.asarray(out), ref(x64), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(np.asarray(mx.vmap(mx.grad(f))(x)), d_ref(x64), rtol=1e-5,
                               atol=1e-7)
    np.testing.assert_allclose(np.asarray(mx.vmap(mx.grad(mx.grad(f)))(x)), dd_ref(x64),
                               rtol=1e-4, atol=1e-6)


def test_kinks_explicitly():
    d = mx.grad(nn.sparse_sigmoid)
    assert float(d(-1.0)) == 0.25 and float(d(1.0)) == 0.25 and float(d(0.0)) == 0.5
    d = mx.grad(nn.sparse_plus)
    assert float(d(-1.0)) == 0.0 and float(d(1.0)) == 1.0 and float(d(-2.0)) == 0.0
    assert float(nn.sparse_plus(-1.0)) == 0.0 and float(nn.sparse_plus(1.0)) == 1.0
    assert float(mx.grad(nn.log1mexp)(0.0)) == np.inf and float(nn.log1mexp(0.0)) == -np.inf


def test_activations_f64_and_check_grads():
    x = np.array([-0.7, 0.2, 0.6, 2.0], np.float64)
    for f in (nn.squareplus, nn.sparse_plus):
        assert f(x).dtype == np.float64
        mx.testing.check_grads(f, (x,), order=2)
    mx.testing.check_grads(lambda x: nn.squareplus(x, 0.5), (x,), order=2)
    mx.testing.check_grads(nn.log1mexp, (np.array([0.1, 0.69, 0.7, 3.0]),), order=2)
    assert nn.identity(x).dtype == np.float64
    assert nn.sparse_sigmoid(np.arange(3)).dtype == np.float32   # ints go to float


def _lme_ref(x, axis, where=None, keepdims=False):
    x = x.astype(np.float64)
    e = np.exp(x) if where is None else np.where(where, np.exp(x), 0.0)
    n = np.sum(np.ones_like(x) if where is None else where, axis=axis, keepdims=keepdims)
    return np.log(np.sum(e, axis=axis, keepdims=keepdims) / n)


@pytest.mark.parametrize("axis,keepdims", [(None, False), (1, False), ((0, 2), True), (-1, True)])
def test_logmeanexp(axis, keepdims):
    x = np.random.default_rng(0).normal(size=(3, 4, 5)).astype(np.float32) * 3
    out = nn.logmeanexp(x, axis=axis, keepdims=keepdims)
    ref = _lme_ref(x, axis, keepdims=keepdims)
    assert out.shape == np.shape(ref)
    np.testing.assert_allclose(np.asarray(out), ref, rtol=2e-6, atol=2e-6)
    mx.testing.check_grads(lambda x: nn.logmeanexp(x, axis=axis, keepdims=keepdims),
                           (x[:2, :2, :3].astype(np.float64),), order=1, modes=("rev",))


def test_logmeanexp_where():
    x = np.random.default_rng(1).normal(size=(4, 6)).astype(np.float32)
    w = np.random.default_rng(2).random((4, 6)) > 0.4
    w[:, 0] = True
    for axis, kd in ((1, False), (None, False), (1, True)):
        out = nn.logmeanexp(x, axis=axis, where=w, keepdims=kd)
        np.testing.assert_allclose(np.asarray(out), _lme_ref(x, axis, w, kd), rtol=2e-6,
                                   atol=2e-6)
    g = np.asarray(mx.grad(lambda x: nn.logmeanexp(x, axis=1, where=w).sum())(x))
    e = np.where(w, np.exp(x.astype(np.float64)), 0)
    np.testing.assert_allclose(g, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert np.all(g[~w] == 0)


def test_new_activations_under_jit_and_errors():
    x = np.linspace(-2, 2, 9).astype(np.float32)
    for f in (nn.sparse_plus, nn.sparse_sigmoid, nn.squareplus, nn.log1mexp):
        np.testing.assert_array_equal(np.asarray(mx.jit(f)(x)), np.asarray(f(x)))
    with pytest.raises(ValueError, match="logmeanexp"):
        nn.logmeanexp(np.zeros((2, 3), np.float32), axis=2)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activations_equal_jax(name):
    jax = pytest.importorskip("jax")
    f, jname, x, *_ = ACTIVATIONS[name]
    jf = getattr(jax.nn, jname)
    np.testing.assert_allclose(np.asarray(f(x)), np.asarray(jf(x)), rtol=1e-6, atol=1e-7)
    for mf, jgf in ((mx.grad(f), jax.grad(jf)), (mx.grad(mx.grad(f)), jax.grad(jax.grad(jf)))):
        np.testing.assert_allclose(np.asarray(mx.vmap(mf)(x)), np.asarray(jax.vmap(jgf)(x)),
                                   rtol=1e-5, atol=1e-6)


# --- initializers ----------------------------------------------------------------------------
INIT = mx.nn.initializers


def _init_cases(I):
    """name: (initializer, shape) with the same call for mx.nn.initializers and jax's."""
    return {
        "normal": (I.normal(0.5), (3, 4)),
        "uniform": (I.uniform(2.0), (3, 4)),
        "truncated_normal": (I.truncated_normal(0.3, lower=-1.0, upper=1.5), (3, 4)),
        "glorot_uniform": (I.glorot_uniform(), (4, 3)),
        "glorot_normal": (I.glorot_normal(), (4, 3)),
        "xavier_uniform": (I.xavier_uniform(), (2, 5)),
        "xavier_normal": (I.xavier_normal(), (2, 5)),
        "lecun_uniform": (I.lecun_uniform(), (2, 2, 3, 2)),
        "lecun_normal": (I.lecun_normal(), (2, 2, 3, 2)),
        "he_uniform": (I.he_uniform(), (5, 2)),
        "he_normal": (I.he_normal(), (5, 2)),
        "kaiming_uniform": (I.kaiming_uniform(), (2, 5)),
        "kaiming_normal": (I.kaiming_normal(), (2, 5)),
        "vs_normal_fan_out": (I.variance_scaling(2.0, "fan_out", "normal"), (4, 3)),
        "vs_uniform_geo_avg": (I.variance_scaling(1.0, "fan_geo_avg", "uniform"), (4, 3)),
        "vs_normal_axes": (I.variance_scaling(1.0, "fan_in", "truncated_normal",
                                              in_axis=(0, 1), out_axis=-1, batch_axis=2),
                           (2, 1, 3, 2)),
        "orthogonal": (I.orthogonal(2.0), (4, 3)),
        "orthogonal_col0": (I.orthogonal(1.0, column_axis=0), (2, 3, 4)),
        "delta_orthogonal": (I.delta_orthogonal(), (3, 2, 3)),
        "constant": (I.constant(-7.0), (2, 3)),
    }


# jax.nn.initializers' values for key jax.random.PRNGKey(42) (jax 0.10; test_..._jax_live
# below recomputes them, under -m slow, since JAX's compiles are slow on the CI machine)
GOLDEN = {
    'normal': [
        -0.014152308, 0.23356593, 0.14785148, 0.07677296, -0.06201641, 0.10846157,
        -0.7204395, 0.37792996, 0.26070482, 0.4550852, -0.1922483, 0.56991166],
    'uniform': [
        0.97741914, 1.3595943, 1.232543, 1.1220322, 0.9012892, 1.1717317, 0.14961886,
        1.5502667, 1.3979185, 1.6372674, 0.7006104, 1.74564],
    'truncated_normal': [
        0.027998906, 0.14467324, 0.10432074, 0.070722386, 0.00578799, 0.08569773,
        -0.23512033, 0.21095107, 0.15734212, 0.24476627, -0.05292768, 0.2918563],
    'glorot_uniform': [
        -0.020905817, 0.3329197, 0.21529298, 0.11297984, -0.09138842, 0.15899268,
        -0.78729993, 0.509448, 0.3684009, 0.5899949, -0.2771809, 0.69032854],
    'glorot_normal': [
        -0.016417125, 0.27003706, 0.17128834, 0.089028604, -0.07192526, 0.12573154,
        -0.79944557, 0.4343255, 0.30115262, 0.5204617, -0.22251517, 0.64527744],
    'xavier_uniform': [
        -0.020905817, 0.3329197, 0.21529298, 0.11297984, -0.09138842, 0.15899268,
        -0.78729993, 0.509448, 0.3684009, 0.5899949],
    'xavier_normal': [
        -0.016417125, 0.27003706, 0.17128834, 0.089028604, -0.07192526, 0.12573154,
        -0.79944557, 0.4343255, 0.30115262, 0.5204617],
    'lecun_uniform': [
        -0.011290431, 0.17979717, 0.116271496, 0.061016083, -0.049355388, 0.085865855,
        -0.42519057, 0.27513337, 0.19895923, 0.31863368, -0.1496948, 0.37282002, 0.4258814,
        0.36013067, -0.022445917, 0.3184818, 0.2113545, 0.08669722, -0.42626262, 0.27762222,
        -0.09543443, -0.38087678, -0.4737444, 0.13917875],
    'lecun_normal': [
        -0.008866261, 0.14583668, 0.09250628, 0.04808094, -0.038844083, 0.067902796,
        -0.43174997, 0.23456256, 0.162641, 0.28108144, -0.12017192, 0.34848964, 0.43304208,
        0.3314507, -0.017632887, 0.2809094, 0.17373995, 0.06856984, -0.43375805, 0.2370925,
        -0.07559787, -0.35981402, -0.54689723, 0.1113844],
    'he_uniform': [
        -0.024736095, 0.3939159, 0.2547381, 0.13367954, -0.10813224, 0.18812267, -0.9315459,
        0.602787, 0.43589786, 0.69809145],
    'he_normal': [
        -0.019425005, 0.31951216, 0.20267111, 0.10534006, -0.08510312, 0.14876758,
        -0.9459168, 0.5139008, 0.35632858, 0.61581856],
    'kaiming_uniform': [
        -0.0391112, 0.62283564, 0.40277627, 0.21136591, -0.17097208, 0.29744804, -1.4729033,
        0.95308995, 0.689215, 1.1037794],
    'kaiming_normal': [
        -0.030713633, 0.5051931, 0.32045117, 0.16655728, -0.13455985, 0.2352222, -1.4956259,
        0.81254864, 0.563405, 0.97369474],
    'vs_normal_fan_out': [
        -0.023110623, 0.38141158, 0.24144047, 0.12536971, -0.101272374, 0.17711702,
        -1.1764728, 0.61715704, 0.4257292, 0.743151, -0.31394017, 0.93066186],
    'vs_uniform_geo_avg': [
        -0.02101386, 0.33464026, 0.21640565, 0.11356373, -0.09186073, 0.15981437,
        -0.79136884, 0.5120809, 0.37030485, 0.5930441, -0.27861342, 0.69389623],
    'vs_normal_axes': [
        -0.021717817, 0.35722545, 0.22659318, 0.11777377, -0.09514818, 0.16632721,
        -1.0575671, 0.5745586, 0.39838746, 0.6885061, -0.2943599, 0.8536218],
    'orthogonal': [
        -0.03307748, 1.95974, -0.29140198, 0.17943805, -0.20293409, 0.4162173, -1.6838516,
        0.13864598, 1.0686108, 1.0636506, 0.31466728, 1.6124262],
    'orthogonal_col0': [
        -0.008565545, 0.08948587, -0.03753491, -0.43603995, 0.15778941, -0.11635667,
        0.437525, -0.017035497, 0.16866454, -0.4383489, -0.07309714, -0.586757, 0.17496917,
        0.06725774, 0.07770778, 0.23854025, 0.359336, 0.41685435, 0.453153, 0.34066066,
        0.10028245, 0.24143179, -0.45175087, 0.07218076],
    'delta_orthogonal': [
        0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.08792734, 0.9185913, -0.38530377, 0.8722634,
        0.25780204, 0.4155657, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    'constant': [-7.0, -7.0, -7.0, -7.0, -7.0, -7.0],
}


@pytest.mark.parametrize("name", sorted(_init_cases(INIT)))
def test_initializers_same_key_same_numbers_as_jax(name):
    init, shape = _init_cases(INIT)[name]
    out = init(mr.key(42), shape)
    assert out.shape == shape and out.dtype == np.float32
    ref = np.array(GOLDEN[name], np.float32).reshape(shape)
    if "normal" in name or "orthogonal" in name:   # through erf_inv / QR: to an ulp or two
        np.testing.assert_allclose(np.asarray(out), ref, rtol=3e-6, atol=3e-7)
    else:     # uniform bits scaled as JAX scales them: exactly
        np.testing.assert_array_equal(np.asarray(out), ref)


@pytest.mark.slow
def test_initializer_goldens_equal_jax_live():
    jax = pytest.importorskip("jax")
    for name, (init, shape) in _init_cases(jax.nn.initializers).items():
        got = np.asarray(init(jax.random.PRNGKey(42), shape))
        ref = np.array(GOLDEN[name], np.float32).reshape(shape)
        if "orthogonal" in name:   # JAX's QR, whose rounding follows the CPU's LAPACK kernels
            np.testing.assert_allclose(got, ref, rtol=3e-6, atol=3e-7)
        else:
            np.testing.assert_array_equal(got, ref)


def test_initializer_statistics_and_dtypes():
    w = np.asarray(INIT.he_normal()(mr.key(0), (256, 512)))
    assert abs(w.std() - np.sqrt(2 / 256)) < 0.03 * np.sqrt(2 / 256) and abs(w.mean()) < 2e-3
    w = np.asarray(INIT.glorot_uniform()(mr.key(1), (300, 100), mnp.float64))
    assert w.dtype == np.float64 and np.abs(w).max() <= np.sqrt(6 / 400)
    assert abs(w.var() - 2 / 400) < 0.05 * 2 / 400
    w = INIT.normal(1.0, dtype=mnp.float16)(mr.key(2), (8,))
    assert w.dtype == np.float16
    w = INIT.lecun_normal()(mr.key(3), (3, 3, 64, 32), mnp.bfloat16)
    assert str(w.dtype) == "bfloat16" and w.shape == (3, 3, 64, 32)


@pytest.mark.parametrize("shape,col", [((6, 4), -1), ((4, 6), -1), ((3, 5, 2), -1),
                                       ((2, 3, 6), 1), ((5, 5), 0)])
def test_orthogonal_initializer(shape, col):
    q = np.asarray(INIT.orthogonal(scale=2.0, column_axis=col)(mr.key(4), shape),
                   np.float64) / 2.0
    m = np.moveaxis(q, col, -1).reshape(-1, shape[col])
    small = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
    np.testing.assert_allclose(small, np.eye(small.shape[0]), atol=1e-5)


def test_delta_orthogonal_and_bad_shapes():
    w = np.asarray(INIT.delta_orthogonal()(mr.key(5), (3, 3, 4, 6)))
    mask = np.zeros((3, 3), bool)
    mask[1, 1] = True
    assert np.all(w[~mask] == 0)
    np.testing.assert_allclose(w[1, 1] @ w[1, 1].T, np.eye(4), atol=1e-5)
    with pytest.raises(ValueError, match="delta_orthogonal"):
        INIT.delta_orthogonal()(mr.key(0), (3, 6, 4))
    with pytest.raises(ValueError, match="delta_orthogonal"):
        INIT.delta_orthogonal()(mr.key(0), (4, 6))
    with pytest.raises(ValueError, match="orthogonal"):
        INIT.orthogonal()(mr.key(0), (4,))
    with pytest.raises(ValueError, match="variance_scaling"):
        INIT.glorot_uniform()(mr.key(0), (4,))
    with pytest.raises(ValueError, match="variance_scaling: invalid mode"):
        INIT.variance_scaling(1.0, "fan", "normal")
    assert INIT.orthogonal()(mr.key(0), (0, 3)).shape == (0, 3)


def test_initializers_namespace():
    import mirax.nn.initializers as mod
    from mirax.nn import initializers
    assert mod is initializers is mx.nn.init
    for name in ("constant", "zeros", "ones", "uniform", "normal", "truncated_normal",
                 "variance_scaling", "glorot_uniform", "glorot_normal", "xavier_uniform",
                 "xavier_normal", "lecun_uniform", "lecun_normal", "he_uniform", "he_normal",
                 "kaiming_uniform", "kaiming_normal", "orthogonal", "delta_orthogonal"):
        assert callable(getattr(initializers, name)), name
    # an initializer is jit/vmap friendly: keys in, same numbers out
    keys = mr.split(mr.key(9), 3)
    f = INIT.glorot_normal()
    eager = np.stack([np.asarray(f(keys[i], (4, 5))) for i in range(3)])
    np.testing.assert_array_equal(np.asarray(mx.vmap(lambda k: f(k, (4, 5)))(keys)), eager)
