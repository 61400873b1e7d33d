"""conv_general_dilated, conv2d and the pools: values and gradients against JAX (and
PyTorch for pooling), derivatives against finite differences, vmap against loops, fused
pooling kernels against their bodies."""
import numpy as np
import pytest

import mirax as mx
from mirax.compiler.decompose import decompose
from mirax.testing import check_grads

nn = mx.nn
RNG = np.random.default_rng(1)


def rnd(*shape):
    return RNG.standard_normal(shape)


# (groups, strides, padding, lhs_dilation, rhs_dilation, kernel)
CONFIGS = [
    (1, (1, 1), ((1, 1), (0, 2)), (1, 1), (1, 1), (3, 2)),
    (2, (2, 3), ((1, 0), (2, 1)), (1, 1), (2, 1), (3, 2)),
    (3, (2, 2), ((0, 1), (1, 1)), (2, 1), (1, 2), (2, 3)),
    (1, (3, 2), ((0, 0), (0, 0)), (1, 1), (1, 1), (3, 3)),
    (6, (1, 1), ((-1, 1), (1, 0)), (1, 1), (1, 1), (2, 2)),
]


def conv_fn(cfg):
    g, st, pad, ld, rd, _ = cfg
    return lambda x, w: nn.conv_general_dilated(x, w, st, pad, ld, rd, feature_group_count=g)


