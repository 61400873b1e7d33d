"""pmap and shard_map over several CPU devices of one process (cpu_devices), against
vmap(axis_name=) (the reference) and NumPy: every collective, composition with grad, jvp,
vmap and jit in both orders, shardings, device_put / device_get; the thread engine's
failure behaviour (mismatched shapes, a failing member, a member that never comes)."""
import threading

import numpy as np
import pytest

import mirax as mx
from mirax.core import comm, config
from mirax.distributed import engines
from mirax.sharding import Mesh, NamedSharding, P

PERM = ((0, 1), (1, 2), (2, 0))
CASES = {
    "psum": lambda a: mx.lax.psum(a, "i"),
    "pmean": lambda a: mx.lax.pmean(a, "i") * a,
    "pmax": lambda a: mx.lax.pmax(a, "i") * a,
    "pmin": lambda a: mx.lax.pmin(a, "i"),
    "all_gather": lambda a: mx.lax.all_gather(a, "i"),
    "all_gather_tiled": lambda a: mx.lax.all_gather(a, "i", axis=1, tiled=True),
    "psum_scatter_tiled": lambda a: mx.lax.psum_scatter(a, "i", scatter_dimension=1,
                                                        tiled=True),
    "ppermute": lambda a: mx.lax.ppermute(a, "i", PERM),
    "all_to_all_tiled": lambda a: mx.lax.all_to_all(a, "i", 1, 0, tiled=True),
    "axis_index": lambda a: a * mx.lax.axis_index("i"),
}


@pytest.fixture
def devices(knobs):
    def make(n):
        knobs(cpu_devices=n)
        assert mx.local_device_count("cpu") == n
        return mx.local_devices("cpu")
    return make


def _x(n, seed=0):
    return np.random.RandomState(seed).randn(n, 3, 8)


@pytest.mark.parametrize("name", list(CASES))
def test_pmap_matches_vmap(devices, name):
    devices(4)
    f = CASES[name]
    x = _x(4)
    want = np.asarray(mx.vmap(f, axis_name="i")(x))
    np.testing.assert_allclose(np.asarray(mx.pmap(f, axis_name="i")(x)), want, rtol=1e-13)
    # grad inside: each member differentiates its own loss (psum's transpose is psum)
    w = np.random.RandomState(1).randn(*want.shape[1:])

    def g(a):
        return mx.grad(lambda a: (f(a) * w).sum())(a)
    np.testing.assert_allclose(np.asarray(mx.pmap(g, axis_name="i")(x)),
                               np.asarray(mx.vmap(g, axis_name="i")(x)), rtol=1e-12)


@pytest.mark.parametrize("n", [2, 8])
def test_psum_and_all_gather_on_2_and_8_devices(devices, n):
    devices(n)
    x = _x(n)
    np.testing.assert_allclose(np.asarray(mx.pmap(lambda a: mx.lax.psum(a, "i"),
                                                  axis_name="i")(x)),
                               np.broadcast_to(x.sum(0), x.shape), rtol=1e-13)
    got = mx.pmap(lambda a: mx.lax.all_gather(a, "i"), axis_name="i")(x)
    np.testing.assert_array_equal(np.asarray(got), np.broadcast_to(x, (n,) + x.shape))


def test_transforms_outside_pmap(devices):
    devices(4)
    x, t = _x(4), _x(4, 1)
    f = mx.pmap(lambda a: (mx.lax.psum(a, "i") * a).sum(), axis_name="i")
    v = mx.vmap(lambda a: (mx.lax.psum(a, "i") * a).sum(), axis_name="i")
    np.testing.assert_allclose(np.asarray(mx.grad(lambda x: f(x).sum())(x)),
                               np.asarray(mx.grad(lambda x: v(x).sum())(x)), rtol=1e-12)
    # d/dx of sum_i <S, x_i> = 2 S for every member
    np.testing.assert_allclose(np.asarray(mx.grad(lambda x: f(x).sum())(x)),
                               np.broadcast_to(2 * x.sum(0), x.shape), rtol=1e-12)
    _, ft = mx.jvp(f, (x,), (t,))
    _, vt = mx.jvp(v, (x,), (t,))
    np.testing.assert_allclose(np.asarray(ft), np.asarray(vt), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(mx.jit(f)(x)), np.asarray(v(x)), rtol=1e-12)
    xs = np.stack([x, 2 * x])
    np.testing.assert_allclose(np.asarray(mx.vmap(f)(xs)), np.asarray(mx.vmap(v)(xs)),
                               rtol=1e-12)


