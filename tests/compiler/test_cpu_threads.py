"""The CPU backend's threads (backends/cpu/threads.py, parallel.py, the parallel parts of
blocked.py and loops.py): a plan's values are the same, bit for bit, at every thread count
and on every run; against the unsplit NumPy call they are equal (elementwise, row-wise
reductions, stacked products) or equal to rounding (reductions cut into parts)."""
import io
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax.core import runtime
cpu_backend = runtime.backend("cpu")
from mirax.backends.cpu import attention, blocked, kernels, loops, parallel, threads
from mirax.compiler import optimize
from mirax.core import config

RNG = np.random.default_rng(0)
UNFUSED = types.SimpleNamespace(fuses=False, writes_into=cpu_backend.writes_into)


def _run(f, args, n, backend=cpu_backend):
    """f's compiled plan (fused per `backend`) run at `n` threads."""
    g = mx.make_graph(f)(*(mx.asarray(a) for a in args))
    with config.override(cpu_threads=n):
        run = cpu_backend.compile(optimize(g, backend))
        return [np.asarray(o) for o in run(*args)]


@pytest.fixture
def splits(monkeypatch):
    """A list that records the number of parts of every pool.map call."""
    seen = []
    real = threads.Pool.map

    def spy(self, fn, n, threads=None):
        seen.append(n)
        return real(self, fn, n, threads)
    monkeypatch.setattr(threads.Pool, "map", spy)
    return seen


def _same_at_every_thread_count(f, *args, backend=cpu_backend):
    one = _run(f, args, 1, backend)
    for n in (2, 3):
        for _ in range(2):   # and on every run
            for a, b in zip(one, _run(f, args, n, backend)):
                np.testing.assert_array_equal(a, b)
    return one


def _sum_tol(x, axis=None):
    """Bound on the rounding difference of two float32 summation orders of x."""
    return 4 * np.finfo(np.float32).eps * np.sqrt(x.shape[0]) * np.sum(np.abs(x), axis=axis)


def test_big_elementwise_ops_are_split_and_bitwise_equal():
    x = RNG.standard_normal((600, 512)).astype(np.float32)
    y = RNG.standard_normal((600, 512)).astype(np.float32)
    b = RNG.standard_normal(512).astype(np.float32)
    f = lambda x, y, b: [mnp.exp(x), x * y + b, mnp.tanh(y) > x]
    g = mx.make_graph(f)(x, y, b)
    assert all(parallel.elementwise(n.prim.impl if isinstance(n.prim.impl, np.ufunc) else
                                    n.prim.impl.ufunc, n) is not None
               for n in g.nodes if n.prim.name in ("exp", "tanh"))
    got = _same_at_every_thread_count(f, x, y, b, backend=UNFUSED)
    np.testing.assert_array_equal(got[0], np.exp(x))
    np.testing.assert_array_equal(got[1], x * y + b)
    np.testing.assert_array_equal(got[2], np.tanh(y) > x)


@pytest.mark.parametrize("native", [False, True], ids=["pool", "native"])
def test_big_single_ops_as_compiled_loops(native, knobs, tmp_path, monkeypatch):
    """A big unfused arithmetic op runs as a compiled loop of one op where its parts go to
    native threads (else on the pool as NumPy calls), bitwise NumPy's values; NumPy's
    transcendental functions are never replaced."""
    pytest.importorskip("numba")
    knobs(numba=True, cache_dir=str(tmp_path))
    _engine(knobs, native)
    x = RNG.standard_normal((20000, 64)).astype(np.float32)
    a = RNG.standard_normal((20000, 1)).astype(np.float32)
    idx = RNG.integers(0, 900, 20000).astype(np.int32)
    y = RNG.standard_normal((30000, 64)).astype(np.float32)
    # (the product read twice: an index_add reading it alone would scale its rows itself)
    f = lambda x, a, idx, y: [mx.nn.index_add(x * a, idx, 900), x * a, mnp.exp(y)]
    g = optimize(mx.make_graph(f)(x, a, idx, y), cpu_backend)
    assert [n.prim.name for n in g.nodes if n.prim.name in ("mul", "exp", "fusion")] == \
        ["mul", "exp"]   # nothing to fuse with
    assert loops.compile_single(next(n for n in g.nodes if n.prim.name == "exp")) is None
    made = []
    real = loops.compile_single
    monkeypatch.setattr(loops, "compile_single", lambda node: (
        lambda k: made.append((node.prim.name, k is not None)) or k)(real(node)))
    got = _same_at_every_thread_count(f, x, a, idx, y)
    assert ("mul", native) in made and ("exp", False) in made
    want = np.zeros((900, 64), np.float32)
    np.add.at(want, idx, x * a)
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], x * a)
    np.testing.assert_array_equal(got[2], np.exp(y))


