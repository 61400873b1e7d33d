"""Indexing: x[idx], x.at[idx], dynamic_slice/update, gather/scatter, take & co.

Values against NumPy, jit against eager, derivatives against float64 central differences
(and JAX where installed), vmap against a Python loop."""
import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax.core.errors import ConcretizationError
from mirax.ops import indexing as ix

RNG = np.random.default_rng(0)
A = np.arange(60.0, dtype=np.float32).reshape(3, 4, 5)
I = np.array([0, 2, -1])
J = np.array([[1], [3]])


def num_grad(f, x, eps=1e-6):
    """Central finite differences of a scalar f at x (float64)."""
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[k] = eps
        g[k] = (float(f(mx.asarray(x + e))) - float(f(mx.asarray(x - e)))) / (2 * eps)
    return g


def check_grad(f, x, rtol=1e-6, atol=1e-7):
    x = np.asarray(x, np.float64)
    got = np.asarray(mx.grad(f)(mx.asarray(x)))
    np.testing.assert_allclose(got, num_grad(f, x), rtol=rtol, atol=atol)


# --- x[idx] values -------------------------------------------------------------------------
INDEXES = {
    "int": (0,), "neg_int_slice": (-1, slice(1, 3)), "newaxis": (slice(None), None),
    "steps": (slice(None, None, -1), slice(None, None, 2), slice(1, -1, 2)),
    "ellipsis_int": (Ellipsis, 2), "mixed_basic": (1, Ellipsis, None, 3),
    "array": (I,), "array_axis1": (slice(None), I), "separated": (I[:2], slice(None), J),
    "adjacent_bcast": (slice(None), J, I), "int_slice_array": (0, slice(None), I),
    "slice_int_array": (slice(None), 1, I), "mask_rows": (A[:, 0, 0] > 10,),
    "mask_full": (A > 30,), "mask_axis1": (slice(None), A[0, :, 0] > 7),
    "true": (True,), "false": (False,), "true_array": (slice(None), True, I),
    "none_between": ([0, 1], None, [1, 2]), "ellipsis_between": ([1, 0], Ellipsis, [1, 2]),
    "none_sep": (slice(None), [0, 1], None, [0, 1]), "neg_steps": (slice(None), slice(4, 1, -1),
                                                                  slice(None, None, -2)),
    "empty_slice": (slice(5, None),), "empty_list": (slice(None), []),
    "grid": (I[:, None], J.T), "0d_array": (np.array(1),), "nested_list": ([[0, 1], [2, 2]],),
    "list_mx": (mx.asarray([2, 0]),), "scalar_mx": (mx.asarray(1), slice(None), 2),
    "unit": (slice(0, 1), slice(-1, None), 0),
}


@pytest.mark.parametrize("name", list(INDEXES))
def test_getitem_matches_numpy(name):
    idx = INDEXES[name]
    np_idx = tuple(np.asarray(i) if isinstance(i, mx.Array) else i for i in idx)
    want = A[np_idx]
    x = mx.asarray(A)
    got = np.asarray(x[idx])
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    if not name.startswith("mask") and name not in ("true", "false", "true_array"):
        np.testing.assert_array_equal(np.asarray(mx.jit(lambda t: t[idx])(x)), want)


@pytest.mark.parametrize("shape,idx", [
    ((), ()), ((), None), ((), Ellipsis), ((0, 3), (slice(None), 1)), ((0, 3), ([],)),
    ((1,), 0), ((1, 1), (0, [0, 0])), ((2, 0), (1,)), ((4,), [])])
def test_getitem_edge_shapes(shape, idx):
    a = RNG.standard_normal(shape).astype(np.float32)
    want = a[idx]
    got = mx.asarray(a)[idx]
    np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(np.asarray(mx.jit(lambda t: t[idx])(mx.asarray(a))), want)


def test_getitem_weak_and_dtype():
    x = mx.asarray(np.arange(6, dtype=np.int64).reshape(2, 3))
    assert x[1].dtype == np.int64 and x[:, [0, 2]].dtype == np.int64
    assert isinstance(x[0, 0], mx.Array) and x[0, 0].shape == ()


