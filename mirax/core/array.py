"""`mx.Array`: an immutable n-d array holding one backend buffer (a NumPy array on the CPU).

`ArrayOps` is the shared base of `Array` and every `Tracer`: operators and methods
(`+`, `@`, `x[i]`, `.sum()`, `.at[...]`) are attached to it by mirax/ops/methods.py,
since they are written with ops. An Array also carries JAX's weak-type bit: an array
made from a Python scalar takes the dtype of whatever it meets.
"""
from __future__ import annotations

import numpy as np

from mirax.core import dtypes
from mirax.core.avals import ShapedArray
from mirax.core.runtime import device_of_buffer, synchronize, to_host


class ArrayOps:
    """Operators shared by concrete arrays and tracers (filled in by ops/methods.py)."""
    __slots__ = ()
    __array_priority__ = 100  # so np.ndarray <op> Array defers to Array


class Array(ArrayOps):
    __slots__ = ("_buf", "_weak", "_sharded")

    def __init__(self, buf, weak: bool = False):
        self._buf = buf
        self._weak = weak

    @property
    def shape(self) -> tuple[int, ...]:
        return self._buf.shape

    @property
    def dtype(self) -> np.dtype:
        return self._buf.dtype

    @property
    def ndim(self) -> int:
        return self._buf.ndim

    @property
    def size(self) -> int:
        return self._buf.size

    @property
    def weak_type(self) -> bool:
        return self._weak

    @property
    def aval(self) -> ShapedArray:
        return ShapedArray(self._buf.shape, self._buf.dtype, self._weak)

    @property
    def device(self):
        return device_of_buffer(self._buf)

    @property
    def sharding(self):
        """How pmap / shard_map / device_put(x, sharding) laid the array out over devices
        (core/sharding.py); None for an array on one device."""
        s = getattr(self, "_sharded", None)
        return None if s is None else s[1]

    @property
    def addressable_shards(self) -> list:
        """This process's shards (core/sharding.Shard); none when unsharded."""
        s = getattr(self, "_sharded", None)
        return list(s[0]) if s is not None else []

    def __array__(self, dtype=None, copy=None):
        host = np.asarray(to_host(self._buf))
        if dtype is not None and host.dtype != np.dtype(dtype):
            return host.astype(dtype)
        if copy:
            return host.copy()
        view = host.view()  # read-only: np.asarray(x) must not let anyone mutate x
        view.flags.writeable = False
        return view

    def __len__(self):
        if not self._buf.ndim:
            raise TypeError("len() of a 0-d array")
        return self._buf.shape[0]

    def __iter__(self):
        if not self._buf.ndim:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self._buf.shape[0]))

    def item(self):
        return np.asarray(self).item()

    def tolist(self):
        return np.asarray(self).tolist()

    def __bool__(self):
        return bool(np.asarray(self))

    def __int__(self):
        return int(np.asarray(self))

    def __float__(self):
        return float(np.asarray(self))

    def __index__(self):
        if not dtypes.is_int(self.dtype):
            raise TypeError(f"only integer arrays can be used as an index, got "
                            f"{self.aval.str_short()}")
        return int(np.asarray(self))

    def __hash__(self):
        raise TypeError("mx.Array is unhashable (pass it as a non-static argument)")

    def block_until_ready(self):
        sync = getattr(self._buf, "block_until_ready", None)
        if sync is not None:
            sync()
        elif not isinstance(self._buf, (np.ndarray, np.generic)):  # a device buffer
            synchronize(self._buf)
        return self

    def __repr__(self):
        body = np.array2string(np.asarray(self), separator=", ", prefix="Array(")
        return f"Array({body}, dtype={dtypes.short_name(self.dtype)}" + \
            (", weak_type=True)" if self._weak else ")")

    def __str__(self):
        return str(np.asarray(self))

    def __reduce__(self):
        return (Array, (np.asarray(self), self._weak))

    def __dlpack__(self, *args, **kwargs):
        return self._buf.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._buf.__dlpack_device__()
