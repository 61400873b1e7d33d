"""mx.profiler: the Chrome trace of a jitted step (one slice per executed plan node, nested
in the jitted function's slice; compile phases), its coverage of the step's wall time, and
the plain plan left untouched when no trace is on."""
import json
import time

import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax.core import profile_events

RNG = np.random.default_rng(0)


def _mlp_step(batch=128):
    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = mnp.maximum(h @ w + b, 0.0)
        w, b = params[-1]
        logits = h @ w + b
        return -mnp.mean(mx.nn.log_softmax(logits) * y)

    @mx.jit
    def step(params, x, y):
        l, g = mx.value_and_grad(loss)(params, x, y)
        return l, [(w - 0.1 * gw, b - 0.1 * gb) for (w, b), (gw, gb) in zip(params, g)]
    sizes = [256, 512, 512, 10]
    params = [((RNG.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32),
               np.zeros(b, np.float32)) for a, b in zip(sizes[:-1], sizes[1:])]
    x = RNG.standard_normal((batch, 256)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[RNG.integers(0, 10, batch)]
    return step, (params, x, y)


def test_trace_loads_and_nests_nodes_under_the_jitted_function(tmp_path, knobs):
    knobs(cpu_threads=1)
    step, args = _mlp_step()
    path = tmp_path / "trace.json"
    with mx.profiler.trace(path):
        step(*args)          # traced, compiled and run
        step(*args)
    doc = json.loads(path.read_text())
    evs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert all({"name", "ts", "dur", "pid", "tid"} <= e.keys() for e in evs)
    cats = {e["cat"] for e in evs}
    assert {"compile", "plan", "cpu"} <= cats
    names = {e["name"] for e in evs if e["cat"] == "compile"}
    assert {"trace step", "compile step", "pass fuse", "lower (cpu)"} <= names
    plans = [e for e in evs if e["cat"] == "plan"]
    assert [p["name"] for p in plans] == ["step", "step"]
    nodes = [e for e in evs if e["cat"] == "cpu"]
    assert any(e["name"] == "dot_general" for e in nodes)
    for e in nodes:   # every node slice lies inside one plan slice of its thread
        assert sum(p["tid"] == e["tid"] and p["ts"] <= e["ts"] and
                   e["ts"] + e["dur"] <= p["ts"] + p["dur"] + 1e-3 for p in plans) == 1
        assert e["args"]["out"].startswith(("f32", "bool"))
    per_plan = len(nodes) // 2    # the same nodes on both calls
    assert [e["name"] for e in nodes[:per_plan]] == [e["name"] for e in nodes[per_plan:]]


def test_node_slices_cover_the_step(knobs):
    knobs(cpu_threads=1)
    # a step whose nodes outweigh the Python between them (on a busy machine a smaller one
    # measured 89%: the interpreter's share grows while the nodes' does not)
    step, args = _mlp_step(batch=512)
    step(*args)
    with mx.profiler.trace() as rec:
        step(*args)          # the instrumented plan is built here
        covered = []
        for _ in range(3):
            n0 = len(rec.events)
            t0 = profile_events.now()
            step(*args)
            wall = profile_events.now() - t0
            nodes = [e for e in rec.events[n0:] if e[1] == "cpu"]
            covered.append(sum(t1 - s for _, _, s, t1, _, _ in nodes) / wall)
    assert max(covered) >= 0.9, covered


def test_no_trace_leaves_the_plain_plan(knobs):
    f = mx.jit(lambda x: mnp.sum(mnp.tanh(x) * 2.0))
    x = mx.asarray(np.ones((8, 8), np.float32))
    f(x)
    run = f._fast[next(iter(f._fast))][1]
    assert run.__globals__["_traced"].__name__ == "build_traced"   # never instrumented
    with mx.profiler.trace():
        want = f(x)
    assert run.__globals__["_traced"].__name__ == "traced"
    assert float(f(x)) == float(want) == pytest.approx(2 * 64 * np.tanh(1.0), rel=1e-6)


def test_summary_and_errors(capsys, knobs):
    knobs(cpu_threads=1)
    f = mx.jit(lambda x: mnp.exp(x) @ x)
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    with mx.profiler.trace():
        for _ in range(3):
            f(x)
        with pytest.raises(RuntimeError, match="already"):
            with mx.profiler.trace():
                pass
    text = mx.profiler.summary()
    assert "dot_general" in capsys.readouterr().out
    row = next(ln for ln in text.splitlines() if ln.startswith("dot_general"))
    assert row.split()[2] == "3"    # calls
    with pytest.raises(RuntimeError, match="no trace"):
        mx.profiler.stop_trace()


def test_directory_path(tmp_path):
    with mx.profiler.trace(tmp_path):
        time.sleep(0)
    assert json.loads((tmp_path / "mirax_trace.json").read_text())["traceEvents"]


def test_pool_parts_on_their_threads():
    x = RNG.standard_normal((1024, 512)).astype(np.float32)
    f = mx.jit(lambda x: mnp.exp(x) + 1.0)
    # parts run by numba's native threads are not traced: the loop's parts on the pool
    with mx.config.override(cpu_threads=2, cpu_native_threads=False):
        f(x)
        with mx.profiler.trace():
            f(x)
    evs = mx.profiler.events()
    nodes = [e for e in evs if e["cat"] == "cpu"]
    parts = [e for e in evs if e["cat"] == "pool"]
    assert len(parts) >= 2 and all(e["name"].startswith("part ") for e in parts)
    for e in parts:   # inside the node that ran it
        assert any(n["ts"] <= e["ts"] and e["ts"] + e["dur"] <= n["ts"] + n["dur"] + 1
                   for n in nodes)