def test_small_ops_stay_on_one_thread():
    g = mx.make_graph(lambda x: [mnp.exp(x), mnp.sum(x, axis=0)])(
        np.ones((64, 64), np.float32))
    exp, red = g.nodes
    assert parallel.elementwise(np.exp, exp) is None
    assert parallel.reduction(red) is None


@pytest.mark.parametrize("axes", [(0,), (1,), (0, 1), (1, 2), (0, 2), (0, 1, 2)])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_reductions(axes, op, splits):
    x = RNG.standard_normal((1200, 40, 24)).astype(np.float32)
    f = {"sum": mnp.sum, "max": mnp.max}[op]
    got = _same_at_every_thread_count(lambda x: f(x, axis=axes), x, backend=UNFUSED)[0]
    want = {"sum": np.sum, "max": np.max}[op](x, axis=axes)
    assert any(n > 1 for n in splits)
    if op == "max" or 0 not in axes:   # rows apart, or exact: NumPy's values
        np.testing.assert_array_equal(got, want)
    else:
        assert np.all(np.abs(got - want) <= _sum_tol(x, axes))


def test_blocked_fusion_with_reductions(knobs, splits):
    knobs(numba=False)   # the NumPy chunked path
    x = RNG.uniform(-2, 2, (700, 600)).astype(np.float32)
    f = lambda x: [mnp.sum(mnp.exp(mnp.sin(x) * x) - x / 3.0, axis=0),
                   mnp.sum(mnp.tanh(x) * x + x),
                   mnp.exp(mnp.cos(x) * x) + 1.0]
    g = optimize(mx.make_graph(f)(x), cpu_backend)
    assert "fusion" in [n.prim.name for n in g.nodes]
    got = _same_at_every_thread_count(f, x)
    assert any(n > 1 for n in splits)
    want = _run(f, [x], 1, UNFUSED)
    t = np.exp(np.sin(x) * x) - x / 3.0
    assert np.all(np.abs(got[0] - want[0]) <= _sum_tol(t, 0))
    assert abs(got[1] - want[1]) <= _sum_tol(np.tanh(x) * x + x)
    np.testing.assert_array_equal(got[2], want[2])


@pytest.fixture
def loop_parts(monkeypatch):
    """A list that records (parts, threads, on native threads) of every loops.run_parts
    call."""
    seen = []
    real = loops.run_parts

    def spy(src, args, starts, stops, count, on_native=None, fn="kernel_parts"):
        on = threads.native.ready() if on_native is None else on_native
        seen.append((len(starts), count, on))
        return real(src, args, starts, stops, count, on_native, fn)
    monkeypatch.setattr(loops, "run_parts", spy)
    return seen


@pytest.fixture
def blas_threads(monkeypatch):
    """A list that records BLAS's thread count at every np.matmul call."""
    seen = []
    real = np.matmul
    monkeypatch.setattr(np, "matmul", lambda *a, **kw: seen.append(
        threads.blas.threads()) or real(*a, **kw))
    return seen


def _engine(knobs, native: bool):
    """Compiled loops on numba's native threads or on the pool, for one test."""
    knobs(cpu_native_threads=native)
    if native and not threads.native.ready():
        pytest.skip("no native threads here (numba's TBB layer: the tbb package, and two "
                    "CPUs or more)")


