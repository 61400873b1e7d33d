"""Matmul precision on CUDA: float32 products at "default" on TF32 tensor cores, "high" as
3xTF32, "highest" exact float32 (cuBLAS SGEMM), each against a float64 reference; 16-bit
and float64 products unaffected; the knob resolved at trace time under jit; a 3xTF32 plan
captured as a CUDA graph.

Bounds, per entry, in units of (|A| |B|)_ij (the conditioning of the product): TF32 keeps
10 mantissa bits, so each operand is off by at most 2^-10 relatively (truncation; 2^-11
when rounded) and a TF32 product by at most about 2 * 2^-10 |A||B|, plus float32
accumulation. 3xTF32 drops lo_a lo_b (<= 2^-20 |a||b|) and TF32's rounding of the low
parts (<= 2^-20 |a||b| together): float32 accumulation dominates. Random N(0, 1)
operands make the observed errors much smaller than these worst cases: TF32's are
~u_tf32 / sqrt(k) relative to |A||B| (about 1e-4 at the maximum over 512 x 512 entries),
float32's ~1e-7; the tests put a threshold at 2^-17 (7.6e-6) between them.

Skipped cleanly without CuPy or without a GPU. (tests/cuda/conftest.py sets the knob to
"highest" for every CUDA test; here each setting is given explicitly.)
"""
from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")
if not cp.cuda.is_available():  # getDeviceCount() > 0; False where it raises (no driver)
    pytest.skip("no CUDA device", allow_module_level=True)

import mirax as mx  # noqa: E402
import mirax.numpy as mnp  # noqa: E402
from mirax.core import runtime  # noqa: E402
from mirax.backends.cuda import graphs, library  # noqa: E402

pytestmark = pytest.mark.gpu
BE = runtime.get_device("cuda").backend
F32_LEVEL = 2.0 ** -17   # between float32's observed error and TF32's (module docstring)
TF32_BOUND = 2 * 2.0 ** -10 + 512 * 2.0 ** -24  # worst case of one TF32 product, k = 512


def _cuda(x):
    return mx.device_put(x, "cuda")


def _operands(seed, shape_a=(512, 512), shape_b=(512, 512)):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape_a).astype(np.float32),
            rng.standard_normal(shape_b).astype(np.float32))


def _rel_err(got, a, b, subs="ij,jk->ik"):
    """max |got - exact| / (|A| |B|), entrywise, exact = the float64 product."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact = np.einsum(subs, a64, b64, optimize=True)
    scale = np.einsum(subs, np.abs(a64), np.abs(b64), optimize=True)
    return float(np.max(np.abs(np.asarray(got).astype(np.float64) - exact) / scale))


def test_each_precision_against_float64():
    a, b = _operands(0)
    da, db = _cuda(a), _cuda(b)
    err = {p: _rel_err(mnp.matmul(da, db, precision=p), a, b)
           for p in ("default", "high", "highest")}
    print("max |err| / (|A||B|), 512^3 float32:", err)
    assert F32_LEVEL < err["default"] <= TF32_BOUND  # TF32 is in use, and within its bound
    assert err["high"] <= F32_LEVEL
    assert err["highest"] <= F32_LEVEL
    assert err["high"] < err["default"] / 16


def test_default_knob_reaches_cuda_products_under_jit():
    """No explicit precision: the knob at trace time decides, and jit keys on it."""
    a, b = _operands(1)
    da, db = _cuda(a), _cuda(b)
    f = mx.jit(lambda x, y: x @ y)
    with mx.default_matmul_precision("default"):
        e_default = _rel_err(f(da, db), a, b)
    with mx.default_matmul_precision("tensorfloat32"):   # JAX's name for HIGH
        e_high = _rel_err(f(da, db), a, b)
    e_highest = _rel_err(f(da, db), a, b)                # conftest: "highest"
    assert f.cache_info().misses == 3
    assert e_default > F32_LEVEL and e_high <= F32_LEVEL and e_highest <= F32_LEVEL


@pytest.mark.parametrize("prec", ["default", "high"])
def test_batched_transposed_and_empty_products(prec):
    """The strided-batched path, F-contiguous (transposed) operands and k = 0 or m = 0."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 64, 96)).astype(np.float32)
    b = rng.standard_normal((3, 96, 80)).astype(np.float32)
    got = mnp.einsum("bij,bjk->bik", _cuda(a), _cuda(b), precision=prec)
    bound = TF32_BOUND if prec == "default" else F32_LEVEL
    assert _rel_err(got, a, b, "bij,bjk->bik") <= bound
    at = rng.standard_normal((96, 64)).astype(np.float32)   # used as at.T: F-contiguous
    got = mnp.matmul(_cuda(at).T, _cuda(b[0]), precision=prec)
    assert _rel_err(got, at.T, b[0]) <= bound
    for shape_a, shape_b in (((4, 0), (0, 5)), ((0, 3), (3, 5))):
        z = mnp.matmul(_cuda(np.ones(shape_a, np.float32)),
                       _cuda(np.ones(shape_b, np.float32)), precision=prec)
        np.testing.assert_array_equal(np.asarray(z), np.zeros((shape_a[0], 5), np.float32))


