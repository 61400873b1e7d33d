"""CPU kernels (backends/cpu/kernels.py) against the reference impls, and the rewrites that
feed them: transpose(dot) -> swapped dot, commutative cse, mul+reduce_sum as einsum, float
div as a raw ufunc."""
import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax.backends.cpu import attention, conv, gathers, kernels, loops, norms
from mirax.compiler import optimize
from mirax.core.avals import ShapedArray
from mirax.graph.graph import Node, Var
from mirax.ops.dot import dot_general_p
from mirax.core.primitive import registry

RNG = np.random.default_rng(0)


def _node(prim, ins, out_aval, **params):
    return Node(prim, [Var(ShapedArray(a.shape, a.dtype)) for a in ins], params,
                [Var(out_aval)], None)


@pytest.mark.parametrize("ls, rs, dims", [
    ((5, 3), (3, 4), (((1,), (0,)), ((), ()))),
    ((3, 5), (3, 4), (((0,), (0,)), ((), ()))),
    ((5, 3), (4, 3), (((1,), (1,)), ((), ()))),
    ((2, 6, 3), (3, 4), (((2,), (0,)), ((), ()))),
    ((2, 6, 3), (2, 6, 4), (((0, 1), (0, 1)), ((), ()))),
    ((2, 5, 3), (2, 3, 4), (((2,), (1,)), ((0,), (0,)))),
    ((2, 3, 5), (4, 2, 3), (((1,), (2,)), ((0,), (1,)))),
    ((5, 1), (1, 4), (((1,), (0,)), ((), ()))),              # outer products (einsum)
    ((5,), (4,), (((), ()), ((), ()))),
    ((3, 1, 5), (3, 1, 4), (((1,), (1,)), ((0,), (0,)))),    # per-example weight grads
    ((3, 5, 1), (4, 1, 3), (((2,), (1,)), ((0,), (2,)))),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_dot_general_specialized_matches_reference(ls, rs, dims, dtype):
    x = RNG.normal(size=ls).astype(dtype)
    y = RNG.normal(size=rs).astype(dtype)
    ref = dot_general_p.impl(x, y, dimension_numbers=dims, preferred_element_type=None)
    node = _node(dot_general_p, [x, y], ShapedArray(ref.shape, ref.dtype),
                 dimension_numbers=dims, preferred_element_type=None)
    fn = kernels.specialize(node)
    if dtype is np.int32:
        assert fn is None  # outside the fast case: the reference runs
        return
    out = fn(x, y)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("shape", [(50, 7), (50, 3, 4), (50,)])
def test_index_add_kernel_is_bitwise_the_reference(shape, monkeypatch):
    monkeypatch.setattr(kernels, "ROWS_BLOCK", 24)  # several blocks, rows split unevenly
    x = RNG.normal(size=shape).astype(np.float32)
    idx = RNG.integers(0, 9, shape[0]).astype(np.int32)  # many repeats
    out = kernels.NATIVE["index_add"](x, idx, num_rows=11)
    np.testing.assert_array_equal(out, registry["index_add"].impl(x, idx, num_rows=11))
    assert out.shape == (11,) + shape[1:] and out.dtype == np.float32
    # rows with an index out of range are dropped (jax.ops.segment_sum), as the reference
    np.testing.assert_array_equal(kernels.NATIVE["index_add"](x, idx, num_rows=5),
                                  registry["index_add"].impl(x, idx, num_rows=5))
    keep = idx < 5
    np.testing.assert_array_equal(kernels.NATIVE["index_add"](x, idx, num_rows=5),
                                  registry["index_add"].impl(x[keep], idx[keep], num_rows=5))


def test_index_add_through_jit_uses_the_kernel():
    x = RNG.normal(size=(300, 8)).astype(np.float32)
    idx = RNG.integers(0, 40, 300).astype(np.int32)
    out = mx.jit(lambda x, i: mx.nn.index_add(x, i, 40))(mx.asarray(x), mx.asarray(idx))
    np.testing.assert_array_equal(np.asarray(out), registry["index_add"].impl(x, idx, num_rows=40))


@pytest.mark.parametrize("native", [False, True], ids=["pool", "native"])
@pytest.mark.parametrize("dtype, itype", [(np.float32, np.int32), (np.float64, np.int64),
                                          (np.int64, np.int32)])
def test_index_rows_kernels(dtype, itype, native, knobs, monkeypatch):
    """index_select and index_add as compiled rows (gathers.py) are the reference's values
    bit for bit (index_add: the same additions in index order), indices outside the rows
    included (index_select reads zeros, index_add drops them), at every thread count and
    on either engine."""
    pytest.importorskip("numba")
    knobs(cpu_native_threads=native)
    monkeypatch.setattr(loops, "CHEAP_BYTES", 4096)   # several parts on either engine
    monkeypatch.setattr(loops, "NATIVE_CHEAP_BYTES", 4096)
    seen = []
    real = loops.run_parts
    monkeypatch.setattr(loops, "run_parts", lambda src, args, starts, *a, **k:
                        seen.append((src, len(starts))) or real(src, args, starts, *a, **k))
    x = (RNG.normal(size=(600, 3, 5)) * 100).astype(dtype)
    idx = RNG.integers(-3, 603, 2000).astype(itype)   # repeats, a few outside the rows
    for threads in (1, 2, 3):
        with mx.config.override(cpu_threads=threads):
            got_sel = kernels.NATIVE["index_select"](x, idx)
            got_add = kernels.NATIVE["index_add"](x[idx % 600], idx, num_rows=600)
        np.testing.assert_array_equal(got_sel, registry["index_select"].impl(x, idx))
        np.testing.assert_array_equal(got_add, registry["index_add"].impl(x[idx % 600], idx,
                                                                          num_rows=600))
        assert got_sel.dtype == got_add.dtype == dtype
    for src in (gathers.INDEX_SELECT_ROWS, gathers.INDEX_ADD_ROWS):
        assert any(s == src and n == 3 for s, n in seen)   # three parts at three threads
    # through jit, and with nothing to gather
    f = mx.jit(lambda x, i: mx.nn.index_add(mx.nn.index_select(x, i), i, 600))
    np.testing.assert_array_equal(np.asarray(f(x, idx)), registry["index_add"].impl(
        registry["index_select"].impl(x, idx), idx, num_rows=600))
    assert kernels.NATIVE["index_select"](x, idx[:0]).shape == (0, 3, 5)


@pytest.mark.parametrize("mode", ["drop", "clip"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_scatter_add_into_rows_is_the_reference(mode, dtype, knobs, monkeypatch):
    """scatter_add into the leading axis, one index a row (an embedding's gradient), runs
    as index_add's compiled rows onto a copy of x (gathers.scatter_add_rows): the
    reference's `np.add.at` bit for bit (x's row first, then the updates in index order),
    indices outside dropped or clipped by the mode, at 1 and 3 threads; other scatters
    keep the reference."""
    pytest.importorskip("numba")
    monkeypatch.setattr(loops, "NATIVE_CHEAP_BYTES", 4096)   # several parts
    monkeypatch.setattr(loops, "CHEAP_BYTES", 4096)
    x = (RNG.normal(size=(40, 3, 6)) * 100).astype(dtype)
    idx = RNG.integers(-4, 44, (25, 9, 1)).astype(np.int32)
    upd = (RNG.normal(size=(25, 9, 3, 6)) * 100).astype(dtype)
    want = registry["scatter_add"].impl(x, idx, upd, axes=(0,), mode=mode)
    for threads in (1, 3):
        knobs(cpu_threads=threads)
        got = kernels.NATIVE["scatter_add"](x, idx, upd, axes=(0,), mode=mode)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == dtype and got is not x
    assert gathers.scatter_add_rows(x, idx, upd, (0,), mode) is not None
    assert gathers.scatter_add_rows(x[:, 0, 0], idx, upd[:, :, 0, 0], (0,), mode) is None
    cols = RNG.integers(0, 3, (40, 1)).astype(np.int32)   # along axis 1: the reference's
    assert gathers.scatter_add_rows(x, cols, x[:, 0], (1,), mode) is None
    tok = RNG.integers(0, 40, (7, 5)).astype(np.int32)   # through jit: a gather's gradient
    g = mx.jit(mx.grad(lambda e: mnp.sum(e[tok] ** 2)))(mx.asarray(x.astype(np.float32)))
    want_g = np.zeros((40, 3, 6), np.float32)
    np.add.at(want_g, tok, 2 * x.astype(np.float32)[tok])
    np.testing.assert_array_equal(np.asarray(g), want_g)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_index_add_of_rows_scaled_by_a_column(dtype):
    """index_add(x * w[:, None]) with the product used nowhere else runs as one loop that
    scales each row as it adds it (lower.py's pairs, kernels.mul_index_add): bitwise the
    multiply and the index_add, either order of the factors, 3-d rows, indices outside the
    rows dropped; with the product used again the two ops stay apart."""
    pytest.importorskip("numba")
    from mirax.backends.cpu.lower import _mul_pairs
    from mirax.core import runtime
    be = runtime.backend("cpu")
    x = (RNG.normal(size=(900, 4, 8)) * 10).astype(dtype)
    w = RNG.normal(size=(900, 1, 1)).astype(dtype)
    idx = RNG.integers(-2, 302, 900).astype(np.int32)

    def want(x, w):
        return registry["index_add"].impl(x * w, idx, num_rows=300)
    for f, pairs in ((lambda x, w: mx.nn.index_add(x * w, idx, 300), 1),
                     (lambda x, w: mx.nn.index_add(w * x, idx, 300), 1),
                     (lambda x, w: (mx.nn.index_add(x * w, idx, 300), x * w), 0)):
        g = optimize(mx.make_graph(f)(x, w), be)
        labels = [p[3] for p in _mul_pairs(g, g.cache["memory_plan"].reuse).values()]
        assert labels.count("mul+index_add") == pairs, labels
        got = mx.jit(f)(x, w)
        np.testing.assert_array_equal(np.asarray(got[0] if pairs == 0 else got), want(x, w))


def test_a_product_computed_at_its_consumer_keeps_its_factors():
    """A product that its consumer computes (index_add's scaled rows, reduce_sum's einsum)
    is not, where a node between them writes into a factor's buffer (the factor's last
    reader before the pairing): the values as the ops one by one."""
    import types
    from mirax.core import runtime
    be = runtime.backend("cpu")
    unfused = types.SimpleNamespace(fuses=False, writes_into=be.writes_into)
    a = RNG.normal(size=(500, 8)).astype(np.float32)
    w = RNG.normal(size=(500, 1)).astype(np.float32)
    idx = RNG.integers(0, 50, 500).astype(np.int32)

    def f(a, w):
        x = mnp.exp(a)   # a buffer of the plan's own
        p, q = x * w, x * a
        y = x + 1.0      # x's last reader: may write into x's buffer
        return mx.nn.index_add(p, idx, 50), mnp.sum(q, axis=1), y
    g = optimize(mx.make_graph(f)(a, w), unfused)
    got = be.compile(g)(a, w)
    x = np.exp(a)
    np.testing.assert_allclose(got[0], registry["index_add"].impl(x * w, idx, num_rows=50),
                               rtol=1e-6)
    np.testing.assert_allclose(got[1], np.sum(x * a, axis=1), rtol=1e-5)
    np.testing.assert_array_equal(got[2], x + np.float32(1.0))


@pytest.mark.parametrize("shape", [(3, 70001), (5,), ()])
def test_gelu_kernels_match_reference(shape):
    x = (3 * RNG.normal(size=shape)).astype(np.float32)
    ct = RNG.normal(size=shape).astype(np.float32)
    np.testing.assert_allclose(kernels.NATIVE["gelu"](x, approximate=True),
                               registry["gelu"].impl(x, approximate=True), rtol=2e-6, atol=2e-6)
    got = kernels.NATIVE["gelu_bwd"](ct, None, x, wrt=(0,), nout=1, approximate=True)
    ref = registry["gelu_bwd"].impl(ct, None, x, wrt=(0,), nout=1, approximate=True)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-5)
    erf = kernels.NATIVE["gelu"](x, approximate=False)  # the erf form: the reference
    np.testing.assert_array_equal(erf, registry["gelu"].impl(x, approximate=False))


@pytest.mark.parametrize("shape", [(3, 70001), (5,), ()])
def test_silu_and_softplus_kernels_match_reference(shape):
    """The compiled loops of silu, its backward, softplus and its backward (vecmath's
    logistic, exp and log1p) against the NumPy reference impls: a few float32 ulp apart;
    the 0-d case and float64 take the reference itself. softplus also at the edges: -0,
    infinities, NaN, where e^-|x| underflows and where it is below x's last place."""
    for dtype in (np.float32, np.float64):
        x = (3 * RNG.normal(size=shape)).astype(dtype)
        ct = RNG.normal(size=shape).astype(dtype)
        exact = dtype == np.float64 or not shape
        check = np.testing.assert_array_equal if exact else (
            lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6))
        check(kernels.NATIVE["silu"](x), registry["silu"].impl(x))
        check(kernels.NATIVE["softplus"](x), registry["softplus"].impl(x))
        for name in ("silu_bwd", "softplus_bwd"):
            got = kernels.NATIVE[name](ct, None, x, wrt=(0,), nout=1)
            check(got[0], registry[name].impl(ct, None, x, wrt=(0,), nout=1)[0])


def test_softplus_loop_at_the_edges():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 20.0, -20.0, 88.0,
                  -88.0, 120.0, -120.0, 3e38, -3e38] * 300, np.float32)
    got = kernels.NATIVE["softplus"](x)
    with np.errstate(over="ignore"):
        want = np.log1p(np.exp(x.astype(np.float64))).astype(np.float32)
    want[x > 80] = x[x > 80]   # (e^x overflows float64 past 709: softplus(x) = x there)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=3e-7, atol=1e-45)


