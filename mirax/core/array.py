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
from mirax.core.errors import DeletedArrayError


class ArrayOps:
    """Operators shared by concrete arrays and tracers (filled in by ops/methods.py)."""
    __slots__ = ()
    __array_priority__ = 100  # so np.ndarray <op> Array defers to Array


class _AnyArrayMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, ArrayOps)

    def __subclasscheck__(cls, sub):
        return isinstance(sub, type) and issubclass(sub, ArrayOps)


class AnyArray(metaclass=_AnyArrayMeta):
    """The public `mx.Array` type, as `jax.Array`: concrete arrays and the tracers of every
    transform are instances (`isinstance(x, mx.Array)` holds inside grad / vmap / jit).
    Inside mirax, `Array` below is the concrete class; code that needs a concrete value
    tests `type(x) is Array` or `isinstance(x, Array)` on that class, never this one."""
    __slots__ = ()

    def __new__(cls, *args, **kwargs):
        return Array(*args, **kwargs)


AnyArray.__name__ = AnyArray.__qualname__ = "Array"
AnyArray.__module__ = "mirax"


class DeletedBuffer:
    """Stands in for the buffer of a deleted Array: shape and dtype still read (as in JAX),
    anything touching the data raises DeletedArrayError with the reason."""
    __slots__ = ("shape", "dtype", "ndim", "size", "why")

    def __init__(self, buf, why: str):
        self.shape, self.dtype, self.ndim, self.size = buf.shape, buf.dtype, buf.ndim, buf.size
        self.why = why

    def error(self) -> DeletedArrayError:
        d = f"{dtypes.short_name(self.dtype)}[{','.join(map(str, self.shape))}]"
        return DeletedArrayError(f"Array {d} has been deleted: {self.why}")

    def __getattr__(self, name):
        raise self.error()

    def __array__(self, *args, **kwargs):
        raise self.error()


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

    def is_deleted(self) -> bool:
        return type(self._buf) is DeletedBuffer

    def delete(self, why: str = "it was deleted with .delete()"):
        """Drop the buffer; any later use of the data raises DeletedArrayError (`why`)."""
        if type(self._buf) is not DeletedBuffer:
            self._buf = DeletedBuffer(self._buf, why)

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
        if type(self._buf) is DeletedBuffer:
            raise self._buf.error()
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

    def __complex__(self):
        return complex(np.asarray(self))

    def __format__(self, spec):
        """'{:.2f}'.format(x) formats the value (0-d: the scalar), as NumPy and JAX."""
        host = np.asarray(self)
        return format(host[()] if host.ndim == 0 else host, spec)

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
        if type(self._buf) is DeletedBuffer:
            return f"Array(<deleted>, shape={self.shape}, dtype={dtypes.short_name(self.dtype)})"
        body = np.array2string(np.asarray(self), separator=", ", prefix="Array(")
        return f"Array({body}, dtype={dtypes.short_name(self.dtype)}" + \
            (", weak_type=True)" if self._weak else ")")

    def __str__(self):
        return str(np.asarray(self))

    def __reduce__(self):
        return (Array, (np.asarray(self), self._weak))

    def __dlpack__(self, *args, **kwargs):
        b = self._buf
        if isinstance(b, np.ndarray) and not b.flags.writeable:
            b = np.array(b)  # NumPy's DLPack cannot export a read-only view (mnp.ones' is)
        return b.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._buf.__dlpack_device__()
