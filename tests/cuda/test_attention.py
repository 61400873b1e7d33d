"""The fused CUDA attention kernels (mirax/backends/cuda/attention.py) against the NumPy
composite on the CPU: forward values and the gradients of q, k, v and bias, for every
option (causal, sliding window, boolean mask, additive bias, scale, cross attention,
head dims that need padding) in float32, float16 and bfloat16; fully masked rows; jit
and eager; the fallback for what the kernels do not cover. The default rule runs f16/bf16
on the tensor-core kernels and float32 on the CUDA-core ones (tests/cuda/conftest.py sets
precision "highest"); float32 at precision "default" runs on the tensor-core kernels with
TF32 operands (each case once more); every case also runs forced
through the other paths (cuBLAS + row kernels, CUDA cores for f16/bf16), and shapes that
span several tensor-core tiles (odd lengths, head dims 16 to 128) run on all paths.

Skipped cleanly without CuPy or without a GPU.
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest

cp = pytest.importorskip("cupy")
if not cp.cuda.is_available():  # getDeviceCount() > 0; False where it raises (no driver)
    pytest.skip("no CUDA device", allow_module_level=True)

import mirax as mx  # noqa: E402
from mirax.core import runtime  # noqa: E402
from mirax.backends.cuda import attention  # noqa: E402
from mirax.core import dtypes  # noqa: E402

pytestmark = pytest.mark.gpu
BE = runtime.get_device("cuda").backend
NAMES = ("dot_product_attention", "dot_product_attention_bwd")
TOL = {"float32": 2e-5, "float16": 2e-2, "bfloat16": 3e-2}
# TF32 operands keep 10 mantissa bits, as float16: float16's tolerance (the outputs, float32,
# are not rounded again)
TOL_TF32 = TOL["float16"]


def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _attn_failures():
    return {k: v for k, v in BE.failures.items() if k[0] in NAMES}


def _case(name, B=2, T=37, S=None, H=3, D=16, Dv=None, mask=None, bias=None, causal=False,
          window=None, scale=None):
    return pytest.param(dict(B=B, T=T, S=S or T, H=H, D=D, Dv=Dv or D, mask=mask, bias=bias,
                             causal=causal, window=window, scale=scale), id=name)


CASES = [
    _case("plain"),
    _case("causal", causal=True),
    _case("window", window=(5, 3)),
    _case("causal_window", causal=True, window=4),
    _case("mask_full", mask="full"),
    _case("mask_bcast", mask="bcast"),
    _case("bias_full", bias="full"),
    _case("bias_bcast", bias="bcast"),
    _case("all", mask="bcast", bias="full", causal=True, window=(6, 2), scale=0.3),
    _case("cross", T=21, S=50),
    _case("cross_causal_mask", T=40, S=29, causal=True, mask="full"),
    _case("dv_differs", D=8, Dv=24),
    _case("pad_dims", D=6, Dv=5, causal=True),
    _case("tiles_d64", B=1, T=150, H=2, D=64, causal=True, bias="bcast"),
    _case("d128", B=1, T=70, H=1, D=128, Dv=96),
]


def _inputs(c, dtype):
    rng = _rng("attn", c["T"], c["S"], c["D"], c["Dv"], str(c["mask"]), str(c["bias"]))
    B, T, S, H = c["B"], c["T"], c["S"], c["H"]
    q = rng.standard_normal((B, T, H, c["D"])).astype(np.float32)
    k = rng.standard_normal((B, S, H, c["D"])).astype(np.float32)
    v = rng.standard_normal((B, S, H, c["Dv"])).astype(np.float32)
    kw = {"is_causal": c["causal"], "sliding_window": c["window"], "scale": c["scale"]}
    extra = {}
    if c["mask"] is not None:
        shape = (B, H, T, S) if c["mask"] == "full" else (B, 1, T, S)
        m = rng.random(shape) > 0.3
        m[0, 0, 1] = False  # a fully masked row: output 0, finite gradients
        extra["mask"] = m
    if c["bias"] is not None:
        shape = (B, H, T, S) if c["bias"] == "full" else (1, H, 1, S)
        extra["bias"] = rng.standard_normal(shape).astype(np.float32)
    cast = (lambda a: mx.asarray(a).astype(dtype))
    arrays = {"q": cast(q), "k": cast(k), "v": cast(v)}
    if "bias" in extra:
        arrays["bias"] = cast(extra["bias"])
    if "mask" in extra:
        kw["mask"] = extra["mask"]
    return arrays, kw


def _loss_fn(kw, w):
    def loss(arrays):
        kw2 = dict(kw)
        if "mask" in kw2:
            kw2["mask"] = mx.asarray(kw2["mask"])
        o = mx.nn.dot_product_attention(arrays["q"], arrays["k"], arrays["v"],
                                        bias=arrays.get("bias"), **kw2)
        return (o.astype("float32") * w).sum()
    return loss


def _to(tree, device):
    return mx.tree.map(lambda a: mx.device_put(a, device), tree)


def _f32(a):
    return np.asarray(mx.asarray(a).astype("float32"))


def _check(got, want, tol, what):
    """got within tol of want; returns the largest error relative to max(1, |want|)."""
    g, w = _f32(got), _f32(want)
    assert g.shape == w.shape, what
    assert np.all(np.isfinite(g)), f"{what}: non-finite values"
    scale = max(1.0, float(np.max(np.abs(w))))
    np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale, err_msg=what)
    return float(np.max(np.abs(g - w))) / scale


# shapes across several tensor-core tiles (blocks of 64 rows or keys, streamed tiles of 64
# or 32 through two shared-memory stages): odd lengths, partial tiles on the causal
# diagonal, head dims 16 .. 128
TILE_CASES = [
    _case("tc_d64_causal_odd", B=1, T=193, H=2, D=64, causal=True),
    _case("tc_d128_cross", B=1, T=70, S=131, H=2, D=128),
    _case("tc_d32_window_mask", B=1, T=150, H=2, D=32, window=(40, 7), mask="bcast"),
    _case("tc_d80_bias_causal", B=1, T=129, H=1, D=80, Dv=48, causal=True, bias="full"),
    _case("tc_d16_cross_causal", B=2, T=100, S=67, H=1, D=16, causal=True),
    _case("tc_d96_scale", B=1, T=65, H=3, D=96, Dv=128, scale=0.05),
    _case("tc_d64_long_window", B=1, T=300, H=2, D=64, causal=True, window=(150, 0)),
    _case("tc_d128_long_cross", B=1, T=260, S=333, H=1, D=128, causal=True),
]
_FAST = {"all", "cross_causal_mask", "pad_dims", "bias_bcast", "window", "tc_d64_causal_odd",
         "tc_d128_cross"}  # the rest of the forced-path cases are marked slow


def _forced_params():
    """(case, path, dtype): float32 through cuBLAS, f16/bf16 through cuBLAS and CUDA cores."""
    out = []
    for c in CASES + TILE_CASES:
        marks = () if c.id in _FAST else (pytest.mark.slow,)
        for dtype, paths in (("float32", ["blas"]), ("bfloat16", ["blas", "simt"]),
                             ("float16", ["blas", "simt"])):
            out += [pytest.param(c.values[0], p, dtype, id=f"{c.id}-{p}-{dtype}", marks=marks)
                    for p in paths]
    return out


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("c", CASES + TILE_CASES)
def test_kernel_matches_composite(c, dtype):
    _compare(c, dtype)


@pytest.mark.parametrize("c,path,dtype", _forced_params())
def test_forced_path_matches_composite(c, path, dtype, monkeypatch):
    """The paths the rule does not pick for these small cases, the cuBLAS one in chunks of
    two heads."""
    monkeypatch.setattr(attention, "force_path", path)
    monkeypatch.setattr(attention, "BLAS_MAX_BYTES", 2 * 4 * c["T"] * c["S"])
    _compare(c, dtype)


@pytest.mark.parametrize("c", CASES + TILE_CASES)
def test_float32_default_precision_on_tf32_tensor_cores(c):
    """float32 at precision "default" (JAX's TF32 for float32 products) runs the
    tensor-core kernels: within TF32's tolerance of the exact composite, and measurably
    not exact (the forward's error above float32's 2e-5 level would not prove it: above
    1e-6 of the output's scale, where exact float32 kernels stay near 1e-7)."""
    err = _compare(c, "float32", precision="default")
    assert err > 1e-6, f"forward error {err:.2e}: TF32 not in use?"


def test_rule():
    f32, bf16 = np.dtype(np.float32), dtypes.bfloat16
    assert attention.path(bf16, 1024, 1024, False) == "tc"
    assert attention.path(np.float16, 37, 37, True) == "tc"
    assert attention.path(f32, 1024, 1024, False) == "simt"
    assert attention.path(f32, 1024, 1024, True) == "blas"
    assert attention.path(f32, 64, 64, True) == "simt"
    for backward in (False, True):
        assert attention.path(f32, 64, 64, backward, "default") == "tc"
        assert attention.path(f32, 64, 64, backward, "high") != "tc"


def _compare(c, dtype, precision=None):
    """Forward and gradients of case c on the GPU against the CPU composite (exact at
    every precision); returns the forward's error relative to its scale."""
    arrays, kw = _inputs(c, dtype)
    tol = TOL[dtype]
    if precision is not None:
        kw["precision"] = precision
        if precision == "default" and dtype == "float32":
            tol = TOL_TF32
    # the oracle: the NumPy composite on the CPU, in float32 on the same (rounded) values
    ref = {k: a.astype("float32") for k, a in arrays.items()}
    rng = _rng("w", c["T"], c["Dv"])
    w = rng.standard_normal((c["B"], c["T"], c["H"], c["Dv"])).astype(np.float32)
    loss = _loss_fn(kw, mx.asarray(w))
    kw_np = dict(kw)
    if "mask" in kw_np:
        kw_np["mask"] = mx.asarray(kw_np["mask"])

    def fwd(a):
        return mx.nn.dot_product_attention(a["q"], a["k"], a["v"], bias=a.get("bias"), **kw_np)
    want_o = fwd(ref)
    want_g = mx.grad(loss)(ref)
    dev = _to(arrays, "cuda")
    before = BE.report[("dot_product_attention", "decomposed")]
    got_o = fwd(dev)
    assert got_o.device.platform == "cuda" and got_o.dtype == arrays["q"].dtype
    err = _check(got_o, want_o, tol, "forward")
    wd = mx.device_put(w, "cuda")
    got_g = mx.grad(_loss_fn(kw, wd))(dev)
    for name in want_g:
        assert got_g[name].dtype == arrays[name].dtype, name
        _check(got_g[name], want_g[name], tol, f"d{name}")
    assert BE.report[("dot_product_attention", "decomposed")] == before, "fell back"
    assert not _attn_failures(), _attn_failures()
    return err


HOPPER = cp.cuda.Device().compute_capability == "90"
# the cases the Hopper kernels take (head dims multiples of 64), and one with a mask (a fully
# masked row), a window and cross lengths that end mid-tile
WG_CASES = [c for c in CASES + TILE_CASES
            if c.values[0]["D"] % 64 == 0 and c.values[0]["Dv"] % 64 == 0] + [
    _case("wg_mask_window_cross", B=1, T=130, S=97, H=2, D=64, mask="full", window=(30, 5))]


@pytest.mark.skipif(not HOPPER, reason="the wgmma kernels need an sm_90 GPU")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("c", WG_CASES)
def test_hopper_kernels_match_the_mma_sync_kernels(c, dtype, knobs, monkeypatch):
    """On an sm_90 device the f16/bf16 forward and backward with head dims that are multiples
    of 64 run the wgmma kernels (seen by a spy) and agree with the mma.sync kernels
    (cuda_attn_wgmma off): the same tiles, softmax and roundings (P and dS to the operand
    type before their products), float32 accumulation in another order. The output differs
    by at most rounding in its type (2 ulps of its scale); a gradient also by the few P or
    dS elements whose rounding the order flips (1 ulp of one term each): 4 ulps."""
    arrays, kw = _inputs(c, dtype)
    if "mask" in kw:
        kw["mask"] = mx.device_put(kw["mask"], "cuda")
    dev = _to(arrays, "cuda")
    w = _rng("w", c["T"], c["Dv"]).standard_normal((c["B"], c["T"], c["H"], c["Dv"]))
    loss = _loss_fn(kw, mx.device_put(w.astype(np.float32), "cuda"))
    calls = []
    wg = attention._wg
    monkeypatch.setattr(attention, "_wg", lambda call: calls.append(call) or wg(call))

    def run():
        o = mx.nn.dot_product_attention(dev["q"], dev["k"], dev["v"], bias=dev.get("bias"),
                                        **kw)
        return {"o": _f32(o), **{"d" + n: _f32(g) for n, g in mx.grad(loss)(dev).items()}}
    got = run()
    assert len(calls) >= 3, "the wgmma kernels did not run"  # forward, forward, backward
    knobs(cuda_attn_wgmma=False)
    n = len(calls)
    want = run()
    assert len(calls) == n
    ulp = float(np.finfo(np.float16).eps) if dtype == "float16" else 2.0 ** -7
    for name, x in want.items():
        scale = max(1.0, float(np.max(np.abs(x))))
        np.testing.assert_allclose(got[name], x, rtol=0, atol=(2 if name == "o" else 4) * ulp
                                   * scale, err_msg=name)
    assert not _attn_failures(), _attn_failures()


@pytest.mark.skipif(not HOPPER, reason="the wgmma kernels need an sm_90 GPU")
def test_hopper_forward_that_does_not_build_falls_back(knobs, monkeypatch, capsys):
    """Where NVRTC cannot build the sm_90a module, the forward says so once and runs the
    mma.sync kernel from then on (the same values as with the Hopper kernel off)."""
    def no_sm90a(src):
        raise RuntimeError("mx_attn (wg): no sm_90a here\nthe compiler's log")
    monkeypatch.setattr(attention, "_sm90a_module", no_sm90a)
    monkeypatch.setattr(attention, "_modules", {})
    monkeypatch.setattr(attention, "_launchers", {})
    monkeypatch.setattr(attention, "_hopper", {})
    arrays, kw = _inputs(WG_CASES[0].values[0], "bfloat16")
    dev = _to(arrays, "cuda")

    def f():
        return _f32(mx.nn.dot_product_attention(dev["q"], dev["k"], dev["v"],
                                                bias=dev.get("bias"), **kw))
    got = f()
    assert "did not build (mx_attn (wg): no sm_90a here)" in capsys.readouterr().err
    assert attention._hopper == {cp.cuda.Device().id: False}
    knobs(cuda_attn_wgmma=False)
    np.testing.assert_array_equal(got, f())
    assert not _attn_failures(), _attn_failures()


def test_fully_masked_rows_zero_and_finite():
    rng = _rng("masked")
    q, k, v = (rng.standard_normal((1, 8, 2, 16)).astype(np.float32) for _ in range(3))
    mask = np.ones((1, 2, 8, 8), bool)
    mask[:, :, 3] = False
    mask[:, 1] = False  # a whole head
    args = [mx.device_put(a, "cuda") for a in (q, k, v)]
    m = mx.device_put(mask, "cuda")

    def f(q, k, v):
        return mx.nn.dot_product_attention(q, k, v, mask=m)
    o = np.asarray(f(*args))
    assert np.all(o[:, 3] == 0) and np.all(o[:, :, 1] == 0)
    gs = mx.grad(lambda q, k, v: (f(q, k, v) ** 2).sum() + f(q, k, v).sum(),
                 argnums=(0, 1, 2))(*args)
    for g in gs:
        assert np.all(np.isfinite(np.asarray(g)))
    assert np.all(np.asarray(gs[0])[:, 3] == 0)
    assert not _attn_failures(), _attn_failures()


@pytest.mark.parametrize("path,dtype,precision", [
    ("tc", "bfloat16", "highest"), ("tc", "float32", "default"), ("simt", "float32", "highest"),
    ("blas", "float32", "highest"), ("simt", "float16", "highest")])
def test_logsumexp_output_and_its_cotangent(path, dtype, precision, monkeypatch):
    """The primitive's second output (each row's logsumexp, float32, +inf for a row that
    attends nothing) from every path's forward kernel against the CPU composite, and the
    gradients of a loss of both outputs (the lse cotangent enters the backward through
    delta) against it."""
    from mirax.ops.nn import dot_product_attention_p as attn
    monkeypatch.setattr(attention, "force_path", path)
    c = dict(B=2, T=70, S=70, H=2, D=32, Dv=32, mask="full", bias=None, causal=True,
             window=None, scale=None)
    arrays, kw = _inputs(c, dtype)
    mask = kw["mask"]
    empty = ~(mask & np.tril(np.ones((70, 70), bool))).any(-1)  # rows that attend nothing
    params = dict(scale=1 / np.sqrt(32), is_causal=True, window=None, has_mask=True,
                  has_bias=False, precision=precision)
    rng = _rng("lse", dtype)
    w_o = rng.standard_normal((2, 70, 2, 32)).astype(np.float32)
    w_l = rng.standard_normal((2, 2, 70)).astype(np.float32)
    w_l[empty] = 0.0  # (their lse is +inf) stay out of the loss

    def run(arrays, device):
        m, wo, wl = (mx.device_put(a, device) for a in (mask, w_o, w_l))

        def loss(a):
            o, lse = attn.bind(a["q"], a["k"], a["v"], m, **params)
            lse = mx.numpy.where(wl != 0, lse, 0.0)
            return (o.astype("float32") * wo).sum() + (lse * wl).sum()
        lse = attn.bind(arrays["q"], arrays["k"], arrays["v"], m, **params)[1]
        return lse, mx.grad(loss)(arrays)

    ref = {k: a.astype("float32") for k, a in arrays.items()}
    want_l, want_g = run(ref, "cpu")
    got_l, got_g = run(_to(arrays, "cuda"), "cuda")
    assert got_l.dtype == np.float32
    gl, wl = np.asarray(got_l), np.asarray(want_l)
    assert empty.any() and np.all(gl[empty] == np.inf)
    tol = TOL_TF32 if precision == "default" else TOL[dtype]
    np.testing.assert_allclose(gl[~empty], wl[~empty], rtol=tol, atol=tol)
    for name in want_g:
        _check(got_g[name], want_g[name], tol, f"d{name}")
    assert not _attn_failures(), _attn_failures()


def test_jit_grad_uses_the_kernels():
    rng = _rng("jit")
    q, k, v = (mx.device_put(rng.standard_normal((2, 64, 4, 32)).astype(np.float32), "cuda")
               for _ in range(3))

    def loss(q, k, v):
        return (mx.nn.dot_product_attention(q, k, v, is_causal=True) ** 2).sum()
    f = mx.jit(mx.value_and_grad(loss, argnums=(0, 1, 2)))
    before = dict(BE.report)
    val, gs = f(q, k, v)
    host = [mx.asarray(np.asarray(a)) for a in (q, k, v)]
    want_val, want_gs = mx.value_and_grad(loss, argnums=(0, 1, 2))(*host)
    np.testing.assert_allclose(float(val), float(want_val), rtol=1e-5)
    for g, w in zip(gs, want_gs):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-5)
    for name in NAMES:
        assert BE.report[(name, "native")] > before.get((name, "native"), 0), name
        assert BE.report[(name, "decomposed")] == before.get((name, "decomposed"), 0), name
    assert not _attn_failures(), _attn_failures()


def test_unsupported_falls_back_and_is_counted():
    rng = _rng("f64")
    q, k, v = (rng.standard_normal((1, 9, 2, 8)) for _ in range(3))  # float64
    dev = [mx.device_put(a, "cuda") for a in (q, k, v)]
    n0 = attention.fallbacks["dtype f64"]
    got = mx.nn.dot_product_attention(*dev, is_causal=True)
    want = mx.nn.dot_product_attention(*[mx.asarray(a) for a in (q, k, v)], is_causal=True)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-10, atol=1e-12)
    assert attention.fallbacks["dtype f64"] == n0 + 1
    assert BE.report[("dot_product_attention", "decomposed")] >= 1
    # head dims over 128 likewise
    big = [mx.device_put(rng.standard_normal((1, 5, 1, 160)).astype(np.float32), "cuda")
           for _ in range(3)]
    want = mx.nn.dot_product_attention(*[mx.asarray(np.asarray(a)) for a in big])
    np.testing.assert_allclose(np.asarray(mx.nn.dot_product_attention(*big)),
                               np.asarray(want), rtol=1e-5, atol=1e-5)
    assert attention.fallbacks["head dims 160, 160"] >= 1


