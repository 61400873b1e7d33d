"""mx.Array: attributes, conversions, methods, immutability and operators."""
from __future__ import annotations

import operator
import pickle

import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp


@pytest.fixture
def x():
    return mnp.asarray([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])


def test_attributes(x):
    assert x.shape == (2, 3) and x.ndim == 2 and x.size == 6
    assert x.dtype == mnp.float32 and isinstance(x, mx.Array)
    assert str(x.device).startswith("cpu")
    assert mnp.asarray(3).shape == () and mnp.asarray(3).ndim == 0


def test_repr_and_str(x):
    assert repr(x) == "Array([[1., 2., 3.],\n       [4., 5., 6.]], dtype=f32)"
    assert repr(mnp.asarray(2.0)) == "Array(2., dtype=f32, weak_type=True)"
    assert repr(mnp.arange(3)) == "Array([0, 1, 2], dtype=i32)"
    assert repr(mnp.asarray([True])) == "Array([ True], dtype=bool)"
    assert str(x) == str(np.asarray(x))


def test_array_protocol(x):
    a = np.asarray(x)
    assert isinstance(a, np.ndarray) and a.dtype == np.float32
    np.testing.assert_array_equal(a, [[1, 2, 3], [4, 5, 6]])
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    assert np.array(x).flags.writeable


def test_immutability(x):
    with pytest.raises(ValueError):
        np.asarray(x)[0, 0] = 100.0      # the view NumPy gets is read-only
    b = np.array(x)
    b[0, 0] = 100.0                      # a copy
    assert float(x[0, 0]) == 1.0
    src = np.ones(3, np.float32)
    y = mnp.asarray(src)
    src[0] = 7.0                         # asarray copies NumPy input
    assert y.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(AttributeError):
        x.shape = (3, 2)
    with pytest.raises(TypeError):
        x[0, 0] = 5.0                    # no item assignment: use x.at[...].set
    with pytest.raises(TypeError):
        hash(x)


def test_item_len_iter(x):
    assert mnp.asarray(3.5).item() == 3.5 and isinstance(mnp.asarray(3).item(), int)
    assert len(x) == 2
    rows = list(x)
    assert len(rows) == 2 and rows[1].tolist() == [4.0, 5.0, 6.0]
    with pytest.raises(TypeError):
        len(mnp.asarray(1.0))
    with pytest.raises(TypeError):
        iter(mnp.asarray(1.0))
    assert float(mnp.asarray(2.5)) == 2.5 and int(mnp.asarray(7)) == 7
    assert bool(mnp.asarray(True)) and not bool(mnp.asarray(0.0))
    assert [0, 1, 2][mnp.asarray(1)] == 1          # __index__ on integer arrays
    with pytest.raises(TypeError):
        [0, 1][mnp.asarray(1.0)]
    assert x.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def test_transpose_astype_reshape(x):
    assert x.T.shape == (3, 2) and x.T.tolist() == np.asarray(x).T.tolist()
    assert x.mT.shape == (3, 2)
    assert x.astype(mnp.int32).dtype == mnp.int32
    assert x.astype("float16").dtype == mnp.float16
    assert x.astype(mnp.float32) is x or x.astype(mnp.float32).dtype == mnp.float32
    assert x.reshape(3, 2).shape == (3, 2)
    assert x.reshape((6,)).shape == (6,)
    assert x.reshape(-1).shape == (6,)
    assert x.reshape(1, -1).shape == (1, 6)
    assert x.ravel().shape == (6,) and x.flatten().shape == (6,)
    assert x.transpose().shape == (3, 2) and x.transpose(1, 0).shape == (3, 2)
    assert x.transpose((1, 0)).shape == (3, 2)
    assert x.reshape(1, 2, 3).squeeze().shape == (2, 3)
    assert x.reshape(1, 2, 3).squeeze(0).shape == (2, 3)
    assert x.swapaxes(0, 1).shape == (3, 2)


