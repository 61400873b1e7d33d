"""mx.lax control flow: cond, switch, while_loop, fori_loop, scan, map.

Every op x {eager, jit} x {value, jvp, grad, vmap, grad of grad} against an unrolled Python
reference (the same math with Python control flow, run eagerly through the transforms),
plus JAX as an oracle where installed, error messages, listings and a long scan."""
import time

import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp

lax = mx.lax
RNG = np.random.default_rng(0)


# --- cases: (f built with lax, reference with Python control flow), both x[n] -> scalar ---
def cond_f(x):
    w = mnp.sin(x)  # closed over by both branches
    y = lax.cond(mnp.sum(x) > 0, lambda y: mnp.sin(y) * y + w, lambda y: mnp.cos(y) * w, x)
    return mnp.sum(y * y)


def cond_ref(x):
    w = mnp.sin(x)
    y = mnp.sin(x) * x + w if mnp.sum(x) > 0 else mnp.cos(x) * w
    return mnp.sum(y * y)


BRANCHES = [lambda y, s: (mnp.tanh(y) * s, s), lambda y, s: (y * y * s, s + 1.0),
            lambda y, s: (mnp.exp(-y) + s, s * 2.0)]


def switch_f(x):
    i = (mnp.sum(x) > 0).astype("int32") + (mnp.max(x) > 1.0).astype("int32")
    y, s = lax.switch(i, BRANCHES, x, mnp.sum(x))
    return mnp.sum(y) * s


def switch_ref(x):
    i = int(mnp.sum(x) > 0) + int(mnp.max(x) > 1.0)
    y, s = BRANCHES[i](x, mnp.sum(x))
    return mnp.sum(y) * s


def _wbody(c):
    return c[0] + 1, c[1] * 1.3 + mnp.sin(c[1]) * c[2], c[2]


def while_f(x):
    # the trip count depends on the data (norm of x), so vmap members finish apart
    _, y, _ = lax.while_loop(lambda c: mnp.sum(c[1] * c[1]) < 50.0, _wbody,
                             (0, x, mnp.mean(x)), max_steps=40)
    return mnp.sum(y)


def while_ref(x):
    c = (0, x, mnp.mean(x))
    while mnp.sum(c[1] * c[1]) < 50.0:
        c = _wbody(c)
    return mnp.sum(c[1])


def fori_f(x):
    return mnp.sum(lax.fori_loop(1, 5, lambda i, v: mnp.sin(v) * i + x, x))


def fori_ref(x):
    v = x
    for i in range(1, 5):
        v = mnp.sin(v) * i + x
    return mnp.sum(v)


def _sbody(c, xi, w):
    h, acc = c
    h = mnp.tanh(h * w + xi)
    return (h, acc + mnp.sum(h)), h * xi


def scan_f(x, reverse=False, checkpoint=None):
    w = mnp.cos(x[:3])
    xs = mnp.reshape(x, (4, 3))
    (h, acc), ys = lax.scan(lambda c, xi: _sbody(c, xi, w), (x[3:6], 0.0), xs,
                            reverse=reverse, checkpoint=checkpoint)
    return mnp.sum(h) + acc * 0.5 + mnp.sum(ys * ys)


def scan_ref(x, reverse=False):
    w = mnp.cos(x[:3])
    xs = mnp.reshape(x, (4, 3))
    c, ys = (x[3:6], 0.0), [None] * 4
    for t in (range(3, -1, -1) if reverse else range(4)):
        c, ys[t] = _sbody(c, xs[t], w)
    return mnp.sum(c[0]) + c[1] * 0.5 + mnp.sum(mnp.stack(ys) ** 2)


def map_f(x):
    return mnp.sum(lax.map(lambda r: mnp.sin(r) * mnp.sum(r), mnp.reshape(x, (4, 3))))


def map_ref(x):
    rows = mnp.reshape(x, (4, 3))
    return mnp.sum(mnp.stack([mnp.sin(rows[i]) * mnp.sum(rows[i]) for i in range(4)]))


CASES = {
    "cond": (cond_f, cond_ref, 12),
    "switch": (switch_f, switch_ref, 12),
    "while_loop": (while_f, while_ref, 12),
    "fori_loop": (fori_f, fori_ref, 12),
    "scan": (scan_f, scan_ref, 12),
    "scan_reverse": (lambda x: scan_f(x, reverse=True), lambda x: scan_ref(x, True), 12),
    "scan_sqrt": (lambda x: scan_f(x, checkpoint="sqrt"), scan_ref, 12),
    "map": (map_f, map_ref, 12),
}


