"""CUDA graphs (mirax/backends/cuda/graphs.py): a captured plan replays with the results
of the plain plan, hands out fresh buffers every call, falls back to the plain plan when a
capture is not possible, and composes with jit and grad.

Skipped cleanly without CuPy or without a GPU.
"""
from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")
if not cp.cuda.is_available():  # getDeviceCount() > 0; False where it raises (no driver)
    pytest.skip("no CUDA device", allow_module_level=True)

import mirax as mx  # noqa: E402
import mirax.numpy as mnp  # noqa: E402
from mirax.core import runtime  # noqa: E402
from mirax.backends.cuda import graphs  # noqa: E402
from mirax.core.runtime import executable  # noqa: E402

pytestmark = pytest.mark.gpu
BE = runtime.get_device("cuda").backend


def _cuda(x):
    return mx.device_put(x, "cuda")


def _mlp(params, x):
    w1, b1, w2, b2 = params
    h = mx.nn.gelu(x @ w1 + b1)
    return mx.nn.log_softmax(h @ w2 + b2), mnp.sum(h * h, axis=0)


def _data(seed, n=16):
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal((8, 32)).astype(np.float32) * 0.3,
              rng.standard_normal(32).astype(np.float32),
              rng.standard_normal((32, 5)).astype(np.float32) * 0.3,
              np.zeros(5, np.float32)]
    return params, rng.standard_normal((n, 8)).astype(np.float32)


def _plan(f, *args):
    """A fresh top-level CUDA plan (graphs.Replay) of f and the device buffers of args."""
    bufs = [a._buf for a in mx.tree.leaves(args)]
    return executable(mx.make_graph(f)(*args), "cuda"), bufs


def _np(bufs):
    return [cp.asnumpy(b) for b in bufs]


def test_replay_matches_plain_plan_across_calls(knobs, monkeypatch):
    knobs(cuda_graphs="1")
    params, x = _data(0)
    args = (_cuda(params), _cuda(x))
    plan, _ = _plan(_mlp, *args)
    plain, _ = _plan(_mlp, *args)
    plain.state = "off"
    assert isinstance(plan, graphs.Replay)
    captured, replays = graphs.stats["captured"], graphs.stats["replays"]
    for seed in range(6):  # warm-up, capture, then replays: each with other inputs
        p, xs = _data(100 + seed)
        bufs = [a._buf for a in mx.tree.leaves((_cuda(p), _cuda(xs)))]
        got, want = _np(plan(*bufs)), _np(plain(*bufs))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    assert plan.state == "graph", graphs.failures
    assert graphs.stats["captured"] == captured + 1
    assert graphs.stats["replays"] >= replays + 4


def test_outputs_are_fresh_buffers(knobs, monkeypatch):
    knobs(cuda_graphs="1")
    f = lambda a, b: (a * 2.0 + b, mnp.tanh(a).sum(), a)  # noqa: E731 - an input passed out
    a0, b0 = (_cuda(np.arange(12.0, dtype=np.float32).reshape(3, 4) + k) for k in (0, 1))
    plan, _ = _plan(f, a0, b0)
    outs, keep = [], []
    for k in range(5):
        a = _cuda(np.full((3, 4), float(k), np.float32))
        b = _cuda(np.full((3, 4), 10.0 * k, np.float32))
        o = plan(a._buf, b._buf)
        outs.append(o)
        keep.append((a, b))  # the inputs stay alive: no pool reuse hides aliasing
    assert plan.state == "graph", graphs.failures
    ptrs = [o.data.ptr for call in outs for o in call]
    assert len(set(ptrs)) == len(ptrs), "a buffer handed out twice"
    for k, (y, s, a) in enumerate(outs):  # earlier results were not overwritten
        np.testing.assert_array_equal(cp.asnumpy(y), np.full((3, 4), 12.0 * k, np.float32))
        np.testing.assert_allclose(float(s), 12 * np.tanh(float(k)), rtol=1e-6)
        np.testing.assert_array_equal(cp.asnumpy(a), np.full((3, 4), float(k), np.float32))
        if k >= graphs.WARMUP:  # replayed: the input passed out is a copy
            assert a.data.ptr != keep[k][0]._buf.data.ptr