def test_transposed_dot_becomes_swapped_dot():
    def f(a, b):
        return mnp.transpose(a @ b) * 2.0
    a, b = RNG.normal(size=(6, 4)).astype(np.float32), RNG.normal(size=(4, 5)).astype(
        np.float32)
    g = optimize(mx.make_graph(f)(a, b))
    assert [n.prim.name for n in g.nodes] == ["dot_general", "mul"]
    assert g.nodes[0].inputs == [g.inputs[1], g.inputs[0]]
    np.testing.assert_allclose(np.asarray(mx.jit(f)(a, b)), (a @ b).T * 2, rtol=1e-6)

    def both(a, b):  # the dot is used twice: left alone
        d = a @ b
        return mnp.transpose(d), d
    g = optimize(mx.make_graph(both)(a, b))
    assert [n.prim.name for n in g.nodes] == ["dot_general", "transpose"]


def test_cse_merges_commutative_operands():
    g = optimize(mx.make_graph(lambda a, b: a * b + b * a - (a + b) * (b + a))(
        np.ones(3, np.float32), np.ones(3, np.float32)))
    names = [n.prim.name for n in g.nodes]
    assert names.count("mul") == 2 and names.count("add") == 2


def test_mul_reduce_sum_runs_as_einsum(knobs, monkeypatch, capsys):
    from mirax.compiler import pipeline
    knobs(debug=3, numba=False)   # (with numba, exp, the product and its sums are one loop)
    monkeypatch.setattr(pipeline, "_register_report", lambda: None)
    a = RNG.normal(size=(200, 64)).astype(np.float32)   # big enough to be freed early
    b = RNG.normal(size=(200, 64)).astype(np.float32)

    def f(a, b):
        c = mnp.exp(a)
        return mnp.sum(c * b, axis=-1), mnp.sum(a * b, axis=0), mnp.sum(c) * 2.0
    out = mx.jit(f)(a, b)
    src = capsys.readouterr().err
    assert src.count("(einsum)") == 1   # the axis-0 sum is not a trailing reduction
    np.testing.assert_allclose(np.asarray(out[0]), np.sum(np.exp(a) * b, -1), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(np.asarray(out[1]), np.sum(a * b, 0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(float(out[2]), 2 * np.exp(a).sum(), rtol=1e-5)

    def shared(a, b):  # the product is also returned: no fusion
        p = a * b
        return mnp.sum(p, axis=-1), p
    out = mx.jit(shared)(a, b)
    assert "(einsum)" not in capsys.readouterr().err
    np.testing.assert_allclose(np.asarray(out[1]), a * b)


def test_float_div_is_a_raw_ufunc_int_div_truncates(knobs, monkeypatch, capsys):
    """The unfused plan's code (numba off: small groups would run on the tape,
    tests/compiler/test_tape.py)."""
    from mirax.compiler import pipeline
    knobs(debug=3, numba=False)
    monkeypatch.setattr(pipeline, "_register_report", lambda: None)
    x = np.array([1.0, -2.0, 0.0, 3.0], np.float32)
    y = np.array([0.0, 4.0, 0.0, -2.0], np.float32)
    with np.errstate(all="raise"):
        out = mx.jit(lambda x, y: mnp.exp(x / y) / (y + 1.0))(x, y)
    assert "_divide(" in capsys.readouterr().err
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(np.asarray(out), np.exp(x / y) / (y + 1), rtol=1e-6)
    i = mx.jit(lambda a, b: a // b + a / b)
    ia, ib = np.array([-7, 7], np.int32), np.array([2, -2], np.int32)
    np.testing.assert_allclose(np.asarray(i(ia, ib)), np.array([-4 - 3.5, -4 - 3.5]))


_CONVS = [  # (lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation)
    ((14, 16, 12, 11), (8, 16, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1)),
    ((3, 5, 9, 9), (4, 5, 2, 3), (2, 3), ((2, 0), (-1, 1)), (1, 1), (2, 1)),
    ((2, 3, 7, 6), (5, 3, 3, 2), (1, 2), ((1, 2), (2, 0)), (1, 2), (1, 1)),
    ((2, 4, 5, 8), (3, 4, 5, 5), (1, 1), ((2, 2), (2, 2)), (2, 1), (1, 2)),
    # kernels bigger than the output: a weight gradient's orientation
    ((6, 7, 10, 9), (5, 7, 9, 7), (1, 1), ((1, 1), (0, 1)), (1, 1), (1, 1)),
    ((6, 7, 10, 9), (5, 7, 5, 4), (1, 1), ((0, 1), (1, 0)), (1, 1), (2, 2)),
    ((4, 3, 11, 11), (2, 3, 4, 4), (2, 2), ((0, 0), (0, 0)), (1, 2), (2, 2)),
]


@pytest.mark.parametrize("engine", ["gemm in the loop", "pool"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", range(len(_CONVS)))
def test_conv_kernel_matches_the_reference_at_every_thread_count(knobs, monkeypatch, dtype,
                                                                 case, engine):
    """The CPU's convolution kernel (im2col in blocks by a compiled loop, a product per
    block; small blocks here, so that there are several) against the reference impl, in
    both orientations, with strides, dilations and negative padding: within the
    products' rounding (the columns' order differs), and the same values at 1, 2 and 3
    threads. Either engine: the compiled loop calling the BLAS library's gemm itself,
    or (a BLAS without CBLAS symbols we find) NumPy's product of each block on the pool."""
    if not loops.available():
        pytest.skip("numba not installed")
    if engine == "pool":
        monkeypatch.setattr(loops, "gemm_source", lambda dtype: None)
    elif loops.gemm_source(dtype) is None:
        pytest.skip("NumPy's BLAS has no CBLAS gemm symbol mirax finds")
    lshape, rshape, strides, padding, ld, rd = _CONVS[case]
    monkeypatch.setattr(conv, "CONV_BLOCK", 7 * rshape[1] * 8)
    monkeypatch.setattr(conv, "CONV_PARTIALS", 8 * 4096)   # clamps the weight gradients
    monkeypatch.setattr(conv, "CONV_DEPTH", 16)
    rng = np.random.default_rng(case)
    lhs, rhs = rng.standard_normal(lshape).astype(dtype), rng.standard_normal(rshape).astype(dtype)
    params = dict(window_strides=strides, padding=padding, lhs_dilation=ld, rhs_dilation=rd,
                  feature_group_count=1)
    impl = registry["conv_general_dilated"].impl
    want = impl(lhs, rhs, **params)

    def f(a, b):
        return mx.lax.conv_general_dilated(a, b, strides, padding, ld, rd)
    got = {}
    for threads in (1, 2, 3):
        knobs(cpu_threads=threads)
        g = mx.jit(f)
        got[threads] = np.asarray(g(lhs, rhs))
        for _ in range(8):   # every call (a block's columns were once freed before the
            #                  product read them: garbage rows now and then)
            np.testing.assert_array_equal(np.asarray(g(lhs, rhs)), got[threads])
    assert got[1].shape == want.shape
    k = rshape[1] * rshape[2] * rshape[3]
    eps = np.finfo(dtype).eps
    bound = k * eps * impl(np.abs(lhs), np.abs(rhs), **params)   # sums of k products
    assert np.all(np.abs(got[1] - want) <= bound)
    np.testing.assert_array_equal(got[2], got[1])
    np.testing.assert_array_equal(got[3], got[1])


@pytest.mark.parametrize("causal,window,t,s", [(False, None, 33, 33), (True, None, 33, 33),
                                               (False, (0, 0), 40, 25), (True, (6, 0), 17, 30),
                                               (False, (3, 5), 30, 40)])
@pytest.mark.parametrize("rows", [8, attention.ATTN_ROWS])
def test_attention_kernel_matches_reference(knobs, monkeypatch, causal, window, t, s, rows):
    """float32 attention without mask or bias, compiled (each (batch, head) pair's products
    by the BLAS library's gemm, its softmax rows in one pass each, the pairs on native
    threads; under a causal or window mask the queries in blocks of `rows`, each over the
    keys it may attend): outputs, logsumexp (+inf where a window leaves a query no key)
    and the gradients of both (all three, or a subset) against the NumPy reference impls,
    within float32 rounding of these O(1) values, and the same bits at 1, 2 and 3
    threads."""
    if attention.native_source((), False, False) is None:
        pytest.skip("numba or a CBLAS gemm missing")
    monkeypatch.setattr(attention, "ATTN_PART", 1)   # a thread a pair
    monkeypatch.setattr(attention, "ATTN_ROWS", rows)
    q = RNG.normal(size=(2, t, 3, 16)).astype(np.float32)
    k = RNG.normal(size=(2, s, 3, 16)).astype(np.float32)
    v = RNG.normal(size=(2, s, 3, 8)).astype(np.float32)
    kw = dict(scale=0.25, is_causal=causal, window=window, has_mask=False, has_bias=False)
    ro, rl = registry["dot_product_attention"].impl(q, k, v, **kw)
    ct = RNG.normal(size=ro.shape).astype(np.float32)
    ct_lse = np.where(np.isinf(rl), 0, RNG.normal(size=rl.shape)).astype(np.float32)
    args = (ct, ct_lse, ro, rl, q, k, v)
    want = registry["dot_product_attention_bwd"].impl(*args, wrt=(0, 1, 2), nout=2, **kw)
    runs = []
    for threads in (1, 2, 3):
        knobs(cpu_threads=threads)
        o, lse = kernels.NATIVE["dot_product_attention"](q, k, v, **kw)
        grads = kernels.NATIVE["dot_product_attention_bwd"](*args, wrt=(0, 1, 2), nout=2,
                                                            **kw)
        runs.append([o, lse, *grads])
    np.testing.assert_allclose(runs[0][0], ro, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(runs[0][1], rl, rtol=1e-5, atol=1e-6)   # inf == inf included
    if window == (0, 0):
        assert np.all(np.isinf(runs[0][1][:, :, s:])) and np.all(runs[0][0][:, s:] == 0)
    for g, w in zip(runs[0][2:], want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    for run in runs[1:]:
        for a, b in zip(run, runs[0]):
            np.testing.assert_array_equal(a, b)
    only_v = kernels.NATIVE["dot_product_attention_bwd"](*args, wrt=(2,), nout=2, **kw)
    assert len(only_v) == 1
    np.testing.assert_array_equal(only_v[0], runs[0][4])


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", [(3, 70001), (40, 7), (5,), (4, 0)])
def test_softmax_rows_kernel_matches_reference(shape, name, knobs):
    """float32 softmax and log_softmax and their backwards over the last axis on the
    compiled rows against the NumPy reference, within float32 rounding (vecmath's exp, a
    float64 row sum against float32's pairwise one over up to 70001 terms: a few ulp of
    the values, for log_softmax of the row's logsumexp, up to about 25 here), the same
    bits at 1 and 3 threads, non-finite rows as the reference's (a row of -inf is NaN, a
    +inf entry NaN with zeros, or -inf, beside it)."""
    if not loops.available():
        pytest.skip("numba not installed")
    x = (3 * RNG.normal(size=shape)).astype(np.float32)
    if len(shape) == 2 and shape == (40, 7):
        x[3] = -np.inf
        x[5, 2] = np.inf
    ref = registry[name].impl(x, axes=(-1,))
    runs = []
    for t in (1, 3):
        knobs(cpu_threads=t)
        runs.append(kernels.NATIVE[name](x, axes=(-1,)))
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(np.isnan(runs[0]), np.isnan(ref))
    np.testing.assert_allclose(runs[0], ref, rtol=4e-6, atol=1e-5 if name == "log_softmax"
                               else 0)
    ct = RNG.normal(size=shape).astype(np.float32)
    ok = np.isfinite(ref).all(axis=-1)
    y, c = ref[ok], ct[ok]
    got = kernels.NATIVE[name + "_bwd"](c, y, x[ok], wrt=(0,), nout=1, axes=(-1,))
    want = registry[name + "_bwd"].impl(c, y, x[ok], wrt=(0,), nout=1, axes=(-1,))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)


def _layer_norm64(x, w, b, ct):
    """layer_norm and its gradients in float64 (the reference for the compiled rows)."""
    x, ct = x.astype(np.float64), ct.astype(np.float64)
    m = x.mean(-1, keepdims=True)
    inv = 1 / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5)
    xh = (x - m) * inv
    g = ct * w if w is not None else ct
    dx = inv * (g - g.mean(-1, keepdims=True) - xh * (g * xh).mean(-1, keepdims=True))
    y = xh * w if w is not None else xh
    rows = tuple(range(x.ndim - 1))
    return [y + b if b is not None else y, dx, (ct * xh).sum(rows), ct.sum(rows)]


@pytest.mark.parametrize("native", [False, True], ids=["pool", "native"])
@pytest.mark.parametrize("shape, affine, offset", [
    ((6, 70, 256), (True, True), 0.0), ((300, 37), (True, False), 0.0),
    ((64, 130), (False, False), 1e3),    # rows far from 0: the variance from (x - mean)^2
])
def test_layer_norm_rows_kernel(shape, affine, offset, native, knobs, monkeypatch):
    pytest.importorskip("numba")
    knobs(cpu_native_threads=native)
    seen = []
    real = loops.run_parts
    monkeypatch.setattr(loops, "run_parts", lambda src, *a, **k: seen.append(src) or
                        real(src, *a, **k))
    x = (RNG.normal(size=shape) + offset).astype(np.float32)
    ct = RNG.normal(size=shape).astype(np.float32)
    d = shape[-1]
    w = RNG.normal(size=d).astype(np.float32) if affine[0] else None
    b = RNG.normal(size=d).astype(np.float32) if affine[1] else None
    params = [a for a in (w, b) if a is not None]

    def f(x, *wb):
        it = iter(wb)
        return mx.nn.layer_norm(x, next(it) if affine[0] else None,
                                next(it) if affine[1] else None)

    @mx.jit
    def fwd_bwd(x, ct, *params):
        y, vjp = mx.vjp(f, x, *params)
        return [y, *vjp(ct)]

    def run(threads):
        with mx.config.override(cpu_threads=threads):
            return [np.asarray(a) for a in fwd_bwd(x, ct, *params)]
    got = run(1)
    assert norms.LAYER_NORM_ROWS in seen and norms.LAYER_NORM_ROWS_BWD in seen
    for n in (2, 3):   # bitwise the same at every thread count
        for a, c in zip(got, run(n)):
            np.testing.assert_array_equal(a, c)
    want = _layer_norm64(x, w, b, ct)
    want = want[:2] + [g for g, on in zip(want[2:], affine) if on]
    # float32 rounding of x (and of the row's mean) relative to the row's spread
    eps, std = np.finfo(np.float32).eps, x.astype(np.float64).std(-1)
    cond = np.abs(x).max() / std.min()
    wmax = np.abs(w).max() if w is not None else 1.0
    bmax = np.abs(b).max() if b is not None else 0.0
    cmax, rows = np.abs(ct).max(), np.prod(shape[:-1])
    units = [wmax + bmax, cmax * wmax / std.min(), cmax * np.sqrt(rows), cmax * np.sqrt(rows)]
    units = units[:2] + [u for u, on in zip(units[2:], affine) if on]
    for k, (a, r, unit) in enumerate(zip(got, want, units)):
        assert np.abs(a - r).max() <= 16 * eps * cond * unit, (k, np.abs(a - r).max())