def test_traced_scalar_index_clamps_like_jax():
    x = mx.asarray(A)
    f = mx.jit(lambda t, i: t[i])
    for i, want in [(1, A[1]), (-1, A[2]), (7, A[2]), (-9, A[0])]:
        np.testing.assert_array_equal(np.asarray(f(x, mx.asarray(np.int32(i)))), want)
    g = mx.jit(lambda t, i: t[:, i, 1:3])
    np.testing.assert_array_equal(np.asarray(g(x, mx.asarray(np.int32(-2)))), A[:, -2, 1:3])
    h = mx.jit(lambda t, i: t[i, :, [0, 4]])       # traced scalar joins the advanced group
    np.testing.assert_array_equal(np.asarray(h(x, mx.asarray(np.int32(2)))), A[2, :, [0, 4]])


def test_getitem_graph_basic_is_cheap():
    x = mx.asarray(A)
    basic = str(mx.make_graph(lambda t: t[1, ::-1, None, 2:4])(x))
    assert "gather" not in basic and "slice" in basic
    adv = str(mx.make_graph(lambda t: t[:, [0, 1]])(x))
    assert "gather" in adv


# --- errors ------------------------------------------------------------------------------------
def test_getitem_errors():
    x = mx.asarray(A)
    np.testing.assert_array_equal(x[3], A[2])       # static ints clamp on reads (JAX)
    np.testing.assert_array_equal(x[0, -5], A[0, 0])
    with pytest.raises(IndexError, match=r"index 0 is out of bounds.*f32\[0,2\]"):
        mx.asarray(np.zeros((0, 2), np.float32))[0]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., 0, ...]
    with pytest.raises(IndexError, match="integers or booleans"):
        x[mx.asarray([0.5])]
    with pytest.raises(IndexError, match="broadcast"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="boolean index"):
        x[np.array([True, False])]
    with pytest.raises(ConcretizationError, match="boolean mask"):
        mx.jit(lambda t: t[t > 3])(x)
    with pytest.raises(ConcretizationError, match="boolean mask"):
        mx.vmap(lambda t: t[t > 3])(x)
    with pytest.raises(ConcretizationError, match="size="):
        mx.jit(lambda t: mnp.nonzero(t)[0])(x)


def test_bool_mask_under_eager_grad():
    x = RNG.standard_normal((4, 3))
    check_grad(lambda t: mnp.sum(mnp.sin(t[t > 0])), x)


# --- derivatives -----------------------------------------------------------------------------
GRAD_INDEXES = ["int", "steps", "mixed_basic", "array", "separated", "adjacent_bcast",
                "int_slice_array", "none_sep", "neg_steps", "grid", "nested_list"]


@pytest.mark.parametrize("name", GRAD_INDEXES)
def test_getitem_grad(name):
    idx = INDEXES[name]
    x = RNG.standard_normal(A.shape)
    w = RNG.standard_normal(A[idx].shape)
    check_grad(lambda t: mnp.sum(mnp.sin(t[idx]) * w), x)


def test_grad_of_grad_through_gather():
    idx = np.array([0, 2, 2, 1])
    x = RNG.standard_normal(4)

    def f(t):
        return mnp.sum(t[idx] ** 3)

    def gdot(t):
        return mnp.sum(mx.grad(f)(t) * mnp.arange(4.0, dtype=mnp.float64))
    check_grad(gdot, x)
    # exact: d/dx (sum_k 3 x[idx_k]^2 v[idx_k]) = 6 x * counts * v
    counts = np.bincount(idx, minlength=4)
    np.testing.assert_allclose(np.asarray(mx.grad(gdot)(mx.asarray(x))),
                               6 * x * counts * np.arange(4.0), rtol=1e-12)
    h = np.asarray(mx.hessian(f)(mx.asarray(x)))
    np.testing.assert_allclose(h, np.diag(6 * x * counts), rtol=1e-12)


@pytest.mark.slow
def test_grad_matches_jax():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = RNG.standard_normal((5, 4))
    idx = np.array([[0, 4], [4, 1]])

    def body(np_):
        def f(t):
            y = t[idx, 1:] * t[1, ::-1][None, None, :3]
            return (y ** 2).sum() + t.at[idx[0], 2].add(t[0, 0]).max()
        return f
    with jax.enable_x64(True):
        want = jax.grad(lambda t: (jax.grad(body(jnp))(t) ** 2).sum())(x)
    got = mx.grad(lambda t: mnp.sum(mx.grad(body(mnp))(t) ** 2))(mx.asarray(x))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-10)


