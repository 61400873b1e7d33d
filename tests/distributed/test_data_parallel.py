"""Data-parallel charlm: the same losses as one process at the same global batch (float32
tolerance: the gradient mean is summed in another order), with two CPU devices in one
process and with mpiexec -n 2; process 0's checkpoint loads in this (one) process."""
import json

import numpy as np
import pytest

import mirax as mx
from mirax.examples import charlm

from test_mpi import launch, needs_mpi, HERE

ARGS = ("--steps 4 --batch 8 --context 16 --dim 32 --layers 1 --heads 2 --eval-batches 1 "
        "--sample-chars 2 --plot= --quiet").split()


@pytest.fixture(scope="module")
def reference():
    return charlm.main(ARGS)["train_losses"]


def test_two_devices_in_one_process(knobs, reference):
    knobs(cpu_devices=2)
    got = charlm.main(ARGS + ["--data-parallel"])["train_losses"]
    np.testing.assert_allclose(got, reference, rtol=2e-5)


def test_allreduce_mean_buckets(knobs):
    knobs(cpu_devices=2)
    dp = mx.distributed.data_parallel
    g = {"a": np.arange(6.0).reshape(2, 3), "b": np.ones(5, np.float32),
         "c": np.arange(4.0)}
    stacked = {k: np.stack([v, 3 * v]) for k, v in g.items()}
    for bucket in (8, 1 << 20):   # one leaf per bucket; all float64 leaves in one
        out = mx.pmap(lambda t: dp.allreduce_mean(t, "b", bucket_bytes=bucket),
                      axis_name="b")(stacked)
        for k, v in g.items():
            np.testing.assert_allclose(np.asarray(out[k]), np.stack([2 * v, 2 * v]))
            assert out[k].dtype == v.dtype


@needs_mpi
def test_two_processes_match_one(tmp_path, reference):
    ck = tmp_path / "charlm.safetensors"
    r = launch(HERE / "dp_charlm.py", args=(str(ck),))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("LOSSES "))
    np.testing.assert_allclose(json.loads(line[7:]), reference, rtol=2e-5)
    params = mx.io.load(str(ck))
    assert sum(np.asarray(x).size for x in mx.tree.leaves(params)) > 1000