def test_blas_path_is_captured_as_a_cuda_graph(knobs, monkeypatch):
    """The float32 cuBLAS path calls cuBLAS through library's ctypes handle, so a plan that
    runs it can be captured as a CUDA graph (CuPy's binding refused the capture)."""
    from mirax.backends.cuda import graphs
    knobs(cuda_graphs="1")
    monkeypatch.setattr(attention, "force_path", "blas")
    rng = _rng("graph")
    host = [rng.standard_normal((1, 40, 2, 16)).astype(np.float32) for _ in range(3)]

    def loss(q, k, v):
        return (mx.nn.dot_product_attention(q, k, v, is_causal=True) ** 2).sum()
    f = mx.jit(mx.value_and_grad(loss, argnums=(0, 1, 2)))
    captured = graphs.stats["captured"]
    for _ in range(4):  # warm-up, capture, replays
        val, gs = f(*[mx.device_put(a, "cuda") for a in host])
    assert graphs.stats["captured"] == captured + 1, graphs.failures
    want_val, want_gs = mx.value_and_grad(loss, argnums=(0, 1, 2))(*map(mx.asarray, host))
    np.testing.assert_allclose(float(val), float(want_val), rtol=1e-4)
    for g, w in zip(gs, want_gs):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-5)


def test_geometry():
    assert attention.geometry(64, 64) == 2
    assert attention.geometry(128, 128) == 4
    assert attention.geometry(6, 5) == 1       # padded to 8, 8
    assert attention.geometry(160, 160) is None
    assert attention.geometry(100, 100) is None  # 25 float4s per row: no even split