# --- .at ------------------------------------------------------------------------------------
def _np_at(a, idx, v, op):
    out = a.copy()
    ufunc = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}
    if op == "set":
        out[idx] = v
    else:
        ufunc[op].at(out, idx, v)
    return out


AT_CASES = [((1,), 5.0), ((slice(None), 2), 1.0), ((I,), 2.0), (([0, 0, 2],), 3.0),
            ((slice(None, None, -2), 1, slice(1, 4)), 7.0), ((0, [1, 1, 3], slice(None)), 2.0),
            ((slice(None), J, [0, 2]), 4.0), ((Ellipsis, None, 1), -1.0),
            ((A[:, 0, 0] > 10,), 9.0), (([1, 2], None, slice(None), [0, 3]), 0.5)]


@pytest.mark.parametrize("op", ["set", "add", "mul", "min", "max"])
@pytest.mark.parametrize("case", range(len(AT_CASES)))
def test_at_matches_numpy(op, case):
    idx, scale = AT_CASES[case]
    shape = A[idx].shape
    v = (RNG.standard_normal(shape) * scale + 30).astype(np.float32)
    want = _np_at(A, idx, v, op)
    x = mx.asarray(A)
    got = getattr(x.at[idx], op)(v)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    if case != 8:
        jit_got = mx.jit(lambda t, u: getattr(t.at[idx], op)(u))(x, mx.asarray(v))
        np.testing.assert_allclose(np.asarray(jit_got), want, rtol=1e-6)


def test_at_get_broadcast_and_dtype():
    x = mx.asarray(A)
    np.testing.assert_array_equal(np.asarray(x.at[1, :, I].get()), A[1, :, I])
    got = x.at[:, 0].set(2)                        # Python scalar broadcast, dtype kept
    assert got.dtype == np.float32 and float(got[2, 0, 3]) == 2.0
    xi = mx.asarray(np.arange(5, dtype=np.int32))
    np.testing.assert_array_equal(np.asarray(xi.at[[1, 1, 4]].add(1)), [0, 3, 2, 3, 5])
    with pytest.raises(ValueError, match="broadcast"):
        x.at[0].set(np.ones(3))


def test_at_traced_out_of_bounds_is_dropped():
    x = mx.asarray(np.arange(5.0))
    f = mx.jit(lambda t, i: t.at[i].set(9.0))
    np.testing.assert_array_equal(np.asarray(f(x, mx.asarray(np.int32(7)))), np.arange(5.0))
    np.testing.assert_array_equal(np.asarray(f(x, mx.asarray(np.int32(-1)))),
                                  [0, 1, 2, 3, 9])
    np.testing.assert_array_equal(np.asarray(x.at[np.array([-1, 7])].add(1.0)),
                                  [0, 1, 2, 3, 5])


@pytest.mark.parametrize("op", ["set", "add", "mul", "max", "min"])
@pytest.mark.parametrize("idx", [(1,), ([0, 2], slice(1, 3)), (slice(None, None, 2), 0)])
def test_at_grad(op, idx):
    x = RNG.standard_normal((3, 4))
    shape = np.zeros((3, 4))[idx].shape
    v = RNG.standard_normal(shape)
    w = RNG.standard_normal((3, 4))
    check_grad(lambda t: mnp.sum(getattr(t.at[idx], op)(v) * w), x)
    check_grad(lambda u: mnp.sum(getattr(mx.asarray(x).at[idx], op)(u) * w), v)


def test_at_repeated_indices_grad():
    x = RNG.standard_normal(4)
    idx = np.array([1, 1, 3, 1])
    v = RNG.standard_normal(4)
    w = np.array([1.0, 2.0, 3.0, 4.0])
    check_grad(lambda u: mnp.sum(mx.asarray(x).at[idx].add(u) * w), v)
    # set: the last write wins, only it receives the cotangent
    g = np.asarray(mx.grad(lambda u: mnp.sum(mx.asarray(x).at[idx].set(u) * w))(mx.asarray(v)))
    np.testing.assert_allclose(g, [0, 0, 4, 2])
    gx = np.asarray(mx.grad(lambda t: mnp.sum(t.at[idx].set(mx.asarray(v)) * w))(mx.asarray(x)))
    np.testing.assert_allclose(gx, [1, 0, 3, 0])
    # max with ties split evenly
    xt = np.array([0.0, 2.0, 0.0, 0.0])
    g = mx.grad(lambda t: mnp.sum(t.at[np.array([1, 1])].max(mx.asarray([2.0, 1.0]))))
    np.testing.assert_allclose(np.asarray(g(mx.asarray(xt))), [1, 0.5, 1, 1])