def test_strided_and_scalar_inputs(knobs, monkeypatch):
    knobs(cuda_graphs="1")
    f = lambda a, s: (a + s) * a.T.sum()  # noqa: E731
    a = _cuda(np.ones((4, 6), np.float32))
    plan, _ = _plan(f, a, _cuda(np.float32(1)))
    for k in range(4):
        m = np.arange(24, dtype=np.float32).reshape(6, 4) * (k + 1)
        at = cp.asarray(m).T  # a transposed (strided) input
        got = cp.asnumpy(plan(at, cp.asarray(np.float32(k)))[0])
        np.testing.assert_allclose(got, (m.T + k) * m.sum(), rtol=1e-6)
    assert plan.state == "graph", graphs.failures


def test_not_captured_when_a_host_sync_is_inside(knobs, monkeypatch):
    """cond reads its branch index on the host: the capture fails, the plan runs plain."""
    knobs(cuda_graphs="1")

    def f(x):
        return mx.lax.cond(x.sum() > 0, lambda v: v * 2.0, lambda v: -v, x) + 1.0
    x = _cuda(np.arange(4, dtype=np.float32))
    plan, _ = _plan(f, x)
    for k in range(4):
        v = np.arange(4, dtype=np.float32) - 2.0 * k
        got = cp.asnumpy(plan(cp.asarray(v))[0])
        want = (v * 2 if v.sum() > 0 else -v) + 1
        np.testing.assert_allclose(got, want)
    assert plan.state == "off"
    assert not plan.captured


def test_not_captured_with_a_host_fallback(knobs, monkeypatch):
    knobs(cuda_graphs="1")
    f = lambda a: mnp.linalg.cholesky(a @ a.T + 4.0 * mnp.eye(3)) * 2.0  # noqa: E731
    a0 = np.arange(9, dtype=np.float32).reshape(3, 3) / 9
    plan, _ = _plan(f, _cuda(a0))
    for k in range(4):
        a = a0 + k
        got = cp.asnumpy(plan(cp.asarray(a))[0])
        np.testing.assert_allclose(got, np.linalg.cholesky(a @ a.T + 4 * np.eye(3)) * 2,
                                   rtol=1e-5)
    assert plan.state == "off"


def test_knob_off_never_captures(knobs, monkeypatch):
    knobs(cuda_graphs="0")
    params, x = _data(1)
    plan, bufs = _plan(_mlp, _cuda(params), _cuda(x))
    captured = graphs.stats["captured"]
    for _ in range(4):
        plan(*bufs)
    assert graphs.stats["captured"] == captured and not plan.captured


def test_auto_mode_captures_a_launch_bound_plan(knobs, monkeypatch):
    knobs(cuda_graphs="auto")
    params, x = _data(2, n=4)  # tiny: the GPU waits on the host between kernels
    plan, bufs = _plan(_mlp, _cuda(params), _cuda(x))
    want = _np(plan(*bufs))
    for _ in range(4):
        got = _np(plan(*bufs))
    assert plan.state == "graph", (getattr(plan, "measured", None), graphs.failures)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_auto_mode_leaves_a_plan_of_big_arrays_plain(knobs, monkeypatch):
    """One softmax over 256 MiB: GPU-bound, and a replay would add copies of in- and
    output (0.3 ms) that exceed what it saves on the host: auto keeps it plain. (At 64 MiB
    the copies, 0.08 ms, were within the rule's margin of a slow host's call.)"""
    knobs(cuda_graphs="auto")
    x = _cuda(np.random.default_rng(0).standard_normal((16384, 4096), dtype=np.float32))
    plan, bufs = _plan(lambda x: mx.nn.softmax(x, axis=-1), x)
    for _ in range(5):
        plan(*bufs)
    assert plan.state == "off" and not plan.captured, plan.measured


