"""mx.nn modules and initializers: pytree behaviour through jit / grad / vmap, forward passes
against NumPy references, initializer statistics (and JAX's numbers when installed)."""
import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax import nn

KEY = mx.random.key(0)


def _np(x):
    return np.asarray(x, dtype=np.float64)


def _x(shape, seed=1):
    return mx.random.normal(mx.random.key(seed), shape)


def test_linear_forward_and_layout():
    lin = nn.Linear(3, 4, key=KEY)
    assert lin.weight.shape == (4, 3) and lin.bias.shape == (4,)
    x = _x((2, 5, 3))
    np.testing.assert_allclose(_np(lin(x)), _np(x) @ _np(lin.weight).T + _np(lin.bias),
                               rtol=1e-5, atol=1e-6)
    assert np.abs(_np(lin.weight)).max() <= 1 / np.sqrt(3)
    assert nn.Linear(3, 4, use_bias=False, key=KEY).bias is None


def test_module_is_a_pytree_with_static_config():
    mlp = nn.MLP(2, 1, 8, 2, activation=nn.tanh, key=KEY)
    leaves, treedef = mx.tree.flatten(mlp)
    assert len(leaves) == 6 and all(isinstance(x, mx.Array) for x in leaves)
    rebuilt = mx.tree.unflatten(treedef, leaves)
    assert isinstance(rebuilt, nn.MLP) and rebuilt.activation is nn.tanh
    doubled = mx.tree.map(lambda a: a * 2, mlp)
    np.testing.assert_allclose(_np(doubled.layers[0].weight), 2 * _np(mlp.layers[0].weight))
    assert "MLP(layers=(Linear(weight=float32[8, 2]" in repr(mlp)


def test_modules_through_jit_grad_vmap():
    mlp = nn.MLP(3, 2, 16, 2, activation=nn.gelu, key=KEY)
    x = _x((5, 3))
    loss = lambda m, x: mnp.mean(m(x) ** 2)
    eager = _np(mlp(x))
    np.testing.assert_allclose(_np(mx.jit(lambda m, x: m(x))(mlp, x)), eager, rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(_np(mx.vmap(lambda m, xi: m(xi), in_axes=(None, 0))(mlp, x)),
                               eager, rtol=1e-5, atol=1e-6)
    g = mx.grad(loss)(mlp, x)
    gj = mx.jit(mx.grad(loss))(mlp, x)
    assert isinstance(g, nn.MLP)
    for a, b in zip(mx.tree.leaves(g), mx.tree.leaves(gj)):
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-4, atol=1e-6)
    # finite differences on one weight entry, in float64
    m64 = mx.tree.map(lambda a: a.astype(mnp.float64), mlp)
    x64 = x.astype(mnp.float64)
    g64 = mx.grad(loss)(m64, x64)
    eps = 1e-6
    leaves, treedef = mx.tree.flatten(m64)
    w = _np(leaves[2])                        # layers[1].weight
    assert w.shape == (16, 16)

    def with_w(v):
        w2 = w.copy()
        w2[3, 4] = v
        return float(loss(mx.tree.unflatten(treedef, leaves[:2] + [mnp.asarray(w2)]
                                            + leaves[3:]), x64))
    fd = (with_w(w[3, 4] + eps) - with_w(w[3, 4] - eps)) / (2 * eps)
    np.testing.assert_allclose(float(g64.layers[1].weight[3, 4]), fd, rtol=1e-6)


def test_vmap_builds_an_ensemble():
    keys = mx.random.split(KEY, 4)
    ens = mx.vmap(lambda k: nn.Linear(3, 2, key=k))(keys)
    assert ens.weight.shape == (4, 2, 3)
    x = _x((3,))
    out = mx.vmap(lambda m: m(x))(ens)
    for i in range(4):
        np.testing.assert_allclose(_np(out[i]), _np(nn.Linear(3, 2, key=keys[i])(x)),
                                   rtol=1e-5, atol=1e-6)