# --- primitives: rules, vmap -------------------------------------------------------------------
def _loop(f, *args, in_axes):
    n = next(np.shape(a)[d] for a, d in zip(args, in_axes) if d is not None)
    outs = [f(*[a if d is None else np.take(a, k, axis=d) for a, d in zip(args, in_axes)])
            for k in range(n)]
    return np.stack([np.asarray(o) for o in outs])


VMAP_AXES = [(0, None), (None, 0), (0, 0), (1, 1)]


@pytest.mark.parametrize("axes", VMAP_AXES)
@pytest.mark.parametrize("mode", ["clip", "fill"])
def test_gather_vmap(axes, mode):
    xs = RNG.standard_normal((3, 3, 4, 5))
    idx = RNG.integers(-1, 5, size=(3, 3, 2, 2))

    def f(x, i):
        return ix.gather(x, i, (2, 0), mode=mode)
    xin = xs[0] if axes[0] is None else np.moveaxis(xs, 0, axes[0])
    iin = idx[0] if axes[1] is None else np.moveaxis(idx, 0, axes[1])
    got = mx.vmap(f, in_axes=axes)(mx.asarray(xin), mx.asarray(iin))
    want = _loop(lambda a, b: f(mx.asarray(a), mx.asarray(b)), xin, iin, in_axes=axes)
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("axes", [(0, None, 0), (None, 0, 0), (0, 0, 0), (None, None, 0),
                                  (0, None, None), (1, 0, 1)])
@pytest.mark.parametrize("fn", ["scatter", "scatter_add", "scatter_mul", "scatter_max"])
def test_scatter_vmap(axes, fn):
    xs = RNG.standard_normal((3, 4, 5))
    idx = RNG.integers(0, 4, size=(3, 6, 1))
    ups = RNG.standard_normal((3, 6, 5))
    op = getattr(ix, fn)

    def f(x, i, u):
        return op(x, i, u, (0,))
    ins = [a[0] if d is None else np.moveaxis(a, 0, d) for a, d in zip((xs, idx, ups), axes)]
    got = mx.vmap(f, in_axes=axes)(*map(mx.asarray, ins))
    want = _loop(lambda *a: f(*map(mx.asarray, a)), *ins, in_axes=axes)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)


@pytest.mark.parametrize("axes", [(0, None, None), (None, 0, 0), (0, 0, None), (1, 0, 0)])
def test_dynamic_slice_vmap(axes):
    xs = RNG.standard_normal((4, 5, 6))
    s0 = np.array([0, 3, -2, 9])
    s1 = np.array([1, 5, 2, 0])
    f = lambda x, a, b: ix.dynamic_slice(x, (a, b), (3, 2))  # noqa: E731
    ins = [xs[0] if axes[0] is None else np.moveaxis(xs, 0, axes[0]),
           s0 if axes[1] is not None else 2, s1 if axes[2] is not None else 4]
    ins = [np.asarray(v, np.int32) if k else v for k, v in enumerate(ins)]
    got = mx.vmap(f, in_axes=axes)(*map(mx.asarray, ins))
    want = _loop(lambda *a: f(*map(mx.asarray, a)), *ins, in_axes=axes)
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("axes", [(0, None, None), (None, 0, None), (None, None, 0),
                                  (0, 0, 0), (1, None, 0)])
def test_dynamic_update_slice_vmap(axes):
    xs = RNG.standard_normal((4, 5, 6))
    us = RNG.standard_normal((4, 2, 6))
    s = np.array([0, 3, -2, 9], np.int32)
    f = lambda x, u, a: ix.dynamic_update_slice(x, u, (a, 0))  # noqa: E731
    ins = [xs[0] if axes[0] is None else np.moveaxis(xs, 0, axes[0]),
           us[0] if axes[1] is None else us, s if axes[2] is not None else np.int32(2)]
    got = mx.vmap(f, in_axes=axes)(*map(mx.asarray, ins))
    want = _loop(lambda *a: f(*map(mx.asarray, a)), *ins, in_axes=axes)
    np.testing.assert_array_equal(np.asarray(got), want)