def test_auto_mode_drops_a_graph_that_replays_slower(knobs, monkeypatch):
    """The trial after a capture: a GPU-bound plan let through the rule before it (its
    margins opened wide) replays slower than it runs plain: its copies in and out of 512
    MiB each (2 GiB of traffic, about 0.6 ms) cost more than its host time (a launch:
    0.02-0.36 ms measured, the latter in the whole suite); the graph is dropped and the
    plan stays plain, with the plain plan's values on every call."""
    knobs(cuda_graphs="auto")
    monkeypatch.setattr(graphs, "LAUNCH_BOUND", 0.0)
    monkeypatch.setattr(graphs, "COPIES", float("inf"))
    x = cp.random.default_rng(1).standard_normal((32768, 4096), dtype=cp.float32)
    plan, bufs = _plan(lambda x: mx.nn.softmax(x, axis=-1), mx.asarray(x))
    want = plan(*bufs)[0]
    dropped, captured = graphs.stats["dropped"], graphs.stats["captured"]
    for _ in range(graphs.WARMUP + 2 * graphs.MEASURED + 2):
        assert bool(cp.array_equal(plan(*bufs)[0], want))
    assert graphs.stats["captured"] == captured + 1, graphs.failures
    assert graphs.stats["dropped"] == dropped + 1, (plan.measured, plan.replayed)
    assert plan.state == "off" and not plan.captured


def test_jit_and_grad_compose_with_graphs(knobs, monkeypatch):
    knobs(cuda_graphs="1")

    def loss(params, x):
        y, s = _mlp(params, x)
        return -y[:, 0].mean() + 1e-3 * s.sum()
    params, x = _data(3)
    ref = mx.grad(loss)(params, mx.asarray(x))  # CPU
    g_jit = mx.jit(mx.grad(loss))
    g_of_jit = mx.grad(mx.jit(loss))
    vg = mx.jit(mx.value_and_grad(loss))
    for _ in range(4):
        for got in (g_jit(_cuda(params), _cuda(x)), g_of_jit(_cuda(params), _cuda(x)),
                    vg(_cuda(params), _cuda(x))[1]):
            for g, w in zip(got, ref):
                np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-6)
    assert not any(k[0] == "call" for k in BE.failures), BE.failures


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_products_are_captured(knobs, dtype):
    """Complex products (CGEMM / ZGEMM, 2-d and batched) call cuBLAS through library's own
    handle, so their plans are captured; the replays give the plain call's values, within
    the products' rounding (k eps |a| |b|) of complex128 NumPy."""
    knobs(cuda_graphs="1")
    rng = np.random.default_rng(11)

    def cplx(*shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    a, b = cplx(3, 40, 24), cplx(3, 24, 16)
    f = mx.jit(lambda x, y: mnp.matmul(x, y) + mnp.matmul(x[0], y[0]))
    before = dict(graphs.stats)
    outs = [np.asarray(f(_cuda(a), _cuda(b))) for _ in range(4)]
    assert graphs.stats["captured"] == before["captured"] + 1, list(graphs.failures)
    assert graphs.stats["replays"] > before["replays"]
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])
    a2, b2 = a.astype(np.complex128), b.astype(np.complex128)
    want = a2 @ b2 + a2[0] @ b2[0]
    bound = 2 * 24 * np.finfo(dtype).eps * (np.abs(a2) @ np.abs(b2) +
                                            np.abs(a2[0]) @ np.abs(b2[0]))
    assert np.all(np.abs(outs[-1] - want) <= bound)


