"""Behaviours of real JAX programs run as written (`import mirax as jax`), each checked
against JAX itself on the CPU."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp


def _same(a, b, rtol=1e-6, atol=0.0):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


# --- array / asarray of sequences holding traced values ----------------------------------
_SLOW = pytest.mark.slow


@pytest.mark.parametrize("make", [
    pytest.param(lambda np_, x: np_.array([x, 2 * x]), id="list"),
    pytest.param(lambda np_, x: np_.asarray((x, x * x, 1)), id="tuple-int", marks=_SLOW),
    pytest.param(lambda np_, x: np_.array([[x, 1.0], [2, x]]), id="nested-mixed"),
    pytest.param(lambda np_, x: np_.array([np_.stack([x, x]), [1, 2]]), id="array-and-list",
                 marks=_SLOW),
    pytest.param(lambda np_, x: np_.array([x, 3], dtype=np_.int32), id="dtype", marks=_SLOW),
])
def test_array_of_traced_values(make):
    x = 1.5
    want = make(jnp, jnp.float32(x))
    _same(make(mnp, mnp.float32(x)), want)
    _same(mx.jit(lambda v: make(mnp, v))(np.float32(x)), jax.jit(lambda v: make(jnp, v))(
        np.float32(x)))
    f_mx = lambda v: mnp.sum(make(mnp, v).astype(mnp.float32) ** 2)  # noqa: E731
    f_jax = lambda v: jnp.sum(make(jnp, v).astype(jnp.float32) ** 2)  # noqa: E731
    _same(mx.grad(f_mx)(np.float32(x)), jax.grad(f_jax)(np.float32(x)))
    xs = np.arange(3, dtype=np.float32)
    _same(mx.vmap(lambda v: make(mnp, v))(xs), jax.vmap(lambda v: make(jnp, v))(xs))


@pytest.mark.parametrize("leaf", [np.int8(1), mnp.int8(1)], ids=["numpy", "mirax"])
def test_array_of_sequence_promotes_as_jax(leaf):
    _same(mnp.array([mnp.asarray(leaf), 2]), jnp.array([jnp.asarray(np.int8(1)), 2]))
    _same(mnp.array([mnp.asarray(leaf), 2.5]), jnp.array([jnp.asarray(np.int8(1)), 2.5]))
    _same(mx.jit(lambda v: mnp.array([v, True]))(True), jnp.array([True, True]))


def test_array_of_ragged_sequence_raises():
    with pytest.raises((TypeError, ValueError), match="ragged"):
        mnp.array([mnp.ones(2), [1.0, 2.0, 3.0]])


# --- dtype names are callable casts --------------------------------------------------------
def test_dtype_names_cast():
    _same(mnp.float32(1.5), jnp.float32(1.5))
    _same(mnp.int32(mnp.array(2.7)), jnp.int32(jnp.array(2.7)))
    _same(mx.jit(lambda v: mnp.float32(v) * 2)(3), jax.jit(lambda v: jnp.float32(v) * 2)(3))
    assert mnp.zeros(2, mnp.float64).dtype == mnp.float64 == np.float64
    assert np.dtype(mnp.bfloat16) == np.dtype(jnp.bfloat16)
    assert mnp.ones(3, dtype=mnp.int8).dtype == np.int8
    assert isinstance(np.float32(1), mnp.float32)
    assert {np.dtype(np.float32): "f"}[mnp.float32] == "f"


# --- static out-of-range integer indices clamp on reads ------------------------------------
_IDX = [7, -7, (5, slice(1, None)), (-9, [0, 9]), (Ellipsis, 9), ([7, -9],), (1, -100)]


@pytest.mark.parametrize("idx", _IDX, ids=[str(i) for i in range(len(_IDX))])
def test_static_out_of_range_index_clamps(idx):
    a = np.arange(20, dtype=np.float32)[:5] if idx in (7, -7) or idx == ([7, -9],) else \
        np.arange(12, dtype=np.float32).reshape(3, 4)
    want = jnp.asarray(a)[idx]
    _same(mx.asarray(a)[idx], want)
    _same(mx.jit(lambda v: v[idx])(a), want)


def test_static_out_of_range_update_is_dropped_or_clipped():
    a = np.arange(5, dtype=np.int32)
    for make in (lambda v: v.at[7].set(9), lambda v: v.at[-7].add(9),
                 lambda v: v.at[7].set(9, mode="clip"), lambda v: v.at[-7].add(9, mode="clip"),
                 lambda v: v.at[7].get(mode="fill", fill_value=-1)):
        _same(make(mx.asarray(a)), make(jnp.asarray(a)))


# --- Python conversions of concrete 0-d arrays ---------------------------------------------
def test_python_conversions_of_0d_arrays():
    for v in (1.2345, -2.5, 1.6):
        a, b = mnp.array(v), jnp.array(v)
        for spec in ("{:.2f}", "{:.3e}", "{}", "{:>10.4f}"):
            assert spec.format(a) == spec.format(b)
        assert float(a) == float(b) and int(a) == int(b) and complex(a) == complex(b)
        _same(round(a), round(b))
        _same(round(a, 2), round(b, 2))
    assert f"{mnp.array(3, mnp.int32):d}" == f"{jnp.array(3, jnp.int32):d}"
    assert f"{mnp.arange(3)}" == f"{jnp.arange(3)}"


@pytest.mark.parametrize("conv", [float, int, complex, lambda v: f"{v:.2f}"],
                         ids=["float", "int", "complex", "format"])
def test_python_conversions_under_jit_raise(conv):
    with pytest.raises(mx.errors.ConcretizationError):
        mx.jit(lambda v: conv(v))(1.0)


def test_compare_with_tuple_and_list():
    _same(mnp.array([1, 2]) == (1, 2), np.array([1, 2]) == (1, 2))
    _same(mnp.array([1, 2]) != [1, 3], np.array([1, 2]) != [1, 3])
    for other in (None, "a", object()):      # not array-like: Python's identity answer, as JAX
        assert (mnp.ones(2) == other) is (jnp.ones(2) == other) is False
        assert (mnp.ones(2) != other) is (jnp.ones(2) != other) is True


# --- 64-bit NumPy scalars are weak: f32 computations stay f32 ------------------------------
@pytest.mark.parametrize("scalar", [
    pytest.param(np.float64(0.5), id="f64"),
    pytest.param(np.log(2 * np.pi), id="np.log", marks=_SLOW),
    pytest.param(np.array(0.5), id="0-d"),
    pytest.param(np.int64(3), id="i64", marks=_SLOW),
    pytest.param(np.float32(2.0), id="f32", marks=_SLOW)])
def test_numpy_scalars_keep_float32(scalar):
    x = np.linspace(0.1, 1.0, 4).astype(np.float32)
    for f in (lambda v, s: v * s, lambda v, s: s - v ** 2, lambda v, s: v / s + 1.0):
        _same(f(mx.asarray(x), scalar), f(jnp.asarray(x), scalar))
        _same(mx.jit(f)(x, scalar), jax.jit(f)(x, scalar))
        g_mx = mx.grad(lambda v: mnp.sum(f(v, scalar)))(x)
        _same(g_mx, jax.grad(lambda v: jnp.sum(f(v, scalar)))(x))


def test_numpy_float64_arrays_keep_their_dtype():
    assert (mnp.ones(3) * np.ones(3)).dtype == np.float64
    assert (mnp.ones(3, mnp.float16) * np.float32(2)).dtype == np.float32   # strong, as JAX


# --- shape / dtype mismatches are both TypeError (JAX) and ValueError (NumPy) ---------------
_MISMATCH = {
    "dot": lambda np_: np_.dot(np_.ones((2, 3)), np_.ones((4,))),
    "matmul": lambda np_: np_.ones((2, 3)) @ np_.ones((4, 2)),
    "matmul-batch": lambda np_: np_.matmul(np_.ones((2, 2, 3)), np_.ones((3, 3, 4))),
    "einsum": lambda np_: np_.einsum("ij,j->i", np_.ones((2, 3)), np_.ones((4,))),
    "tensordot": lambda np_: np_.tensordot(np_.ones((2, 3)), np_.ones((3, 5)), 2),
    "add": lambda np_: np_.ones((2, 3)) + np_.ones((4,)),
    "concatenate": lambda np_: np_.concatenate([np_.ones((2, 3)), np_.ones((3, 5))]),
    "reshape": lambda np_: np_.ones((2, 3)).reshape(4, 2),
}


@pytest.mark.parametrize("name", list(_MISMATCH))
def test_mismatch_errors_are_type_and_value_errors(name):
    f = _MISMATCH[name]
    with pytest.raises((TypeError, ValueError)):
        f(jnp)                                   # the oracle rejects it too
    for run in (lambda: f(mnp), lambda: mx.jit(lambda: f(mnp))()):
        with pytest.raises(TypeError) as err:
            run()
        assert isinstance(err.value, ValueError)
        assert isinstance(err.value, (mx.errors.ShapeError, mx.errors.DTypeError))


# --- smooth derivatives: logaddexp at ties, power at 0 -------------------------------------
@pytest.mark.parametrize("name", ["logaddexp", pytest.param("logaddexp2", marks=_SLOW)])
def test_logaddexp_derivatives_match_jax_at_and_off_ties(name):
    fm, fj = getattr(mnp, name), getattr(jnp, name)
    for x, y in ((1.0, 1.0), (0.0, 0.0), (1.3, 1.0), (-2.0, 3.0)):
        for order in (1, 2, 3):
            gm, gj = (lambda v: fm(v, y)), (lambda v: fj(v, y))
            for _ in range(order):
                gm, gj = mx.grad(gm), jax.grad(gj)
            np.testing.assert_allclose(gm(np.float32(x)), gj(np.float32(x)), rtol=2e-5,
                                       atol=1e-7)
    assert float(mx.grad(mx.grad(lambda v: fm(v, 1.0)))(1.0)) == pytest.approx(
        0.25 if name == "logaddexp" else np.log(2) / 4, rel=1e-6)
    a = np.array([0.0, -30, 5, -np.inf, np.inf, -np.inf, 1e30], np.float32)
    b = np.array([-30, 0, 5, 1, 2, -np.inf, -1e30], np.float32)
    np.testing.assert_allclose(fm(a, b), getattr(np, name)(a, b), rtol=1e-6)


def test_power_derivatives_at_zero_are_finite():
    g = mx.grad
    assert float(g(lambda x: x ** 0.0)(0.0)) == 0.0                # JAX: NaN (0 * inf)
    assert float(g(g(lambda x: x ** 1.0))(0.0)) == 0.0
    assert float(g(g(lambda x: x ** 2.0))(0.0)) == 2.0
    assert float(g(g(g(lambda x: x ** 2.0)))(0.0)) == 0.0
    assert float(g(lambda x: mx.lax.integer_pow(x, 0))(0.0)) == 0.0
    assert float(g(g(lambda x: mx.lax.integer_pow(x, 1)))(0.0)) == 0.0
    # away from 0 they are JAX's; d/dy of d/dx x^y at y = 0 is 1/x (the strong product
    # keeps the mixed derivative)
    for x, y in ((2.0, 0.0), (0.7, 1.0), (1.5, 2.5)):
        for f in (lambda a, b: a ** b,):
            for argnums in (0, 1):
                np.testing.assert_allclose(
                    g(g(f, argnums), argnums)(np.float32(x), np.float32(y)),
                    jax.grad(jax.grad(f, argnums), argnums)(np.float32(x), np.float32(y)),
                    rtol=1e-5)
    assert float(g(lambda b: g(lambda a: a ** b)(2.0))(0.0)) == pytest.approx(0.5)


# --- einsum sublists, moveaxis sequences, *space dtypes, isinstance, ConvDimensionNumbers --
def test_einsum_sublist_form():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 3)).astype(np.float32), rng.normal(size=(3, 4)).astype(np.float32)
    for args in ((a, [0, 1], b, [1, 2], [0, 2]), (a, [0, 1], b, [1, 2]), (a, [0, 1], [1]),
                 (a, [Ellipsis, 1], [Ellipsis]), (a, [0, 1], a, [0, 1], [])):
        np.testing.assert_allclose(mnp.einsum(*args), jnp.einsum(*args), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("src,dst", [((0, 1), (2, 0)), (0, 2), (-1, 0), ([0, 2], [1, 0])])
def test_moveaxis_sequences(src, dst):
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    _same(mnp.moveaxis(a, src, dst), jnp.moveaxis(a, src, dst))


@pytest.fixture
def jax_x64():
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", False)


def _space_cases(cases):
    for start, stop in cases:
        jstart = jnp.asarray(np.asarray(start)) if isinstance(start, mx.Array) else start
        for name in ("linspace", "logspace", "geomspace"):
            lo = start if name != "geomspace" else start + 1
            jlo = jstart if name != "geomspace" else jstart + 1
            got, want = getattr(mnp, name)(lo, stop, 5), getattr(jnp, name)(jlo, stop, 5)
            assert got.dtype == want.dtype, (name, start, got.dtype, want.dtype)
            np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.slow
def test_space_functions_default_float32():
    _space_cases([(0.0, 1.0), (1, 10), (np.float32(1), np.float32(2)),
                  (mnp.zeros(2, mnp.bfloat16), 1.0)])


def test_space_functions_keep_float64(jax_x64):   # JAX needs x64 to keep a float64 start
    _space_cases([(np.zeros(2), np.ones(2)), (np.float64(0.5), 2.0),
                  (mnp.float64(1.0), 2.0)])


def test_tracers_are_arrays():
    for transform in (mx.jit, mx.vmap, mx.grad):
        assert float(transform(lambda v: v * isinstance(v, mx.Array))(mnp.ones(()))
                     if transform is mx.grad else
                     transform(lambda v: v * isinstance(v, mx.Array))(mnp.ones(2))[0]) == 1.0
    assert isinstance(mnp.ones(2), mx.Array) and isinstance(mnp.ones(2), mnp.ndarray)
    assert not isinstance(np.ones(2), mx.Array) and not isinstance(1.0, mx.Array)


def test_conv_dimension_numbers_is_a_namedtuple():
    d = mx.lax.ConvDimensionNumbers(lhs_spec=(0, 1, 2, 3), rhs_spec=(0, 1, 2, 3),
                                    out_spec=(0, 1, 2, 3))
    assert d._fields == jax.lax.ConvDimensionNumbers._fields
    assert d._replace(out_spec=(0, 3, 1, 2)).out_spec == (0, 3, 1, 2)
    got = mx.lax.conv_dimension_numbers((1, 3, 5, 5), (2, 3, 3, 3), ("NHWC", "HWIO", "NHWC"))
    want = jax.lax.conv_dimension_numbers((1, 3, 5, 5), (2, 3, 3, 3), ("NHWC", "HWIO", "NHWC"))
    assert tuple(got) == tuple(want)


def test_jax_error_names_catch_concretization():
    for name in ("ConcretizationTypeError", "TracerBoolConversionError",
                 "TracerIntegerConversionError", "TracerArrayConversionError"):
        assert issubclass(getattr(jax.errors, name), TypeError)
        with pytest.raises(getattr(mx.errors, name)):
            mx.jit(lambda v: v if v > 0 else -v)(1.0)
