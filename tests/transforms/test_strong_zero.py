"""The strong-zero product behind derivative rules: 0 * inf = 0 * NaN = 0, yet exact
derivatives with respect to both factors (so mixed partials of guarded rules are right)."""
import numpy as np

import mirax as mx
import mirax.numpy as mnp
from mirax.ops.elementwise import mul_strong


def test_values():
    g = mnp.asarray([0.0, 0.0, 2.0, 0.0, 3.0])
    d = mnp.asarray([np.inf, np.nan, np.inf, 5.0, np.nan])
    out = np.asarray(mul_strong(g, d))
    assert out[0] == 0 and out[1] == 0 and out[3] == 0
    assert out[2] == np.inf and np.isnan(out[4])


def test_derivative_wrt_the_zero_factor_is_the_other_factor():
    # d/dg (g * d) at g = 0 is d, even though the product there is a strong zero
    assert float(mx.grad(lambda g: mul_strong(g, 3.0))(0.0)) == 3.0
    assert float(mx.grad(lambda d: mul_strong(0.0, d), argnums=0)(3.0)) == 0.0


def test_mixed_partial_through_guarded_rule():
    # f(x, c) = c * sqrt(x); d/dc (df/dx) = 0.5 / sqrt(x), also where c = 0
    dfdx = mx.grad(lambda x, c: c * mnp.sqrt(x), argnums=0)
    mixed = mx.grad(dfdx, argnums=1)(4.0, 0.0)
    np.testing.assert_allclose(mixed, 0.25)


def test_where_branch_not_taken_stays_finite():
    f = lambda x: mnp.where(x > 0, mnp.sqrt(x), 0.0)
    for x0 in (0.0, -1.0):
        assert float(mx.grad(f)(x0)) == 0.0
        assert float(mx.grad(mx.grad(f))(x0)) == 0.0
    f2 = lambda y: mnp.where(y != 0, 1.0 / y, 0.0)
    assert float(mx.grad(f2)(0.0)) == 0.0
    assert np.isfinite(float(mx.jit(mx.grad(lambda x: mnp.where(x > 0, mnp.log(x), 0.0)))(0.0)))


def test_simplify_drops_strong_products_that_cannot_meet_zero_times_inf():
    from mirax.compiler.simplify import simplify
    g = mx.make_graph(mx.grad(lambda x: mnp.sum(mnp.sqrt(x))))(mnp.ones(5))
    names = [n.prim.name for n in simplify(g).nodes]
    assert "mul_strong" in [n.prim.name for n in g.nodes]
    assert "mul_strong" not in names          # seed 1.0 * d: a plain product, then d
    x = mnp.asarray([0.0, 1.0, 4.0])
    f = lambda x: mnp.sum(mnp.where(x > 0, mnp.sqrt(x), 0.0))
    np.testing.assert_array_equal(mx.jit(mx.grad(f))(x), mx.grad(f)(x))