def test_dynamic_slice_values_and_grad():
    x = RNG.standard_normal((5, 6))
    for s in [(1, 2), (4, 5), (-3, 0)]:
        got = ix.dynamic_slice(mx.asarray(x), s, (2, 3))
        a, b = (min(max(v + n if v < 0 else v, 0), n - k)    # wrap once, then clamp
                for v, n, k in zip(s, x.shape, (2, 3)))
        np.testing.assert_array_equal(np.asarray(got), x[a:a + 2, b:b + 3])
    w = RNG.standard_normal((2, 3))
    check_grad(lambda t: mnp.sum(ix.dynamic_slice(t, (4, 1), (2, 3)) ** 2 * w), x)
    u = RNG.standard_normal((2, 3))
    check_grad(lambda t: mnp.sum(mnp.sin(ix.dynamic_update_slice(t, u, (1, 4)))), x)
    check_grad(lambda t: mnp.sum(mnp.sin(ix.dynamic_update_slice(mx.asarray(x), t, (1, 4)))), u)


def test_vmap_traced_index_getitem_and_at():
    xs = RNG.standard_normal((4, 6))
    i = np.array([0, 5, -1, 2], np.int32)
    got = mx.vmap(lambda x, k: x[k])(mx.asarray(xs), mx.asarray(i))
    np.testing.assert_array_equal(np.asarray(got), xs[np.arange(4), i])
    got = mx.vmap(lambda k: mx.asarray(xs.T)[k, 1:3])(mx.asarray(i))
    np.testing.assert_array_equal(np.asarray(got), xs.T[i, 1:3])
    got = mx.vmap(lambda x, k: x.at[k].add(1.0))(mx.asarray(xs), mx.asarray(i))
    want = xs.copy()
    want[np.arange(4), i] += 1
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("prim", ["gather", "scatter_add", "scatter", "dynamic_slice",
                                  "dynamic_update_slice"])
def test_vjp_is_adjoint_of_jvp(prim):
    x = RNG.standard_normal((4, 5))
    idx = mx.asarray(np.array([[3, 1], [0, 4], [3, 1]]))
    u = RNG.standard_normal((3,))
    fns = {"gather": lambda a, b: ix.gather(a, idx, (0, 1)) * 1.0 + 0 * mnp.sum(b),
           "scatter_add": lambda a, b: ix.scatter_add(a, idx, b, (0, 1)),
           "scatter": lambda a, b: ix.scatter(a, idx, b, (0, 1)),
           "dynamic_slice": lambda a, b: ix.dynamic_slice(a, (2, 1), (2, 3)),
           "dynamic_update_slice": lambda a, b: ix.dynamic_update_slice(
               a, mnp.reshape(b, (1, 3)), (3, 2))}
    f = fns[prim]
    primals = (mx.asarray(x), mx.asarray(u))
    tx, tu = RNG.standard_normal(x.shape), RNG.standard_normal(u.shape)
    out, t_out = mx.jvp(f, primals, (mx.asarray(tx), mx.asarray(tu)))
    ct = RNG.standard_normal(out.shape)
    _, vjp_fn = mx.vjp(f, *primals)
    cx, cu = vjp_fn(mx.asarray(ct))
    lhs = np.sum(np.asarray(t_out) * ct)
    rhs = np.sum(np.asarray(cx) * tx) + np.sum(np.asarray(cu) * tu)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-10)


def test_gather_fill_and_scatter_drop():
    x = mx.asarray(np.arange(4.0))
    idx = mx.asarray(np.array([[1], [4], [-1]]))
    np.testing.assert_array_equal(np.asarray(ix.gather(x, idx, (0,), mode="fill")),
                                  [1, np.nan, np.nan])
    np.testing.assert_array_equal(np.asarray(ix.gather(x, idx, (0,))), [1, 3, 0])
    np.testing.assert_array_equal(np.asarray(ix.scatter_add(x, idx, 1.0, (0,))), [0, 2, 2, 3])
    g = mx.grad(lambda t: mnp.sum(mnp.where(mnp.isnan(ix.gather(t, idx, (0,), mode="fill")),
                                            0.0, ix.gather(t, idx, (0,), mode="fill"))))(x)
    np.testing.assert_array_equal(np.asarray(g), [0, 1, 0, 0])
    with pytest.raises(TypeError, match="indices"):
        ix.gather(x, mx.asarray([1, 2]), (0,))
    with pytest.raises(ValueError, match="updates"):
        ix.scatter_add(x, idx, np.ones(2), (0,))