def test_pmap_of_vmap_and_jit_inside(devices):
    devices(2)
    x = np.random.RandomState(2).randn(2, 3, 4)
    inner = mx.vmap(lambda a: mx.lax.psum(a, "i") - mx.lax.psum(a, "j"), axis_name="j")
    got = mx.pmap(mx.jit(inner), axis_name="i")(x)
    want = x.sum(0)[None] - x.sum(1)[:, None]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-13)


def test_pmap_arguments_and_sharding(devices):
    devs = devices(4)
    x = _x(4)
    c = np.arange(8.0)
    f = mx.pmap(lambda a, k, b: (a + b) * k, axis_name="i", in_axes=(0, None, None),
                static_broadcasted_argnums=(1,))
    np.testing.assert_allclose(np.asarray(f(x, 3, c)), (x + c) * 3)
    y = mx.pmap(lambda a: a * 2, out_axes=1)(x)
    np.testing.assert_allclose(np.asarray(y), np.moveaxis(x * 2, 0, 1))
    z = mx.pmap(lambda a: mx.lax.psum(a, "i"), axis_name="i")(x)
    assert z.sharding.devices == tuple(devs) and len(z.addressable_shards) == 4
    np.testing.assert_allclose(np.asarray(z.addressable_shards[2].data), x.sum(0))
    # a pmap-sharded input is consumed shard by shard
    np.testing.assert_allclose(np.asarray(mx.pmap(lambda a: a + 1)(z)), np.asarray(z) + 1)
    np.testing.assert_allclose(mx.device_get({"z": z})["z"], np.asarray(z))
    with pytest.raises(ValueError, match="5 members but only 4 local devices"):
        mx.pmap(lambda a: a)(np.ones((5, 2)))


def _mesh(devices):
    return Mesh(np.array(devices(4)).reshape(2, 2), ("data", "model"))


def test_shard_map_values_and_collectives(devices):
    mesh = _mesh(devices)
    x = np.random.RandomState(3).randn(8, 4)

    def f(a):   # the block's column sums, summed over the data axis
        return mx.lax.psum(a.sum(0, keepdims=True), "data")
    y = mx.shard_map(f, mesh, in_specs=P("data", "model"), out_specs=P(None, "model"))(x)
    np.testing.assert_allclose(np.asarray(y), x.sum(0, keepdims=True), rtol=1e-13)
    assert y.sharding == NamedSharding(mesh, P(None, "model"))
    g = mx.shard_map(lambda a: mx.lax.all_gather(a, ("data", "model"), tiled=True), mesh,
                     P(("data", "model")), P())(np.arange(8.0))
    np.testing.assert_array_equal(np.asarray(g), np.arange(8.0))
    idx = mx.shard_map(lambda a: a * 0 + mx.lax.axis_index(("data", "model")), mesh,
                       P(("data", "model")), P(("data", "model")))(np.ones(4))
    np.testing.assert_array_equal(np.asarray(idx), [0, 1, 2, 3])
    # a matmul with the contraction dimension split over 'model' (a psum finishes it)
    w = np.random.RandomState(4).randn(4, 6)
    mm = mx.shard_map(lambda a, b: mx.lax.psum(a @ b, "model"), mesh,
                      in_specs=(P("data", "model"), P("model", None)),
                      out_specs=P("data", None))(x, w)
    np.testing.assert_allclose(np.asarray(mm), x @ w, rtol=1e-12)


def test_shard_map_under_transforms(devices):
    mesh = _mesh(devices)
    x = np.random.RandomState(5).randn(8, 4)
    sm = mx.shard_map(lambda a: mx.lax.psum((a ** 2).sum(0, keepdims=True), "data"), mesh,
                      P("data", "model"), P(None, "model"))
    want = (x ** 2).sum(0, keepdims=True)
    np.testing.assert_allclose(np.asarray(mx.jit(sm)(x)), want, rtol=1e-12)
    g = mx.grad(lambda x: sm(x).sum())(x)
    np.testing.assert_allclose(np.asarray(g), 2 * x, rtol=1e-12)
    _, t = mx.jvp(sm, (x,), (np.ones_like(x),))
    np.testing.assert_allclose(np.asarray(t), 2 * x.sum(0, keepdims=True), rtol=1e-12)
    xs = np.stack([x, -x])
    np.testing.assert_allclose(np.asarray(mx.vmap(sm)(xs)), np.stack([want, want]),
                               rtol=1e-12)


