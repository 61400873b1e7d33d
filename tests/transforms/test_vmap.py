"""vmap: in_axes/out_axes forms, nesting, composition with grad and jit, chunking, errors."""
import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp

rng = np.random.default_rng(0)


def r(*shape):
    return rng.normal(size=shape).astype(np.float32)


def loop(f, xs, axis=0):
    return np.stack([np.asarray(f(np.take(xs, i, axis))) for i in range(xs.shape[axis])])


def test_in_axes_int_none_negative():
    x, y = r(5, 3), r(3)
    out = mx.vmap(lambda a, b: a * b, in_axes=(0, None))(x, y)
    np.testing.assert_allclose(out, x * y, rtol=1e-6)
    out = mx.vmap(lambda a: mnp.sum(a), in_axes=-1)(r(3, 7))
    assert out.shape == (7,)
    xt = r(3, 5)
    out = mx.vmap(lambda a: a * 2, in_axes=1)(xt)
    np.testing.assert_allclose(out, (xt * 2).T, rtol=1e-6)


def test_in_axes_pytree_and_out_axes():
    params = {"w": r(4, 3), "b": r(3)}
    xs = r(6, 4)
    f = lambda p, x: mnp.tanh(x @ p["w"] + p["b"])
    out = mx.vmap(f, in_axes=(None, 0))(params, xs)
    np.testing.assert_allclose(out, np.tanh(xs @ params["w"] + params["b"]), rtol=1e-5)
    out = mx.vmap(f, in_axes=({"w": None, "b": None}, 0), out_axes=1)(params, xs)
    assert out.shape == (3, 6)
    out = mx.vmap(lambda x: (x, mnp.sum(x)), out_axes=(1, 0))(xs)
    assert out[0].shape == (4, 6) and out[1].shape == (6,)
    out = mx.vmap(lambda x, c: (x, c), in_axes=(0, None), out_axes=(0, None))(xs, r(2))
    assert out[1].shape == (2,)


def test_axis_size_and_unbatched_output():
    out = mx.vmap(lambda: mnp.ones(3), axis_size=4)()
    assert out.shape == (4, 3)
    out = mx.vmap(lambda x, y: y, in_axes=(0, None))(r(5, 2), r(3))
    assert out.shape == (5, 3)


def test_nested_vmap_matches_loop():
    x = r(3, 4, 5)
    f = lambda v: mnp.sum(mnp.sin(v) * v)
    out = mx.vmap(mx.vmap(f))(x)
    ref = np.sum(np.sin(x) * x, axis=-1)
    np.testing.assert_allclose(out, ref, rtol=1e-5)
    out = mx.vmap(mx.vmap(f, in_axes=1), in_axes=2)(x)
    np.testing.assert_allclose(out, np.sum(np.sin(x) * x, axis=0).T, rtol=1e-5)


def mlp_loss(params, x, y):
    (w1, b1), (w2, b2) = params
    h = mnp.tanh(x @ w1 + b1)
    logits = h @ w2 + b2
    return mnp.mean((logits - y) ** 2)


def _mlp():
    return ((mnp.asarray(r(8, 16)), mnp.asarray(r(16))),
            (mnp.asarray(r(16, 2)), mnp.asarray(r(2))))


def test_per_example_grads_match_loop():
    params = _mlp()
    xs, ys = r(7, 8), r(7, 2)
    per = mx.vmap(mx.grad(mlp_loss), in_axes=(None, 0, 0))(params, xs, ys)
    for i in range(7):
        gi = mx.grad(mlp_loss)(params, xs[i], ys[i])
        for a, b in zip(mx.tree.leaves(per), mx.tree.leaves(gi)):
            np.testing.assert_allclose(np.asarray(a)[i], b, rtol=1e-4, atol=1e-6)


