"""Operators and methods of mx.Array and of every tracer, with NumPy semantics.

Attached to the shared base `ArrayOps` here because they are written with mirax.numpy."""
from __future__ import annotations

import numpy as np

from mirax.core.array import ArrayOps
from mirax import numpy as mnp
from mirax.ops import elementwise as ew
from mirax.numpy._indexing import _IndexUpdateHelper, getitem


def _swap(fn):
    return lambda self, other: fn(other, self)


def _eq_seq(fn):
    """x == (1, 2): a list or tuple on the other side is converted first (NumPy's ==);
    x == None (or any non-array) is NotImplemented, so Python answers False (JAX)."""
    def compare(self, other):
        if isinstance(other, (list, tuple)):
            other = mnp.asarray(other)
        elif not isinstance(other, _ARRAY_LIKE) and not hasattr(other, "__array__"):
            return NotImplemented
        return fn(self, other)
    return compare


_ARRAY_LIKE = (ArrayOps, np.ndarray, np.generic, bool, int, float)


def _round(self, ndigits=None):
    """round(x) is an int32 array (Python's round of a float gives an int); round(x, n) keeps
    the dtype (jnp.round), as JAX."""
    if ndigits is None:
        return ew.convert_element_type(mnp.round(self), mnp.int32)
    return mnp.round(self, ndigits)


def install():
    A = ArrayOps
    A.__add__, A.__radd__ = ew.add, _swap(ew.add)
    A.__sub__, A.__rsub__ = ew.sub, _swap(ew.sub)
    A.__mul__, A.__rmul__ = ew.mul, _swap(ew.mul)
    A.__truediv__, A.__rtruediv__ = mnp.true_divide, _swap(mnp.true_divide)
    A.__floordiv__, A.__rfloordiv__ = mnp.floor_divide, _swap(mnp.floor_divide)
    A.__mod__, A.__rmod__ = mnp.remainder, _swap(mnp.remainder)
    A.__pow__, A.__rpow__ = mnp.power, _swap(mnp.power)
    A.__matmul__, A.__rmatmul__ = mnp.matmul, _swap(mnp.matmul)
    A.__and__, A.__rand__ = mnp.bitwise_and, _swap(mnp.bitwise_and)
    A.__or__, A.__ror__ = mnp.bitwise_or, _swap(mnp.bitwise_or)
    A.__xor__, A.__rxor__ = mnp.bitwise_xor, _swap(mnp.bitwise_xor)
    A.__lshift__, A.__rshift__ = mnp.left_shift, mnp.right_shift
    A.__getitem__ = getitem
    A.at = property(_IndexUpdateHelper)
    A.__neg__ = ew.neg
    A.__pos__ = lambda self: self
    A.__abs__ = ew.abs
    A.__invert__ = mnp.invert
    A.__eq__, A.__ne__ = _eq_seq(ew.eq), _eq_seq(ew.ne)
    A.__round__ = _round
    A.__lt__, A.__le__, A.__gt__, A.__ge__ = ew.lt, ew.le, ew.gt, ew.ge
    A.T = property(lambda self: mnp.transpose(self))
    A.mT = property(lambda self: mnp.swapaxes(self, -1, -2))
    A.astype = lambda self, dtype: ew.convert_element_type(self, dtype)
    A.reshape = lambda self, *shape, order="C": mnp.reshape(
        self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape,
        order=order)
    A.transpose = lambda self, *axes: mnp.transpose(
        self, (axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes) or None)
    A.ravel = A.flatten = lambda self: mnp.ravel(self)
    A.squeeze = lambda self, axis=None: mnp.squeeze(self, axis)
    A.swapaxes = lambda self, a, b: mnp.swapaxes(self, a, b)
    for name in ("sum", "prod", "mean", "var", "std", "max", "min", "argmax", "argmin",
                 "all", "any", "cumsum", "cumprod", "clip", "round", "dot", "sort",
                 "argsort", "conj", "trace", "repeat", "take", "nonzero"):
        fn = getattr(mnp, name, None)
        if fn is not None:
            setattr(A, name, (lambda f: lambda self, *a, **k: f(self, *a, **k))(fn))
