"""mirax.numpy values against NumPy and result dtypes against JAX, generated from the OpSpec
registry (tests/opspec.py): one test id per op, dtype and sample (`test_value[sin-f32-3x4]`).
Plus hand-written checks of semantics the registry cannot express."""
from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from opspec import SHORT, SPECS, reference


def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _params(dtype_filter=None, keep=None):
    """One param per (spec, dtype, sample). keep(spec, dtype, k, sample) says which run by
    default; the others are marked slow (pytest -m slow runs them)."""
    out = []
    for spec in SPECS:
        for j, dtype in enumerate(spec.dtypes):
            if dtype_filter and not dtype_filter(spec, dtype):
                continue
            tag = f"{spec.name}-{SHORT[dtype]}"
            if spec.fn is None:
                reason = f"mirax.{spec.path} does not exist yet" + (
                    f" (in progress: {spec.owner})" if spec.owner else "")
                out.append(pytest.param(spec, dtype, None, id=tag,
                                        marks=pytest.mark.skip(reason=reason)))
                continue
            for k, sample in enumerate(spec.samples(_rng(spec.name, str(dtype)), dtype)):
                fast = keep is None or keep(j, k, sample)
                out.append(pytest.param(spec, dtype, sample, id=f"{tag}-{sample.name}",
                                        marks=() if fast else pytest.mark.slow))
    return out


def _flat(x):
    if isinstance(x, (list, tuple)):
        return [y for v in x for y in _flat(v)]
    return [x]


def tol_for(dtype, rtol=1e-5, atol=1e-6):
    """Tolerance by the result's dtype: f32 per spec, f64 tight, ints and bools exact."""
    d = np.dtype(dtype)
    if d in (np.float64, np.complex128):
        return 1e-9, 1e-10
    if d.kind in "iub":
        return 0.0, 0.0
    return rtol, atol


def assert_close(got, want, rtol=1e-5, atol=1e-6, what=""):
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want), f"{what}: {len(got)} outputs, expected {len(want)}"
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"{what}: shape {g.shape}, expected {w.shape}"
        if w.dtype == np.bool_ or g.dtype == np.bool_:
            np.testing.assert_array_equal(g, w, err_msg=what)
        else:
            rtol, atol = tol_for(g.dtype, rtol, atol)
            wide = np.complex128 if "c" in (g.dtype.kind, w.dtype.kind) else np.float64
            np.testing.assert_allclose(g.astype(wide), w.astype(wide), rtol=rtol,
                                       atol=atol, equal_nan=True, err_msg=what)


# by default: every sample in the first dtype, the first two in the others
@pytest.mark.parametrize("spec,dtype,sample", _params(keep=lambda j, k, s: j == 0 or k < 2))
def test_value(spec, dtype, sample):
    ref = reference(spec)
    if ref is None:
        pytest.skip("no NumPy reference")
    got = spec.call(spec.fn, sample.args, sample.kwargs)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want = spec.call(ref, sample.args, sample.kwargs)
    if spec.post is not None:
        got, want = spec.post(got), spec.post(want)
    assert_close(got, want, spec.rtol, spec.atol, f"{spec.name} on {sample.name}")


def _jax_params():
    return _params(lambda s, d: s.jax_name is not None and d != np.float64,
                   keep=lambda j, k, s: k == 0 or "py" in s.name)