def _inputs(n, sign=1.0):
    x = RNG.normal(size=n) * 0.7
    x[0] = sign * (abs(x[0]) + 0.5)
    # NOTE: mx arrays, not NumPy: jit currently traces a NumPy f64 argument as weak-typed
    return mnp.asarray(x)


def _close(a, b, tol=1e-9):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


@pytest.fixture(params=["eager", "jit"])
def mode(request):
    return request.param


def _maybe_jit(f, mode):
    return mx.jit(f) if mode == "jit" else f


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_value(case, sign, mode):
    f, ref, n = CASES[case]
    x = _inputs(n, sign)
    _close(_maybe_jit(f, mode)(x), ref(x))


@pytest.mark.parametrize("case", sorted(CASES))
def test_jvp(case, mode):
    f, ref, n = CASES[case]
    x, v = _inputs(n), mnp.asarray(RNG.normal(size=n))
    out, t = mx.jvp(_maybe_jit(f, mode), (x,), (v,))
    out_r, t_r = mx.jvp(ref, (x,), (v,))
    _close(out, out_r)
    _close(t, t_r)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_grad(case, sign, mode):
    f, ref, n = CASES[case]
    x = _inputs(n, sign)
    _close(mx.grad(_maybe_jit(f, mode))(x), mx.grad(ref)(x))
    _close(_maybe_jit(mx.grad(f), mode)(x), mx.grad(ref)(x))


@pytest.mark.parametrize("case", sorted(CASES))
def test_vmap(case, mode):
    f, ref, n = CASES[case]
    xs = mnp.stack([_inputs(n, s) * k for s, k in [(1, 1), (-1, 1), (1, 2.5), (-1, 0.3)]])
    got = _maybe_jit(mx.vmap(f), mode)(xs)
    _close(got, np.stack([np.asarray(ref(x)) for x in xs]))


@pytest.mark.parametrize("case", sorted(CASES))
def test_grad_of_grad(case, mode):
    f, ref, n = CASES[case]
    x, v = _inputs(n), mnp.asarray(RNG.normal(size=n))

    def gg(fn):
        return mx.grad(lambda y: mnp.sum(mx.grad(fn)(y) * v))
    _close(_maybe_jit(gg(f), mode)(x), gg(ref)(x), 1e-8)


@pytest.mark.parametrize("case", ["cond", "scan", "while_loop", "fori_loop"])
def test_vmap_of_grad_and_hvp(case):
    f, ref, n = CASES[case]
    xs = mnp.stack([_inputs(n), _inputs(n, -1.0)])
    _close(mx.vmap(mx.grad(f))(xs), np.stack([np.asarray(mx.grad(ref)(x)) for x in xs]))
    x, v = _inputs(n), mnp.asarray(RNG.normal(size=n))
    _close(mx.hvp(f, (x,), (v,))[0], mx.hvp(ref, (x,), (v,))[0], 1e-8)


def test_finite_differences():
    x = _inputs(12)
    for name in ("cond", "scan", "while_loop"):
        f = CASES[name][0]
        g = np.asarray(mx.grad(f)(x))
        eps = 1e-6
        for i in range(0, 12, 5):
            e = np.zeros(12)
            e[i] = eps
            fd = (float(f(x + e)) - float(f(x - e))) / (2 * eps)
            assert abs(fd - g[i]) < 1e-5 * max(1.0, abs(fd)), (name, i, fd, g[i])


# --- semantics ------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_switch_clamps_index(mode):
    fs = [lambda y: y + 1.0, lambda y: y * 10.0, lambda y: y - 5.0]
    f = _maybe_jit(lambda i, y: lax.switch(i, fs, y), mode)
    for i, want in [(-3, 2.0), (0, 2.0), (1, 10.0), (2, -4.0), (7, -4.0)]:
        assert float(f(i, mnp.asarray(1.0))) == want


def test_cond_pytrees_and_no_operands():
    out = mx.jit(lambda p: lax.cond(p, lambda: {"a": 1.0, "b": (2, 3.0)},
                                    lambda: {"a": -1.0, "b": (0, 0.5)}))(mnp.asarray(False))
    assert float(out["a"]) == -1.0 and int(out["b"][0]) == 0 and float(out["b"][1]) == 0.5


def test_while_loop_vmap_batched_predicate_masks_finished_members():
    def f(x):
        return lax.while_loop(lambda c: c[1] < 10.0, lambda c: (c[0] + 1, c[1] * 2.0),
                              (0, x))
    n, y = mx.jit(mx.vmap(f))(np.array([1.0, 3.0, 20.0, 0.2]))
    np.testing.assert_array_equal(np.asarray(n), [4, 2, 0, 6])
    np.testing.assert_allclose(np.asarray(y), [16.0, 12.0, 20.0, 12.8])