# --- take & co ---------------------------------------------------------------------------------
def test_take():
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    x = mx.asarray(a)
    i = np.array([[0, -1], [3, 2]])
    np.testing.assert_array_equal(np.asarray(mnp.take(x, i, axis=1)), np.take(a, i, axis=1))
    np.testing.assert_array_equal(np.asarray(mnp.take(x, i)), np.take(a, i))
    np.testing.assert_array_equal(np.asarray(mnp.take(x, [5, -5], axis=1, mode="clip")),
                                  np.take(a, [5, -5], axis=1, mode="clip"))
    np.testing.assert_array_equal(np.asarray(mnp.take(x, [5, -6], axis=1, mode="wrap")),
                                  np.take(a, [5, -6], axis=1, mode="wrap"))
    got = np.asarray(mnp.take(x, [1, 4, -5], axis=1))                # JAX default: fill
    assert np.isnan(got[:, 1:]).all() and (got[:, 0] == a[:, 1]).all()
    assert int(mnp.take(mx.asarray([1, 2]), [7])[0]) == np.iinfo(np.int32).min
    np.testing.assert_array_equal(np.asarray(x.take(np.array([2]), axis=0)), a[[2]])


def test_take_along_axis_and_put():
    a = RNG.standard_normal((3, 4, 2))
    i = RNG.integers(-4, 4, size=(3, 5, 2))
    x = mx.asarray(a)
    np.testing.assert_array_equal(np.asarray(mnp.take_along_axis(x, i, axis=1)),
                                  np.take_along_axis(a, i, axis=1))
    np.testing.assert_array_equal(np.asarray(mnp.take_along_axis(x, i[:, :, :1], axis=1)),
                                  np.take_along_axis(a, i[:, :, :1], axis=1))
    flat = np.array([0, 23, -1])
    np.testing.assert_array_equal(np.asarray(mnp.take_along_axis(x, flat, None)),
                                  np.take_along_axis(a, flat, None))
    w = RNG.standard_normal((3, 5, 2))
    check_grad(lambda t: mnp.sum(mnp.take_along_axis(t, i, 1) * w), a)
    j = np.argsort(RNG.standard_normal((3, 4, 2)), axis=1)[:, :2]
    v = RNG.standard_normal((3, 2, 2))
    want = a.copy()
    np.put_along_axis(want, j, v, axis=1)
    np.testing.assert_array_equal(np.asarray(mnp.put_along_axis(x, j, v, 1)), want)
    with pytest.raises(ValueError, match="inplace"):
        mnp.put_along_axis(x, j, v, 1, inplace=True)


def test_nonzero_argwhere_compress():
    a = np.array([[0, 1, 0], [2, 0, 3]])
    x = mx.asarray(a)
    for g, w in zip(mnp.nonzero(x), np.nonzero(a)):
        np.testing.assert_array_equal(np.asarray(g), w)
    got = mx.jit(lambda t: mnp.nonzero(t, size=5, fill_value=-1))(x)
    np.testing.assert_array_equal(np.asarray(got[0]), [0, 1, 1, -1, -1])
    np.testing.assert_array_equal(np.asarray(got[1]), [1, 0, 2, -1, -1])
    got = mnp.nonzero(x, size=2)
    np.testing.assert_array_equal(np.asarray(got[1]), [1, 0])
    np.testing.assert_array_equal(np.asarray(mnp.argwhere(x)), np.argwhere(a))
    np.testing.assert_array_equal(np.asarray(mnp.argwhere(x, size=4)),
                                  np.concatenate([np.argwhere(a), [[0, 0]]]))
    np.testing.assert_array_equal(np.asarray(mnp.flatnonzero(x)), np.flatnonzero(a))
    np.testing.assert_array_equal(np.asarray(x.nonzero()[1]), a.nonzero()[1])
    cond = np.array([True, False, True])
    np.testing.assert_array_equal(np.asarray(mnp.compress(cond, x, axis=1)),
                                  np.compress(cond, a, axis=1))
    np.testing.assert_array_equal(np.asarray(mnp.compress(cond, x)), np.compress(cond, a))
    got = mx.vmap(lambda r: mnp.nonzero(r, size=3, fill_value=9)[0])(x)
    np.testing.assert_array_equal(np.asarray(got), [[1, 9, 9], [0, 2, 9]])
    with pytest.raises(ValueError, match="0-d"):
        mnp.nonzero(mx.asarray(1.0))


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (2, 3, 4)])
@pytest.mark.parametrize("k", [0, 1, -2, 7])
def test_diag_family(shape, k):
    a = RNG.standard_normal(shape)
    x = mx.asarray(a)
    np.testing.assert_array_equal(np.asarray(mnp.tril(x, k)), np.tril(a, k))
    np.testing.assert_array_equal(np.asarray(mnp.triu(x, k)), np.triu(a, k))
    np.testing.assert_array_equal(np.asarray(mnp.diagonal(x, k)), np.diagonal(a, k))
    np.testing.assert_array_equal(np.asarray(mnp.diagonal(x, k, -1, 0)),
                                  np.diagonal(a, k, -1, 0))
    np.testing.assert_allclose(np.asarray(mnp.trace(x, k)), np.trace(a, k))
    if len(shape) == 2:
        np.testing.assert_array_equal(np.asarray(mnp.diag(x, k)), np.diag(a, k))
        np.testing.assert_array_equal(np.asarray(mnp.diag(x[0], k)), np.diag(a[0], k))


