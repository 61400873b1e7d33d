"""CPU cache-blocked fusion (backends/cpu/blocked.py): values equal the unfused plan's.
Compiled loops (loops.py, numba) are off here; tests/compiler/test_loops.py has them."""
import types

import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax.core import runtime
cpu_backend = runtime.backend("cpu")
from mirax.backends.cpu import blocked, layout
from mirax.compiler import optimize

UNFUSED = types.SimpleNamespace(fuses=False, writes_into=cpu_backend.writes_into)


@pytest.fixture(autouse=True)
def numpy_only(knobs):
    """These tests are about the NumPy path: compiled loops (loops.py) off."""
    knobs(numba=False)


@pytest.fixture
def small_blocks(monkeypatch):
    """Tiny chunks so that small arrays take several chunks and a ragged tail."""
    monkeypatch.setattr(blocked, "BLOCK", 64)
    monkeypatch.setattr(blocked, "MIN_SIZE", 16)
    monkeypatch.setattr(layout, "MAX_ROW", 256)


def _both(f, *args):
    g = mx.make_graph(f)(*(mx.asarray(a) for a in args))
    fused = optimize(g, cpu_backend)
    fused.typecheck()
    n_fusion = [n.prim.name for n in fused.nodes].count("fusion")
    got = cpu_backend.compile(fused)(*args)
    want = cpu_backend.compile(optimize(g, UNFUSED))(*args)
    return n_fusion, got, want


def _check(f, *args, fusions=1, rtol=1e-6):
    n, got, want = _both(f, *args)
    assert n == fusions
    for a, b in zip(got, want):
        a = np.asarray(a)
        assert a.shape == np.shape(b) and a.dtype == np.asarray(b).dtype
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-6)
    return got


def test_flat_chain_with_ragged_tail_is_bitwise_equal(small_blocks):
    x = np.random.default_rng(0).uniform(-2, 2, 1001).astype(np.float32)
    got = _check(lambda x: mnp.exp(mnp.sin(x) * x) - x / 3.0 + 1.0, x)
    _, _, want = _both(lambda x: mnp.exp(mnp.sin(x) * x) - x / 3.0 + 1.0, x)
    np.testing.assert_array_equal(got[0], want[0])


def test_third_derivative(small_blocks):
    def f(x):
        return mnp.sum(mnp.sin(x) * x ** 3)
    d3 = mx.grad(lambda x: mnp.sum(mx.grad(lambda x: mnp.sum(mx.grad(f)(x)))(x)))
    x = np.random.default_rng(1).uniform(-2, 2, 777).astype(np.float32)
    _check(d3, x, rtol=1e-5)


def test_bias_rows_and_columns(small_blocks):
    r = np.random.default_rng(2)
    x, b = r.normal(size=(37, 20)).astype(np.float32), r.normal(size=20).astype(np.float32)
    c = r.normal(size=(37, 1)).astype(np.float32)
    _check(lambda x, b, c: mnp.tanh(x + b) * c - x, x, b, c)


@pytest.mark.parametrize("axes", [None, (0, 1), 2, (1, 2)])
@pytest.mark.parametrize("red", [mnp.sum, mnp.max])
def test_reductions(small_blocks, axes, red):
    r = np.random.default_rng(3)
    x, w = r.normal(size=(9, 13, 10)).astype(np.float32), r.normal(size=10).astype(np.float32)

    def f(x, w):
        h = mnp.tanh(x * w + 1.0)
        return h, red(mnp.exp(h) - x, axis=axes)
    got = _check(f, x, w, rtol=1e-5)
    assert got[1].shape == np.sum(x, axis=axes).shape


def test_einsum_row_dots(small_blocks):
    r = np.random.default_rng(4)
    a, b = r.normal(size=(50, 16)).astype(np.float32), r.normal(size=(50, 16)).astype(np.float32)
    _check(lambda a, b: mnp.sum(mnp.tanh(a) * (b + 1.0), axis=1), a, b, rtol=1e-5)
    g = optimize(mx.make_graph(lambda a, b: mnp.sum(mnp.tanh(a) * (b + 1.0), axis=1))(a, b),
                 cpu_backend)
    src_names = [n.prim.name for n in g.nodes[0].params["graph"].nodes]
    assert src_names[-2:] == ["mul", "reduce_sum"]


def test_masks_selects_and_casts(small_blocks):
    r = np.random.default_rng(5)
    x, y = r.normal(size=300).astype(np.float32), r.normal(size=300).astype(np.float32)

    def f(x, y):
        m = x > y
        return mnp.where(m, x * y, mnp.sqrt(mnp.abs(y))) + m.astype(np.float32) * 0.5
    _check(f, x, y)
    _check(lambda x: mx.grad(lambda x: mnp.sum(mnp.maximum(x, 0.0) ** 2))(x), x)


def test_float64_and_noncontiguous_inputs(small_blocks):
    r = np.random.default_rng(6)
    x = r.normal(size=(40, 30))

    def f(x):
        return mnp.cos(x) * x + mnp.sin(x) / 2.0
    g = optimize(mx.make_graph(f)(mx.asarray(x)), cpu_backend)
    run = cpu_backend.compile(g)
    xt = np.asfortranarray(x)   # same values, other strides
    np.testing.assert_allclose(run(xt)[0], np.cos(x) * x + np.sin(x) / 2, rtol=1e-12)


def test_small_or_unconnected_groups_stay_unfused():
    x = np.ones(10, np.float32)
    assert _both(lambda x: mnp.sin(x) * x + 1.0, x)[0] == 0       # too small
    big = np.ones((3, 1 << 15), np.float32)
    # three independent adds: nothing passes between them, nothing to keep in cache
    n, _, _ = _both(lambda x: (x + 1.0, x + 2.0, x + 3.0), big)
    assert n == 0