@pytest.mark.parametrize("spec,dtype,sample", _jax_params())
def test_dtype_matches_jax(spec, dtype, sample):
    """Result dtypes (and shapes) follow JAX's promotion, weak types included."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    jfn = getattr(jnp, spec.jax_name or spec.path.rsplit(".", 1)[1], None)
    if jfn is None:
        pytest.skip("no jax.numpy counterpart")
    idx = sample.arrays()

    def f(*arrays):
        args = list(sample.args)
        for i, a in zip(idx, arrays):
            args[i] = a
        return spec.call(jfn, args, sample.kwargs)

    structs = [jax.ShapeDtypeStruct(sample.args[i].shape, sample.args[i].dtype) for i in idx]
    x32 = getattr(jax, "enable_x64", None)  # other tests may have switched x64 on globally
    if x32 is not None:
        with x32(False):
            want = jax.eval_shape(f, *structs)
    else:
        want = jax.eval_shape(f, *structs)
    got = spec.call(spec.fn, sample.args, sample.kwargs)
    for g, w in zip(_flat(got), jax.tree_util.tree_leaves(want)):
        assert tuple(g.shape) == tuple(w.shape)
        assert np.dtype(g.dtype) == np.dtype(w.dtype), \
            f"{spec.name}: mirax gives {g.dtype}, JAX {w.dtype}"


# --- semantics the registry does not express -------------------------------------------------
def test_sum_bool_int32_and_small_ints():
    assert mnp.sum(mnp.asarray([True, False, True])).dtype == mnp.int32
    assert mnp.sum(mnp.asarray(np.array([1, 2], np.uint8))).dtype == mnp.uint32
    assert mnp.sum(mnp.asarray(np.array([1, 2], np.int8))).dtype == mnp.int32
    assert mnp.prod(mnp.asarray([True, True])).dtype == mnp.int32


def test_mean_of_ints_is_float32():
    x = mnp.asarray([1, 2, 4])
    assert mnp.mean(x).dtype == mnp.float32 and float(mnp.mean(x)) == pytest.approx(7 / 3)
    assert mnp.var(x).dtype == mnp.float32
    assert mnp.average(x).dtype == mnp.float32


def test_max_initial_and_empty():
    assert float(mnp.max(mnp.asarray([1.0, 2.0]), initial=5.0)) == 5.0
    np.testing.assert_array_equal(mnp.max(mnp.zeros((0, 3)), axis=0, initial=-1.0), [-1.0] * 3)
    with pytest.raises(ValueError, match="reduce_max"):
        mnp.max(mnp.zeros((0, 3)), axis=0)
    assert bool(mnp.all(mnp.zeros((0,)))) and not bool(mnp.any(mnp.zeros((0,))))


def test_arange_dtypes():
    assert mnp.arange(5).dtype == mnp.int32
    assert mnp.arange(5.0).dtype == mnp.float32
    assert mnp.arange(0, 5, 1.5).dtype == mnp.float32
    assert mnp.arange(3, dtype=mnp.float64).dtype == mnp.float64
    np.testing.assert_allclose(mnp.arange(0.0, 1.0, 0.1), np.arange(0.0, 1.0, 0.1), rtol=1e-6)
    assert mnp.arange(10, 0, -3).tolist() == [10, 7, 4, 1]
    assert mnp.arange(5, 2).shape == (0,)


def test_linspace_accuracy_and_int_dtype():
    x = np.asarray(mnp.linspace(0.0, 1.0, 11, dtype=mnp.float64))
    np.testing.assert_array_equal(x, np.linspace(0.0, 1.0, 11))
    assert np.asarray(mnp.linspace(-3.0, 7.0, 1000))[-1] == np.float32(7.0)
    assert mnp.linspace(-1, 0, 3, dtype=mnp.int32).tolist() == [-1, -1, 0]  # floors
    y, step = mnp.linspace(0, 1, 5, retstep=True)
    assert step == 0.25 and y.shape == (5,)


def test_round_half_to_even():
    x = mnp.asarray([0.5, 1.5, 2.5, -0.5, -1.5, 2.675])
    np.testing.assert_array_equal(mnp.round(x), np.round(np.asarray(x)))
    np.testing.assert_allclose(mnp.round(mnp.asarray([1.25, 2.35]), 1), [1.2, 2.4], rtol=1e-6)


def test_power_rules():
    x = mnp.asarray([1, 2, 3])
    assert mnp.power(x, 2).dtype == mnp.int32 and mnp.power(x, 2).tolist() == [1, 4, 9]
    assert mnp.power(x, 0.5).dtype == mnp.float32
    with pytest.raises(ValueError, match="negative"):
        mnp.power(x, -1)
    # array exponents: negative ones truncate like lax.pow (JAX gives the same)
    b = mnp.asarray([2, 3, 1, -1, -1, -2])
    e = mnp.asarray([-1, 2, -3, -3, -2, -2])
    assert mnp.power(b, e).tolist() == [0, 9, 1, -1, 1, 0]
    f = mnp.asarray([0.5, 2.0])
    np.testing.assert_allclose(f ** -2, [4.0, 0.25])
    np.testing.assert_allclose(2 ** f, 2 ** np.asarray(f), rtol=1e-6)
    np.testing.assert_allclose(mnp.power(f, mnp.asarray([1.5, -0.5])), [0.5 ** 1.5, 2 ** -0.5],
                               rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_floor_divide_and_remainder_signs(dtype):
    a = np.array([-7, 7, -7, 7, 0, 6], dtype)
    b = np.array([2, -2, -2, 2, 3, -3], dtype)
    x, y = mnp.asarray(a), mnp.asarray(b)
    np.testing.assert_array_equal(mnp.floor_divide(x, y), np.floor_divide(a, b))
    np.testing.assert_array_equal(mnp.remainder(x, y), np.remainder(a, b))
    np.testing.assert_array_equal(x // y, a // b)
    np.testing.assert_array_equal(x % y, a % b)
    np.testing.assert_array_equal(mnp.fmod(x, y), np.fmod(a, b))
    np.testing.assert_array_equal(-7 % y, np.remainder(-7, b).astype(dtype))


def test_bitwise_on_bool_and_ints():
    t, f = mnp.asarray([True, True, False]), mnp.asarray([True, False, False])
    assert (t & f).tolist() == [True, False, False]
    assert (t | f).tolist() == [True, True, False]
    assert (t ^ f).tolist() == [False, True, False]
    assert (~t).tolist() == [False, False, True]
    assert (~mnp.asarray([0, 5])).tolist() == [-1, -6]
    assert (mnp.asarray([1, 2]) << 2).tolist() == [4, 8]
    with pytest.raises(TypeError):
        mnp.bitwise_and(mnp.ones(2), mnp.ones(2))


def test_clip_where_forms():
    x = mnp.arange(6)
    assert mnp.clip(x, 1, 4).tolist() == [1, 1, 2, 3, 4, 4]
    assert mnp.clip(x, min=2).tolist() == [2, 2, 2, 3, 4, 5]
    assert mnp.clip(x, None, 2).tolist() == [0, 1, 2, 2, 2, 2]
    assert mnp.clip(x, 0.5, 2.5).dtype == mnp.float32
    assert mnp.where(x > 2, x, 0).tolist() == [0, 0, 0, 3, 4, 5]
    assert mnp.where(mnp.asarray([1, 0]), 1.0, 2).dtype == mnp.float32
    with pytest.raises(ValueError):
        mnp.where(x > 2, x)


def test_signbit_negative_zero():
    assert mnp.signbit(mnp.asarray([-0.0, 0.0, -1.0, np.nan])).tolist() == \
        np.signbit(np.array([-0.0, 0.0, -1.0, np.nan])).tolist()
    assert mnp.copysign(mnp.asarray([2.0]), mnp.asarray([-0.0])).tolist() == [-2.0]


def test_split_errors_and_forms():
    x = mnp.arange(10)
    with pytest.raises(ValueError, match="split"):
        mnp.split(x, 3)
    parts = mnp.array_split(x, 3)
    assert [p.tolist() for p in parts] == [p.tolist() for p in np.array_split(np.arange(10), 3)]
    parts = mnp.split(x, [3, 20])
    assert [p.shape for p in parts] == [(3,), (7,), (0,)]


def test_repeat_needs_static_repeats():
    x = mnp.arange(3)
    assert mnp.repeat(x, mnp.asarray([1, 2, 0])).tolist() == [0, 1, 1]
    with pytest.raises(mx.errors.ConcretizationError):
        mx.jit(lambda r: mnp.repeat(x, r))(mnp.asarray([1, 2, 0]))
    assert mnp.repeat(x, 2, total_repeat_length=6).tolist() == [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize("sub,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("ii->i", [(4, 4)]), ("ii->", [(4, 4)]),
    ("iij->j", [(3, 3, 2)]), ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,jk", [(2, 3, 4), (4, 5)]), ("i,i", [(4,), (4,)]), ("i,j", [(3,), (2,)]),
    ("ij,kj", [(3, 4), (2, 4)]), ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ij,jk,kl->li", [(2, 3), (3, 4), (4, 5)]), ("ab,cd->abcd", [(2, 1), (1, 3)]),
    ("i...->...", [(3, 2, 2)]), ("ij->ji", [(2, 3)]), ("i,i->i", [(1,), (4,)]),
])
def test_einsum_against_numpy(sub, shapes):
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=s).astype(np.float32) for s in shapes]
    np.testing.assert_allclose(mnp.einsum(sub, *xs), np.einsum(sub, *xs), rtol=1e-5,
                               atol=1e-5)


def test_einsum_errors():
    with pytest.raises(ValueError, match="einsum"):
        mnp.einsum("ij,jk->ik", mnp.ones((2, 3)), mnp.ones((4, 5)))
    with pytest.raises(ValueError, match="einsum"):
        mnp.einsum("ij->k", mnp.ones((2, 3)))
    with pytest.raises(ValueError, match="einsum"):
        mnp.einsum("ijk", mnp.ones((2, 3)))


def test_result_type_and_can_cast():
    assert mnp.result_type(mnp.int32, 2.0) == mnp.float32
    assert mnp.result_type(1, 2.0) == mnp.float32
    assert mnp.result_type(mnp.float16, mnp.bfloat16) == mnp.float32
    assert mnp.result_type(mnp.ones(2, mnp.bfloat16), 2.0) == mnp.bfloat16
    assert mnp.result_type(np.zeros(2, np.float64), mnp.ones(2)) == mnp.float64
    assert mnp.can_cast(mnp.int8, mnp.int32) and not mnp.can_cast(mnp.float32, mnp.int32)
    assert mnp.can_cast(mnp.float64, mnp.float32, "same_kind")
    assert not mnp.can_cast(mnp.float32, mnp.int32, "same_kind")


def test_isclose_infinities_and_nans():
    a = mnp.asarray([1.0, np.inf, -np.inf, np.nan, 1.0])
    b = mnp.asarray([1.0 + 1e-7, np.inf, np.inf, np.nan, 2.0])
    assert mnp.isclose(a, b).tolist() == [True, True, False, False, False]
    assert mnp.isclose(a, b, equal_nan=True).tolist() == [True, True, False, True, False]
    assert bool(mnp.array_equal(mnp.ones(3), mnp.ones(3)))
    assert not bool(mnp.array_equal(mnp.ones(3), mnp.ones(4)))


def test_composites_differentiate():
    """split/pad/roll/einsum are built from differentiable ops: a quick grad check."""
    f = lambda x: mnp.sum(mnp.pad(mnp.roll(x, 1), 1, mode="reflect") ** 2) + \
        mnp.einsum("ii", mnp.reshape(x, (2, 2)))
    x = mnp.asarray([1.0, 2.0, 3.0, 4.0])
    g = mx.grad(f)(x)
    eps, xn = 1e-3, np.asarray(x, np.float64)
    num = [(float(f(mnp.asarray(xn + eps * e))) - float(f(mnp.asarray(xn - eps * e)))) / (2 * eps)
           for e in np.eye(4)]
    np.testing.assert_allclose(g, num, rtol=1e-3)


def test_reshape_fortran_order():
    from mirax.testing import check_grads
    x = np.arange(24.0).reshape(2, 3, 4)
    for shape in [(4, 6), (-1,), 24, (3, -1, 2)]:
        got = mnp.reshape(mx.asarray(x), shape, order="F")
        np.testing.assert_array_equal(np.asarray(got), np.reshape(x, shape, order="F"))
    np.testing.assert_array_equal(np.asarray(mx.asarray(x).reshape(6, 4, order="F")),
                                  x.reshape(6, 4, order="F"))   # the method passes order on
    with pytest.raises(ValueError, match="order must be 'C' or 'F'"):
        mnp.reshape(mx.asarray(x), (4, 6), order="K")
    w = np.random.default_rng(0).normal(size=(4, 6))
    check_grads(lambda a: mnp.sum(mnp.reshape(a, (3, 8), order="F") ** 2 * np.arange(8.0)),
                (x,), order=2, atol=1e-6, rtol=1e-6)
    f = mx.jit(lambda a: mnp.reshape(a, (4, 6), order="F") * w)
    np.testing.assert_allclose(np.asarray(f(x)), np.reshape(x, (4, 6), order="F") * w)


def test_where_with_the_condition_alone_is_nonzero():
    x = np.array([[0, 3, 0], [4, 0, 5]])
    got = mnp.where(mx.asarray(x) > 0)
    for a, b in zip(got, np.where(x > 0)):
        np.testing.assert_array_equal(np.asarray(a), b)
    jitted = mx.jit(lambda c: mnp.where(c, size=4, fill_value=-1))(mx.asarray(x > 0))
    assert [np.asarray(a).tolist() for a in jitted] == [[0, 1, 1, -1], [1, 0, 2, -1]]
    with pytest.raises(mx.errors.ConcretizationError, match="size="):
        mx.jit(lambda c: mnp.where(c))(mx.asarray(x > 0))
    with pytest.raises(ValueError, match="one-argument form"):
        mnp.where(x > 0, 1, 2, size=3)


def test_logsumexp_return_sign_matches_scipy():
    sp = pytest.importorskip("scipy.special")
    from mirax.testing import check_grads
    r = np.random.default_rng(1)
    a = r.normal(size=(3, 5))
    b = r.normal(size=(3, 5))          # negative weights: sums of either sign
    a[2] = -np.inf                     # an empty row: sum 0, sign 0, log -inf
    for axis, keepdims in [(None, False), (1, False), (1, True), ((0, 1), True), (-1, False)]:
        got, sign = mx.scipy.special.logsumexp(a, axis=axis, b=b, keepdims=keepdims,
                                               return_sign=True)
        want, wsign = sp.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=True)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
        np.testing.assert_array_equal(np.asarray(sign), wsign)
    got, sign = mx.scipy.special.logsumexp(a[:2], axis=1, return_sign=True)
    np.testing.assert_allclose(np.asarray(got), sp.logsumexp(a[:2], axis=1), rtol=1e-12)
    assert np.asarray(sign).tolist() == [1.0, 1.0]
    neg = -np.abs(b[:2]) - 0.5         # negative sums, far from 0 (log|sum| is smooth)
    check_grads(lambda a: mx.scipy.special.logsumexp(a, axis=1, b=neg,
                                                     return_sign=True)[0].sum(),
                (a[:2],), order=2, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("mode,kw", [
    ("mean", {}), ("mean", {"stat_length": 2}), ("median", {}),
    ("median", {"stat_length": ((1, 2), (3, 4))}), ("maximum", {}),
    ("minimum", {"stat_length": 1}), ("linear_ramp", {}),
    ("linear_ramp", {"end_values": ((1, 9), (5, 7))})])
def test_pad_computed_modes(mode, kw):
    r = _rng("pad", mode, repr(kw))
    for dtype in (np.float32, np.float64, np.int32, np.uint8):
        x = (np.abs(r.normal(size=(3, 5))) * 10).astype(dtype)
        for widths in [((1, 2), (3, 0)), 2, ((7, 3), (2, 9))]:
            got = mnp.pad(mx.asarray(x), widths, mode=mode, **kw)
            want = np.pad(x, widths, mode=mode, **kw)
            assert got.dtype == want.dtype
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_pad_computed_modes_differentiate_and_check_arguments():
    from mirax.testing import check_grads
    x = np.random.default_rng(3).normal(size=(3, 4))
    for mode in ("mean", "maximum", "linear_ramp"):
        check_grads(lambda a: mnp.sum(mnp.pad(a, ((1, 2), (2, 1)), mode=mode) ** 2),
                    (x,), order=2, atol=1e-6, rtol=1e-6)
    with pytest.raises(TypeError, match="takes no end_values"):
        mnp.pad(mx.asarray(x), 1, mode="mean", end_values=1)
    with pytest.raises(ValueError, match="mode 'bogus' is not one of"):
        mnp.pad(mx.asarray(x), 1, mode="bogus")


def test_linspace_array_endpoints_and_axis():
    cases = [((np.zeros(2), np.array([1.0, 2.0]), 3), {}),
             ((np.zeros((2, 1)), np.array([1.0, 2.0, 3.0]), 4), {"axis": 1}),
             ((np.array([0.0, 1.0]), 5.0, 3), {"axis": -1, "endpoint": False}),
             ((np.zeros(2), np.ones(2), 1), {}), ((0, 1, 5), {"axis": -1})]
    for args, kw in cases:
        got = np.asarray(mnp.linspace(*args, **kw))
        want = np.linspace(*args, **kw)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)
    traced = mx.jit(lambda a: mnp.linspace(a, 2 * a, 5))(np.float32(1.5))
    np.testing.assert_allclose(np.asarray(traced), np.linspace(1.5, 3.0, 5), rtol=1e-6)
    with pytest.raises(ValueError, match="axis 1 is out of range"):
        mnp.linspace(0.0, 1.0, 3, axis=1)
    with pytest.raises(ValueError, match="do not broadcast"):
        mnp.linspace(np.zeros(2), np.ones(3), 4)


def test_var_std_correction_and_concatenate_stack_dtype():
    x = np.random.default_rng(4).normal(size=(4, 5))
    np.testing.assert_allclose(np.asarray(mnp.var(x, axis=1, correction=1)),
                               np.var(x, axis=1, ddof=1), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(mnp.std(x, correction=1)), np.std(x, ddof=1),
                               rtol=1e-12)
    with pytest.raises(ValueError, match="not both"):
        mnp.std(x, ddof=1, correction=1)
    ints = [np.arange(2, dtype=np.int32), np.arange(3, dtype=np.int32)]
    got = mnp.concatenate(ints, dtype=np.float32)
    assert got.dtype == np.float32 and got.tolist() == [0, 1, 0, 1, 2]
    assert mnp.concatenate([x, x], axis=None, dtype=np.float32).shape == (40,)
    assert mnp.stack([np.ones(2), np.zeros(2)], dtype="int32").dtype == np.int32


def test_nn_logsumexp_takes_b_and_return_sign():
    x = np.random.default_rng(5).normal(size=(3, 4))
    b = np.random.default_rng(6).normal(size=(3, 4))
    s = (b * np.exp(x)).sum(1)
    out, sign = mx.nn.logsumexp(x, axis=1, b=b, return_sign=True)
    np.testing.assert_allclose(np.asarray(out), np.log(np.abs(s)), rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(sign), np.sign(s))
    got = mx.nn.logsumexp(x, axis=1, keepdims=True, b=np.abs(b))
    np.testing.assert_allclose(np.asarray(got), np.log((np.abs(b) * np.exp(x)).sum(1,
                                                                                  keepdims=True)))


def test_median_and_quantiles_propagate_nan():
    x = np.array([[3.0, np.nan, -1.0, 2.0], [1.0, 2.0, 3.0, 4.0]], np.float32)
    np.testing.assert_array_equal(np.asarray(mnp.median(x, axis=1)), np.median(x, axis=1))
    np.testing.assert_allclose(np.asarray(mnp.quantile(x, [0.2, 0.9], axis=1)),
                               np.quantile(x, [0.2, 0.9], axis=1), rtol=1e-6)
    assert np.isnan(float(mnp.percentile(x, 50)))
    np.testing.assert_array_equal(np.asarray(mx.grad(lambda v: mnp.median(v))(
        np.array([3.0, 1.0, 2.0]))), [0.0, 0.0, 1.0])


def test_nanvar_skips_input_nans_only_and_mean_where():
    x = np.array([3.0, np.nan, -1.0, 2.0, np.nan, -np.inf, 0.0], np.float32)
    with warnings.catch_warnings():    # NumPy warns about the inf - inf it computes
        warnings.simplefilter("ignore", RuntimeWarning)
        assert np.isnan(float(mnp.nanstd(x)))      # inf - inf is NaN, as in NumPy
    y = np.array([[3.0, np.nan, -1.0], [2.0, 5.0, 1.0]], np.float32)
    np.testing.assert_allclose(np.asarray(mnp.nanvar(y, axis=1)), np.nanvar(y, axis=1),
                               rtol=1e-6)
    m = np.array([[1, 5, 2], [7, 0, 7]], np.float32)
    np.testing.assert_allclose(np.asarray(mnp.mean(m, axis=1, where=m > 1)),
                               np.mean(m, axis=1, where=m > 1))
    w = np.array([True, False, True])
    with warnings.catch_warnings():    # the empty column: NaN, with NumPy's warning
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.mean(m, axis=0, where=w, keepdims=True)
    np.testing.assert_array_equal(np.asarray(mnp.mean(m, axis=0, where=w, keepdims=True)), want)
