"""mx.optim: every optimizer against its textbook formula in NumPy (float64), eagerly and under
jit; schedules against their formulas; optax as an extra oracle when installed."""
import math

import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax import optim

RNG = np.random.default_rng(0)
P0 = {"w": RNG.normal(size=(3, 2)), "b": RNG.normal(size=(2,))}
GRADS = [{"w": RNG.normal(size=(3, 2)), "b": RNG.normal(size=(2,))} for _ in range(4)]


def _np_sgd(lr, mom=None, nesterov=False):
    def run(p, grads):
        t = {k: 0 * v for k, v in p.items()}
        for g in grads:
            for k in p:
                if mom is None:
                    p[k] = p[k] - lr * g[k]
                    continue
                t[k] = g[k] + mom * t[k]
                d = g[k] + mom * t[k] if nesterov else t[k]
                p[k] = p[k] - lr * d
        return p
    return run


def _np_adam(lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0):
    def run(p, grads):
        m = {k: 0 * v for k, v in p.items()}
        v = {k: 0 * v for k, v in p.items()}
        for i, g in enumerate(grads, 1):
            for k in p:
                m[k] = b1 * m[k] + (1 - b1) * g[k]
                v[k] = b2 * v[k] + (1 - b2) * g[k] ** 2
                mh, vh = m[k] / (1 - b1 ** i), v[k] / (1 - b2 ** i)
                p[k] = p[k] - lr * (mh / (np.sqrt(vh) + eps) + wd * p[k])
        return p
    return run


def _np_rmsprop(lr, decay=0.9, eps=1e-8, centered=False):
    def run(p, grads):
        v = {k: 0 * v for k, v in p.items()}
        m = {k: 0 * v for k, v in p.items()}
        for g in grads:
            for k in p:
                v[k] = decay * v[k] + (1 - decay) * g[k] ** 2
                m[k] = decay * m[k] + (1 - decay) * g[k]
                den = v[k] - m[k] ** 2 if centered else v[k]
                p[k] = p[k] - lr * g[k] / np.sqrt(den + eps)
        return p
    return run


def _np_clipped_sgd(lr, max_norm):
    def run(p, grads):
        for g in grads:
            n = math.sqrt(sum(np.sum(x ** 2) for x in g.values()))
            s = 1.0 if n < max_norm else max_norm / n
            for k in p:
                p[k] = p[k] - lr * s * g[k]
        return p
    return run


CASES = {
    "sgd": (lambda: optim.sgd(0.1), _np_sgd(0.1)),
    "momentum": (lambda: optim.momentum(0.1, 0.9), _np_sgd(0.1, 0.9)),
    "nesterov": (lambda: optim.momentum(0.1, 0.8, nesterov=True), _np_sgd(0.1, 0.8, True)),
    "adam": (lambda: optim.adam(0.01), _np_adam(0.01)),
    "adamw": (lambda: optim.adamw(0.01, weight_decay=0.1), _np_adam(0.01, wd=0.1)),
    "rmsprop": (lambda: optim.rmsprop(0.01), _np_rmsprop(0.01)),
    "rmsprop_centered": (lambda: optim.rmsprop(0.01, centered=True),
                         _np_rmsprop(0.01, centered=True)),
    "clip_sgd": (lambda: optim.chain(optim.clip_by_global_norm(1.0), optim.sgd(0.1)),
                 _np_clipped_sgd(0.1, 1.0)),
}


def _run(opt, use_jit):
    params = mx.tree.map(mnp.asarray, P0)       # float64 leaves: NumPy inputs keep dtype
    state = opt.init(params)

    def step(params, state, grads):
        updates, state = opt.update(grads, state, params)
        return optim.apply_updates(params, updates), state
    step = mx.jit(step) if use_jit else step
    for g in GRADS:
        params, state = step(params, state, mx.tree.map(mnp.asarray, g))
    return params