def test_diag_family_grads_and_jit():
    a = RNG.standard_normal((3, 4))
    w = RNG.standard_normal((3, 4))
    check_grad(lambda t: mnp.sum(mnp.diagonal(t, 1) ** 2), a)
    check_grad(lambda t: mnp.sum(mnp.diag(t, -1) * w[:, :1].sum()), a[0])
    check_grad(lambda t: mnp.sum(mnp.triu(t, 1) * w) + mnp.trace(t) ** 2, a)
    np.testing.assert_array_equal(np.asarray(mx.jit(lambda t: mnp.tril(t))(mx.asarray(a))),
                                  np.tril(a))
    np.testing.assert_array_equal(np.asarray(mnp.tril(mx.asarray(a[0]))), np.tril(a[0]))


@pytest.mark.parametrize("prim", ["scatter_mul", "scatter_max", "scatter_min"])
def test_vjp_is_adjoint_of_jvp_unique(prim):
    x = RNG.standard_normal((4, 5))
    idx = mx.asarray(np.array([[3, 1], [0, 4], [2, 2]]))
    u = RNG.standard_normal((3,))
    op = getattr(ix, prim)
    f = lambda a, b: op(a, idx, b, (0, 1))  # noqa: E731
    primals = (mx.asarray(x), mx.asarray(u))
    tx, tu = RNG.standard_normal(x.shape), RNG.standard_normal(u.shape)
    out, t_out = mx.jvp(f, primals, (mx.asarray(tx), mx.asarray(tu)))
    ct = RNG.standard_normal(out.shape)
    cx, cu = mx.vjp(f, *primals)[1](mx.asarray(ct))
    np.testing.assert_allclose(np.sum(np.asarray(t_out) * ct),
                               np.sum(np.asarray(cx) * tx) + np.sum(np.asarray(cu) * tu),
                               rtol=1e-10)


@pytest.mark.parametrize("op", ["set", "add", "mul", "max"])
def test_second_order_through_at(op):
    x = RNG.standard_normal(5)
    idx = np.array([4, 0, 2])

    def f(t):
        return mnp.sum(mnp.sin(getattr(t.at[idx], op)(t[1:4] ** 2)) * mnp.arange(1.0, 6.0))

    def g(t):
        return mnp.sum(mx.grad(f)(t) * mnp.cos(t))
    check_grad(g, x, rtol=1e-5, atol=1e-6)


def test_index_misc():
    x = mx.asarray(A)
    f = mx.jit(lambda t, i, j: t[[i, j], 0, 1])
    got = f(x, mx.asarray(np.int32(2)), mx.asarray(np.int32(0)))
    np.testing.assert_array_equal(np.asarray(got), A[[2, 0], 0, 1])
    with pytest.raises(ConcretizationError, match="slice bounds must be static"):
        mx.jit(lambda t, i: t[i:])(x, mx.asarray(np.int32(1)))
    y = mx.asarray(np.arange(4.0))
    np.testing.assert_array_equal(np.asarray(y.at[np.array([5])].set(9.0, mode="clip")),
                                  [0, 1, 2, 9])
    # int index arguments under eager grad (their tracers carry no tangent)
    g = mx.grad(lambda t, i: t[i] * t[i:][0], argnums=0)(y, 2)
    np.testing.assert_array_equal(np.asarray(g), [0, 0, 4, 0])
    assert [float(r[0]) for r in mx.asarray(np.eye(2))] == [1.0, 0.0]


