"""mirax.lax's shape helpers (conv_general_shape_tuple, conv_transpose_shape_tuple,
reduce_window_shape_tuple, conv_shape_tuple, padtype_to_pads) against jax.lax, and JAX's own
jax.example_libraries.stax source run on mirax (its imports pointed at mirax): the network's
init shapes, outputs and gradients equal JAX's with the same parameters."""
import importlib.util
import itertools

import jax
import jax.lax as jlax
import numpy as np
import pytest

import mirax as mx
import mirax.lax as mlax

LAYOUTS = [("NHWC", "HWIO", "NHWC"), ("NCHW", "OIHW", "NCHW"), ("NHWC", "OIHW", "NCHW"),
           ("NCHW", "HWIO", "NHWC")]


def _shape_in(layout, n, c, h, w):
    return tuple({"N": n, "C": c, "H": h, "W": w}[d] for d in layout)


def _kernel(layout, o, i, kh, kw):
    return tuple({"O": o, "I": i, "H": kh, "W": kw}[d] for d in layout)


@pytest.mark.parametrize("dn", LAYOUTS, ids=lambda d: "-".join(d))
def test_conv_shape_tuples_vs_jax(dn):
    pads = ["SAME", "VALID", "SAME_LOWER", [(1, 0), (2, 3)]]
    for (h, w), (kh, kw), strides, pad in itertools.product(
            [(8, 9), (5, 3)], [(3, 3), (2, 4)], [(1, 1), (2, 3)], pads):
        lhs = _shape_in(dn[0], 2, 3, h, w)
        rhs = _kernel(dn[1], 5, 3, kh, kw)
        args = (lhs, rhs, strides, pad, dn)
        assert mlax.conv_general_shape_tuple(*args) == tuple(
            int(d) for d in jlax.conv_general_shape_tuple(*args)), args
        if not isinstance(pad, str) or pad != "SAME_LOWER":
            assert mlax.conv_transpose_shape_tuple(*args) == tuple(
                int(d) for d in jlax.conv_transpose_shape_tuple(*args)), args
    dnums = mlax.conv_dimension_numbers((2, 8, 9, 3), (3, 3, 3, 5), dn)
    assert tuple(dnums) == tuple(jlax.conv_dimension_numbers((2, 8, 9, 3), (3, 3, 3, 5), dn))
    assert mlax.conv_general_permutations(dn) == jlax.conv_general_permutations(dn)


def test_conv_shape_tuple_and_windows_vs_jax():
    for lhs, rhs, strides, pads, groups in [
            ((4, 3, 9, 9), (6, 3, 3, 3), (2, 2), "SAME", 1),
            ((4, 3, 9, 9), (6, 3, 3, 3), (2, 2), "SAME", 2),
            ((1, 2, 7, 5), (4, 2, 2, 3), (1, 2), [(0, 1), (2, 2)], 1),
            ((1, 2, 2, 5), (4, 2, 3, 3), (1, 1), "VALID", 1)]:
        assert mlax.conv_shape_tuple(lhs, rhs, strides, pads, groups) == tuple(
            int(d) for d in jlax.conv_shape_tuple(lhs, rhs, strides, pads, groups))
    for shape, window, strides, pad in [((2, 7, 8, 3), (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
                                        ((2, 7, 8, 3), (1, 2, 3, 1), (1, 1, 2, 1), "VALID"),
                                        ((5, 6), (2, 4), (3, 1), "SAME_LOWER")]:
        pads = mlax.padtype_to_pads(shape, window, strides, pad)
        assert [tuple(p) for p in pads] == [tuple(int(v) for v in p) for p in
                                            jlax.padtype_to_pads(shape, window, strides, pad)]
        for base, win in [(None, None), ((1,) * len(shape), (1,) * len(shape)),
                          ((1, 2) + (1,) * (len(shape) - 2), (2,) + (1,) * (len(shape) - 1))]:
            assert mlax.reduce_window_shape_tuple(shape, window, strides, pads, base, win) == \
                tuple(int(d) for d in jlax.reduce_window_shape_tuple(shape, window, strides,
                                                                    pads, base, win))


def _stax_on_mirax():
    """JAX's stax source, executed with `jax` replaced by `mirax` in its imports."""
    spec = importlib.util.find_spec("jax.example_libraries.stax")
    with open(spec.origin) as f:
        src = f.read()
    src = src.replace("from jax.nn.initializers import", "from mirax.nn.init import")
    src = src.replace("from jax.nn import", "from mirax.nn import")
    src = src.replace("from jax import lax", "from mirax import lax")
    src = src.replace("from jax import random", "from mirax import random")
    src = src.replace("import jax.numpy as jnp", "import mirax.numpy as jnp")
    assert "jax" not in src.replace("jax.example_libraries", "").split('"""', 2)[2].split(
        "def Dense")[0], "an import of stax was not redirected"
    ns = {"__name__": "mirax_stax"}
    exec(compile(src, "stax_on_mirax.py", "exec"), ns)
    return ns


def _net(stax):
    return stax["serial"](
        stax["Conv"](4, (3, 3), padding="SAME"), stax["Relu"],
        stax["GeneralConv"](("NHWC", "OIHW", "NHWC"), 6, (2, 3), strides=(2, 1)),
        stax["Tanh"], stax["MaxPool"]((2, 2), strides=(1, 2), padding="SAME"),
        stax["ConvTranspose"](3, (3, 2), strides=(2, 2), padding="SAME"),
        stax["AvgPool"]((3, 3), strides=(2, 2), padding="SAME"),
        stax["SumPool"]((2, 1), padding="VALID"),
        stax["Flatten"], stax["Dense"](5), stax["LogSoftmax"])


IN_SHAPE = (2, 9, 8, 3)


@pytest.fixture(scope="module")
def nets():
    """(mirax init, mirax apply, JAX apply, params drawn by mirax's init as NumPy arrays)."""
    from jax.example_libraries import stax as jstax
    m_init, m_apply = _net(_stax_on_mirax())
    j_init, j_apply = _net(vars(jstax))
    m_out_shape, m_params = m_init(mx.random.key(0), IN_SHAPE)
    box = []   # the output shape is a tuple of Python ints: keep it out of eval_shape's result
    j_params = jax.eval_shape(lambda k: box.append(j_init(k, IN_SHAPE)[0]) or
                              j_init(k, IN_SHAPE)[1], jax.random.key(0))
    assert tuple(m_out_shape) == tuple(box[0]) == (2, 5)
    assert [tuple(p.shape) for p in mx.tree.leaves(m_params)] == \
        [tuple(p.shape) for p in jax.tree.leaves(j_params)]
    return m_apply, j_apply, mx.tree.map(np.asarray, m_params)


def test_stax_source_runs_on_mirax_vs_jax(nets):
    m_apply, j_apply, params = nets
    x = np.random.default_rng(0).normal(size=IN_SHAPE).astype(np.float32)
    np.testing.assert_allclose(np.asarray(m_apply(params, x)),
                               np.asarray(jax.jit(j_apply)(params, x)), rtol=2e-5, atol=2e-5)


@pytest.mark.slow
def test_stax_gradients_vs_jax(nets):
    m_apply, j_apply, params = nets
    x = np.random.default_rng(1).normal(size=IN_SHAPE).astype(np.float32)

    def loss(apply, p):
        return -apply(p, x)[:, 1].sum()
    g = mx.grad(lambda p: loss(m_apply, p))(params)
    jg = jax.jit(jax.grad(lambda p: loss(j_apply, p)))(params)
    for a, b in zip(mx.tree.leaves(g), jax.tree.leaves(jg)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