@pytest.mark.parametrize("use_jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_optimizer_matches_formula(name, use_jit):
    make, ref = CASES[name]
    got = _run(make(), use_jit)
    want = ref({k: v.copy() for k, v in P0.items()}, GRADS)
    for k in want:
        assert got[k].dtype == np.float64
        np.testing.assert_allclose(np.asarray(got[k]), want[k], rtol=1e-6, atol=1e-9)


def test_state_is_a_pytree_of_arrays_with_array_counter():
    state = optim.adam(1e-3).init({"w": mnp.zeros((2,))})
    leaves = mx.tree.leaves(state)
    assert all(isinstance(x, mx.Array) for x in leaves)
    assert state[0].count.dtype == np.int32 and state[0].count.shape == ()


def test_adam_with_schedule_under_jit():
    sched = optim.exponential_decay(0.1, 1, 0.5)
    opt = optim.adam(sched)
    params = {"w": mnp.asarray(np.array([1.0, -2.0]))}
    state = opt.init(params)
    step = mx.jit(lambda p, s, g: opt.update(g, s, p))
    g = {"w": mnp.asarray(np.array([0.5, 0.5]))}
    lrs = []
    for _ in range(3):
        u, state = step(params, state, g)
        lrs.append(-float(u["w"][0]))            # adam's direction is 1 for a constant g
    np.testing.assert_allclose(lrs, [0.1, 0.05, 0.025], rtol=1e-6)


def test_schedules_match_formulas():
    t = np.arange(0, 30)
    cos = optim.cosine_decay_schedule(1.0, 20, alpha=0.1)
    want = [(1 - 0.1) * 0.5 * (1 + math.cos(math.pi * min(s, 20) / 20)) + 0.1 for s in t]
    np.testing.assert_allclose([float(cos(int(s))) for s in t], want, rtol=1e-6, atol=1e-7)
    w = optim.warmup_cosine_decay_schedule(0.0, 1.0, 5, 25, end_value=0.1)
    got = [float(w(int(s))) for s in t]
    want = [s / 5 if s < 5 else
            0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(s - 5, 20) / 20)) for s in t]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    e = optim.exponential_decay(2.0, 10, 0.5, transition_begin=3, staircase=True,
                                end_value=0.6)
    want = [max(2.0 * 0.5 ** math.floor(max(s - 3, 0) / 10), 0.6) for s in t]
    np.testing.assert_allclose([float(e(int(s))) for s in t], want, rtol=1e-6)
    assert float(optim.constant_schedule(0.3)(mnp.asarray(7))) == pytest.approx(0.3)
    # under jit, with a traced step
    np.testing.assert_allclose(float(mx.jit(w)(mnp.asarray(12))), got[12], rtol=1e-6)


def test_adamw_mask_and_global_norm():
    params = {"w": mnp.ones((2,)), "b": mnp.ones((2,))}
    opt = optim.adamw(0.1, weight_decay=1.0, mask={"w": True, "b": False})
    zero = mx.tree.map(mnp.zeros_like, params)
    u, _ = opt.update(zero, opt.init(params), params)
    np.testing.assert_allclose(np.asarray(u["w"]), -0.1)
    np.testing.assert_allclose(np.asarray(u["b"]), 0.0)
    assert float(optim.global_norm({"a": mnp.asarray([3.0]), "b": mnp.asarray([4.0])})) == 5.0


def test_training_loop_decreases_loss():
    params = {"w": mnp.zeros((3,))}
    x = mnp.asarray(RNG.normal(size=(32, 3)).astype(np.float32))
    y = x @ mnp.asarray([1.0, -2.0, 0.5])
    loss = lambda p: mnp.mean((x @ p["w"] - y) ** 2)
    opt = optim.chain(optim.clip_by_global_norm(10.0), optim.adam(0.1))
    state = opt.init(params)

    @mx.jit
    def step(params, state):
        v, g = mx.value_and_grad(loss)(params)
        u, state = opt.update(g, state, params)
        return optim.apply_updates(params, u), state, v
    for _ in range(200):
        params, state, v = step(params, state)
    assert float(loss(params)) < 1e-3


def test_optax_oracle():
    optax = pytest.importorskip("optax")
    for ours, theirs in [(optim.adam(0.01), optax.adam(0.01)),
                         (optim.rmsprop(0.01, momentum=0.9), optax.rmsprop(0.01, momentum=0.9)),
                         (optim.adagrad(0.1), optax.adagrad(0.1)),
                         (optim.lion(0.01, weight_decay=0.1), optax.lion(0.01, weight_decay=0.1))]:
        got = _run(ours, True)
        p = {k: np.asarray(v, np.float64) for k, v in P0.items()}
        s = theirs.init(p)
        for g in GRADS:
            u, s = theirs.update(g, s, p)
            p = optax.apply_updates(p, u)
        for k in p:
            np.testing.assert_allclose(np.asarray(got[k]), np.asarray(p[k]), rtol=1e-5)


def _np_adagrad_lion(lr):
    """Adagrad and Lion (weight decay 0.1) by their formulas, in float64."""
    p_ada = {k: v.copy() for k, v in P0.items()}
    p_lion = {k: v.copy() for k, v in P0.items()}
    acc = {k: np.full_like(v, 0.1) for k, v in P0.items()}
    mom = {k: np.zeros_like(v) for k, v in P0.items()}
    for g in GRADS:
        for k in P0:
            acc[k] = acc[k] + g[k] ** 2
            p_ada[k] = p_ada[k] - lr * g[k] / np.sqrt(acc[k] + 1e-7)
            step = np.sign(0.1 * g[k] + 0.9 * mom[k]) + 0.1 * p_lion[k]
            mom[k] = 0.99 * mom[k] + 0.01 * g[k]
            p_lion[k] = p_lion[k] - lr * step
    return p_ada, p_lion


@pytest.mark.parametrize("use_jit", [False, True])
def test_adagrad_and_lion_formulas(use_jit):
    want_ada, want_lion = _np_adagrad_lion(0.05)
    for opt, want in [(optim.adagrad(0.05), want_ada),
                      (optim.lion(0.05, weight_decay=0.1), want_lion)]:
        got = _run(opt, use_jit)
        for k in want:
            np.testing.assert_allclose(np.asarray(got[k]), want[k], rtol=1e-10)