@pytest.mark.parametrize("native", [False, True], ids=["pool", "native"])
@pytest.mark.parametrize("shape", [(300_000,), (400, 700)])
def test_compiled_loops(shape, native, knobs, tmp_path, loop_parts):
    pytest.importorskip("numba")
    knobs(numba=True, cache_dir=str(tmp_path))
    _engine(knobs, native)
    x, m, v = (RNG.standard_normal(shape).astype(np.float32) for _ in range(3))

    def adam(x, m, v):   # elementwise only; and a bias gradient (leading-axis sum)
        m2 = 0.9 * m + 0.1 * x
        v2 = 0.99 * v + 0.01 * x * x
        out = [m2, v2, x - 0.001 * m2 / (mnp.sqrt(v2) + 1e-8)]
        if len(shape) == 2:
            out.append(mnp.sum(mnp.maximum(x, 0.0) * m, axis=0))
        return out
    g = optimize(mx.make_graph(adam)(x, m, v), cpu_backend)
    assert any(n.prim.name == "fusion" and loops.eligible(n.params["graph"].nodes)
               for n in g.nodes)
    got = _same_at_every_thread_count(adam, x, m, v)
    assert any(n > 1 and t > 1 and on == native for n, t, on in loop_parts)
    if native:   # the pool's values, bit for bit
        with config.override(cpu_native_threads=False):
            for a, b in zip(got, _run(adam, [x, m, v], 2)):
                np.testing.assert_array_equal(a, b)
    want = _run(adam, [x, m, v], 1, UNFUSED)
    for a, b in zip(got[:3], want):
        np.testing.assert_array_equal(a, b)
    if len(shape) == 2:   # the loop sums rows in order; the unfused plan by parts
        t = np.maximum(x, 0) * m
        assert np.all(np.abs(got[3] - want[3]) <= _sum_tol(t, 0))


def test_stacked_small_products_split_over_the_stack(splits):
    q = RNG.standard_normal((64, 128, 64)).astype(np.float32)
    k = RNG.standard_normal((64, 128, 64)).astype(np.float32)
    f = lambda q, k: mnp.einsum("bqd,bkd->bqk", q, k)
    got = _same_at_every_thread_count(f, q, k)[0]
    assert any(n > 1 for n in splits)
    np.testing.assert_array_equal(got, np.matmul(q, k.transpose(0, 2, 1)))


@pytest.mark.parametrize("gemm", ["native", "pool", "blas"])
@pytest.mark.parametrize("m,k,n", [(512, 256, 256), (40, 512, 1024), (256, 512, 10)])
def test_products_on_threads(m, k, n, gemm, splits, loop_parts, blas_threads, knobs):
    """Big products run in blocks on native threads (cpu_gemm "native"), whole on BLAS's
    threads ("blas") or split over the pool ("pool"), at every thread count the same dot
    products up to the rounding of k."""
    knobs(cpu_gemm=gemm)
    if gemm == "native":
        _engine(knobs, True)
    x = RNG.standard_normal((m, k)).astype(np.float32)
    w = RNG.standard_normal((k, n)).astype(np.float32)
    f = lambda x, w: [x @ w, mnp.einsum("ij,kj->ik", x, w.T)]
    one = _run(f, [x, w], 1)
    for t in (2, 3):
        runs = [_run(f, [x, w], t) for _ in range(2)]
        for a, b in zip(*runs):           # deterministic at a thread count
            np.testing.assert_array_equal(a, b)
        for a, b in zip(one, runs[0]):    # each element the same dot product: rounding of k
            np.testing.assert_allclose(a, b, rtol=0, atol=4 * k * np.finfo(np.float32).eps *
                                       np.max(np.abs(x)) * np.max(np.abs(w)))
    np.testing.assert_allclose(one[0], x.astype(np.float64) @ w, rtol=1e-4, atol=1e-3)
    big = n > 10   # (256 x 512 x 10: under two threads' worth of work)
    assert any(s > 1 for s in splits) == (big and gemm == "pool")
    assert any(p > 1 and on for p, _, on in loop_parts) == (big and gemm == "native")
    if threads.blas.available:
        assert (max(blas_threads) > 1) == (big and gemm == "blas")
        assert max(blas_threads) <= 3