def test_while_loop_unbatched_predicate_keeps_loop():
    def f(x):
        return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * c[1]), (0, x))[1]
    g = mx.make_graph(mx.vmap(f))(np.array([1.0, 2.0]))
    assert [n.prim.name for n in g.nodes].count("while") == 1
    np.testing.assert_allclose(np.asarray(mx.vmap(f)(np.array([1.0, 2.0]))), [1.0, 256.0])


def test_while_max_steps_stops_early():
    out = lax.while_loop(lambda c: c < 100, lambda c: c + 1, 0, max_steps=7)
    assert int(out) == 7


def test_fori_loop_traced_bounds_is_a_while():
    f = mx.jit(lambda n, x: lax.fori_loop(0, n, lambda i, v: v + i, x))
    assert float(f(5, mnp.asarray(0.5))) == 10.5
    g = mx.make_graph(lambda n, x: lax.fori_loop(0, n, lambda i, v: v + i, x))(5, 0.5)
    assert any(n.prim.name == "while" for n in g.nodes)


def test_scan_carry_becomes_batched_inside_body():
    # init unbatched, xs batched: the carry must be batched from the start (fixed point)
    def f(xs):
        return lax.scan(lambda c, x: (c + x, c * 2.0), 0.0, xs)
    c, ys = mx.vmap(f, in_axes=1)(np.arange(6.0).reshape(3, 2))
    np.testing.assert_allclose(np.asarray(c), [6.0, 9.0])
    np.testing.assert_allclose(np.asarray(ys), [[0.0, 0.0, 4.0], [0.0, 2.0, 8.0]])


def test_scan_no_xs_length_and_closure_tangent():
    def f(w):
        return lax.scan(lambda c, _: (c * w, c), 1.0, None, length=4)[0]
    assert float(f(2.0)) == 16.0
    _, t = mx.jvp(f, (mnp.asarray(2.0),), (mnp.asarray(1.0),))
    assert float(t) == 32.0  # d w^4 = 4 w^3
    assert float(mx.grad(f)(2.0)) == 32.0
    assert float(mx.grad(mx.grad(f))(2.0)) == 48.0


def test_scan_integer_carry_and_outputs():
    def f(x):
        (i, v), ys = lax.scan(lambda c, xi: ((c[0] + 1, c[1] * xi), c[0]), (0, 1.0), x)
        return v * i, ys
    v, ys = f(np.array([2.0, 3.0]))
    assert float(v) == 12.0 and list(np.asarray(ys)) == [0, 1]
    assert float(mx.grad(lambda x: f(x)[0])(np.array([2.0, 3.0]))[0]) == 6.0


def test_sqrt_checkpoint_matches_plain_long():
    x = mnp.asarray(RNG.normal(size=(23, 2)))

    def f(x, ck):
        c, ys = lax.scan(lambda c, xi: (mnp.sin(c) * xi + c, c * xi), mnp.ones(2, 'float64'), x,
                         checkpoint=ck)
        return mnp.sum(c) + mnp.sum(ys)
    _close(mx.grad(lambda x: f(x, "sqrt"))(x), mx.grad(lambda x: f(x, None))(x))
    v = RNG.normal(size=(7, 2))

    def gg(ck):
        return mx.grad(lambda y: mnp.sum(mx.grad(lambda z: f(z, ck))(y) * v))
    _close(gg("sqrt")(x[:7]), gg(None)(x[:7]))


def test_weak_typed_init_is_promoted():
    c, _ = lax.scan(lambda c, x: (c + x, None), 0, np.ones(3, np.float32))
    assert c.dtype == np.float32 and float(c) == 3.0


def _nested(x):
    a, b = mnp.sin(x), mnp.cos(x)

    def outer(c, xi):
        inner = (lambda d, y: (d * mnp.tanh(y * c) + a, mnp.sum(d)))
        d, ys = lax.scan(inner, c, mnp.stack([xi, xi * 2.0]))
        e = lax.cond(mnp.sum(d) > 0, lambda: d * a, lambda: d * b)  # different captures
        _, e = lax.while_loop(lambda s: s[0] < 2, lambda s: (s[0] + 1, s[1] * 0.5 + b),
                              (0, e), max_steps=3)
        return e, mnp.sum(ys)
    c, ys = lax.scan(outer, x, mnp.stack([x, x * 0.5, -x]))
    return mnp.sum(c) + mnp.sum(ys)


