"""regroup: rematerialize and merge_elementwise on fused graphs (the CUDA backend's passes,
checked here as Graph -> Graph functions: structure, and values on the CPU)."""
import jax
import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax.compiler import optimize
from mirax.compiler.decompose import decompose
from mirax.ops.call import fusion_p
from mirax.compiler.regroup import fold_broadcasts, merge_elementwise, rematerialize
from mirax.graph.interpret import eval_graph


class _Fusing:  # a backend that takes every fusion group (as the CUDA backend does)
    fuses = True

    def writes_into(self, node):
        return False


def _planned(f, *args):
    g = optimize(mx.make_graph(f)(*args), _Fusing())
    return optimize(decompose(g, frozenset({"layer_norm"})), _Fusing())


def _fusions(g):
    return [n for n in g.nodes if n.prim is fusion_p]


def _big(node, size):
    return sum(v.aval.size == size for v in dict.fromkeys(node.inputs))


def _same(g1, g2, *args):
    leaves = jax.tree_util.tree_leaves(args)
    for a, b in zip(eval_graph(g1, *leaves), eval_graph(g2, *leaves)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _mlp(p, x):
    h = mx.nn.gelu(x @ p["w1"] + p["b1"], approximate=True)
    return mnp.mean(mnp.square((h @ p["w2"]).astype("float32")))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gelu_backward_recomputes_the_forward(dtype):
    """The tanh-gelu forward stores only its activation; the backward reads the
    pre-activation (and the incoming gradient) and makes its values and the bias gradient
    in one node; values bitwise as before."""
    rng = np.random.default_rng(0)
    p = {"w1": rng.standard_normal((8, 32)), "b1": rng.standard_normal(32),
         "w2": rng.standard_normal((32, 4))}
    p = {k: mnp.asarray(v.astype(np.float32) * 0.3).astype(dtype) for k, v in p.items()}
    x = mnp.asarray(rng.standard_normal((6, 8)).astype(np.float32)).astype(dtype)
    g = _planned(mx.value_and_grad(_mlp), p, x)
    size = 6 * 32
    fwd = [n for n in _fusions(g) if any(o.aval.size == size for o in n.outputs)]
    assert max(len(n.outputs) for n in fwd) > 2  # before: the forward stores its values
    g2 = merge_elementwise(rematerialize(g)).typecheck()
    big = [n for n in _fusions(g2) if any(o.aval.size == size for o in n.outputs)]
    assert len(big) == 2, [n.params["name"] for n in big]
    forward, backward = big
    assert [o.aval.size for o in forward.outputs] == [size]
    assert _big(forward, size) == 1 and _big(backward, size) == 2
    assert backward.params["graph"].nodes[-1].prim.name == "reduce_sum"  # the bias gradient
    assert len(g2.nodes) < len(g.nodes)
    _same(g, g2, p, x)


def test_recompute_only_when_it_reads_no_more():
    """A product of two arrays read by a later group is not recomputed there (two reads
    in place of one); a chain of one array and a bias is."""
    def f(x, y, b):
        s = x * y
        t = mnp.tanh(x + b)
        u = mnp.exp(s)  # ... a GEMM between keeps the groups apart:
        w = (u @ mnp.ones((5, 5))) * s + t
        return u, w
    rng = np.random.default_rng(1)
    args = [mnp.asarray(rng.standard_normal(sh).astype(np.float32))
            for sh in ((4, 5), (4, 5), (5,))]
    g = _planned(f, *args)
    g2 = rematerialize(g).typecheck()
    last = _fusions(g2)[-1]
    names = [n.prim.name for n in last.params["graph"].nodes]
    assert "tanh" in names and "exp" not in names, names
    assert _big(last, 20) == 3  # x (for tanh), s and the GEMM's output
    _same(g, g2, *args)


def test_merge_into_a_reduction():
    """An elementwise group feeding a reduction group (bias gradient) becomes one node."""
    def f(x, y, w):
        a = mnp.sin(x) * 2.0  # group 1
        z = (y @ w) * 3.0     # a GEMM, then group 2 ending in a column sum
        return (z + a).sum(axis=0), mnp.cos(z)
    rng = np.random.default_rng(2)
    args = [mnp.asarray(rng.standard_normal(sh).astype(np.float32))
            for sh in ((6, 3), (6, 4), (4, 3))]
    g = _planned(f, *args)
    g2 = merge_elementwise(g).typecheck()
    assert len(_fusions(g2)) == len(_fusions(g)) - 1, g2
    assert _fusions(g2)[-1].params["graph"].nodes[-1].prim.name == "reduce_sum"
    _same(g, g2, *args)


def test_fold_broadcasts():
    """A layer norm's backward: its per-row broadcasts are read in place ([B, T, 1]) by
    the fusion nodes and not made; values bitwise as before."""
    rng = np.random.default_rng(3)
    x = mnp.asarray(rng.standard_normal((2, 5, 16)).astype(np.float32))
    w = mnp.asarray(rng.standard_normal(16).astype(np.float32))

    def loss(x, w):
        return mnp.sum(mx.nn.layer_norm(x, w, w) ** 2)
    g = _planned(mx.grad(loss, argnums=(0, 1)), x, w)
    count = lambda g: sum(n.prim.name == "broadcast_in_dim" and n.inputs[0].aval.ndim > 0  # noqa
                          for n in g.nodes)
    assert count(g) > 0
    g2 = fold_broadcasts(g).typecheck()
    assert count(g2) == 0
    assert any(v.aval.shape == (2, 5, 1) for n in _fusions(g2) for v in n.inputs)
    _same(g, g2, x, w)


def _adam(p, m, v, g, t):
    m = 0.9 * m + 0.1 * g
    v = 0.999 * v + 0.001 * g * g
    p = p - 1e-3 * (m / (1 - 0.9 ** t)) / (mnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    return p, m, v


def _adam_args(seed, shape):
    """p, m, v (>= 0), g of `shape` and the step count t."""
    rng = np.random.default_rng(seed)
    args = [mnp.asarray(rng.standard_normal(shape).astype(np.float32)) for _ in range(4)]
    args[2] = mnp.abs(args[2])
    return args + [mnp.asarray(np.float32(3))]


def test_merge_reads_scalars_in_place_and_keeps_shapes():
    """An Adam update merges into one node per parameter reading the 0-d values in place
    of their broadcasts, every member keeping its shape; values bitwise as before."""
    args = _adam_args(4, (4, 5))
    g = _planned(_adam, *args)
    g2 = merge_elementwise(g).typecheck()
    assert any(len(n.outputs) == 3 for n in _fusions(g2)), g2
    for n in _fusions(g2):
        for m in n.params["graph"].nodes:
            assert m.outputs[0].aval.shape == (4, 5) or m.outputs[0].aval.ndim == 0
    _same(g, g2, *args)


def test_adam_update_is_one_node_a_parameter():
    """Adam's new moments are returned and read by the parameter's update: they are not
    recomputed in the update (they are stored anyway); the moments and the update become
    one node a parameter, which reads the gradient once. Values bitwise as before."""
    args = _adam_args(3, (16, 8))
    g = _planned(_adam, *args)
    g2 = merge_elementwise(rematerialize(fold_broadcasts(g))).typecheck()
    big = [n for n in _fusions(g2) if any(o.aval.size == 128 for o in n.outputs)]
    assert len(big) == 1, [n.params["name"] for n in big]
    assert len(big[0].outputs) == 3 and _big(big[0], 128) == 4  # reads p, m, v, g once
    _same(g, g2, *args)
