"""The CPU loops' vectorized float32 exp, tanh, logistic, sin, cos, log, log1p and
softplus (backends/cpu/vecmath.py)
against float64 NumPy: errors in units of the float32 result's last place, over the
whole float32 range and the special values; and a fused loop that uses them against the
unfused plan."""
import numpy as np
import pytest

numba = pytest.importorskip("numba")

import mirax as mx  # noqa: E402
import mirax.numpy as mnp  # noqa: E402
from mirax.backends.cpu import vecmath  # noqa: E402

F = np.float32
RNG = np.random.default_rng(0)


@numba.njit(error_model="numpy")
def _apply(which, x, out):
    for i in range(x.size):
        v = x[i]
        if which == 0:
            out[i] = vecmath.exp32(v)
        elif which == 1:
            out[i] = vecmath.tanh32(v)
        elif which == 2:
            out[i] = vecmath.logistic32(v)
        elif which == 3:
            out[i] = vecmath.sin32(v)
        elif which == 4:
            out[i] = vecmath.cos32(v)
        elif which == 5:
            out[i] = vecmath.log32(v)
        elif which == 6:
            out[i] = vecmath.log1p32(v)
        else:
            out[i] = vecmath.softplus32(v)


FUNCS = {"exp": (0, np.exp, (-110.0, 95.0), 1.0),
         "tanh": (1, np.tanh, (-12.0, 12.0), 1.5),
         "logistic": (2, lambda x: 1 / (1 + np.exp(-x)), (-110.0, 30.0), 2.5),
         # below vecmath.SIN_LIMIT (beyond it the loops fall back to libm: test_loops.py)
         "sin": (3, np.sin, (-1.6e6, 1.6e6), 0.51),
         "cos": (4, np.cos, (-1.6e6, 1.6e6), 0.51),
         # arguments spread over every binade (below: the samples are e^u for log)
         "log": (5, np.log, (-103.0, 88.7), 1.0),
         "log1p": (6, np.log1p, (-100.0, 88.7), 2.5),
         # log(1 + e^x); results down to the subnormals below x = -87.3
         "softplus": (7, lambda x: np.logaddexp(0.0, x), (-110.0, 95.0), 2.0)}


def _samples(name, lo, hi):
    if name == "log":   # positive floats of every exponent, subnormals included
        return np.concatenate([np.exp(RNG.uniform(lo, hi, 1_000_000)),
                               RNG.uniform(0, 2, 200_000), RNG.uniform(0.99, 1.01, 50_000),
                               [1e-45, 1e-40, 1.1754942e-38, 1.1754944e-38, 3.4e38]])
    if name == "log1p":   # above -1: near it, around 0 and up to the largest
        return np.concatenate([-1 + np.exp(RNG.uniform(-16, 0, 200_000)),
                               np.exp(RNG.uniform(lo, hi, 1_000_000)),
                               RNG.uniform(-1e-3, 1e-3, 50_000), RNG.uniform(-0.5, 2, 200_000)])
    return np.concatenate([RNG.uniform(lo, hi, 1_000_000), RNG.uniform(-1, 1, 200_000),
                           RNG.uniform(-1e-3, 1e-3, 50_000)])


def _ulps(got, exact):
    """|got - exact| in units of the last place of exact rounded to float32 (the smallest
    denormal's spacing for tiny results)."""
    with np.errstate(over="ignore"):
        rounded = exact.astype(F)
    spacing = np.spacing(np.abs(rounded)).astype(np.float64)
    finite = np.isfinite(rounded)
    return np.abs(got.astype(np.float64)[finite] - exact[finite]) / spacing[finite]


@pytest.mark.parametrize("name", list(FUNCS))
def test_error_in_ulps_over_the_range(name):
    which, ref, (lo, hi), bound = FUNCS[name]
    x = _samples(name, lo, hi).astype(F)
    x = x[x > -1] if name == "log1p" else x
    out = np.empty_like(x)
    _apply(which, x, out)
    with np.errstate(over="ignore"):
        exact = ref(x.astype(np.float64))
    assert _ulps(out, exact).max() <= bound


@pytest.mark.parametrize("name", list(FUNCS))
def test_special_values(name):
    which, ref, _, _ = FUNCS[name]
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 1e-45, 88.7, -88.7,
                  89.0, -104.0, -200.0, 200.0, 1.0, -1.0, -0.5, 3.4e38], F)
    if name in ("sin", "cos"):   # (beyond SIN_LIMIT the loops call libm: test_loops.py)
        x = x[:-1]
    out = np.empty_like(x)
    _apply(which, x, out)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        want = ref(x.astype(np.float64)).astype(F)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(out[ok], want[ok], rtol=3e-7, atol=0)
    np.testing.assert_array_equal(out[np.isinf(want)], want[np.isinf(want)])
    if name in ("tanh", "sin", "log1p"):   # the sign of zero kept
        assert np.signbit(out[4]) and not np.signbit(out[3])


def test_a_fused_loop_with_them_matches_the_unfused_plan(knobs):
    x = RNG.standard_normal((256, 512)).astype(F) * 3

    def f(x):
        return (mnp.tanh(x * 0.5 + 1.0) * mnp.exp(-x * x) + mx.nn.sigmoid(x) - x +
                mnp.log(x * x + 1.0) - mnp.log1p(mnp.abs(x)))

    knobs(numba=True)
    fused = np.asarray(mx.jit(f)(x))
    knobs(numba=False)
    plain = np.asarray(mx.jit(lambda x: f(x) + 0.0)(x))
    # each of the five functions within 2.5 ulp, summed terms of size <= 1, x and the logs
    # (below 4.5 for |x| < 20)
    np.testing.assert_allclose(fused, plain, rtol=0, atol=16 * np.spacing(F(20)))