def test_at_get_fill_mode():
    a = np.arange(12.0).reshape(3, 4)
    x = mx.asarray(a)
    got = x.at[np.array([0, 5, -1, -7])].get(mode="fill")
    want = np.stack([a[0], np.full(4, np.nan), a[-1], np.full(4, np.nan)])
    np.testing.assert_array_equal(np.asarray(got), want)
    got = x.at[:, np.array([1, 4])].get(mode="drop", fill_value=-1.0)
    np.testing.assert_array_equal(np.asarray(got), [[1, -1], [5, -1], [9, -1]])
    get = mx.jit(lambda x, i: x.at[i].get(mode="fill", fill_value=0.5))
    np.testing.assert_array_equal(np.asarray(get(x, 7)), np.full(4, 0.5))   # traced scalar
    np.testing.assert_array_equal(np.asarray(get(x, -2)), a[1])
    np.testing.assert_array_equal(np.asarray(mx.jit(lambda x, i: x.at[i].get())(x, 7)), a[2])
    ints = mx.asarray(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert np.asarray(ints.at[np.array([2])].get(mode="fill")).tolist() == [[-2 ** 31] * 3]
    g = mx.grad(lambda x: mnp.sum(x.at[np.array([0, 5, 0])].get(mode="fill", fill_value=0.0)
                                  * np.arange(4.0)))(x)
    np.testing.assert_array_equal(np.asarray(g), [[0, 2, 4, 6], [0] * 4, [0] * 4])
    with pytest.raises(ValueError, match="mode must be one of"):
        x.at[0].get(mode="wrap")


def test_lax_dynamic_slices_count_negative_starts_from_the_end():
    """JAX's allow_negative_indices (default True): a negative start wraps once, then the
    window is clamped."""
    y = np.arange(10.0, dtype=np.float32)
    sl = mx.lax.dynamic_slice
    assert np.asarray(sl(y, (-3,), (2,))).tolist() == [7, 8]
    assert np.asarray(sl(y, (-1,), (3,))).tolist() == [7, 8, 9]        # clamped after
    assert np.asarray(sl(y, (-30,), (2,))).tolist() == [0, 1]
    traced = mx.jit(lambda y, i: sl(y, (i,), (2,)))
    assert np.asarray(traced(y, -3)).tolist() == [7, 8]
    assert np.asarray(traced(y, 4)).tolist() == [4, 5]
    assert np.asarray(sl(y, (-3,), (2,), allow_negative_indices=False)).tolist() == [0, 1]
    assert np.asarray(mx.lax.dynamic_slice_in_dim(y, -2, 2)).tolist() == [8, 9]
    upd = mx.lax.dynamic_update_slice(y, np.ones(2, np.float32), (-3,))
    assert np.asarray(upd).tolist() == [0, 1, 2, 3, 4, 5, 6, 1, 1, 9]
    upd = mx.jit(lambda y, i: mx.lax.dynamic_update_slice_in_dim(y, np.ones(2, np.float32),
                                                                 i))(y, -1)
    assert np.asarray(upd).tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 1, 1]
    # mnp indexing wraps a traced index once, then clamps (x[-30] reads x[0])
    assert float(mx.jit(lambda y, i: y[i])(y, -30)) == 0.0
    assert float(mx.jit(lambda y, i: y[i])(y, -2)) == 8.0


def test_lax_round_ties_away_from_zero_by_default():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 2.4999998, 8388609.0, -0.3], np.float32)
    away = np.asarray(mx.lax.round(x))
    np.testing.assert_array_equal(away, [1, 2, 3, -1, -3, 2, 8388609, -0.0])
    assert np.signbit(away[-1])
    even = mx.lax.round(x, mx.lax.RoundingMethod.TO_NEAREST_EVEN)
    np.testing.assert_array_equal(np.asarray(even), np.round(x))
    np.testing.assert_array_equal(np.asarray(mnp.round(x)), np.round(x))   # NumPy's rule
    assert float(mx.grad(lambda v: mx.lax.round(v * 3.0))(0.7)) == 0.0
    with pytest.raises(ValueError, match="rounding_method"):
        mx.lax.round(x, 2)
