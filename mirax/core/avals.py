"""Abstract values: what a traced value is known to be (shape, dtype, weak type).

`ShapedArray` is the currency of abstract evaluation, graph listings and error messages;
its short form `f32[3,4]` is the one notation used everywhere.
"""
from __future__ import annotations

import math

import numpy as np

from mirax.core import dtypes


class ShapedArray:
    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape, dtype, weak_type: bool = False):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.weak_type = bool(weak_type)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def str_short(self) -> str:
        return f"{dtypes.short_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    __str__ = str_short

    def __repr__(self):
        return f"ShapedArray({self.str_short()}{', weak' if self.weak_type else ''})"

    def __eq__(self, other):
        return (isinstance(other, ShapedArray) and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))

    def update(self, shape=None, dtype=None, weak_type=None) -> ShapedArray:
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type)

    def strip_weak(self) -> ShapedArray:
        return ShapedArray(self.shape, self.dtype) if self.weak_type else self

