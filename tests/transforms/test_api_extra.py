"""Top-level helpers: eval_shape / ShapeDtypeStruct, block_until_ready, tree_util,
named_call, ensure_compile_time_eval, debug.print."""
import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp


def test_eval_shape_runs_nothing():
    calls = []

    def f(x, params, scale=1.0):
        calls.append(1)
        return {"y": mnp.tanh(x @ params["w"]) * scale, "n": (x.sum(), 2)}
    out = mx.eval_shape(f, mx.ShapeDtypeStruct((8, 4), mx.float32),
                        {"w": np.ones((4, 3), np.float32)}, scale=2.0)
    assert out["y"] == mx.ShapeDtypeStruct((8, 3), mx.float32)
    assert out["n"][0].shape == () and out["n"][0].dtype == np.float32
    assert out["n"][1].dtype == np.int32 and out["n"][1].weak_type
    assert len(calls) == 1
    s = mx.ShapeDtypeStruct([2, 3], "float64")
    assert (s.ndim, s.size, s.dtype) == (2, 6, np.float64) and "shape=(2, 3)" in repr(s)


def test_eval_shape_matches_jax():
    jax = pytest.importorskip("jax")

    def f(a, b):
        return a[:, None] * b, mnp.argmax(b, axis=0)

    def jf(a, b):
        return a[:, None] * b, jax.numpy.argmax(b, axis=0)
    a, b = np.ones(3, np.float32), np.ones((3, 5), np.float32)
    ours, ref = mx.eval_shape(f, a, b), jax.eval_shape(jf, a, b)
    assert [(o.shape, o.dtype) for o in ours] == [(r.shape, r.dtype) for r in ref]


def test_shape_dtype_struct_in_make_graph_and_under_grad():
    g = mx.make_graph(lambda x: mnp.sin(x) * 2)(mx.ShapeDtypeStruct((2, 3), mx.float32))
    assert "f32[2,3]" in str(g)

    def f(x):
        s = mx.eval_shape(lambda v: v.sum(0), x)
        assert s.shape == (3,)
        return (x ** 2).sum()
    np.testing.assert_allclose(mx.grad(f)(np.ones((2, 3))), 2 * np.ones((2, 3)))


def test_block_until_ready_tree_util_named_call():
    t = {"a": mnp.ones(2), "b": [mnp.zeros(1), 3]}
    assert mx.block_until_ready(t) is t
    tu = mx.tree_util
    leaves, treedef = tu.tree_flatten(t)
    assert tu.tree_unflatten(treedef, leaves)["b"][1] == 3
    assert tu.tree_structure(t) == treedef and len(tu.tree_leaves(t)) == 3
    assert tu.tree_map(lambda v: v * 2, [1, (2,)]) == [2, (4,)]
    assert tu.tree_reduce(lambda a, b: a + b, [1, (2, 3)]) == 6 and tu.tree_all([1, (True,)])

    def f(x):
        return x + 1
    assert mx.named_call(f, name="g") is f


def test_ensure_compile_time_eval():
    def f(x):
        with mx.ensure_compile_time_eval():
            n = int(mnp.sum(mnp.ones(3)))  # concrete inside jit
        return x * n
    np.testing.assert_allclose(mx.jit(f)(np.ones(2)), [3.0, 3.0])
    with pytest.raises(mx.errors.ConcretizationError):
        mx.jit(lambda x: x * int(mnp.sum(mnp.ones(3))))(np.ones(2))  # without it: staged


def test_debug_print(capsys):
    mx.debug.print("x={x} y={}", mnp.arange(3), x=1.5)
    mx.grad(lambda x: (mx.debug.print("val {}", x), x * x)[1])(3.0)
    mx.vmap(lambda x: (mx.debug.print("v {v}", v=x), x)[1], in_axes=1)(np.zeros((2, 3)))
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "x=1.5 y=[0 1 2]" and out[1] == "val 3.0"
    assert out[2] == "v [[0. 0.]"  # the batch axis first
    with pytest.raises(NotImplementedError, match="debug.print.*jit"):
        mx.jit(lambda x: mx.debug.print("{}", x))(1.0)
