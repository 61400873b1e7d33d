"""Transforms from several threads at once: each thread has its own interpreter stack, and
the caches shared between threads (jit's, a graph's, compiled kernels) stay consistent."""
import gc
import sys
import threading

import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax import autograd
from mirax.core import trace
from mirax.core.array import Array

N_THREADS = 8
N_ITERS = 8  # per thread: 8 x 8 x 5 = 320 calls in the first test, 256 in the second


@pytest.fixture
def switch_often():
    """Switch threads every 10 us (default 5 ms) so that traces really interleave."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def run_threads(work, n=N_THREADS):
    """Run work(i) in n threads started together; the exceptions they raised."""
    errors = []
    start = threading.Barrier(n)

    def worker(i):
        try:
            start.wait()
            work(i)
        except BaseException as e:  # noqa: BLE001 - collected and reported by the test
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return errors


def assert_clean_main_thread():
    assert trace.state.stack == [trace.state.eval_trace]
    assert trace.state.dynamic is trace.state.eval_trace
    assert not trace.state.active
    assert trace.busy[0] == 0


def test_concurrent_jit_grad_vmap_and_shared_jit(switch_often):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((5, 3))
    shared = mx.jit(lambda x, y: mnp.sum(mnp.tanh(x) @ y, axis=0))
    calls = [0] * N_THREADS
    bad = []

    def check(got, want, what):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6,
                                   err_msg=what)

    def work(i):
        local = np.random.default_rng(i)
        for k in range(N_ITERS):
            c = float(i + k / 10)
            x = local.standard_normal(4 + k % 3)

            def f(v, c=c):  # a new function object every call: jit really traces
                return mnp.sum(mnp.sin(v) * c + v ** 2)
            want = np.cos(x) * c + 2 * x
            check(mx.jit(mx.grad(f))(mx.asarray(x)), want, "jit(grad)")
            check(mx.grad(f)(mx.asarray(x)), want, "grad")
            xs = local.standard_normal((3, 5))
            check(mx.vmap(lambda v: mnp.tanh(v) @ w)(mx.asarray(xs)), np.tanh(xs) @ w,
                  "vmap")
            # a shared jitted function: the same signature (hits) and a per-thread one
            # (misses, evictions) from every thread
            for rows in (2, 2 + i % 4):
                a = local.standard_normal((rows, 5))
                check(shared(mx.asarray(a), mx.asarray(w)), (np.tanh(a) @ w).sum(0),
                      "shared jit")
            calls[i] += 5
        if not (trace.state.stack == [trace.state.eval_trace] and not trace.state.active):
            bad.append(i)

    errors = run_threads(work)
    assert not errors, f"{len(errors)} threads failed, first: {errors[0]!r}"
    assert sum(calls) == N_THREADS * N_ITERS * 5 and not bad
    info = shared.cache_info()
    assert info.hits + info.misses == N_THREADS * N_ITERS * 2 and info.size <= info.maxsize
    # the process is healthy afterwards: a fresh trace and a fresh grad work here
    assert_clean_main_thread()
    x = np.linspace(-1, 1, 5)
    g = mx.jit(mx.grad(lambda v: mnp.sum(mnp.exp(v))))(mx.asarray(x))
    np.testing.assert_allclose(np.asarray(g), np.exp(x), rtol=1e-6)
    assert_clean_main_thread()


def test_eager_grad_and_vmap_in_threads(switch_often):
    def work(i):
        for k in range(2 * N_ITERS):
            x = np.full(3, 0.1 * (i + 1) + 0.01 * k)
            g = mx.grad(lambda v: mnp.sum(mnp.exp(v) * v))(mx.asarray(x))
            np.testing.assert_allclose(np.asarray(g), np.exp(x) * (1 + x), rtol=1e-6)
            hv = mx.vmap(mx.grad(lambda v: mnp.sin(v) * v))(mx.asarray(x))
            np.testing.assert_allclose(np.asarray(hv), np.cos(x) * x + np.sin(x), rtol=1e-6)

    errors = run_threads(work)
    assert not errors, f"{len(errors)} threads failed, first: {errors[0]!r}"
    assert_clean_main_thread()


def test_a_trace_in_one_thread_does_not_stage_another_threads_ops():
    """A thread stops in the middle of make_graph (its staging trace pushed); meanwhile
    this thread's eager ops run at once and land in no graph."""
    inside, release = threading.Event(), threading.Event()
    box = []

    def f(x):
        y = mnp.cos(x)
        inside.set()
        assert release.wait(30)
        return mnp.sin(y)

    t = threading.Thread(target=lambda: box.append(mx.make_graph(f)(mx.asarray(
        np.ones(3, np.float32)))))
    t.start()
    try:
        assert inside.wait(30)
        assert trace.busy[0] == 1 and not trace.state.active  # busy there, not here
        x = np.linspace(0, 1, 3)
        y = mnp.exp(mx.asarray(x)) * 2 + 1
        assert type(y) is Array  # concrete (mx.Array is the abstract type tracers share)
        np.testing.assert_allclose(np.asarray(y), np.exp(x) * 2 + 1, rtol=1e-6)
        g = mx.grad(lambda v: mnp.sum(v * v))(mx.asarray(x))
        np.testing.assert_allclose(np.asarray(g), 2 * x, rtol=1e-6)
        out = mx.lax.cond(mx.asarray(True), lambda v: v + 1, lambda v: v - 1,
                          mx.asarray(x))   # eager: runs the taken branch here
        np.testing.assert_allclose(np.asarray(out), x + 1)
    finally:
        release.set()
        t.join(30)
    graph = box[0]
    assert [n.prim.name for n in graph.nodes] == ["cos", "sin"]
    assert_clean_main_thread()


def test_no_grad_is_per_thread():
    inside, release = threading.Event(), threading.Event()

    def other():
        with autograd.no_grad():
            inside.set()
            release.wait(30)

    t = threading.Thread(target=other)
    t.start()
    try:
        assert inside.wait(30)
        assert autograd.is_grad_enabled()
        a = autograd.tensor(np.array([1.0, 2.0]), requires_grad=True)
        loss = (a * a).sum()
        loss.backward()
        np.testing.assert_allclose(a.grad.numpy(), [2.0, 4.0])
    finally:
        release.set()
        t.join(30)
    del a, loss
    assert_clean_main_thread()


def test_a_thread_ending_with_tensors_alive_gives_back_its_busy_count():
    """A worker makes autograd Tensors (its stack holds the autograd interpreter) and
    ends with them alive: the busy count goes back when the thread's context is dropped."""
    box = []
    t = threading.Thread(target=lambda: box.append(autograd.tensor(np.ones(2))))
    t.start()
    t.join(30)
    gc.collect()
    assert trace.busy[0] == 0
    del box[:]
    assert_clean_main_thread()