@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,k,n", [(64, 256, 384), (384, 256, 64)])
def test_mid_size_products_split_on_native_threads(m, k, n, dtype, knobs, monkeypatch):
    """Products too small for BLAS's threads but worth several parts run on native
    threads, each part (columns of the output where it is wide, else rows) one call of the
    BLAS library's gemm, operands as stored (transposed views included): the dot products
    of the whole call up to the rounding of k, the same bits on every run; one BLAS
    thread while the parts run, the caller's count back after."""
    if not (threads.native.ready() and loops.available() and loops.gemm_source(dtype)):
        pytest.skip("no native threads or no CBLAS gemm")
    ran, blas_threads = [], []
    real = loops.run_parts

    def spy(src, args, starts, stops, t, **kw):
        ran.append(len(starts))
        blas_threads.append(threads.blas.threads())
        return real(src, args, starts, stops, t, **kw)
    monkeypatch.setattr(loops, "run_parts", spy)
    x = RNG.standard_normal((m, k)).astype(dtype)
    w = RNG.standard_normal((k, n)).astype(dtype)
    tol = 4 * k * np.finfo(dtype).eps * np.max(np.abs(x)) * np.max(np.abs(w))
    before = threads.blas.current
    threads.blas.set(2)   # called outside a plan: the caller's BLAS threads, 2 here
    try:
        for t in (2, 3):
            knobs(cpu_threads=t)
            for a, b in ((x, w), (np.asfortranarray(x), w), (x, np.asfortranarray(w)),
                         (np.asfortranarray(x), np.asfortranarray(w))):
                ran.clear()
                got = parallel.matmul(a, b)
                assert ran == [t]
                np.testing.assert_allclose(got, np.matmul(x, w), rtol=0, atol=tol)
                np.testing.assert_array_equal(parallel.matmul(a, b), got)
        after = threads.blas.threads()
    finally:
        threads.blas.set(before)
    if threads.blas.available:   # one BLAS thread while the parts call gemm, then back
        assert set(blas_threads) == {1} and after == 2


