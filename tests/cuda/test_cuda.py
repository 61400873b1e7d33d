"""The CUDA backend against NumPy: every OpSpec op eagerly and under jit on `cuda:0`,
derivatives and transform compositions on device arrays, fused kernels against the
unfused plan, row kernels, interop and the dispatch report.

Skipped cleanly without CuPy or without a GPU. Values are compared with the CPU backend
(NumPy), with float32 tolerances widened a little for the GPU's math library (a few ulp).
"""
from __future__ import annotations

import os
import sys
import warnings
import zlib

import numpy as np
import pytest

cp = pytest.importorskip("cupy")
if not cp.cuda.is_available():  # getDeviceCount() > 0; False where it raises (no driver)
    pytest.skip("no CUDA device", allow_module_level=True)

import mirax as mx  # noqa: E402
import mirax.numpy as mnp  # noqa: E402
from mirax.core import runtime  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from opspec import SHORT, SPECS, reference, value_tol  # noqa: E402

pytestmark = pytest.mark.gpu
CUDA = runtime.get_device("cuda")
BE = CUDA.backend


def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _cuda(x):
    return mx.device_put(x, "cuda")


def _flat(x):
    if isinstance(x, (list, tuple)):
        return [y for v in x for y in _flat(v)]
    return [x]


def _close(got, want, rtol=2e-5, atol=1e-6, what=""):
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"{what}: shape {g.shape}, expected {w.shape}"
        if g.dtype.kind in "iub" and w.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w, err_msg=what)
        else:
            wide = np.complex128 if "c" in (g.dtype.kind, w.dtype.kind) else np.float64
            np.testing.assert_allclose(g.astype(wide), w.astype(wide), rtol=rtol,
                                       atol=atol, equal_nan=True, err_msg=what)


def _on_cuda(x):
    for leaf in _flat(x):
        if isinstance(leaf, mx.Array):
            assert leaf.device.platform == "cuda", f"result on {leaf.device}"


def _spec_params():
    out = []
    for spec in SPECS:
        if spec.fn is None or reference(spec) is None:
            continue
        dtype = spec.dtypes[0]
        samples = spec.samples(_rng(spec.name, str(dtype)), dtype)
        if samples:
            out.append(pytest.param(spec, dtype, samples[0],
                                    id=f"{spec.name}-{SHORT[dtype]}-{samples[0].name}"))
    return out


def _to_cuda_args(args):
    return tuple(_cuda(a) if isinstance(a, np.ndarray) else a for a in args)


def _ref_value(spec, sample):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want = spec.call(reference(spec), sample.args, sample.kwargs)
    return spec.post(want) if spec.post else want


def _tol(spec, dtype):
    rtol, atol = value_tol(spec, dtype)
    if np.dtype(dtype) in (np.float32, np.complex64):
        rtol, atol = max(rtol, 2e-5), max(atol, 2e-6)
    elif np.dtype(dtype) == np.float64:
        rtol, atol = max(rtol, 1e-9), max(atol, 1e-10)
    return rtol, atol


# --- every op, eagerly and under jit --------------------------------------------------------
@pytest.mark.parametrize("spec,dtype,sample", _spec_params())
def test_op_eager(spec, dtype, sample):
    want = _ref_value(spec, sample)
    got = spec.call(spec.fn, _to_cuda_args(sample.args), sample.kwargs)
    got = spec.post(got) if spec.post else got
    if sample.arrays():
        _on_cuda(got)
    _close(got, want, *_tol(spec, dtype), what=spec.name)


@pytest.mark.parametrize("spec,dtype,sample", _spec_params())
def test_op_jit(spec, dtype, sample):
    idx = sample.arrays()
    if not idx:
        pytest.skip("no array operands")
    want = _ref_value(spec, sample)
    args = list(_to_cuda_args(sample.args))

    def f(*xs):
        full = list(args)
        for i, x in zip(idx, xs):
            full[i] = x
        return spec.call(spec.fn, tuple(full), sample.kwargs)
    got = mx.jit(f)(*[args[i] for i in idx])
    got = spec.post(got) if spec.post else got
    _on_cuda(got)
    _close(got, want, *_tol(spec, dtype), what=spec.name)


# --- core primitives claimed natively -------------------------------------------------------
NATIVE = ["add", "sub", "mul", "div", "max", "min", "exp", "log", "tanh", "sqrt", "rsqrt",
          "logistic", "erf", "select", "eq", "lt", "convert_element_type", "reduce_sum",
          "reduce_max", "reduce_min", "argmax", "dot_general", "broadcast_in_dim", "reshape",
          "transpose", "concatenate", "slice", "pad", "rev", "iota"]


def test_core_primitives_are_native():
    x = _cuda(np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6))
    y = mnp.exp(x) * 2.0 - mnp.tanh(x) / (1.0 + mnp.sqrt(mnp.abs(x)))
    y = mnp.where(x > 0, y, mx.lax.rsqrt(mnp.abs(x) + 1.0)) + mx.nn.sigmoid(x)
    y = mnp.concatenate([y, mnp.flip(y, 0)], axis=1)[:, 1:5]
    y = mnp.pad(y, 1) @ mnp.ones((6, 3)) + mnp.arange(3)
    s = (mnp.max(y, axis=0) - mnp.min(y, axis=0)).sum() + mnp.argmax(y).astype("float32")
    s = s + mx.scipy.special.erf(y).sum() + mnp.log(mnp.abs(y) + 1).T.reshape(-1).sum()
    _on_cuda(s)
    failed = {k: v for k, v in BE.failures.items() if k[0] in NATIVE}
    assert not failed, failed
    for name in NATIVE:
        assert BE.report[(name, "host-fallback")] == 0, name


def test_dispatch_report_prints():
    from mirax.compiler.pipeline import report
    text = report()
    assert "dispatch report, cuda" in text
    print(text)
    print("native impls that fell back to the host:", BE.failures)


# --- dtypes --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64", "int32", "int8", "bool"])
def test_dtypes_elementwise_and_sum(dtype):
    rng = _rng("dtypes", dtype)
    a = (rng.standard_normal((5, 7)) * 3).astype(np.float32)
    if dtype == "bool":
        a = a > 0
    host = mx.asarray(a).astype(dtype)
    dev = _cuda(host)
    assert dev.dtype == host.dtype
    for fn in (lambda x: x + x, lambda x: mnp.maximum(x, x * 0), lambda x: x.sum(axis=0),
               lambda x: x.sum(), lambda x: mnp.max(x, axis=1)):
        if dtype == "bool":
            fn = (lambda x: mnp.logical_and(x, ~x))
        want, got = fn(host), fn(dev)
        _on_cuda(got)
        assert got.dtype == want.dtype
        tol = 1e-2 if dtype in ("float16", "bfloat16") else 1e-6
        _close(got, want, tol, tol, what=dtype)