def _nested_ref(x):
    a, b = mnp.sin(x), mnp.cos(x)
    c, total = x, 0.0
    for xi in [x, x * 0.5, -x]:
        d, s = c, 0.0
        for y in [xi, xi * 2.0]:
            s, d = s + mnp.sum(d), d * mnp.tanh(y * c) + a
        e = d * a if mnp.sum(d) > 0 else d * b
        for _ in range(2):
            e = e * 0.5 + b
        c, total = e, total + s
    return mnp.sum(c) + total


def test_nested_control_flow():
    x, v = mnp.asarray([0.3, -0.7, 1.1], "float64"), mnp.asarray([1.0, 2.0, 3.0], "float64")
    _close(mx.jit(_nested)(x), _nested_ref(x))
    _close(mx.jit(mx.grad(_nested))(x), mx.grad(_nested_ref)(x))
    _close(mx.hvp(_nested, (x,), (v,))[0], mx.hvp(_nested_ref, (x,), (v,))[0], 1e-8)
    _close(mx.vmap(mx.grad(_nested))(mnp.stack([x, -x]))[1], mx.grad(_nested_ref)(-x))


def test_vmap_cond_unbatched_predicate_keeps_cond():
    def f(p, x):
        return lax.cond(p > 0, lambda y: y * 2.0, lambda y: mnp.sqrt(y), x)
    g = mx.make_graph(mx.vmap(f, in_axes=(None, 0)))(1.0, np.ones(3, np.float32))
    assert [n.prim.name for n in g.nodes].count("cond") == 1
    _close(mx.vmap(f, in_axes=(None, 0))(-1.0, mnp.asarray([4.0, 9.0])), [2.0, 3.0])
    # a batched predicate selects; the branch not taken leaks no NaN into the gradient
    gr = mx.vmap(mx.grad(lambda p, x: f(p, x)), in_axes=(0, None))(mnp.asarray([1.0, -1.0]),
                                                                  -1.0)
    assert np.all(np.isfinite(np.asarray(gr)))


# --- errors ---------------------------------------------------------------------------------
def test_cond_branch_type_mismatch_names_types_and_branch():
    with pytest.raises(TypeError) as e:
        mx.jit(lambda x: lax.cond(x > 0, lambda: mnp.zeros(3), lambda: mnp.zeros(4)))(1.0)
    msg = str(e.value)
    assert "f32[3]" in msg and "f32[4]" in msg and "branch 1" in msg


def test_switch_structure_mismatch():
    with pytest.raises(TypeError, match="branch 2"):
        mx.jit(lambda i: lax.switch(i, [lambda: 1.0, lambda: 2.0, lambda: (1.0, 2.0)]))(0)


def test_scan_carry_change_names_path():
    with pytest.raises(TypeError, match=r"scan: carry\[1\] changed from f32\[3\] to f32\[4\]"):
        lax.scan(lambda c, x: ((c[0], mnp.zeros(4)), x), (1.0, mnp.zeros(3)), mnp.zeros(2))


def test_while_carry_change_and_bad_predicate():
    with pytest.raises(TypeError, match=r"while_loop: carry\['a'\] changed"):
        lax.while_loop(lambda c: True, lambda c: {"a": mnp.zeros(2)}, {"a": mnp.zeros(3)})
    with pytest.raises(TypeError, match="bool scalar"):
        lax.while_loop(lambda c: c, lambda c: c, mnp.zeros(3))


def test_grad_of_while_without_max_steps_says_pass_max_steps():
    def f(x):
        return lax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x)
    assert float(mx.jvp(f, (1.0,), (1.0,))[1]) == 16.0  # forward mode needs no bound
    with pytest.raises(ValueError, match="max_steps"):
        mx.grad(f)(1.0)


# --- listing --------------------------------------------------------------------------------
def test_listing_indents_subgraphs():
    def f(x):
        return lax.scan(lambda c, xi: (c + xi, lax.cond(xi > 0, lambda: xi, lambda: -xi)),
                        0.0, x)
    text = str(mx.make_graph(f)(np.ones(3, np.float32)))
    lines = text.splitlines()
    assert any(ln.startswith("      graph body(") for ln in lines)
    assert any(ln.startswith("            graph branch0(") for ln in lines)
    assert any(ln.startswith("            graph branch1(") for ln in lines)


# --- JAX as oracle ----------------------------------------------------------------------------
def _jax_pair():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def make(np_, lx):
        def f(x):
            def body(c, xi):
                return c * np_.sin(xi) + xi, c * c
            c, ys = lx.scan(body, x[0], x)
            k = lx.fori_loop(0, 3, lambda i, v: v * 0.9 + c, x)
            b = lx.cond(c > 0, lambda: np_.sum(k), lambda: np_.sum(k * k))
            return b + np_.sum(ys)
        return f
    return jax, make(jnp, jax.lax), make(mnp, lax), np.asarray(_inputs(6))