def test_training_loop_with_graphs_matches_without(knobs, monkeypatch):
    """An Adam-like step carried across calls: captured and plain runs agree step by step."""
    def step(p, m, x):
        g = mx.grad(lambda p: mnp.mean(mnp.tanh(x @ p) ** 2))(p)
        m = 0.9 * m + 0.1 * g
        return p - 0.1 * m / (mnp.sqrt(m * m) + 1e-8), m
    rng = np.random.default_rng(4)
    p0 = rng.standard_normal((6, 3)).astype(np.float32)
    x = _cuda(rng.standard_normal((10, 6)).astype(np.float32))
    results = {}
    for knob in ("1", "0"):
        knobs(cuda_graphs=knob)
        f = mx.jit(step)
        p, m = _cuda(p0), _cuda(np.zeros_like(p0))
        trace = []
        for _ in range(6):
            p, m = f(p, m, x)
            trace.append(np.asarray(p))
        results[knob] = trace
    for a, b in zip(results["1"], results["0"]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("sizes", [(0, 1, 3, 17, 4096), (12, 1 << 20, 5)])
def test_copies_kernel(sizes):
    srcs = [cp.asarray(np.random.default_rng(n).integers(0, 255, n, dtype=np.uint8))
            for n in sizes]
    dsts = [cp.zeros(n, cp.uint8) for n in sizes]
    big = cp.arange(40, dtype=cp.uint8)
    srcs[-1] = big[1:1 + sizes[-1]] if sizes[-1] <= 39 else srcs[-1]  # an unaligned source
    graphs.Copies([s.nbytes for s in srcs])(srcs, dsts)
    for s, d in zip(srcs, dsts):
        np.testing.assert_array_equal(cp.asnumpy(d), cp.asnumpy(s))


def test_graphs_read_inputs_where_they_are(knobs, monkeypatch):
    """A step whose outputs are its next inputs: its big state (IN_PLACE bytes or more)
    comes back at two sets of addresses, so graphs read it in place (no graph copies
    every input in), the small input copied in; inputs at more than ADDRESSED sets of
    addresses, all alive, get one more graph whose inputs are all copied in; values are
    the plain plan's on every call, earlier outputs are never overwritten, and a buffer
    given again (written in place) is read anew."""
    knobs(cuda_graphs="1")
    f = lambda p, m, x: (p - 0.1 * (0.9 * m + x), 0.9 * m + x)  # noqa: E731
    rng = np.random.default_rng(5)
    p0, m0 = (rng.standard_normal((256, 128)).astype(np.float32) for _ in range(2))
    x0 = rng.standard_normal(128).astype(np.float32)
    assert p0.nbytes >= graphs.IN_PLACE > x0.nbytes
    plan, _ = _plan(f, _cuda(p0), _cuda(m0), _cuda(x0))
    plain, _ = _plan(f, _cuda(p0), _cuda(m0), _cuda(x0))
    plain.state = "off"
    x = cp.asarray(x0)
    p, m, want = cp.asarray(p0), cp.asarray(m0), []
    for _ in range(8):
        p, m = plain(p, m, x)
        want.append(_np([p, m]))
    p, m = cp.asarray(p0), cp.asarray(m0)
    for w in want:
        p, m = plan(p, m, x)
        for a, b in zip(_np([p, m]), w):
            np.testing.assert_array_equal(a, b)
    assert plan.state == "graph", graphs.failures
    assert None not in plan.captured and len(plan.captured) <= 3, list(plan.captured)
    alive = [[cp.asarray(rng.standard_normal(s).astype(np.float32))
              for s in ((256, 128), (256, 128), (128,))] for _ in range(graphs.ADDRESSED + 2)]
    kept = []
    for bufs in alive + alive[:2]:
        kept.append((plan(*bufs), _np(plain(*bufs))))
        bufs[0] += 1.0   # the same addresses, other values: read anew next time
    for got, w in kept:   # (all kept alive: none was overwritten by a later replay)
        for a, b in zip(_np(got), w):
            np.testing.assert_array_equal(a, b)
    assert None in plan.captured
    assert len(plan.captured) == graphs.ADDRESSED + 1