def test_half_precision_sum_accumulates_in_float32():
    x = _cuda(np.full(100000, 0.01, np.float16))
    assert abs(float(x.sum()) - 1000.0) < 2.0  # an f16 accumulator would stall at 32
    b = _cuda(mx.asarray(np.full(100000, 0.01, np.float32)).astype("bfloat16"))
    assert abs(float(b.sum()) - 1000.0) < 10.0


# --- derivatives and compositions on device arrays ---------------------------------------------
def _mlp_loss(params, x, y):
    w1, b1, w2, b2 = params
    h = mx.nn.gelu(x @ w1 + b1)
    logits = h @ w2 + b2
    return mx.nn.softmax_cross_entropy(logits, y).mean()


def _mlp_data():
    rng = _rng("mlp")
    params = [rng.standard_normal((8, 16)).astype(np.float32) * 0.3,
              np.zeros(16, np.float32),
              rng.standard_normal((16, 4)).astype(np.float32) * 0.3,
              np.zeros(4, np.float32)]
    x = rng.standard_normal((10, 8)).astype(np.float32)
    y = rng.integers(0, 4, 10).astype(np.int32)
    return [mx.asarray(p) for p in params], mx.asarray(x), mx.asarray(y)


def test_grad_mlp_matches_cpu():
    params, x, y = _mlp_data()
    want = mx.grad(_mlp_loss)(params, x, y)
    got = mx.grad(_mlp_loss)(_cuda(params), _cuda(x), _cuda(y))
    _on_cuda(got)
    _close(got, want, 1e-4, 1e-6)
    got_jit = mx.jit(mx.grad(_mlp_loss))(_cuda(params), _cuda(x), _cuda(y))
    _on_cuda(got_jit)
    _close(got_jit, want, 1e-4, 1e-6)


def test_jit_fast_path_per_platform():
    """A jitted function called again with arrays of the same shapes takes the cached fast
    path on each platform: CUDA arrays run the CUDA plan, host arrays the CPU plan (also
    now that CUDA buffers exist), each with the values of the first call; a mix of the two
    goes through eager dispatch, as the first call did."""
    f = mx.jit(lambda a, b: a * b + 1.0)
    a, b = np.arange(6.0, dtype=np.float32).reshape(2, 3), np.full((2, 3), 2.0, np.float32)
    want = a * b + 1.0
    for xs in ((_cuda(a), _cuda(b)), (mx.asarray(a), mx.asarray(b))):
        for _ in range(3):
            out = f(*xs)
            assert isinstance(out._buf, cp.ndarray) == isinstance(xs[0]._buf, cp.ndarray)
            np.testing.assert_array_equal(np.asarray(out), want)
    kinds = {k[1][0] for k in f._fast}
    assert kinds == {cp.ndarray, np.ndarray}, kinds
    mixed = f(_cuda(a), mx.asarray(b))
    np.testing.assert_array_equal(np.asarray(mixed), want)
    assert len(f._fast) == 2  # the mix is no fast entry


def test_value_and_grad_of_jit_and_vmap():
    params, x, y = _mlp_data()
    f = mx.jit(_mlp_loss)
    v, g = mx.value_and_grad(f)(_cuda(params), _cuda(x), _cuda(y))
    v0, g0 = mx.value_and_grad(_mlp_loss)(params, x, y)
    _close(v, v0, 1e-5, 1e-6)
    _close(g, g0, 1e-4, 1e-6)
    # per-example gradients: vmap of grad, and jit of that
    per = lambda p, xi, yi: _mlp_loss(p, xi[None], yi[None])  # noqa: E731
    pe = mx.jit(mx.vmap(mx.grad(per), in_axes=(None, 0, 0)))
    got = pe(_cuda(params), _cuda(x), _cuda(y))
    want = mx.vmap(mx.grad(per), in_axes=(None, 0, 0))(params, x, y)
    _on_cuda(got)
    _close(got, want, 1e-4, 1e-6)


def test_jvp_hvp_and_grad_of_grad():
    f = lambda x: mnp.sum(mnp.sin(x) * mnp.exp(-x * x) + mx.nn.softmax(x) ** 2)  # noqa: E731
    x = np.linspace(-1, 1, 7).astype(np.float64)
    t = np.cos(np.arange(7.0))
    out, tout = mx.jvp(f, (_cuda(x),), (_cuda(t),))
    out0, tout0 = mx.jvp(f, (mx.asarray(x),), (mx.asarray(t),))
    _close([out, tout], [out0, tout0], 1e-9, 1e-12)
    h = mx.hvp(f, (_cuda(x),), (_cuda(t),))
    h0 = mx.hvp(f, (mx.asarray(x),), (mx.asarray(t),))
    _close(h, h0, 1e-9, 1e-12)
    g2 = mx.jit(mx.grad(lambda x: mx.grad(f)(x).sum()))(_cuda(x))
    g20 = mx.grad(lambda x: mx.grad(f)(x).sum())(mx.asarray(x))
    _on_cuda(g2)
    _close(g2, g20, 1e-9, 1e-12)


def test_grad_matches_finite_differences_on_cuda():
    def f(x):
        return mnp.sum(mx.nn.layer_norm(mnp.tanh(x) * 3.0) ** 3 + mx.nn.log_softmax(x))
    x = np.random.default_rng(1).standard_normal((3, 5))
    g = np.asarray(mx.grad(f)(_cuda(x)))
    eps = 1e-6
    fd = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        fd[i] = (float(f(_cuda(x + e))) - float(f(_cuda(x - e)))) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)


def test_control_flow_on_cuda():
    def f(x):
        y = mx.lax.cond(x.sum() > 0, lambda v: v * 2.0, lambda v: -v, x)
        y = mx.lax.fori_loop(0, 3, lambda i, v: v * 0.5 + 1.0, y)
        c, ys = mx.lax.scan(lambda c, v: (c + v, c * v), 0.0, y)
        return c + ys.sum()
    x = np.arange(4.0, dtype=np.float32) - 1.0
    want = f(mx.asarray(x))
    _close(f(_cuda(x)), want, 1e-5, 1e-6)
    got = mx.jit(f)(_cuda(x))
    _on_cuda(got)
    _close(got, want, 1e-5, 1e-6)
    _close(mx.grad(f)(_cuda(x)), mx.grad(f)(mx.asarray(x)), 1e-5, 1e-6)


# --- fused kernels ------------------------------------------------------------------------------
def _fused_count():
    return sum(n for (p, how), n in BE.report.items() if p == "fusion" and how == "native")