def test_high_keeps_infinities_and_nans():
    a = np.ones((4, 4), np.float32)
    b = np.ones((4, 4), np.float32)
    a[0, 0], a[1, 1] = np.inf, np.nan
    want = a.astype(np.float64) @ b.astype(np.float64)
    for p in ("default", "high", "highest"):
        got = np.asarray(mnp.matmul(_cuda(a), _cuda(b), precision=p))
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
        fin = np.isfinite(want)
        np.testing.assert_array_equal(got[fin], want[fin])  # small integers: exact in TF32


def test_other_dtypes_are_unaffected():
    """bf16/f16 products accumulate in float32 and float64 is exact, at every setting."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((64, 48)), rng.standard_normal((48, 32))
    for dtype in ("bfloat16", "float16", "float64"):
        da, db = _cuda(a).astype(dtype), _cuda(b).astype(dtype)
        outs = [np.asarray(mnp.matmul(da, db, precision=p).astype("float64"))
                for p in ("default", "high", "highest")]
        np.testing.assert_array_equal(outs[0], outs[2])
        np.testing.assert_array_equal(outs[1], outs[2])
    np.testing.assert_allclose(outs[2], a @ b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("prec", ["default", "high"])
def test_gradients_follow_the_precision(prec):
    """The vjp's products carry the precision: gradients of sum(A @ B * W) are W B^T and
    A^T W, each a product within the setting's bound."""
    a, b = _operands(4, (256, 384), (384, 128))
    w = np.random.default_rng(5).standard_normal((256, 128)).astype(np.float32)
    dw = _cuda(w)
    ga, gb = mx.grad(lambda x, y: mnp.sum(mnp.matmul(x, y, precision=prec) * dw),
                     argnums=(0, 1))(_cuda(a), _cuda(b))
    bound_lo, bound_hi = (F32_LEVEL, 2 * 2.0 ** -10 + 256 * 2.0 ** -24) \
        if prec == "default" else (0.0, F32_LEVEL)
    e_a = _rel_err(ga, w, b.T)
    e_b = _rel_err(gb, a.T, w)
    assert bound_lo < e_a <= bound_hi and bound_lo < e_b <= bound_hi


def test_high_plan_is_captured_as_a_cuda_graph(knobs):
    """The 3xTF32 split kernel and the three GEMMs run inside a capture (the plain run
    before it compiles the kernel), and the replay gives the plain plan's values."""
    knobs(cuda_graphs="1")
    a, b = _operands(6, (64, 96), (96, 32))
    f = mx.jit(lambda x, y: mx.nn.relu(mnp.matmul(x, y, precision="high")) + 1.0)
    da, db = _cuda(a), _cuda(b)
    before = dict(graphs.stats)
    outs = [np.asarray(f(da, db)) for _ in range(5)]
    assert graphs.stats["captured"] > before["captured"], list(graphs.failures)
    assert graphs.stats["replays"] > before["replays"]
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])
    want = np.maximum(a.astype(np.float64) @ b.astype(np.float64), 0) + 1
    assert np.max(np.abs(outs[-1] - want) / (np.abs(a) @ np.abs(b) + 1)) <= F32_LEVEL