@pytest.mark.parametrize("cols", [384, 16])
def test_small_products_stay_whole_on_many_threads(cols, loop_parts, blas_threads, knobs):
    """From NATIVE_GEMM_THREADS threads on, a product under NATIVE_GEMM_MANY_FLOPS is not
    cut into blocks: it runs whole on BLAS's own threads, one a SMALL_GEMM_FLOPS (W3's
    64 x 256 x 384: 6), on one thread below that: NumPy's own product, bit for bit."""
    knobs(cpu_gemm="auto")
    _engine(knobs, True)
    x = RNG.standard_normal((64, 256)).astype(np.float32)
    w = RNG.standard_normal((256, cols)).astype(np.float32)
    flops = 2 * x.size * w.shape[1]
    assert flops < parallel.NATIVE_GEMM_MANY_FLOPS
    got = _run(lambda x, w: x @ w, [x, w], parallel.NATIVE_GEMM_THREADS)[0]
    assert not any(p > 1 for p, _, _ in loop_parts)
    if threads.blas.available:
        want = max(1, min(parallel.NATIVE_GEMM_THREADS, flops // parallel.SMALL_GEMM_FLOPS))
        assert blas_threads and max(blas_threads) == want
    # (OpenBLAS splits rows and columns over its threads, not the sums: NumPy's values)
    np.testing.assert_array_equal(got, np.matmul(x, w))


def test_plans_run_blas_on_one_thread_and_restore_the_count(monkeypatch):
    """(but for products big enough for several threads: test_products_on_threads)"""
    if not threads.blas.available:
        pytest.skip("no OpenBLAS found to drive")
    seen = []
    real = np.matmul
    monkeypatch.setattr(np, "matmul", lambda *a, **k: seen.append(threads.blas.threads())
                        or real(*a, **k))
    before = threads.blas.threads()
    threads.blas.set(2)
    try:
        a = RNG.standard_normal((64, 64)).astype(np.float32)
        _run(lambda a, b: a @ b, [a, a], 2)
        assert seen and set(seen) == {1}       # inside the plan: one BLAS thread
        assert threads.blas.threads() == 2     # the caller's count is back
    finally:
        threads.blas.set(before)


def test_blas_spin_time_follows_the_knob(knobs, monkeypatch):
    """How long OpenBLAS's idle threads spin (knob cpu_blas_spin, log2 of cycles; 0: the
    library's own; set when mirax loads) is set again by a plan's threaded product after
    the knob changed, and left alone when the user set OPENBLAS_THREAD_TIMEOUT; the
    values stay NumPy's."""
    if threads.blas.timeout() is None:
        pytest.skip("no OpenBLAS found to drive")
    monkeypatch.delenv("OPENBLAS_THREAD_TIMEOUT", raising=False)
    knobs(cpu_gemm="blas")
    a = RNG.standard_normal((256, 256)).astype(np.float32)
    try:
        for spin in (12, 20, 0):
            knobs(cpu_blas_spin=spin)
            got, = _run(lambda a, b: a @ b, [a, a], 2)
            np.testing.assert_array_equal(got, np.matmul(a, a))
            assert threads.blas.timeout() == spin
            assert "OPENBLAS_THREAD_TIMEOUT" not in os.environ
        monkeypatch.setenv("OPENBLAS_THREAD_TIMEOUT", "8")   # the user's: it wins
        knobs(cpu_blas_spin=16)
        got, = _run(lambda a, b: a @ b, [a, a], 2)
        np.testing.assert_array_equal(got, np.matmul(a, a))
        assert threads.blas.timeout() == 0 and os.environ["OPENBLAS_THREAD_TIMEOUT"] == "8"
    finally:   # (the next threaded product sets the knob's default again)
        monkeypatch.delenv("OPENBLAS_THREAD_TIMEOUT", raising=False)


def test_knob():
    with config.override(cpu_threads=4):
        assert threads.n_threads() == 4
    with config.override(cpu_threads=0):
        assert threads.n_threads() == threads.affinity()


def test_pool_runs_every_part_once_and_raises_errors():
    seen = []
    with config.override(cpu_threads=3):
        out = threads.pool.map(lambda i: seen.append(i) or i * i, 50)
        assert out == [i * i for i in range(50)] and sorted(seen) == list(range(50))

        def bad(i):
            if i == 7:
                raise ValueError("part 7")
            return i
        with pytest.raises(ValueError, match="part 7"):
            threads.pool.map(bad, 20)
        # nested calls run inline on the worker (no deadlock)
        assert threads.pool.map(lambda i: sum(threads.pool.map(lambda j: j, 4)), 6) == [6] * 6


def test_parts_do_not_depend_on_thread_count():
    assert threads.parts(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert blocked.PART % blocked.BLOCK == 0


def test_attention_split_over_the_batch(monkeypatch):
    monkeypatch.setattr(attention, "ATTN_MIN", 1)    # the reference's split (masks, biases)
    monkeypatch.setattr(attention, "ATTN_PART", 1)   # the compiled one's
    q, k, v = (RNG.standard_normal((5, 16, 2, 8)).astype(np.float32) for _ in range(3))

    def f(q, k, v):
        loss = lambda q, k, v: mnp.sum(mx.nn.dot_product_attention(q, k, v, is_causal=True)
                                       ** 2)
        return mx.value_and_grad(loss, argnums=(0, 1, 2))(q, k, v)
    g = optimize(mx.make_graph(f)(q, k, v), cpu_backend)
    assert {"dot_product_attention", "dot_product_attention_bwd"} <= \
        {n.prim.name for n in g.nodes}
    got = _same_at_every_thread_count(f, q, k, v)   # each (batch, head) alone: bitwise
    want = mx.tree_util.tree_leaves(mx.value_and_grad(
        lambda q, k, v: mnp.sum(mx.nn.dot_product_attention(q, k, v, is_causal=True) ** 2),
        argnums=(0, 1, 2))(q, k, v))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, np.asarray(b), rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["layer_norm", "softmax"])
def test_row_composites_split_over_rows(op, monkeypatch):
    from mirax.backends.cpu import kernels
    monkeypatch.setattr(kernels, "ROWS_PART", 256)   # parts of 8 rows of 32
    x = RNG.standard_normal((6, 20, 32)).astype(np.float32)
    w = RNG.standard_normal(32).astype(np.float32)

    def loss(x, w):
        if op == "layer_norm":
            y = mx.nn.layer_norm(x, w, w)
        else:
            y = mx.nn.softmax(x * w, axis=-1)
        return mnp.sum(mnp.sin(y))
    f = lambda x, w: mx.value_and_grad(loss, argnums=(0, 1))(x, w)
    names = {n.prim.name for n in optimize(mx.make_graph(f)(x, w), cpu_backend).nodes}
    assert {op, op + "_bwd"} <= names
    got = _same_at_every_thread_count(f, x, w)
    with mx.config.override(cpu_threads=1):
        monkeypatch.setattr(kernels, "ROWS_PART", 1 << 30)   # the whole call
        want = _run(f, [x, w], 1)
    np.testing.assert_array_equal(got[1], want[1])           # row results: bitwise
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)   # sums: to rounding
    np.testing.assert_allclose(got[2], want[2], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("count", [2, parallel.NATIVE_GEMM_THREADS])
def test_auto_products_engine_by_thread_count(count, loop_parts, blas_threads, knobs):
    """cpu_gemm "auto": BLAS's own threads on few threads, the native grid on many."""
    knobs(cpu_gemm="auto")
    _engine(knobs, True)
    x = RNG.standard_normal((512, 256)).astype(np.float32)
    w = RNG.standard_normal((256, 256)).astype(np.float32)
    with config.override(cpu_threads=count):
        got = parallel.matmul(x, w)
    native = count >= parallel.NATIVE_GEMM_THREADS
    assert any(p > 1 and on for p, _, on in loop_parts) == native
    if threads.blas.available:
        assert (bool(blas_threads) and max(blas_threads) > 1) == (not native)
    np.testing.assert_allclose(got, x.astype(np.float64) @ w, rtol=1e-4, atol=1e-3)


def test_numpy_chain_kernels_cap_their_threads(monkeypatch, knobs):
    """Kernels whose parts are chains of NumPy calls run on at most CHAIN_THREADS threads
    (past that the parts queue for the GIL); single-call parts (BLAS) use every thread."""
    knobs(numba=False)   # (with numba, gelu is one compiled loop per part: every thread)
    asked = []
    real = threads.pool.map
    monkeypatch.setattr(threads.pool, "map",
                        lambda fn, n, t=None: asked.append(t) or real(fn, n, t))
    x = RNG.standard_normal(1 << 20).astype(np.float32)
    with config.override(cpu_threads=8, cpu_gemm="pool"):
        got = kernels.NATIVE["gelu"](x, approximate=True)
        parallel.matmul(RNG.standard_normal((512, 512)).astype(np.float32),
                        RNG.standard_normal((512, 512)).astype(np.float32))
    assert asked == [threads.CHAIN_THREADS, None]
    np.testing.assert_allclose(got, 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3))),
                               rtol=1e-6, atol=1e-6)


