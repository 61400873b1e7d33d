"""Small fusion groups on the CPU's tape interpreter (mirax/backends/cpu/tape.py) against
NumPy's unfused ops: arithmetic bit for bit, float32 exp / tanh / logistic / sin / cos
within vecmath's ulp bounds (sin and cos beyond its range through libm), comparisons,
masks and select, boolean inputs and outputs, single-value inputs, float64 groups; that
the tape is what ran (the plan's debug listing); no floating-point traps; calls from
several threads at once."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax.backends.cpu import loops

pytestmark = pytest.mark.skipif(not loops.available(), reason="numba is not installed")
RNG = np.random.default_rng(0)
H, Q, TWO = np.float32(0.5), np.float32(0.25), np.float32(2.0)


def _stretch(v):
    """Eight more IEEE ops on v (the tape takes groups of enough ops: tape.EXTRA_OPS);
    the same in NumPy on float32 values gives the same bits."""
    for _ in range(2):
        v = (v * H + Q) * TWO - H
    return v


def _ran_on_tape(capsys, f, *args):
    """f's value, asserting that its plan put a fusion group on the tape."""
    out = f(*args)
    assert "CPU tape" in capsys.readouterr().err
    return out


@pytest.fixture
def listing(knobs, monkeypatch):
    from mirax.compiler import pipeline
    knobs(debug=3)
    monkeypatch.setattr(pipeline, "_register_report", lambda: None)


def test_arithmetic_and_masks_bit_for_bit(listing, capsys):
    x = RNG.standard_normal(37).astype(np.float32)
    y = RNG.standard_normal(37).astype(np.float32)

    def f(x, y):
        z = (x * 3.0 - y) / (y * y + 0.5)
        m = (z > 0.1) & ~(x < y)
        w = mnp.where(m, mnp.maximum(z, x), mnp.minimum(-z, mnp.abs(y)))
        return mnp.sqrt(mnp.abs(w)) * mnp.sign(x) + 1.0, m
    got, mask = _ran_on_tape(capsys, mx.jit(f), x, y)
    z = (x * np.float32(3) - y) / (y * y + np.float32(0.5))
    m = (z > np.float32(0.1)) & ~(x < y)
    w = np.where(m, np.maximum(z, x), np.minimum(-z, np.abs(y)))
    np.testing.assert_array_equal(np.asarray(got), np.sqrt(np.abs(w)) * np.sign(x) + 1)
    assert np.asarray(mask).dtype == np.bool_
    np.testing.assert_array_equal(np.asarray(mask), m)


def test_float32_transcendentals_within_their_ulp_bounds(listing, capsys):
    x = np.concatenate([RNG.uniform(-8, 8, 60), [0.0, -0.0, 1e-30, 40.0, -90.0]]) \
        .astype(np.float32)

    def f(x):
        x = _stretch(x)
        return (mnp.exp(x * 0.5) + 1.0, mnp.tanh(x) * 2.0, mx.nn.sigmoid(x) - 0.5,
                mnp.sin(x) + mnp.cos(x * 3.0))
    outs = _ran_on_tape(capsys, mx.jit(f), x)
    x = _stretch(x)
    x64 = x.astype(np.float64)
    half, three = (x * np.float32(0.5)).astype(np.float64), (x * np.float32(3)).astype(
        np.float64)
    e, t, s = np.exp(half), np.tanh(x64), 1 / (1 + np.exp(-x64))
    sn, cs = np.sin(x64), np.cos(three)
    # (exact value, the sum of its terms' magnitudes)
    wants = [(e + 1, e + 1), (2 * t, 2 * np.abs(t)), (s - 0.5, s + 0.5),
             (sn + cs, np.abs(sn) + np.abs(cs))]
    for got, (want, size) in zip(outs, wants):
        # each function within 2.5 ulp of float32 (vecmath's bounds: at most 2.5 * 2^-23
        # of its value), then one float32 operation (half an ulp of the result)
        err = np.abs(np.asarray(got, np.float64) - want)
        assert np.all(err <= 3 * 2.0 ** -23 * size + 1e-38), float(np.max(err / size))


def test_sin_beyond_the_vectorized_range_takes_libm(listing, capsys):
    x = np.array([1.0, 3e6, -2.5e7, 0.5], np.float32)
    got = _ran_on_tape(capsys, mx.jit(
        lambda x: (lambda x: mnp.sin(x) * 2.0 + mnp.cos(x) - 1.0)(_stretch(x))), x)
    x64 = _stretch(x).astype(np.float64)
    want = (np.sin(x64).astype(np.float32) * np.float32(2) + np.cos(x64).astype(np.float32)
            - np.float32(1))
    np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=4 * 2.0 ** -23 * 3)


def test_division_by_zero_gives_numpys_values_without_traps(listing, capsys):
    x = np.array([1.0, -2.0, 0.0, 3.0], np.float32)
    y = np.array([0.0, 4.0, 0.0, -2.0], np.float32)
    with np.errstate(all="raise"):
        got = _ran_on_tape(capsys, mx.jit(
            lambda x, y: _stretch((x / y) * 2.0 / (y + 1.0) - x)), x, y)
    with np.errstate(all="ignore"):
        want = _stretch((x / y) * np.float32(2) / (y + np.float32(1)) - x)
    np.testing.assert_array_equal(np.asarray(got), want)


def test_float64_and_boolean_inputs(listing, capsys):
    x = RNG.standard_normal((3, 5))
    flag = RNG.random((3, 5)) > 0.5

    def f(x, flag):
        return _stretch(mnp.where(flag, x * x - 1.0, x + 2.0) * 0.25 + x)
    got = _ran_on_tape(capsys, mx.jit(f), x, flag)
    assert np.asarray(got).dtype == np.float64
    want = np.where(flag, x * x - 1, x + 2) * 0.25 + x
    for _ in range(2):
        want = (want * 0.5 + 0.25) * 2.0 - 0.5
    np.testing.assert_array_equal(np.asarray(got), want)


def test_the_200_op_chain_and_threads(listing, capsys):
    """benchmarks/overhead.py's chain, called from four threads at once."""
    def chain(ns, x, y):
        for _ in range(40):
            x = ns.tanh(ns.sin((x + y) * 0.5)) - y
        return x
    x = np.linspace(-1, 1, 16, dtype=np.float32)
    y = np.linspace(0, 0.5, 16, dtype=np.float32)
    f = mx.jit(lambda x, y: chain(mnp, x, y))
    first = _ran_on_tape(capsys, f, x, y)
    # 40 rounds of contractions: each round's error (a few ulp) is not amplified
    np.testing.assert_allclose(np.asarray(first), chain(np, x, y), rtol=0, atol=1e-5)
    results, errors = [], []

    def worker(k):
        try:
            xs = x + np.float32(k) * np.float32(0.01)
            for _ in range(50):
                results.append((k, np.asarray(f(xs, y))))
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k, r in results:
        np.testing.assert_array_equal(r, np.asarray(f(x + np.float32(k) * np.float32(0.01), y)))


def test_groups_it_does_not_take_run_as_before(capsys, listing):
    """An integer op (and big groups) keep their old paths; values as NumPy's."""
    a = np.arange(12, dtype=np.int32)
    got = mx.jit(lambda a: (a * 3 + 1) // 2 - a)(a)
    assert "CPU tape" not in capsys.readouterr().err
    np.testing.assert_array_equal(np.asarray(got), (a * 3 + 1) // 2 - a)