def test_fused_elementwise_kernel_matches_unfused():
    def f(x, w, b):
        return mx.nn.gelu(x * w + b) * mx.nn.sigmoid(x) - mnp.maximum(x, 0.0) / 3.0
    rng = _rng("fuse")
    x = rng.standard_normal((64, 33)).astype(np.float32)
    w = rng.standard_normal(33).astype(np.float32)
    b = np.float32(0.25)
    before = _fused_count()
    got = mx.jit(f)(_cuda(x), _cuda(w), _cuda(b))
    assert _fused_count() > before, "no fusion kernel was generated"
    want = f(mx.asarray(x), mx.asarray(w), mx.asarray(b))  # NumPy, op by op
    _on_cuda(got)
    _close(got, want, 2e-5, 2e-6)
    plan = mx.transforms.jit.executable(mx.make_graph(f)(x, w, b), "cuda")
    assert "fusion" in plan.source
    # a strided input takes CuPy's n-d indexed kernel instead of the flat one
    xt = _cuda(np.ascontiguousarray(x.T)).T
    assert not xt._buf.flags.c_contiguous
    _close(mx.jit(f)(xt, _cuda(w), _cuda(b)), want, 2e-5, 2e-6)
    from mirax.backends.cuda import codegen
    assert not codegen.failures, codegen.failures


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8"])
def test_flat_kernel_vectors_tails_and_offsets(dtype):
    """The flat elementwise kernel moves four neighbouring values a thread as one vector:
    sizes that leave 1 to 3 values over, broadcast blocks of 7 values (moved one by one)
    and 8 (a vector too), a bool second output, and an
    operand sliced one element in (off the vectors' alignment where the slice is a view):
    values as on the CPU."""
    def f(x, y, b):
        x = x[1:].reshape(y.shape)
        return (x * 3 + y) - b, x > y
    rng = _rng("flat", dtype)
    for m, width in ((1, 7), (2, 7), (3, 7), (4, 7), (587, 7), (3, 8), (587, 8)):
        x = (rng.standard_normal(width * m + 1) * 4).astype(dtype)
        y, b = ((rng.standard_normal(sh) * 4).astype(dtype) for sh in ((m, width), (width,)))
        got = mx.jit(f)(_cuda(x), _cuda(y), _cuda(b))
        want = f(mx.asarray(x), mx.asarray(y), mx.asarray(b))
        tol = 2e-3 if dtype == "float16" else 1e-6
        _close(got[0], want[0], tol, tol)
        np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]))
    from mirax.backends.cuda import codegen
    assert not codegen.failures, codegen.failures


def test_fused_reduction_kernel():
    def f(x):
        return mnp.sum(mnp.exp(x) * 2.0 + 1.0, axis=1), mnp.max(mnp.abs(x) - 1.0, axis=0)
    x = _rng("red").standard_normal((37, 129)).astype(np.float32)
    got = mx.jit(f)(_cuda(x))
    _close(got, f(mx.asarray(x)), 2e-5, 1e-5)
    xn = x.copy()
    xn[3, 5] = np.nan
    got = mx.jit(f)(_cuda(xn))
    assert np.isnan(np.asarray(got[1])[5]) and np.isnan(np.asarray(got[0])[3])


def test_fused_f16_and_int_chains():
    f = lambda x: (x * x + 1.0) / (mnp.abs(x) + 2.0)  # noqa: E731
    x = _rng("h").standard_normal((8, 9)).astype(np.float16)
    _close(mx.jit(f)(_cuda(x)), f(mx.asarray(x)), 2e-3, 2e-3)
    g = lambda i: (i * 3 + 7) % 5 - mnp.minimum(i, 2)  # noqa: E731
    i = np.arange(-10, 10, dtype=np.int32)
    _close(mx.jit(g)(_cuda(i)), g(mx.asarray(i)))


def _op_by_op():
    return BE.report[("fusion", "op-by-op")]