def test_blocked_elementwise_parts_spread_evenly(knobs, splits):
    knobs(numba=False)
    x = RNG.uniform(-2, 2, 300_001).astype(np.float32)
    f = lambda x: [mnp.exp(mnp.sin(x) * x) - x / 3.0 + 1.0]
    got = _same_at_every_thread_count(f, x)
    assert any(n > 1 for n in splits)
    np.testing.assert_array_equal(got[0], _run(f, [x], 1, UNFUSED)[0])


@pytest.mark.parametrize("native", [False, True], ids=["pool", "native"])
def test_scatter_and_outer_products(native, knobs, monkeypatch, loop_parts):
    """index_add and per-example outer products run as compiled loops in parts on either
    engine, with the values of the reference (the same additions in index order; exact
    products) at every thread count."""
    pytest.importorskip("numba")
    _engine(knobs, native)
    monkeypatch.setattr(loops, "CHEAP_BYTES", 4096)   # several parts on either engine
    monkeypatch.setattr(loops, "NATIVE_CHEAP_BYTES", 4096)
    x = RNG.standard_normal((3000, 16)).astype(np.float32)
    idx = RNG.integers(0, 500, 3000).astype(np.int32)
    a = RNG.standard_normal((300, 64)).astype(np.float32)
    b = RNG.standard_normal((300, 32)).astype(np.float32)
    f = lambda x, idx, a, b: [mx.nn.index_add(x, idx, 500),
                              mx.vmap(lambda u, v: u[:, None] @ v[None, :])(a, b)]
    g = optimize(mx.make_graph(f)(x, idx, a, b), cpu_backend)
    dot = next(n for n in g.nodes if n.prim.name == "dot_general")
    assert dot.params["dimension_numbers"][1][0]   # batched outer products (k = 1)
    got = _same_at_every_thread_count(f, x, idx, a, b)
    assert sum(parts == 3 and on == native for parts, _, on in loop_parts) >= 2
    want = np.zeros((500, 16), np.float32)
    np.add.at(want, idx, x)                 # the same additions in index order
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], a[:, :, None] * b[:, None, :])