def test_device_put_with_a_sharding(devices):
    mesh = _mesh(devices)
    x = np.arange(24.0).reshape(4, 6)
    y = mx.device_put(x, NamedSharding(mesh, P("model", "data")))
    assert y.sharding.spec == P("model", "data")
    for s in y.addressable_shards:
        np.testing.assert_array_equal(np.asarray(s.data), x[s.index])
        assert s.data.shape == (2, 3)
    np.testing.assert_array_equal(mx.device_get(y), x)
    with pytest.raises(ValueError, match="not divisible"):
        mx.device_put(np.ones((3, 6)), NamedSharding(mesh, P("data")))


# --- the thread engine's failure behaviour ---------------------------------------------------
def _members(n, fn):
    group = engines.ThreadGroup(n, "axis 'i'")
    errs = [None] * n

    def run(k):
        try:
            fn(engines.ThreadComm(group, k), k)
        except Exception as e:   # as the SPMD runner does
            errs[k] = e
            if not isinstance(e, comm.MismatchError):
                group.abort(f"member {k}: {e}")
    ts = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert not any(t.is_alive() for t in ts), "a member hangs"
    return errs


def test_mismatched_shapes_raise_naming_the_collective():
    errs = _members(2, lambda c, k: c.allreduce(np.ones(3 + k), "sum", "psum"))
    assert all(isinstance(e, ValueError) and "psum" in str(e) and "f64[3]" in str(e)
               and "f64[4]" in str(e) for e in errs)


def test_a_failing_member_fails_the_others():
    def fn(c, k):
        if k == 1:
            raise RuntimeError("boom")
        c.allreduce(np.ones(3), "sum", "psum")
    errs = _members(2, fn)
    assert isinstance(errs[0], comm.CollectiveError) and "boom" in str(errs[0])


def test_a_missing_member_times_out():
    def fn(c, k):
        if k == 0:
            with config.override(collective_timeout=1):
                c.allreduce(np.ones(3), "sum", "all_gather")
    errs = _members(2, fn)
    assert isinstance(errs[0], TimeoutError) and "all_gather" in str(errs[0])


def _member_events(f, a, b):
    """pmap(f) on 2 CPU devices, checked against vmap's values; the CPU node slices of
    its second call, per member thread: {thread: [event, ...]} in order."""
    with config.override(cpu_devices=2):
        pf = mx.pmap(f, axis_name="i")
        pf(a, b)
        with mx.profiler.trace():
            got = pf(a, b)
        events = mx.profiler.events()
    np.testing.assert_allclose(np.asarray(got), np.asarray(mx.vmap(f, axis_name="i")(a, b)),
                               rtol=1e-5)
    rows: dict = {}
    for e in events:
        if e["cat"] == "cpu":
            rows.setdefault(e["tid"], []).append(e)
    return rows


def test_a_collective_starts_early_and_the_plan_computes_while_it_travels():
    """In a CPU plan the psum moves up to where its operand is ready (the hoist pass), runs
    on the member's communication thread, and the plan waits for it only at its first use:
    the independent chain runs in between. Values as vmap's."""
    def f(a, b):
        s = mx.lax.psum(a * 2.0, "i")
        h = b
        for _ in range(3):
            h = mx.numpy.tanh(h @ b)
        return h.sum() + s.sum()

    rng = np.random.RandomState(0)
    a = rng.randn(2, 1000).astype(np.float32)
    b = (rng.randn(2, 64, 64) / 8).astype(np.float32)
    members = _member_events(f, a, b)
    assert len(members) == 2
    for rows in members.values():
        names = [e["name"] for e in rows]
        start, wait = names.index("psum (start)"), names.index("psum (wait)")
        chain = [k for k, n in enumerate(names) if n in ("dot_general", "tanh")]
        assert start < min(chain) and max(chain) < wait, names


def test_collectives_are_issued_in_the_order_their_operands_are_ready():
    """A psum written first but needing a long chain goes after a psum written second whose
    operand is ready at once (gradient buckets of the last layers go first): every member
    issues them in the same order."""
    def f(a, b):
        h = b
        for _ in range(3):
            h = mx.numpy.tanh(h @ b)
        late = mx.lax.psum(h, "i")      # written first, ready last
        early = mx.lax.psum(a * 2.0, "i")
        return late.sum() + early.sum()

    rng = np.random.RandomState(1)
    a = rng.randn(2, 100).astype(np.float32)
    b = (rng.randn(2, 32, 32) / 8).astype(np.float32)
    for rows in _member_events(f, a, b).values():
        names = [e["name"] for e in rows]
        starts = [k for k, n in enumerate(names) if n == "psum (start)"]
        chain = [k for k, n in enumerate(names) if n in ("dot_general", "tanh")]
        assert starts[0] < min(chain) < max(chain) < starts[1], names
        assert rows[starts[0]]["args"]["in"].startswith("f32[100]"), rows[starts[0]]["args"]