def test_norms_embedding_dropout_sequential():
    x = _x((4, 6))
    xn = _np(x)
    ln = nn.LayerNorm(6)
    ref = (xn - xn.mean(-1, keepdims=True)) / np.sqrt(xn.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(_np(ln(x)), ref, rtol=1e-4, atol=1e-5)
    rms = nn.RMSNorm(6)
    np.testing.assert_allclose(_np(rms(x)), xn / np.sqrt((xn ** 2).mean(-1, keepdims=True)
                                                          + 1e-6), rtol=1e-4, atol=1e-5)
    emb = nn.Embedding(10, 3, key=KEY)
    np.testing.assert_array_equal(_np(emb(mnp.asarray([[1, 7]]))), _np(emb.weight)[[[1, 7]]])
    d = nn.Dropout(0.5)
    y = _np(d(mnp.ones((1000,)), key=KEY))
    assert set(np.unique(y)) == {0.0, 2.0} and 400 < (y == 0).sum() < 600
    np.testing.assert_array_equal(_np(d(x, inference=True)), xn)
    with pytest.raises(ValueError, match="Dropout: pass key"):
        d(x)
    seq = nn.Sequential([nn.Linear(6, 5, key=KEY), nn.relu, nn.Dropout(0.1), nn.LayerNorm(5)])
    assert len(seq) == 4 and isinstance(seq[1], nn.Lambda)
    assert seq(x, key=KEY).shape == (4, 5)
    out = mx.jit(lambda s, x, k: s(x, key=k))(seq, x, KEY)
    np.testing.assert_allclose(_np(out), _np(seq(x, key=KEY)), rtol=1e-5, atol=1e-5)


def test_conv2d_matches_functional():
    conv = nn.Conv2d(3, 4, 3, stride=2, padding=1, key=KEY)
    x = _x((2, 3, 8, 8))
    ref = nn.conv2d(x, conv.weight, stride=2, padding=1) + conv.bias[None, :, None, None]
    np.testing.assert_allclose(_np(conv(x)), _np(ref), rtol=1e-5, atol=1e-5)
    assert conv(x[0]).shape == (4, 4, 4)
    g = mx.grad(lambda c: mnp.sum(c(x) ** 2))(conv)
    assert g.weight.shape == (4, 3, 3, 3)


def test_multi_head_attention_matches_numpy():
    mha = nn.MultiHeadAttention(2, 8, key=KEY)
    x = _x((2, 5, 8))
    got = _np(mha(x, is_causal=True))

    def proj(lin, a):
        return a @ _np(lin.weight).T + _np(lin.bias)
    xn = _np(x)
    q, k, v = (proj(p, xn).reshape(2, 5, 2, 4) for p in
               (mha.query_proj, mha.key_proj, mha.value_proj))
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / 2.0
    s = np.where(np.tril(np.ones((5, 5), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ref = proj(mha.output_proj, np.einsum("bhqk,bkhd->bqhd", p, v).reshape(2, 5, 8))
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_np(mha(x[0], is_causal=True)), ref[0], rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="not divisible"):
        nn.MultiHeadAttention(3, 8, key=KEY)


def test_initializers():
    k = mx.random.key(5)
    w = _np(nn.init.glorot_uniform()(k, (200, 300)))
    lim = np.sqrt(6 / 500)
    assert np.abs(w).max() <= lim and abs(w.std() - lim / np.sqrt(3)) < 0.01 * lim
    h = _np(nn.init.he_normal()(k, (400, 300)))
    assert abs(h.std() - np.sqrt(2 / 400)) < 0.03 * np.sqrt(2 / 400)
    assert np.abs(h).max() <= 2 * np.sqrt(2 / 400) / 0.87962566103423978 + 1e-6
    n = nn.init.normal(0.5)(k, (20000,))
    assert n.dtype == np.float32 and abs(_np(n).std() - 0.5) < 0.01
    assert np.all(_np(nn.init.zeros(k, (3, 2))) == 0)
    assert nn.init.zeros(k, (2,), mnp.float64).dtype == np.float64
    # conv kernels: fan_in counts the receptive field (HWIO layout: in_axis=-2, out_axis=-1)
    c = _np(nn.init.he_normal()(k, (3, 3, 64, 32)))
    assert abs(c.std() - np.sqrt(2 / (9 * 64))) < 0.05 * np.sqrt(2 / (9 * 64))


@pytest.mark.slow
def test_initializers_match_jax():
    jax = pytest.importorskip("jax")
    ji, jk = jax.nn.initializers, jax.random.PRNGKey(3)
    k = mx.random.key(3)
    np.testing.assert_array_equal(_np(nn.init.glorot_uniform()(k, (4, 5))),
                                  np.asarray(ji.glorot_uniform()(jk, (4, 5))))
    np.testing.assert_allclose(_np(nn.init.he_normal()(k, (3, 3, 4, 5))),
                               np.asarray(ji.he_normal()(jk, (3, 3, 4, 5))), atol=1e-6)