def _low(x, dtype):
    return mx.asarray(np.asarray(x, np.float32)).astype(dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fused_low_precision_elementwise(dtype):
    """16-bit chains: one kernel, computed in float32 and rounded op by op like the CPU."""
    def f(x, w, b):
        y = mx.nn.gelu(x * w + b, approximate=True)
        return y * mx.nn.sigmoid(x) - mnp.maximum(x, 0.0) / 3.0, (x * 2.0).astype("float32")
    rng = _rng("fuse-low", dtype)
    x, w = _low(rng.standard_normal((64, 33)), dtype), _low(rng.standard_normal(33), dtype)
    b = _low(np.float32(0.25), dtype)
    before, fused = _op_by_op(), _fused_count()
    got = mx.jit(f)(_cuda(x), _cuda(w), _cuda(b))
    assert _op_by_op() == before and _fused_count() > fused
    want = f(x, w, b)  # NumPy / ml_dtypes, op by op
    assert got[0].dtype == want[0].dtype and got[1].dtype == np.float32
    _on_cuda(got)
    _close(got, want, 1e-2, 1e-2)
    xt = _cuda(np.ascontiguousarray(np.asarray(x).T)).T  # CuPy's indexed kernel path
    assert not xt._buf.flags.c_contiguous
    _close(mx.jit(f)(xt, _cuda(w), _cuda(b)), want, 1e-2, 1e-2)
    from mirax.backends.cuda import codegen
    assert not codegen.failures, codegen.failures


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_excess_precision_rounds_a_chain_once(dtype):
    """cuda_excess_precision: a fused 16-bit chain computed in float32 and rounded where it
    is stored: within one 16-bit ulp of the exact (float64) value where the chain's terms
    do not cancel, and closer to it on average than the chain rounded op by op (the
    default)."""
    def f(x, w):
        return mx.nn.gelu(x * w + 0.5, approximate=True) * x - x / 3.0
    rng = _rng("excess", dtype)
    x, w = _low(rng.standard_normal((256, 129)), dtype), _low(rng.standard_normal(129), dtype)
    with mx.config.override(cuda_excess_precision=True):
        got = np.asarray(mx.jit(f)(_cuda(x), _cuda(w))).astype(np.float64)
    per_op = np.asarray(mx.jit(f)(_cuda(x), _cuda(w))).astype(np.float64)
    xf, wf = (np.asarray(a).astype(np.float64) for a in (x, w))
    h = xf * wf + 0.5
    exact = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3))) * xf - xf / 3
    # float32 arithmetic (about 1e-6 relative, growing near the cancellation of its two
    # terms) and one rounding to the 16-bit type (7 or 10 bits of mantissa): at most one
    # of its ulps from the exact value where the terms do not cancel (and no subnormals)
    mant = 7 if dtype == "bfloat16" else 10
    ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(exact), 1e-30))) - mant)
    far = (np.abs(exact) > 0.1 * np.abs(xf)) & (np.abs(exact) > 1e-3)
    assert np.all(np.abs(got - exact)[far] <= ulp[far])
    assert np.mean(np.abs(got - exact)) < np.mean(np.abs(per_op - exact))
    assert not np.array_equal(got, per_op)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_rounding_is_exact(dtype):
    """add/mul/div/convert round to nearest even exactly as ml_dtypes / NumPy: ties, the
    largest finite values (overflow to inf), float16 subnormals, inf and NaN. (bfloat16's
    subnormals are float32's, which CuPy's kernels flush to zero: -ftz=true.)"""
    info = mnp.finfo(dtype)
    tiny = float(info.tiny) * (0.25 if dtype == "float16" else 64.0)
    vals = np.array([1.0, 1.00390625, 1.01171875, 3.0, -7.5, float(info.max), tiny,
                     tiny * 32, 0.0, -0.0, np.inf, -np.inf, np.nan, 1e-3, 65504.0,
                     123.456], np.float32)
    x = _low(vals, dtype)
    y = _low(np.roll(vals, 3) + 0.5, dtype)
    z32 = mx.asarray(np.float32(np.pi) * vals)

    def f(x, y, z):
        return x * y + x, x / (y + 1.0), (z * 3.0).astype(dtype), x.astype("float32") * 0.1
    got = [np.asarray(g) for g in mx.jit(f)(_cuda(x), _cuda(y), _cuda(z32))]
    want = [np.asarray(w) for w in f(x, y, z32)]
    for g, w in zip(got, want):  # NaN payloads differ (the GPU's NaN is canonical)
        nan = np.isnan(w.astype(np.float32))
        np.testing.assert_array_equal(np.isnan(g.astype(np.float32)), nan)
        np.testing.assert_array_equal(g[~nan].view(np.uint16) if g.itemsize == 2 else g[~nan],
                                      w[~nan].view(np.uint16) if w.itemsize == 2 else w[~nan])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fused_low_precision_reductions(dtype):
    def f(x):
        return (mnp.sum(mnp.exp(x) * 2.0 + 1.0, axis=1), mnp.max(mnp.abs(x) - 1.0, axis=0),
                mnp.mean(mnp.square(x.astype("float32"))), mnp.sum(x * x))
    x = np.array(_low(_rng("red-low", dtype).standard_normal((37, 129)), dtype))
    x[3, 5] = np.nan
    before = _op_by_op()
    got = mx.jit(f)(_cuda(x))
    assert _op_by_op() == before
    want = f(mx.asarray(x))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
    _close(got, want, 2e-2, 2e-2)
    assert np.isnan(np.asarray(got[1])[5]) and np.isnan(np.asarray(got[0])[3])


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "layer_norm", "rms_norm"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_row_kernels_low_precision(op, dtype):
    rng = _rng("rows-low", op, dtype)
    x32 = rng.standard_normal((6, 5, 300)).astype(np.float32) * 2
    w32, b32 = rng.standard_normal(300).astype(np.float32), rng.standard_normal(300)
    fns = {"softmax": lambda x, w, b: mx.nn.softmax(x),
           "log_softmax": lambda x, w, b: mx.nn.log_softmax(x),
           "layer_norm": lambda x, w, b: mx.nn.layer_norm(x, w, b),
           "rms_norm": lambda x, w, b: mx.nn.rms_norm(x, w)}
    fn = fns[op]
    x, w, b = (_low(a, dtype) for a in (x32, w32, b32))
    # the reference: float32 math on the rounded inputs, rounded once
    want = fn(*(mx.asarray(np.asarray(a).astype(np.float32)) for a in (x, w, b))).astype(dtype)
    got = mx.jit(fn)(_cuda(x), _cuda(w), _cuda(b))
    assert got.dtype == want.dtype
    tol = 1e-2 if dtype == "bfloat16" else 2e-3
    _close(got, want, tol, tol)
    _close(fn(_cuda(x), _cuda(w), _cuda(b)), want, tol, tol)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("d,lead,labels", [(10, (64,), "int32"), (1000, (4, 9), "int64"),
                                           (3000, (5,), "int32")])
def test_softmax_cross_entropy_row_kernels(dtype, d, lead, labels):
    """softmax_cross_entropy and its backward run as one row kernel each (natives, not the
    decomposed body): the mean loss and its gradient against the CPU's NumPy kernels, a
    label outside the row giving a NaN loss and a gradient of softmax * ct alone."""
    rng = _rng("sce", dtype, d)
    x = _low(rng.standard_normal(lead + (d,)) * 3, dtype)
    y = rng.integers(0, d, lead).astype(labels)
    y.reshape(-1)[1] = d   # out of the row
    wts = np.arange(1, y.size + 1, dtype=np.float32).reshape(lead)

    def f(x, y):   # the loss (NaN at row 1) and the gradient of its weighted sum (finite)
        return (mx.nn.softmax_cross_entropy(x, y),
                mx.grad(lambda x: mnp.sum(mx.nn.softmax_cross_entropy(x, y) * wts))(x))
    # the reference: the CPU's kernels in float32 on the rounded inputs, rounded once (as
    # the CUDA kernels; NumPy's bfloat16 softmax sums in bfloat16: 4% off over 1000 terms)
    want = [w.astype(dtype) for w in f(mx.asarray(x).astype("float32" if dtype == "bfloat16"
                                                             else dtype), mx.asarray(y))]
    before = {k: BE.report[(k, "native")] for k in ("softmax_cross_entropy",
                                                   "softmax_cross_entropy_bwd")}
    got = mx.jit(f)(_cuda(x), _cuda(y))
    for k, n in before.items():
        assert BE.report[(k, "native")] > n, k
    tol = 1e-2 if dtype == "bfloat16" else 1e-5   # bfloat16: a rounding (2^-8) each side
    _close(got, want, tol, tol * 10)
    assert np.isnan(np.asarray(got[0]).reshape(-1)[1])


def test_fused_integer_div_rem_shift():
    def f(x, y):
        return (mx.lax.div(x, y) + mx.lax.rem(x, y) * 3, mnp.left_shift(x, y),
                mnp.right_shift(x, y) - x)
    x = np.array([-7, 7, 5, -5, 2 ** 30, -1, 0, 9], np.int32)
    y = np.array([2, -2, 0, 40, 3, 31, -1, 32], np.int32)
    before = _op_by_op()
    got = mx.jit(f)(_cuda(x), _cuda(y))
    assert _op_by_op() == before
    _close(got, f(mx.asarray(x), mx.asarray(y)))


