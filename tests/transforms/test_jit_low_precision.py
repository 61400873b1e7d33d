"""jit of value_and_grad on every float dtype agrees with eager (large enough arrays that the
CPU backend runs elementwise chains as cache-blocked fusion groups)."""
import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_jit_value_and_grad_matches_eager(dtype):
    x = mnp.asarray(np.linspace(-1, 1, 64 * 1024).reshape(64, 1024), dtype)
    f = lambda x: mnp.sum(mnp.tanh(x * 2 + 1) * x - mnp.exp(x) / 4)
    (v1, g1), (v2, g2) = mx.value_and_grad(f)(x), mx.jit(mx.value_and_grad(f))(x)
    assert g2.dtype == x.dtype
    tol = {"float16": 2e-2, "bfloat16": 5e-2}.get(dtype, 1e-5)
    np.testing.assert_allclose(np.asarray(g2, np.float64), np.asarray(g1, np.float64),
                               rtol=tol, atol=tol)
    np.testing.assert_allclose(float(v2), float(v1), rtol=tol * 10)
