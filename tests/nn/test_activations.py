"""The plain-composition activations of mx.nn against jax.nn: values and derivatives,
including at the kinks (relu6 at 0 and 6, hard_tanh at +-1, hard_sigmoid at +-3), and
second derivatives by finite differences away from them."""
import numpy as np
import pytest

import mirax as mx
from mirax.testing import check_grads

NAMES = ["relu6", "hard_tanh", "soft_sign", "log_sigmoid", "selu", "celu", "swish", "mish",
         "hard_sigmoid", "hard_swish", "hard_silu", "elu"]
X = np.array([-30.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0, 30.0], np.float32)


@pytest.mark.parametrize("name", NAMES)
def test_matches_jax_values_and_derivatives(name):
    jax = pytest.importorskip("jax")
    ours, theirs = getattr(mx.nn, name), getattr(jax.nn, name)
    np.testing.assert_allclose(np.asarray(ours(X)), np.asarray(theirs(X)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(mx.vmap(mx.grad(ours))(X)),
                               np.asarray(jax.vmap(jax.grad(theirs))(X)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_second_order_by_finite_differences(name):
    x = np.array([-2.2, -0.7, 0.4, 1.7, 4.5])   # away from every kink
    check_grads(getattr(mx.nn, name), (x,), order=2, atol=1e-6, rtol=1e-6)


def test_celu_alpha_glu_and_standardize():
    jax = pytest.importorskip("jax")
    m = np.random.default_rng(0).normal(size=(2, 6)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(mx.nn.celu(X, 2.0)), np.asarray(jax.nn.celu(X, 2.0)),
                               rtol=1e-6)
    for axis in (-1, 0):
        np.testing.assert_allclose(np.asarray(mx.nn.glu(m, axis)),
                                   np.asarray(jax.nn.glu(m, axis)), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(mx.nn.standardize(m, axis)),
                                   np.asarray(jax.nn.standardize(m, axis)), atol=1e-5)
    with pytest.raises(ValueError, match="even size"):
        mx.nn.glu(np.ones((2, 3), np.float32))
