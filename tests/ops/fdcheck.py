"""Directional derivative checks against float64 central differences, shared by op tests."""
import numpy as np

import mirax as mx


def fd_check(f, args, rng, rtol=1e-5, atol=1e-7, eps=1e-6):
    """jvp and grad of scalar f along a random direction vs central differences (float64)."""
    args = [np.asarray(a, np.float64) for a in args]
    ts = [rng.randn(*a.shape) for a in args]

    def val(*zs):
        return float(f(*[mx.asarray(z) for z in zs]))
    num = (val(*[a + eps * t for a, t in zip(args, ts)])
           - val(*[a - eps * t for a, t in zip(args, ts)])) / (2 * eps)
    xs = tuple(mx.asarray(a) for a in args)
    _, jv = mx.jvp(f, xs, tuple(mx.asarray(t) for t in ts))
    gs = mx.grad(f, argnums=tuple(range(len(args))))(*xs)
    rev = sum(float((np.asarray(g) * t).sum()) for g, t in zip(gs, ts))
    np.testing.assert_allclose(float(jv), num, rtol=rtol, atol=atol)
    np.testing.assert_allclose(rev, num, rtol=rtol, atol=atol)