def test_merge_pass_fuses_the_adam_update():
    """The CUDA backend's merge pass (merge_elementwise): one kernel per parameter for an
    Adam step's update."""
    from mirax.compiler import optimize
    from mirax.ops.call import fusion_p

    def step(p, m, v, g, t):
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        return p - 1e-3 * (m / (1 - 0.9 ** t)) / (mx.numpy.sqrt(v / (1 - 0.999 ** t)) + 1e-8), \
            m, v
    rng = _rng("adam")
    args = [rng.standard_normal((64, 32)).astype(np.float32) for _ in range(4)]
    args[2] = np.abs(args[2])
    args.append(np.float32(3))
    with mx.config.override(cuda_remat=False):   # the merge pass alone (the backend's
        merged = optimize(mx.make_graph(step)(*args), BE)   # passes run in optimize)
    big = [n for n in merged.nodes if n.prim is fusion_p and len(n.outputs) == 3]
    assert big, str(merged)
    want = step(*[mx.asarray(a) for a in args])
    got = mx.jit(step)(*[mx.device_put(a, "cuda") for a in args])
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_leading_axis_sums_as_gemv(dtype):
    """Bias gradients: reduce_sum over leading axes of a large array runs as a GEMV
    (library.column_sum), eagerly and as the tail of a fused chain under jit."""
    rng = _rng("gemv", dtype)
    x = rng.standard_normal((4, 200, 96)).astype(np.float32)
    g = rng.standard_normal((4, 200, 96)).astype(np.float32)
    hx, hg = mx.asarray(x).astype(dtype), mx.asarray(g).astype(dtype)
    dx, dg = mx.device_put(hx, "cuda"), mx.device_put(hg, "cuda")
    tol = 1e-4 if dtype == "float32" else 3e-2
    want = np.asarray(hx.astype("float32")).sum(axis=(0, 1))
    got = dx.sum(axis=(0, 1))
    assert got.dtype == hx.dtype
    np.testing.assert_allclose(_f32(got), want, rtol=tol, atol=tol * 20)

    def relu_bwd(x, g):  # the select result and its column sums: the MLP's bias gradient
        y = mx.numpy.where(x > 0, g, 0 * g)
        return y, y.sum(axis=(0, 1))
    y, s = mx.jit(relu_bwd)(dx, dg)
    wy = np.where(x > 0, np.asarray(hg.astype("float32")), 0)
    np.testing.assert_allclose(_f32(y), wy, rtol=tol, atol=tol)
    np.testing.assert_allclose(_f32(s), wy.sum(axis=(0, 1)), rtol=tol, atol=tol * 20)
    s_only = mx.jit(lambda x, g: relu_bwd(x, g)[1])(dx, dg)
    np.testing.assert_allclose(_f32(s_only), wy.sum(axis=(0, 1)), rtol=tol, atol=tol * 20)