def test_a_forked_child_runs_compiled_loops(knobs, tmp_path):
    """Compiled loops run in a child forked after the parent ran them on native threads
    (TBB's layer: still native; GNU OpenMP's cannot run in such a child, numba aborts
    it: back to the pool), with the same values."""
    numba = pytest.importorskip("numba")
    knobs(numba=True, cache_dir=str(tmp_path), cpu_threads=2)
    _engine(knobs, True)
    x = RNG.standard_normal(400_000).astype(np.float32)
    f = mx.jit(lambda x: mnp.tanh(x * 2.0) * x + 1.0)
    want = np.asarray(f(x))
    g = mx.jit(lambda x: mnp.exp(x * 0.5) - x)   # compiled in the child
    native = numba.threading_layer() != "omp"
    pid = os.fork()
    if pid == 0:   # the child: exit status 0 only with the right values
        ok = threads.native.ready() == native and np.array_equal(np.asarray(f(x)), want) \
            and np.allclose(np.asarray(g(x)), np.exp(x * 0.5) - x, rtol=1e-6)
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_cgroup_quota_caps_the_thread_count(monkeypatch):
    """A container's CPU quota (cgroup v2 cpu.max, else v1's quota and period) caps the
    threads, rounded up; "max" or -1 means no quota."""
    files = {}

    def fake_open(path, *args, **kwargs):
        if path not in files:
            raise FileNotFoundError(path)
        return io.StringIO(files[path])
    monkeypatch.setattr(threads, "open", fake_open, raising=False)
    assert threads._cgroup_cpus() is None
    files["/sys/fs/cgroup/cpu.max"] = "150000 100000\n"
    assert threads._cgroup_cpus() == 2
    files["/sys/fs/cgroup/cpu.max"] = "max 100000\n"
    assert threads._cgroup_cpus() is None
    files["/sys/fs/cgroup/cpu/cpu.cfs_quota_us"] = "50000\n"
    files["/sys/fs/cgroup/cpu/cpu.cfs_period_us"] = "100000\n"
    assert threads._cgroup_cpus() == 1
    files["/sys/fs/cgroup/cpu/cpu.cfs_quota_us"] = "-1\n"
    assert threads._cgroup_cpus() is None
    files["/sys/fs/cgroup/cpu/cpu.cfs_quota_us"] = "400000\n"
    assert threads.affinity() == min(4, len(os.sched_getaffinity(0)))


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux only")
def test_one_cpu_runs_parts_on_the_pool_and_exits(tmp_path):
    """Pinned to one CPU (even asking for more threads), compiled loops run their parts
    on the pool, not numba's TBB layer (which starts no workers there, and then hung at
    the process's exit), with the right values; the process exits."""
    pytest.importorskip("numba")
    script = tmp_path / "one_cpu.py"
    script.write_text(
        "import os, sys\n"
        "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
        f"sys.path.insert(0, {str(Path(mx.__file__).parent.parent)!r})\n"
        "import numpy as np, mirax as mx, mirax.numpy as mnp\n"
        "from mirax.backends.cpu import threads\n"
        "from mirax.core import config\n"
        "x = np.linspace(-3, 3, 400_000, dtype=np.float32)\n"
        "with config.override(cpu_threads=2):\n"
        "    got = np.asarray(mx.jit(lambda x: mnp.tanh(x * 2.0) * x + 1.0)(x))\n"
        "    assert not threads.native.ready()\n"
        "assert np.allclose(got, np.tanh(x * 2) * x + 1, rtol=1e-6, atol=1e-6)\n"
        "print('ok')\n")
    env = dict(os.environ, MIRAX_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