def test_grad_of_vmap_and_jit_compositions():
    x = r(5, 3)
    f = lambda x: mnp.sum(mx.vmap(lambda v: mnp.sum(v ** 2) * mnp.sin(mnp.sum(v)))(x))
    g = mx.grad(f)(x)
    gj = mx.jit(mx.grad(f))(x)
    np.testing.assert_allclose(g, gj, rtol=1e-5)
    vj = mx.vmap(mx.jit(lambda v: v * mnp.sum(v)))(x)
    jv = mx.jit(mx.vmap(lambda v: v * mnp.sum(v)))(x)
    np.testing.assert_allclose(vj, x * x.sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(jv, vj, rtol=1e-6)


def test_chunk_size_identical():
    x = r(10, 4)
    f = lambda v: mnp.tanh(v) * mnp.sum(v)
    np.testing.assert_array_equal(mx.vmap(f, chunk_size=3)(x), mx.vmap(f)(x))
    jf = mx.jacfwd(lambda v: mnp.tanh(v) * mnp.sum(v), chunk_size=2)(x[0])
    jr = mx.jacrev(lambda v: mnp.tanh(v) * mnp.sum(v), chunk_size=3)(x[0])
    np.testing.assert_allclose(jf, jr, rtol=1e-5, atol=1e-6)


def test_inconsistent_sizes_name_arguments():
    with pytest.raises(ValueError, match=r"args\[0\] has size 3.*args\[1\] has size 4"):
        mx.vmap(lambda a, b: a + b)(mnp.ones(3), mnp.ones(4))


def test_out_of_range_axis_names_argument_and_shape():
    with pytest.raises(ValueError, match=r"in_axes 2 .*args\[0\].*f32\[3,4\]"):
        mx.vmap(lambda a: a, in_axes=2)(mnp.ones((3, 4)))


def test_no_mapped_argument_needs_axis_size():
    with pytest.raises(ValueError, match="axis_size"):
        mx.vmap(lambda a: a, in_axes=None)(mnp.ones(3))


def test_per_example_grads_vs_jax():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    params = _mlp()
    xs, ys = r(6, 8), r(6, 2)
    ours = mx.vmap(mx.grad(mlp_loss), in_axes=(None, 0, 0))(params, xs, ys)
    jparams = jax.tree_util.tree_map(lambda a: jnp.asarray(np.asarray(a)), params)

    def jloss(p, x, y):
        (w1, b1), (w2, b2) = p
        return jnp.mean((jnp.tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2)
    theirs = jax.vmap(jax.grad(jloss), in_axes=(None, 0, 0))(jparams, xs, ys)
    for a, b in zip(mx.tree.leaves(ours), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-4, atol=2e-5)


def test_jacobians_vs_jax():
    jax = pytest.importorskip("jax")
    w = r(4, 4)
    f = lambda x: mnp.tanh(x @ w)
    x = r(4)
    jf = jax.jacfwd(lambda x: jax.numpy.tanh(x @ w))(x)
    np.testing.assert_allclose(mx.jacfwd(f)(x), jf, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mx.jacrev(f)(x), jf, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mx.hessian(lambda x: mnp.sum(f(x) ** 2))(x),
                               jax.hessian(lambda x: jax.numpy.sum(
                                   jax.numpy.tanh(x @ w) ** 2))(x), rtol=1e-4, atol=1e-5)


def test_pad_with_a_batched_padding_value():
    x, v = r(3, 4), r(3)
    f = lambda x, v: mx.lax.pad(x, v, ((1, 2, 1),))
    ref = np.stack([np.asarray(f(x[i], v[i])) for i in range(3)])
    np.testing.assert_array_equal(mx.vmap(f)(x, v), ref)
    ref0 = np.stack([np.asarray(f(x[0], v[i])) for i in range(3)])
    np.testing.assert_array_equal(mx.vmap(f, in_axes=(None, 0))(x[0], v), ref0)
    gv = mx.vmap(mx.grad(lambda x, v: mnp.sum(f(x, v) ** 2), argnums=1))(x, v)
    np.testing.assert_allclose(gv, 2 * 6 * v, rtol=1e-6)   # 6 padded entries per row