def test_against_jax():
    jax, fj, fm, x = _jax_pair()
    xm = mnp.asarray(x)
    _close(fm(xm), fj(x))
    _close(mx.grad(mx.jit(fm))(xm), jax.grad(fj)(x))


@pytest.mark.slow
def test_against_jax_vmap_hessian():
    jax, fj, fm, x = _jax_pair()
    X = np.stack([x, -x, 2 * x])
    _close(mx.vmap(fm)(mnp.asarray(X)), jax.vmap(fj)(X))
    _close(mx.jacfwd(mx.grad(fm))(mnp.asarray(x)), jax.hessian(fj)(x), 1e-8)


# --- a long scan ------------------------------------------------------------------------------
def _long(x, n):
    def body(c, xi):
        c = c + 0.01 * mnp.tanh(c * xi)
        return c, mnp.sum(c)
    c, ys = lax.scan(body, mnp.ones(4, 'float64'), mnp.broadcast_to(x, (n, 4)))
    return mnp.sum(c) + mnp.mean(ys)


def _long_unrolled(x, n):
    c, total = mnp.ones(4, 'float64'), 0.0
    for _ in range(n):
        c = c + 0.01 * mnp.tanh(c * x)
        total = total + mnp.sum(c)
    return mnp.sum(c) + total / n


def test_long_scan_prefix_matches_unrolled():
    x = mnp.asarray(RNG.normal(size=4))
    _close(mx.grad(mx.jit(lambda x: _long(x, 12)))(x), mx.grad(lambda x: _long_unrolled(x, 12))(x))


def test_long_scan_10000_compiles_fast():
    # about 1 s for the first (tracing + compiling + running) and later calls alike
    x = mnp.asarray(RNG.normal(size=4))
    g = mx.jit(mx.grad(lambda x: _long(x, 10_000)))
    t0 = time.perf_counter()
    g(x).block_until_ready()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = g(x)
    steady = time.perf_counter() - t0
    print(f"\nscan 10000 grad under jit: first call {first:.2f} s, steady {steady:.2f} s")
    assert first < 30.0
    assert np.all(np.isfinite(np.asarray(out)))


def test_map_batch_size_chunks_with_a_remainder():
    xs = {"a": np.arange(10.0), "b": np.arange(20.0).reshape(10, 2)}
    f = lambda d: d["a"] * 2 + mnp.sum(d["b"])  # noqa: E731
    want = np.arange(10.0) * 2 + np.arange(20.0).reshape(10, 2).sum(1)   # per element
    for bs in (None, 1, 3, 5, 10, 20):
        np.testing.assert_allclose(np.asarray(mx.lax.map(f, xs, batch_size=bs)), want)
    jitted = mx.jit(lambda xs: mx.lax.map(f, xs, batch_size=3))(xs)
    np.testing.assert_allclose(np.asarray(jitted), want)
    t = np.arange(10.0)
    g = mx.grad(lambda a: mnp.sum(mx.lax.map(lambda v: mnp.sin(v) * v, a, batch_size=4)))(t)
    np.testing.assert_allclose(np.asarray(g), np.cos(t) * t + np.sin(t), rtol=1e-12)
    with pytest.raises(ValueError, match="batch_size must be positive"):
        mx.lax.map(f, xs, batch_size=0)


def test_lax_reshape_dimensions_and_one_hot_axis():
    x = np.arange(24.0).reshape(2, 3, 4)
    got = mx.lax.reshape(x, (4, 6), (2, 0, 1))
    np.testing.assert_array_equal(np.asarray(got), np.transpose(x, (2, 0, 1)).reshape(4, 6))
    labels = np.array([[0, 2], [1, 5]])
    for axis in (-1, 0, 1):
        want = np.moveaxis(np.eye(3)[labels.clip(0, 2)] * (labels < 3)[..., None], -1, axis)
        np.testing.assert_array_equal(np.asarray(mx.nn.one_hot(labels, 3, axis=axis)), want)


def test_eager_cond_and_switch_return_arrays():
    """As the staged forms and JAX: a branch's Python scalars come back as weak arrays."""
    a = mx.lax.cond(True, lambda: 1.0, lambda: 2.0)
    assert isinstance(a, mx.Array) and a.dtype == np.float32 and float(a) == 1.0
    n, d = mx.lax.switch(5, [lambda: (1, {"x": 2.0}), lambda: (3, {"x": 4.0})])
    assert isinstance(n, mx.Array) and int(n) == 3 and isinstance(d["x"], mx.Array)