def test_reduction_methods(x):
    a = np.asarray(x)
    assert float(x.sum()) == a.sum() and x.sum(axis=0).tolist() == a.sum(0).tolist()
    assert float(x.mean()) == pytest.approx(a.mean())
    assert float(x.max()) == 6.0 and float(x.min()) == 1.0
    assert int(x.argmax()) == 5 and x.argmin(axis=1).tolist() == [0, 0]
    assert float(x.prod()) == 720.0
    assert float(x.var()) == pytest.approx(a.var()) and float(x.std()) == pytest.approx(a.std())
    assert bool(x.all()) and bool(x.any())
    assert x.clip(2, 5).tolist() == np.clip(a, 2, 5).tolist()
    assert x.round().dtype == mnp.float32


def test_pickle_roundtrip(x):
    y = pickle.loads(pickle.dumps(x))
    assert isinstance(y, mx.Array) and y.tolist() == x.tolist() and y.dtype == x.dtype
    w = pickle.loads(pickle.dumps(mnp.asarray(2.0)))
    assert w.weak_type


BINOPS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
          operator.mod, operator.pow]


@pytest.mark.parametrize("op", BINOPS, ids=lambda o: o.__name__)
def test_binary_operators(x, op):
    a = np.asarray(x)
    b = mnp.asarray([[2.0, 1.0, 0.5]])
    np.testing.assert_allclose(op(x, b), op(a, np.asarray(b)), rtol=1e-6)
    np.testing.assert_allclose(op(x, 2), op(a, np.float32(2)), rtol=1e-6)        # array op int
    np.testing.assert_allclose(op(3.0, x), op(np.float32(3.0), a), rtol=1e-6)    # reflected
    np.testing.assert_allclose(op(x, np.full(3, 2.0, np.float32)), op(a, 2.0), rtol=1e-6)
    r = op(np.full(3, 2.0, np.float32), x)                                      # NumPy on left
    assert isinstance(r, mx.Array), type(r)
    np.testing.assert_allclose(r, op(np.float32(2.0), a), rtol=1e-6)
    assert op(x, 2).dtype == mnp.float32 and op(2.0, x).dtype == mnp.float32


def test_matmul_and_unary_operators(x):
    a = np.asarray(x)
    np.testing.assert_allclose(x @ x.T, a @ a.T)
    np.testing.assert_allclose(np.asarray(a.T) @ x, a.T @ a)
    assert isinstance(a.T @ x, mx.Array)
    assert (-x).tolist() == (-a).tolist() and (+x).tolist() == a.tolist()
    assert abs(mnp.asarray([-1.0, 2.0])).tolist() == [1.0, 2.0]
    assert (~mnp.asarray([True, False])).tolist() == [False, True]


@pytest.mark.parametrize("op", [operator.eq, operator.ne, operator.lt, operator.le,
                                operator.gt, operator.ge], ids=lambda o: o.__name__)
def test_comparisons(x, op):
    a = np.asarray(x)
    r = op(x, 3.0)
    assert r.dtype == mnp.bool_ and r.tolist() == op(a, 3.0).tolist()
    assert op(3.0, x).tolist() == op(3.0, a).tolist()
    assert op(x, np.full((2, 3), 3.0, np.float32)).tolist() == op(a, 3.0).tolist()


def test_integer_and_bitwise_operators():
    i = mnp.asarray([5, -7, 12])
    a = np.asarray(i)
    assert (i // 2).tolist() == (a // 2).tolist() and (i % 3).tolist() == (a % 3).tolist()
    assert (17 // i).tolist() == (17 // a).tolist() and (17 % i).tolist() == (17 % a).tolist()
    assert (i & 3).tolist() == (a & 3).tolist() and (3 | i).tolist() == (3 | a).tolist()
    assert (i ^ 1).tolist() == (a ^ 1).tolist()
    assert (i << 1).tolist() == (a << 1).tolist() and (i >> 1).tolist() == (a >> 1).tolist()
    assert (i ** 2).dtype == mnp.int32
    assert (i / 2).dtype == mnp.float32


def test_block_until_ready_and_asarray_passthrough(x):
    assert x.block_until_ready() is x
    assert mnp.asarray(x) is x
    assert mx.asarray(x) is x