def test_bool_reductions_fused():
    f = lambda x: (mnp.any(x > 0.5, axis=1), mnp.all(x > -2.0, axis=0))  # noqa: E731
    x = _rng("bool").standard_normal((9, 11)).astype(np.float32)
    _close(mx.jit(f)(_cuda(x)), f(mx.asarray(x)))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fused_row_broadcasts(dtype):
    """Per-row values [B, T, 1] and a [T, 1] block against [B, T, D] in one flat kernel
    (index arithmetic, nothing broadcast in memory), and a layer norm's backward, whose
    per-row broadcasts the fusion nodes read in place: values as on the CPU."""
    rng = _rng("row bcast", dtype)
    x = _low(rng.standard_normal((3, 50, 70)), dtype)
    r, c, b = (_low(rng.standard_normal(sh), dtype) for sh in ((3, 50), (50, 1), (70,)))
    f = lambda x, r, c, b: (x * r[..., None] + c) * b  # noqa: E731
    before = _op_by_op()
    got = mx.jit(f)(*(_cuda(a) for a in (x, r, c, b)))
    assert _op_by_op() == before
    exact = 1e-6 if dtype == "float32" else 0
    _close(np.asarray(got).astype(np.float64), _host(f, x, r, c, b), exact, exact)
    add = mx.jit(lambda x, b: x + b)  # one op, no fusion node: a generated kernel too
    _close(np.asarray(add(_cuda(x), _cuda(b))).astype(np.float64),
           _host(lambda x, b: x + b, x, b), 0, 0)
    w = _low(rng.standard_normal(70), dtype)
    loss = lambda x, w: mnp.sum(mx.nn.layer_norm(x, w, w).astype("float32") ** 2)  # noqa
    gx, gw = mx.jit(mx.grad(loss, argnums=(0, 1)))(_cuda(x), _cuda(w))
    assert _op_by_op() == before
    wx, ww = mx.grad(loss, argnums=(0, 1))(x, w)
    tol = 1e-4 if dtype == "float32" else 5e-2
    for g, want in ((gx, wx), (gw, ww)):
        scale = float(np.max(np.abs(np.asarray(want).astype(np.float32))))
        _close(np.asarray(g).astype(np.float32) / scale,
               np.asarray(want).astype(np.float32) / scale, tol, tol)


def test_full_matrices_svd_and_complete_qr():
    """svd(full_matrices=True) and qr(mode='complete') of non-square matrices on cuSOLVER:
    square orthogonal factors that reconstruct the input."""
    x = _rng("full svd").standard_normal((2, 7, 4))
    for a in (x, np.swapaxes(x, -1, -2).copy()):
        u, s, vh = mnp.linalg.svd(_cuda(a))
        _on_cuda(u)
        u, s, vh = (np.asarray(o) for o in (u, s, vh))
        m, n = a.shape[-2:]
        assert u.shape == (2, m, m) and vh.shape == (2, n, n)
        k = min(m, n)
        _close(u[..., :k] * s[..., None, :] @ vh[..., :k, :], a, 1e-10, 1e-10)
        _close(np.swapaxes(u, -1, -2) @ u, np.broadcast_to(np.eye(m), (2, m, m)), 1e-10, 1e-10)
        q, r = (np.asarray(o) for o in mnp.linalg.qr(_cuda(a), mode="complete"))
        assert q.shape == (2, m, m) and r.shape == (2, m, n)
        _close(q @ r, a, 1e-10, 1e-10)


# --- generated reductions: codegen's two-stage (few outputs, rows) and column kernels ----------
@pytest.fixture
def two_stage(monkeypatch):
    """The reductions (primitive names) given one of codegen's generated kernels, as they
    are built; `two_stage.layouts` lists their layouts ("few", "rows", "columns")."""
    from mirax.backends.cuda import codegen
    built, real = _Built(), codegen._generated

    def spy(layout, params, lines, value, red, *rest):
        built.append(red.prim.name)
        built.layouts.append(layout)
        return real(layout, params, lines, value, red, *rest)
    monkeypatch.setattr(codegen, "_generated", spy)
    yield built
    assert not codegen.failures, codegen.failures


class _Built(list):
    def __init__(self):
        super().__init__()
        self.layouts = []


def _host(fn, *args):
    """fn on the CPU backend (NumPy, op by op), as float64 or int64."""
    out = np.asarray(fn(*[mx.asarray(a) for a in args]))
    return out.astype(np.int64 if out.dtype.kind in "iub" else np.float64)