def conv_args(cfg, n=2, c=6, h=7, w=6, o=6):
    g, *_, k = cfg
    return rnd(n, c, h, w), rnd(o, c // g, *k)


@pytest.mark.parametrize("cfg", [pytest.param(c, marks=() if i in (1, 2) else pytest.mark.slow)
                                 for i, c in enumerate(CONFIGS)],
                         ids=["plain", "grouped", "dilated", "valid", "depthwise_crop"])
def test_conv_against_jax(cfg):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    g, st, pad, ld, rd, _ = cfg
    x, w = conv_args(cfg)
    f = conv_fn(cfg)
    jf = lambda x, w: jax.lax.conv_general_dilated(x, w, st, pad, ld, rd,  # noqa: E731
                                                   feature_group_count=g)
    want = np.asarray(jf(x, w))
    np.testing.assert_allclose(np.asarray(f(x, w)), want, rtol=1e-10, atol=1e-12)
    ct = RNG.standard_normal(want.shape)
    for a, b in zip(mx.vjp(f, x, w)[1](ct), jax.vjp(jf, x, w)[1](ct)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("cfg", CONFIGS[:3], ids=["plain", "grouped", "dilated"])
def test_conv_second_order(cfg):
    g = max(cfg[0], 2)
    x, w = conv_args(cfg, n=1, c=g, h=4, w=4, o=g)
    check_grads(conv_fn(cfg), (x, w), order=2, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("which", ["lhs", "rhs", "both"])
@pytest.mark.parametrize("cfg", CONFIGS[:3], ids=["plain", "grouped", "dilated"])
def test_conv_vmap(cfg, which):
    x, w = conv_args(cfg, n=2, c=6, h=5, w=5)
    f = conv_fn(cfg)
    xs = np.stack([x, x * 0.3 + 1, -x])
    ws = np.stack([w, w * 2 - 1, -w])
    if which == "lhs":
        got, want = mx.vmap(f, in_axes=(0, None))(xs, w), [f(a, w) for a in xs]
    elif which == "rhs":
        got, want = mx.vmap(f, in_axes=(None, 0))(x, ws), [f(x, b) for b in ws]
    else:
        got = mx.vmap(f, in_axes=(1, 0))(np.moveaxis(xs, 0, 1), ws)
        want = [f(a, b) for a, b in zip(xs, ws)]
    np.testing.assert_allclose(np.asarray(got), np.stack([np.asarray(a) for a in want]),
                               rtol=1e-10, atol=1e-12)


def test_conv_layouts_and_string_padding():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    x, w = rnd(2, 7, 5, 3), rnd(3, 2, 3, 4)   # NHWC, HWIO
    dn = ("NHWC", "HWIO", "NHWC")
    for pad in ("SAME", "VALID"):
        got = nn.conv_general_dilated(x, w, (2, 1), pad, dimension_numbers=dn)
        want = jax.lax.conv_general_dilated(x, w, (2, 1), pad, dimension_numbers=dn)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-10)


def test_batch_group_count_against_jax():
    """batch_group_count (XLA's: batch groups against output-feature blocks), plain and in
    NHWC layouts: values and both gradients as JAX's; the count must divide N and O."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    x, w = rnd(6, 4, 7, 5), rnd(9, 4, 3, 2)  # N 6, O 9: 3 groups
    for dn, xx, ww in ((None, x, w), (("NHWC", "HWIO", "NHWC"), x.transpose(0, 2, 3, 1),
                                      w.transpose(2, 3, 1, 0))):
        def f(x, w, dn=dn):
            return nn.conv_general_dilated(x, w, (2, 1), ((1, 0), (0, 1)), rhs_dilation=(1, 2),
                                           dimension_numbers=dn, batch_group_count=3)

        def jf(x, w, dn=dn):
            return jax.lax.conv_general_dilated(x, w, (2, 1), ((1, 0), (0, 1)),
                                                rhs_dilation=(1, 2), dimension_numbers=dn,
                                                batch_group_count=3)
        want = np.asarray(jf(xx, ww))
        np.testing.assert_allclose(np.asarray(f(xx, ww)), want, rtol=1e-10, atol=1e-12)
        ct = RNG.standard_normal(want.shape)
        for a, b in zip(mx.vjp(f, xx, ww)[1](ct), jax.vjp(jf, xx, ww)[1](ct)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="batch_group_count 4"):
        nn.conv_general_dilated(x, w, (1, 1), "VALID", batch_group_count=4)
    with pytest.raises(ValueError, match="feature_group_count 2"):
        nn.conv_general_dilated(x, rnd(6, 2, 3, 2), (1, 1), "VALID", batch_group_count=3,
                                feature_group_count=2)


def test_conv2d_against_torch():
    torch = pytest.importorskip("torch")
    x, w = rnd(2, 4, 8, 7), rnd(6, 2, 3, 3)
    got = nn.conv2d(x, w, stride=2, padding=1, dilation=(1, 2), groups=2)
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), stride=2, padding=1,
                                      dilation=(1, 2), groups=2)
    np.testing.assert_allclose(np.asarray(got), want.numpy(), rtol=1e-10)
    w = rnd(6, 4, 3, 3)
    got = nn.conv2d(x.astype(np.float32), w.astype(np.float32), padding="same")
    assert got.dtype == np.float32 and got.shape == (2, 6, 8, 7)


def test_conv_errors():
    with pytest.raises(ValueError, match=r"conv_general_dilated.*f64\[2,4,5,5\]"):
        nn.conv_general_dilated(rnd(2, 4, 5, 5), rnd(3, 3, 2, 2), (1, 1), "VALID")
    with pytest.raises(ValueError, match="conv2d"):
        nn.conv2d(rnd(4, 5, 5), rnd(3, 4, 2, 2))


def test_conv_jit_and_decompose_free():
    x, w = conv_args(CONFIGS[1])
    f = conv_fn(CONFIGS[1])
    np.testing.assert_allclose(np.asarray(mx.jit(f)(x, w)), np.asarray(f(x, w)), rtol=1e-12)


# --- pooling --------------------------------------------------------------------------------
POOLS = [((2, 2), None, 0), ((3, 3), (2, 2), 1), ((3, 2), (1, 2), (1, 0))]


@pytest.mark.parametrize("pool", ["max_pool2d", "avg_pool2d"])
@pytest.mark.parametrize("cfg", POOLS, ids=["k2", "k3s2p1", "k32"])
def test_pool_against_torch(pool, cfg):
    torch = pytest.importorskip("torch")
    k, s, p = cfg
    x = rnd(2, 3, 7, 6)
    got = getattr(nn, pool)(x, k, s, p)
    tx = torch.tensor(x, requires_grad=True)
    want = getattr(torch.nn.functional, pool)(tx, k, s, p)
    np.testing.assert_allclose(np.asarray(got), want.detach().numpy(), rtol=1e-12)
    ct = RNG.standard_normal(want.shape)
    want.backward(torch.tensor(ct))
    g = mx.vjp(lambda x: getattr(nn, pool)(x, k, s, p), x)[1](ct)[0]
    np.testing.assert_allclose(np.asarray(g), tx.grad.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("pool", ["max_pool2d", "avg_pool2d"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_pool_fused_matches_body(pool, dtype):
    x = mx.asarray(rnd(2, 2, 5, 6).astype(dtype))
    x = mx.asarray(np.round(np.asarray(x), 1))  # ties: the gradient is shared evenly
    ct = mx.asarray(rnd(2, 2, 3, 3).astype(dtype))
    f = lambda x: getattr(nn, pool)(x, 3, 2, 1)  # noqa: E731
    back = lambda x: mx.vjp(f, x)[1](ct)[0]  # noqa: E731
    for fn in (f, back):
        g = mx.make_graph(fn)(x)
        body = mx.ir.eval_graph(decompose(g), x)[0]
        np.testing.assert_allclose(np.asarray(fn(x)), np.asarray(body), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("pool", ["max_pool2d", "avg_pool2d"])
def test_pool_second_order_and_vmap(pool):
    x = rnd(1, 2, 4, 4)
    f = lambda x: getattr(nn, pool)(x, 2, 2, 0)  # noqa: E731
    check_grads(f, (x,), order=2, atol=1e-6, rtol=1e-6)
    xs = rnd(3, 1, 2, 4, 4)
    np.testing.assert_allclose(np.asarray(mx.vmap(f)(xs)),
                               np.stack([np.asarray(f(a)) for a in xs]), rtol=1e-12)
    gl = lambda x: mx.grad(lambda x: (f(x) ** 2).sum())(x)  # noqa: E731
    np.testing.assert_allclose(np.asarray(mx.vmap(gl)(xs)),
                               np.stack([np.asarray(gl(a)) for a in xs]), rtol=1e-12)


def test_preferred_element_type_accumulates_and_returns_that_dtype():
    import ml_dtypes
    from mirax import lax
    r = np.random.default_rng(7)
    x = r.normal(size=(1, 2, 6, 6)).astype(ml_dtypes.bfloat16)
    w = r.normal(size=(3, 2, 3, 3)).astype(ml_dtypes.bfloat16)
    y = lax.conv_general_dilated(x, w, (1, 1), "SAME", preferred_element_type=np.float32)
    want = lax.conv_general_dilated(x.astype(np.float32), w.astype(np.float32), (1, 1), "SAME")
    assert y.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(y), np.asarray(want))
    with pytest.raises(TypeError, match="preferred_element_type must be a float dtype"):
        lax.conv_general_dilated(x, w, (1, 1), "SAME", preferred_element_type=np.int32)