def test_split_is_exact():
    """hi + lo == x exactly, hi has at most 11 significant bits (TF32 holds it)."""
    x = cp.asarray(np.random.default_rng(7).standard_normal(10000).astype(np.float32)
                   * np.float32(1e3))
    hi, lo = library._split_tf32(x)
    np.testing.assert_array_equal(cp.asnumpy(hi + lo), cp.asnumpy(x))
    assert int(cp.count_nonzero(hi.view(cp.uint32) & cp.uint32(0x1FFF))) == 0
    assert float(cp.max(cp.abs(lo) / cp.abs(x))) < 2.0 ** -10


def test_attention_blas_path_follows_the_precision(monkeypatch):
    """The fused attention's cuBLAS path (forced here) takes TF32 at "default" and exact
    float32 at "highest": gradients against the CPU composite in float32."""
    from mirax.backends.cuda import attention
    monkeypatch.setattr(attention, "force_path", "blas")
    rng = np.random.default_rng(8)
    q, k, v, w = (rng.standard_normal((1, 128, 2, 64)).astype(np.float32) for _ in range(4))

    def grads(prec, put):
        ww = put(w)

        def loss(q, k, v):
            o = mx.nn.dot_product_attention(q, k, v, is_causal=True, precision=prec)
            return mnp.sum(o * ww)
        return [np.asarray(g) for g in mx.grad(loss, argnums=(0, 1, 2))(put(q), put(k),
                                                                         put(v))]
    ref = grads("highest", mx.asarray)
    exact, tf32 = grads("highest", _cuda), grads("default", _cuda)
    for r, e, t in zip(ref, exact, tf32):
        scale = max(1.0, float(np.max(np.abs(r))))
        np.testing.assert_allclose(e, r, rtol=2e-5, atol=2e-5 * scale)  # as test_attention
        err = float(np.max(np.abs(t - r)))
        assert 1e-6 * scale < err <= 2.0 ** -7 * scale, err / scale  # TF32 is in use


def test_k_strided_tf32_products_are_laid_out_k_major(monkeypatch):
    """A TF32 product whose operands both have k strided (a^T b with a, b row-major: a
    weight gradient) transposes the smaller operand first (library.RELAYOUT_MACS, lowered
    here): the transpose kernel is exact, and the products stay within TF32's bound, for
    either operand transposed."""
    monkeypatch.setattr(library, "RELAYOUT_MACS", 1)
    rng = np.random.default_rng(9)
    x = cp.asarray(rng.standard_normal((37, 70)).astype(np.float32))
    np.testing.assert_array_equal(cp.asnumpy(library._transposed(x)), cp.asnumpy(x).T)
    for (k, m, n) in ((512, 96, 160), (512, 160, 96)):  # a smaller, b smaller
        h, g = _operands(10, (k, m), (k, n))
        got = mx.jit(lambda h, g: mnp.matmul(h.T, g, precision="default"))(_cuda(h), _cuda(g))
        assert F32_LEVEL < _rel_err(got, h.T, g) <= TF32_BOUND
        a, b = cp.asarray(h).T, cp.asarray(g)
        assert a.flags.f_contiguous and b.flags.c_contiguous
        ka, kb = library._k_major(a, b)
        if m <= n:  # a is the smaller: a row-major copy of it
            assert ka.flags.c_contiguous and kb is b
        else:       # b is: a column-major copy of it
            assert kb.flags.f_contiguous and ka is a
        np.testing.assert_array_equal(cp.asnumpy(ka), cp.asnumpy(a))
        np.testing.assert_array_equal(cp.asnumpy(kb), cp.asnumpy(b))
