"""The NCCL engine on the GPUs CuPy sees (world size = the GPU count of this machine; one
on the device machine): pmap over CUDA devices, each collective against vmap(axis_name=)
on the CPU, eagerly and inside jit (the collective a node of the CUDA plan). Skipped
without CuPy or a GPU."""
import numpy as np
import pytest

cp = pytest.importorskip("cupy")
if not cp.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
nccl = pytest.importorskip("cupy.cuda.nccl")

import mirax as mx  # noqa: E402

pytestmark = pytest.mark.gpu

CASES = {
    "psum": lambda a: mx.lax.psum(a, "i"),
    "pmax": lambda a: mx.lax.pmax(a, "i"),
    "all_gather": lambda a: mx.lax.all_gather(a, "i"),
    "psum_scatter": lambda a: mx.lax.psum_scatter(a, "i", scatter_dimension=1, tiled=True),
    "ppermute": lambda a: mx.lax.ppermute(a, "i", [(i, (i + 1) % N) for i in range(N)]),
    "all_to_all": lambda a: mx.lax.all_to_all(a, "i", 1, 0, tiled=True),
    "axis_index": lambda a: a * mx.lax.axis_index("i"),
}
DEVS = mx.local_devices("cuda")
N = len(DEVS)


@pytest.mark.parametrize("name", list(CASES))
def test_nccl_collectives_match_vmap(name):
    f = CASES[name]
    x = np.random.RandomState(0).randn(N, 4, 2 * N).astype(np.float32)
    want = np.asarray(mx.vmap(f, axis_name="i")(x))
    got = mx.pmap(f, axis_name="i", devices=DEVS)(x)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    g = mx.pmap(mx.grad(lambda a: (f(a) ** 2).sum()), axis_name="i", devices=DEVS)(x)
    gw = mx.vmap(mx.grad(lambda a: (f(a) ** 2).sum()), axis_name="i")(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(gw), rtol=1e-4, atol=1e-5)


def test_the_collective_is_a_node_of_the_cuda_plan():
    x = np.random.RandomState(1).randn(N, 1024).astype(np.float32)
    step = mx.jit(lambda a: mx.lax.psum(a * 2, "i") + 1)
    got = mx.pmap(step, axis_name="i", devices=DEVS)(x)
    np.testing.assert_allclose(np.asarray(got), np.broadcast_to(2 * x.sum(0) + 1, x.shape),
                               rtol=1e-5)
    shard = got.addressable_shards[0].data
    assert shard.device.platform == "cuda"


def test_device_resident_arguments_stay_on_the_device():
    """An argument already on the GPU is sliced there for its members (no trip through the
    host), and the outputs are stacked there; a pmap output fed back in passes its shards
    as they are."""
    x = np.random.RandomState(2).randn(N, 3, 5).astype(np.float32)
    dev = mx.device_put(x, DEVS[0])
    f = mx.pmap(lambda a: mx.lax.psum(a, "i") * a, axis_name="i", devices=DEVS)
    got = f(dev)
    want = x.sum(0) * x
    assert got.device.platform == "cuda"
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    again = f(got)
    np.testing.assert_allclose(np.asarray(again), want.sum(0) * want, rtol=1e-4, atol=1e-5)