_FULL = {  # op -> (the fused chain, mirax's reduction, NumPy's)
    "sum": (lambda x, w, s: x * w + s, mnp.sum, np.sum),
    "max": (lambda x, w, s: x * w - s, mnp.max, np.max),
    "min": (lambda x, w, s: x - w * s, mnp.min, np.min),
    "prod": (lambda p, w, s: p * 2 - p, mnp.prod, np.prod),  # p: +-1 and a few 2s: exact
    "mean": (lambda x, w, s: mnp.square(x.astype("float32")), mnp.mean, np.mean),
}
_RTOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2, "float64": 1e-12, "int32": 0}


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int32"])
def test_two_stage_full_reductions(dtype, two_stage):
    """Fused chains reduced to one value (a loss) against NumPy on the same rounded chain
    values: sizes 1, 7 (one block, partly idle) and 1000003 (many blocks, a ragged tail)."""
    isint = dtype == "int32"
    for n in (1, 7, 1000003):
        rng = _rng("full", dtype, n)
        if isint:
            x, w = (mx.asarray(rng.integers(-5, 6, n).astype(np.int32)) for _ in range(2))
            s = mx.asarray(np.int32(2))
        else:  # the sum stays in float16's range: about n * s
            x, w = (_low(rng.standard_normal(n), dtype) for _ in range(2))
            s = _low(np.float32(0.01), dtype)
        p = np.ones(n, np.float32)
        p[rng.random(n) < 0.01] = -1
        p[::max(1, n // 9)] = 2
        p = mx.asarray(p).astype(dtype)
        ops = ["sum", "max"] if n < 1000 else \
            ["sum", "max", "min", "prod"] + ([] if isint else ["mean"])
        before = len(two_stage)
        for op in ops:
            chain, red, ref = _FULL[op]
            args = (p, w, s) if op == "prod" else (x, w, s)
            f = mx.jit(lambda a, b, c, chain=chain, red=red: red(chain(a, b, c)))
            got = f(*(_cuda(a) for a in args))
            _on_cuda(got)
            assert got.shape == ()
            want = ref(_host(chain, *args))
            # max / min: exact but for a float32 / float64 chain contracted to an FMA
            rtol = 1e-5 if op == "mean" else 0 if op == "prod" else \
                min(_RTOL[dtype], 1e-6) if op in ("max", "min") else _RTOL[dtype]
            _close(np.asarray(got).astype(np.float64), want, rtol, rtol, what=f"{op} n={n}")
            if op == "sum" and n > 1000:  # deterministic: the same bits again
                again = f(*(_cuda(a) for a in args))
                assert np.asarray(again).tobytes() == np.asarray(got).tobytes()
        assert len(two_stage) - before == len(ops), two_stage


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_two_stage_nan_propagates(dtype, two_stage):
    """A NaN anywhere (first value, middle, last of the ragged tail) makes sum, max and min
    NaN, as NumPy; without one, max and min are exact."""
    n = 1000003
    x32 = _rng("nan", dtype).standard_normal(n).astype(np.float32)
    fs = [mx.jit(lambda x: mnp.sum(x * 2.0)), mx.jit(lambda x: mnp.max(x + 1.0)),
          mx.jit(lambda x: mnp.min(mnp.abs(x) - 1.0))]
    for at in (0, 12345, n - 1):
        xn = x32.copy()
        xn[at] = np.nan
        for f in fs:
            assert np.isnan(float(np.asarray(f(_cuda(_low(xn, dtype)))).astype(np.float64)))
    x = _low(x32, dtype)
    assert float(np.asarray(fs[1](_cuda(x))).astype(np.float64)) == \
        np.max(_host(lambda x: x + 1.0, x))
    assert float(np.asarray(fs[2](_cuda(x))).astype(np.float64)) == \
        np.min(_host(lambda x: mnp.abs(x) - 1.0, x))
    assert len(two_stage) == 3


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_two_stage_broadcast_inputs(dtype, two_stage):
    """Biases over the last axis, a column, a row block and a 0-d device value, read by
    index arithmetic (nothing materialized) in a full reduction of [3, 517, 129]."""
    rng = _rng("bcast", dtype)
    x, b, c, r = (_low(rng.standard_normal(sh), dtype)
                  for sh in ((3, 517, 129), (129,), (3, 517, 1), (3, 1, 129)))
    s = _low(np.float32(0.25), dtype)
    chains = [lambda x, b, c, r, s: x * b + c - r * s,
              lambda x, b, c, r, s: (x + c) * s - b]
    for chain, red, ref in ((chains[0], mnp.sum, np.sum), (chains[1], mnp.max, np.max)):
        got = mx.jit(lambda *a, chain=chain, red=red: red(chain(*a)))(
            *(_cuda(a) for a in (x, b, c, r, s)))
        want = ref(_host(chain, x, b, c, r, s))
        f32 = dtype == "float32"  # (max: exact but for an FMA in the float32 chain)
        rtol = (1e-6 if f32 else 0) if red is mnp.max else 2e-5 if f32 else 1e-2
        _close(np.asarray(got).astype(np.float64), want, rtol, 1e-3 if red is mnp.sum else rtol,
               what=dtype)
    assert len(two_stage) == 2


def test_two_stage_few_outputs(two_stage):
    """Reductions to a few outputs: trailing, leading, middle and split kept axes."""
    rng = _rng("few")
    f32 = np.float32
    cases = [
        (lambda x, b: mnp.sum(x * b, axis=1), ((5, 300001), (5, 1)), f32),
        (lambda x, b: mnp.sum(mnp.exp(x * 0.1) + b, axis=(0, 2)), ((64, 8, 515), (8, 1)), f32),
        (lambda x: mnp.max(x * 2.0 - 1.0, axis=0), ((100003, 6),), f32),
        (lambda x: mnp.min(mnp.abs(x) + 1.0, axis=1), ((3, 100003, 2),), f32),
        (lambda i: mnp.sum(i * 3 - 1, axis=0), ((100003, 3),), np.int32),
        (lambda x: mnp.prod(x * 1e-3 + 1.0, axis=1), ((4, 2000),), np.float64),
    ]
    for fn, shapes, dt in cases:
        args = [(rng.integers(-5, 6, sh) if dt == np.int32 else rng.standard_normal(sh))
                .astype(dt) for sh in shapes]
        got = mx.jit(fn)(*(_cuda(a) for a in args))
        want = fn(*(mx.asarray(a.astype(np.float64) if dt == f32 else a) for a in args))
        _on_cuda(got)
        _close(got, want, 2e-5 if dt == f32 else 1e-12, 1e-3 if dt == f32 else 0,
               what=str(shapes))
    assert len(two_stage) == len(cases), two_stage


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_two_stage_loss_with_values(dtype, two_stage):
    """mean(square(y)) where the backward pass reads y too: one two-stage kernel stores y
    (the chain's value) and reduces it; values and gradients as on the CPU; a strided
    input is copied to a contiguous one first."""
    rng = _rng("loss", dtype)
    x = _low(rng.standard_normal((3, 517, 129)), dtype)
    b = _low(rng.standard_normal(129), dtype)

    def loss(x, b):
        return mnp.mean(mnp.square((x * b + 1.0).astype("float32")))
    f = mx.jit(mx.value_and_grad(loss, argnums=(0, 1)))
    want = mx.value_and_grad(loss, argnums=(0, 1))(x, b)
    tol = 2e-5 if dtype == "float32" else 2e-2
    for xin in (_cuda(x), _cuda(np.ascontiguousarray(np.asarray(x).transpose(2, 1, 0)))
                .transpose((2, 1, 0))):
        val, (gx, gb) = f(xin, _cuda(b))
        _on_cuda(val)
        _close(val, want[0], tol, tol)
        for g, w in zip((gx, gb), want[1]):
            scale = float(np.max(np.abs(np.asarray(w).astype(np.float32))))
            _close(np.asarray(g).astype(np.float32) / scale,
                   np.asarray(w).astype(np.float32) / scale, tol, tol)
    assert "reduce_sum" in two_stage


def test_two_stage_fallbacks(knobs, two_stage, monkeypatch):
    """A strided input takes CuPy's kernel; MIRAX_CUDA_TWO_STAGE=0 turns the kernels off;
    many short rows keep CuPy's kernel. The values agree."""
    x = _rng("fallback").standard_normal((513, 1027)).astype(np.float32)
    f = lambda x: mnp.sum(mnp.square(x) * 0.5)  # noqa: E731
    want = 0.5 * np.sum(x.astype(np.float64) ** 2)
    _close(mx.jit(f)(_cuda(x)), want, 1e-5, 0)
    assert len(two_stage) == 1
    xt = _cuda(np.ascontiguousarray(x.T)).T
    assert not xt._buf.flags.c_contiguous
    _close(mx.jit(lambda x: mnp.sum(mnp.square(x) * 0.5))(xt), want, 1e-5, 0)
    assert len(two_stage) == 2  # built for the new plan; run: CuPy's kernel (strided input)
    xs = x.reshape(-1)[:4000 * 100].reshape(4000, 100)
    _close(mx.jit(lambda x: mnp.max(x * 2.0, axis=1))(_cuda(xs)), 2 * xs.max(axis=1), 1e-6, 0)
    assert len(two_stage) == 2  # 4000 rows of 100: CuPy's kernel
    knobs(cuda_two_stage="0")
    _close(mx.jit(lambda x: mnp.sum(mnp.square(x) * 0.5 + 0.0))(_cuda(x)), want, 1e-5, 0)
    _close(mx.jit(lambda x: mnp.max(x * 3.0, axis=0))(_cuda(x)), 3 * x.max(axis=0), 1e-6, 0)
    assert len(two_stage) == 2


_COLUMN_CASES = [  # (shape, axes, bias shape or None): innermost dimension kept
    ((8, 128, 1024), (0, 1), (1024,)),     # a bias gradient of [B, T, D]
    ((3000, 1030), (0,), (1030,)),         # ragged: 1030 outputs, 3000 rows
    ((37, 5, 129), (0,), (5, 129)),        # few rows: one slice, a 645-wide kept block
    ((6, 100, 3, 400), (0, 1), None),      # kept [3, 400] merged into 1200 outputs
    ((4, 2, 300, 2050), (0, 2), (2050,)),  # reduced axes split by a kept one
]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_column_reductions(dtype, two_stage):
    """Sums and maxima over leading axes (bias and norm-weight gradients) by the column
    kernel, with and without the chain's values stored too, against NumPy on the same
    rounded chain values; the sums are deterministic."""
    for shape, axes, bshape in _COLUMN_CASES:
        rng = _rng("columns", dtype, shape)
        x = _low(rng.standard_normal(shape), dtype)
        b = _low(rng.standard_normal(bshape or (1,)), dtype)
        chain = lambda x, b: x * b + 0.5  # noqa: E731
        for red, ref in ((mnp.sum, np.sum), (mnp.max, np.max)):
            f = mx.jit(lambda x, b, red=red: red(chain(x, b), axis=axes))
            got = f(_cuda(x), _cuda(b))
            _on_cuda(got)
            want = ref(_host(chain, x, b), axis=axes)
            f32 = dtype == "float32"  # (exact but for an FMA in the float32 chain)
            rtol = (1e-6 if f32 else 0) if red is mnp.max else _RTOL[dtype]
            scale = 1.0 if red is mnp.max else float(np.sqrt(np.prod(shape) / want.size))
            _close(np.asarray(got).astype(np.float64), want, rtol, rtol * scale,
                   what=f"{red.__name__} {shape}")
            if red is mnp.sum:
                again = f(_cuda(x), _cuda(b))
                assert np.asarray(again).tobytes() == np.asarray(got).tobytes()
        # the chain's values stored too: y (for a GEMM) and its column sums, one kernel
        g = mx.jit(lambda x, b: (lambda y: (y, mnp.sum(y, axis=axes)))(chain(x, b) * 2.0))
        before = _op_by_op()
        y, s = g(_cuda(x), _cuda(b))
        assert _op_by_op() == before
        want_y = _host(lambda x, b: chain(x, b) * 2.0, x, b)
        exact = 1e-6 if dtype == "float32" else 0  # (an FMA in the float32 chain)
        _close(np.asarray(y).astype(np.float64), want_y, exact, exact, what=f"values {shape}")
        _close(np.asarray(s).astype(np.float64), want_y.sum(axis=axes), _RTOL[dtype],
               _RTOL[dtype] * float(np.sqrt(np.prod(shape) / want_y.sum(axis=axes).size)))
    assert set(two_stage.layouts) == {"columns"}, two_stage.layouts


def test_column_reductions_int_and_min(two_stage):
    """Integer column sums (exact) and minima with NaN propagation."""
    rng = _rng("columns int")
    i = rng.integers(-50, 50, (5000, 1077)).astype(np.int32)
    got = mx.jit(lambda i: mnp.sum(i * 3 - 1, axis=0))(_cuda(i))
    np.testing.assert_array_equal(np.asarray(got), (i * 3 - 1).sum(axis=0))
    x = rng.standard_normal((4000, 1100)).astype(np.float32)
    x[1234, 17] = np.nan
    x[3999, 1099] = np.nan
    got = np.asarray(mx.jit(lambda x: mnp.min(x - 1.0, axis=0))(_cuda(x)))
    want = (x - 1.0).min(axis=0)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
    assert two_stage.layouts == ["columns", "columns"]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_row_reductions_with_values(dtype, two_stage):
    """Row sums over the last axis of many rows (a layer norm's backward) with the chain's
    values stored too: one kernel (the two-stage kernel, a block per row); ragged rows."""
    for shape in ((8, 256, 1024), (2048, 300), (1500, 4097)):
        rng = _rng("rows", dtype, shape)
        x, w = (_low(rng.standard_normal(sh), dtype) for sh in (shape, shape[-1:]))

        def chain(x, w):
            return x * w - 0.25
        f = mx.jit(lambda x, w: (lambda y: (y, mnp.sum(y, axis=-1)))(chain(x, w)))
        before = _op_by_op()
        y, s = f(_cuda(x), _cuda(w))
        assert _op_by_op() == before
        want_y = _host(chain, x, w)
        exact = 1e-6 if dtype == "float32" else 0  # (an FMA in the float32 chain)
        _close(np.asarray(y).astype(np.float64), want_y, exact, exact, what=f"values {shape}")
        tol = _RTOL[dtype] * float(np.sqrt(shape[-1]))
        _close(np.asarray(s).astype(np.float64), want_y.sum(axis=-1), _RTOL[dtype], tol,
               what=f"sums {shape}")
    assert set(two_stage.layouts) == {"rows"}, two_stage.layouts


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_transformer_block_has_no_op_by_op_fusions(dtype):
    """The benchmark's pre-LN block (forward + backward): every fusion node is a kernel."""
    B, T, D, H = 2, 16, 32, 4
    rng = _rng("block", dtype)
    p = {k: _low(rng.standard_normal(s) * 0.2, dtype) for k, s in
         [("w1", (D, 4 * D)), ("b1", (4 * D,)), ("w2", (4 * D, D)), ("wq", (D, D)),
          ("wk", (D, D)), ("wv", (D, D)), ("wo", (D, D)), ("g", (D,)), ("b", (D,))]}
    x = _low(rng.standard_normal((B, T, D)), dtype)

    def loss(p, x):
        h = mx.nn.layer_norm(x, p["g"], p["b"])
        q, k, v = (mnp.reshape(h @ p[n], (B, T, H, D // H)) for n in ("wq", "wk", "wv"))
        a = mx.nn.dot_product_attention(q, k, v, is_causal=True)
        x = x + mnp.reshape(a, (B, T, D)) @ p["wo"]
        h = mx.nn.layer_norm(x, p["g"], p["b"])
        y = x + mx.nn.gelu(h @ p["w1"] + p["b1"], approximate=True) @ p["w2"]
        return mnp.mean(mnp.square(y.astype("float32")))
    before = _op_by_op()
    val, g = mx.jit(mx.value_and_grad(loss))(_cuda(p), _cuda(x))
    assert _op_by_op() == before
    val0, g0 = mx.value_and_grad(loss)(p, x)
    tol = 5e-2 if dtype == "bfloat16" else 1e-4
    _close(val, val0, tol, tol)
    for k in p:
        scale = float(np.max(np.abs(np.asarray(g0[k]).astype(np.float32)))) + 1e-6
        _close(np.asarray(g[k]).astype(np.float32) / scale,
               np.asarray(g0[k]).astype(np.float32) / scale, tol, tol, what=k)


def test_debug_prints_kernel_source(knobs, monkeypatch, capfd):
    knobs(debug="3")
    f = mx.jit(lambda x: mnp.tanh(x * 1.7) + mnp.cos(x) * 0.1234567)
    f(_cuda(np.ones((3, 3), np.float32)))
    err = capfd.readouterr().err
    assert "generated CUDA plan" in err
    assert "0.1234567" in err and "tanhf" in err


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "layer_norm", "rms_norm"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_row_kernels(op, dtype):
    rng = _rng("rows", op, dtype)
    x = rng.standard_normal((6, 5, 300)).astype(dtype) * 4
    x[0, 0] = -np.inf  # a row of -inf (softmax: NaN as NumPy's 0/0)
    w = rng.standard_normal(300).astype(dtype)
    b = rng.standard_normal(300).astype(dtype)
    fns = {"softmax": lambda x, w, b: mx.nn.softmax(x),
           "log_softmax": lambda x, w, b: mx.nn.log_softmax(x),
           "layer_norm": lambda x, w, b: mx.nn.layer_norm(x, w, b),
           "rms_norm": lambda x, w, b: mx.nn.rms_norm(x, w)}
    if op in ("layer_norm", "rms_norm"):
        x[0, 0] = 1.0
    fn = fns[op]
    want = fn(mx.asarray(x), mx.asarray(w), mx.asarray(b))
    tol = 2e-5 if dtype == "float32" else 1e-11
    _close(fn(_cuda(x), _cuda(w), _cuda(b)), want, tol, tol)
    _close(mx.jit(fn)(_cuda(x), _cuda(w), _cuda(b)), want, tol, tol)
    # a non-last axis takes the compiled body
    if op == "softmax":
        _close(mx.nn.softmax(_cuda(x[1:]), axis=1), mx.nn.softmax(mx.asarray(x[1:]), axis=1),
               tol, tol)


def test_bf16_matmul():
    rng = _rng("bf16")
    a = mx.asarray(rng.standard_normal((64, 96)).astype(np.float32)).astype("bfloat16")
    b = mx.asarray(rng.standard_normal((96, 48)).astype(np.float32)).astype("bfloat16")
    got = _cuda(a) @ _cuda(b)
    assert got.dtype == a.dtype
    want = np.asarray(a).astype(np.float32) @ np.asarray(b).astype(np.float32)
    np.testing.assert_allclose(np.asarray(got).astype(np.float32), want, rtol=2e-2, atol=0.1)
    assert not any(k[0] == "dot_general" for k in BE.failures), BE.failures


# --- devices and interop ------------------------------------------------------------------------
def test_devices_and_transfers():
    assert any(d.platform == "cuda" for d in mx.devices())
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    d = mx.device_put(x, "cuda:0")
    assert str(d.device) == "cuda:0"
    assert isinstance(d._buf, cp.ndarray)
    h = mx.device_put(d, "cpu")
    assert h.device == "cpu"
    np.testing.assert_array_equal(np.asarray(d), x)
    np.testing.assert_array_equal(np.asarray(h), x)
    d.block_until_ready()
    assert "Array(" in repr(d)


def test_dlpack_interop():
    c = cp.arange(5, dtype=cp.float32)
    a = mx.asarray(c)
    assert a.device.platform == "cuda"
    np.testing.assert_array_equal(np.asarray(a * 2), np.arange(5) * 2)
    back = cp.from_dlpack(a)
    np.testing.assert_array_equal(cp.asnumpy(back), np.arange(5))
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    t = torch.arange(4, dtype=torch.float32, device="cuda")
    m = mx.asarray(t)
    assert m.device.platform == "cuda"
    np.testing.assert_array_equal(np.asarray(m + 1), np.arange(4) + 1)


def test_mirax_device_env(knobs, monkeypatch):
    knobs(device="cuda")
    assert mx.default_device().platform == "cuda"
    x = mx.asarray(np.ones(3, np.float32), device=mx.default_device())
    assert x.device.platform == "cuda"


def test_complex_and_fft_on_cuda():
    """Complex elementwise chains (no CUDA C type: run op by op), cuFFT through cupy.fft,
    and a gradient through both, on device, against the CPU backend."""
    rng = np.random.default_rng(0)
    z = (rng.normal(size=(64, 96)) + 1j * rng.normal(size=(64, 96))).astype(np.complex64)
    r = rng.normal(size=(64, 96)).astype(np.float32)

    def f(a, b):
        y = mnp.fft.fft2(a * mnp.exp(0.1j * b)) + mnp.fft.rfft(b, n=190, axis=-1)[:, :96]
        return mnp.sum(mnp.abs(mnp.fft.ifft(y, axis=0)) ** 2) + mnp.real(mnp.vdot(a, y))

    want_v = f(mnp.asarray(z), mnp.asarray(r))
    want_g = mx.grad(f, argnums=(0, 1))(mnp.asarray(z), mnp.asarray(r))
    for fn in (f, mx.jit(f)):
        got_v = fn(_cuda(z), _cuda(r))
        _on_cuda(got_v)
        _close(got_v, want_v, rtol=1e-4, atol=1e-2)
    g = mx.jit(mx.grad(f, argnums=(0, 1)))(_cuda(z), _cuda(r))
    _on_cuda(g)
    for a, b in zip(g, want_g):
        scale = float(np.abs(np.asarray(b)).max())
        _close(a, b, rtol=1e-4, atol=1e-5 * scale)
    irf = mnp.fft.irfftn(_cuda(z[:, :49]), s=(64, 96))
    _on_cuda(irf)
    _close(irf, np.fft.irfftn(z[:, :49], s=(64, 96)), rtol=1e-4, atol=1e-6)
    assert not [k for k in BE.failures if k[0] in ("fft", "complex", "real", "imag", "conj")]
