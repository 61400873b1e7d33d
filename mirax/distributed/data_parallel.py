"""Data-parallel training helpers: the recipe of README's "Data-parallel training".

    mx.distributed.initialize()                       # reads mpiexec (or one process)
    step = mx.pmap(train_step, axis_name="batch")     # one member per local device
    params, opt_state = replicate(params), replicate(opt_state)
    for x, y in batches:                              # the same global batch everywhere
        params, opt_state, loss = step(params, opt_state, shard_batch(x), shard_batch(y))
    if mx.process_index() == 0:                       # process 0 writes the checkpoint
        mx.io.save("ckpt.safetensors", unreplicate(params))
    barrier()                                         # (loads under any process count)

where train_step computes `loss, grads = value_and_grad(...)`, then
`grads = allreduce_mean(grads, "batch")` (bucketed: the gradient leaves travel in a few
large all-reduces, not one per leaf) before the optimizer update. Every member then holds
the same parameters, and the losses are those of one process at the same global batch.

Where it sits: distributed/, written with ops and the collectives.
"""
from __future__ import annotations

import numpy as np

from mirax.core import config, runtime, tree
from mirax.core.trace import aval_of
from mirax.distributed import process
from mirax.ops import collective, shape as sh
from mirax.ops.common import operand


def _local_count() -> int:
    """This process's device count on the default platform (what pmap maps over)."""
    want = config.get("device").lower()
    return len(runtime.devices("cuda" if want.startswith("cuda") or want == "gpu" else "cpu"))


def replicate(x, n: int | None = None):
    """Every leaf stacked `n` times (default: this process's local device count): the
    replicated argument of a pmap'd step."""
    n = n or _local_count()
    return tree.map(lambda a: np.broadcast_to(np.asarray(a), (n,) + np.shape(a)), x)


def unreplicate(x):
    """Member 0's copy of every leaf (the members hold the same values)."""
    return tree.map(lambda a: a[0], x)


def shard_batch(x, n: int | None = None):
    """This process's part of a global batch (the same on every process), split into one
    slice per local device: shape (local devices, batch / all devices, ...)."""
    n = n or _local_count()
    x = np.asarray(x)
    p, k = process.process_count(), process.process_index()
    total = p * n
    if x.shape[0] % total:
        raise ValueError(f"shard_batch: a global batch of {x.shape[0]} does not split over "
                         f"{total} devices ({p} processes x {n})")
    b = x.shape[0] // total
    return x[k * n * b:(k + 1) * n * b].reshape((n, b) + x.shape[1:])


def allreduce_mean(grads, axis_name, bucket_bytes: int = 1 << 18):
    """The mean of a gradient pytree over the named axis, in buckets: leaves of one dtype
    are flattened and concatenated into buffers of about `bucket_bytes`, each one pmean
    (one all-reduce), and split back. Buckets take the leaves last to first (as a model's
    parameters are listed, the backward pass makes the last ones' gradients first), so
    that in a CPU plan a bucket's all-reduce starts as soon as the backward pass has
    produced its leaves and travels while the pass goes on."""
    leaves, treedef = tree.flatten(grads)
    leaves = [operand(g, "allreduce_mean") for g in leaves]
    out = [None] * len(leaves)
    bucket, size, dtype = [], 0, None

    def flush():
        nonlocal bucket, size
        if not bucket:
            return
        flat = [sh.reshape(leaves[i], (aval_of(leaves[i]).size,)) for i in bucket]
        joined = flat[0] if len(flat) == 1 else sh.concatenate(flat, 0)
        mean = collective.pmean(joined, axis_name)
        start = 0
        for i in bucket:
            a = aval_of(leaves[i])
            piece = sh.slice_in_dim(mean, start, start + a.size) if len(bucket) > 1 else mean
            out[i] = sh.reshape(piece, a.shape)
            start += a.size
        bucket, size = [], 0

    for i in reversed(range(len(leaves))):
        a = aval_of(leaves[i])
        nbytes = a.size * a.dtype.itemsize
        if bucket and (a.dtype != dtype or size + nbytes > bucket_bytes):
            flush()
        dtype = a.dtype
        bucket.append(i)
        size += nbytes
    flush()
    return tree.unflatten(treedef, out)


def barrier():
    """Wait until every process gets here."""
    if process.group.comm is not None:
        process.group.comm.Barrier()
