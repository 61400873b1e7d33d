"""mx.profiler on CUDA: one slice per executed plan node, timed by CUDA events, on the
'CUDA stream' track inside the call's time; transfers recorded. Skipped without a GPU."""
from __future__ import annotations

import json

import numpy as np
import pytest

cp = pytest.importorskip("cupy")
if not cp.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import mirax as mx  # noqa: E402
import mirax.numpy as mnp  # noqa: E402
from mirax.backends.cuda.runtime import CUDA_TRACK  # noqa: E402

pytestmark = pytest.mark.gpu


def test_cuda_nodes_and_transfers(tmp_path):
    rng = np.random.default_rng(0)
    w = mx.device_put(rng.standard_normal((256, 256)).astype(np.float32), "cuda")
    f = mx.jit(lambda x, w: mnp.sum(mnp.tanh(x @ w) ** 2, axis=1))
    x = rng.standard_normal((512, 256)).astype(np.float32)
    xd = mx.device_put(x, "cuda")
    want = np.asarray(f(xd, w))
    path = tmp_path / "t.json"
    with mx.profiler.trace(path):
        xd = mx.device_put(x, "cuda")
        for _ in range(3):
            got = f(xd, w)
        host = np.asarray(got)
    np.testing.assert_allclose(host, want, rtol=1e-5)
    evs = [e for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"]
    gpu = [e for e in evs if e["cat"] == "cuda"]
    plans = [e for e in evs if e["cat"] == "plan"]
    assert len(plans) == 3 and gpu and all(e["tid"] == CUDA_TRACK for e in gpu)
    assert len(gpu) % 3 == 0 and any("dot_general" in e["name"] for e in gpu)
    assert all(e["dur"] >= 0 for e in gpu)
    assert {"from_host", "to_host"} <= {e["name"] for e in evs if e["cat"] == "transfer"}
    assert "cuda" in mx.profiler.summary()
