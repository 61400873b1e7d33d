"""Run under `mpiexec -n P python tests/distributed/mpi_collectives.py`: pmap over every
process's devices (MIRAX_CPU_DEVICES per process), each collective checked against NumPy
on the global value, and grad inside pmap against vmap(axis_name=) over the global batch.
Prints `ok <rank>` and exits 0 when every check passes. Without a launcher:
`python mpi_collectives.py --no-launcher HOST:PORT P ID` in each of P processes."""
import sys

import numpy as np

import mirax as mx

if sys.argv[1:2] == ["--no-launcher"]:
    mx.distributed.initialize(coordinator_address=sys.argv[2],
                              num_processes=int(sys.argv[3]), process_id=int(sys.argv[4]))
else:
    mx.distributed.initialize()
rank, nproc = mx.process_index(), mx.process_count()
L = mx.local_device_count("cpu")
N = nproc * L
rng = np.random.RandomState(0)
X = rng.randn(N, 4, 2 * N)           # the global batch; this process holds rows rank*L...
x = X[rank * L:(rank + 1) * L]
PERM = tuple((i, (i + 1) % N) for i in range(N - 1))   # the last member receives nothing
assert len(mx.devices("cpu")) == N, mx.devices("cpu")


def check(name, f, want_global):
    got = np.asarray(mx.pmap(f, axis_name="i")(x))
    want = np.asarray(want_global)[rank * L:(rank + 1) * L]
    if not np.allclose(got, want, rtol=1e-12, atol=1e-12):
        print(f"FAIL {name} on rank {rank}: max err {np.abs(got - want).max()}", flush=True)
        sys.exit(1)


def vm(f):
    return mx.vmap(f, axis_name="i")(X)


cases = {
    "psum": lambda a: mx.lax.psum(a, "i"),
    "pmean": lambda a: mx.lax.pmean(a, "i"),
    "pmax": lambda a: mx.lax.pmax(a, "i"),
    "pmin": lambda a: mx.lax.pmin(a, "i"),
    "all_gather": lambda a: mx.lax.all_gather(a, "i"),
    "all_gather_tiled": lambda a: mx.lax.all_gather(a, "i", axis=1, tiled=True),
    "psum_scatter": lambda a: mx.lax.psum_scatter(a, "i", scatter_dimension=1, tiled=True),
    "ppermute": lambda a: mx.lax.ppermute(a, "i", PERM),
    "all_to_all": lambda a: mx.lax.all_to_all(a, "i", 1, 0, tiled=True),
    "axis_index": lambda a: a * mx.lax.axis_index("i"),
}
for name, f in cases.items():
    check(name, f, vm(f))
    w = np.linspace(-1, 1, np.asarray(vm(f)).size // N).reshape(np.shape(vm(f))[1:])

    def g(a, f=f, w=w):
        return mx.grad(lambda a: (f(a) * w).sum())(a)
    check(name + " grad", g, vm(g))
# NumPy references for the global value
check("psum numpy", cases["psum"], np.broadcast_to(X.sum(0), X.shape))
check("all_gather numpy", cases["all_gather"], np.broadcast_to(X, (N,) + X.shape))
# failure behaviour: mismatched shapes across processes raise, naming the collective
if L == 1:
    try:
        mx.pmap(lambda a: mx.lax.psum(a, "i"), axis_name="i")(np.ones((1, 3 + rank)))
    except ValueError as e:
        assert "psum" in str(e) and "disagree" in str(e), e
    else:
        print(f"FAIL mismatch on rank {rank}: no error", flush=True)
        sys.exit(1)
# shard_map over a mesh of every process's devices: (processes, local devices)
from mirax.sharding import Mesh, P  # noqa: E402
mesh = Mesh(np.array(mx.devices("cpu"), dtype=object).reshape(nproc, L), ("p", "l"))
A = rng.randn(4 * nproc, 2 * L)
W = rng.randn(2 * L, 3)
mm = mx.shard_map(lambda a, w: mx.lax.psum(a @ w, "l"), mesh,
                  in_specs=(P("p", "l"), P("l", None)), out_specs=P("p", None))(A, W)
if not np.allclose(np.asarray(mm), A @ W, rtol=1e-12):
    print(f"FAIL shard_map on rank {rank}", flush=True)
    sys.exit(1)
g = mx.shard_map(lambda a: mx.lax.all_gather(a, ("p", "l"), tiled=True), mesh,
                 P(("p", "l")), P())(np.arange(2.0 * N))
if not np.array_equal(np.asarray(g), np.arange(2.0 * N)):
    print(f"FAIL shard_map all_gather on rank {rank}", flush=True)
    sys.exit(1)
print(f"ok {rank}", flush=True)
