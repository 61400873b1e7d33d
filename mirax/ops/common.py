"""Helpers every op family uses: turning user inputs into operands, dtype promotion,
axis normalization and shape checks. Errors name the operation and the shapes in `f32[3,4]`
notation, and are raised here, in the wrappers, before anything runs."""
from __future__ import annotations

import numpy as np

from mirax.core import dtypes
from mirax.core.array import Array
from mirax.core.avals import ShapedArray
from mirax.core.trace import Tracer, aval_of
from mirax.core.errors import ConcretizationError
from mirax.core.errors import ShapeError

Operand = (Array, Tracer)


def short(x) -> str:
    """`f32[3,4]` for an operand, aval, or NumPy array."""
    if isinstance(x, ShapedArray):
        return x.str_short()
    return f"{dtypes.short_name(x.dtype)}[{','.join(map(str, np.shape(x)))}]"


def operand(x, op: str = "op"):
    """An Array or Tracer for any array-like; Python scalars become weak arrays."""
    if isinstance(x, Operand):
        return x
    if dtypes.is_python_scalar(x):
        d = dtypes.python_scalar_dtype(x)
        return Array(_scalar_buf(x, d), not isinstance(x, bool))
    try:
        return creation_ops.asarray(x)
    except TypeError as e:
        raise TypeError(f"{op}: expected an array, got {type(x).__name__}: {e}") from None


def _scalar_buf(x, dtype):
    try:
        return np.asarray(x, dtype)
    except OverflowError:
        raise OverflowError(f"Python int {x} does not fit in {dtype}") from None


def dtype_weak(x) -> tuple[np.dtype, bool]:
    if isinstance(x, Array):
        return x._buf.dtype, x._weak
    if isinstance(x, Tracer):
        a = x.aval
        return a.dtype, a.weak_type
    return dtypes.input_dtype(x)


def result_dtype(*xs) -> tuple[np.dtype, bool]:
    d, w = dtype_weak(xs[0])
    for x in xs[1:]:
        d2, w2 = dtype_weak(x)
        if d2 != d or w2 != w:
            d, w = dtypes.promote_types_weak(d, w, d2, w2)
    return d, w


def promote(op: str, *xs):
    """Operands of one common dtype (JAX promotion with weak types)."""
    if len(xs) == 2 and isinstance(xs[0], Array) and isinstance(xs[1], Array) and \
            xs[0]._buf.dtype == xs[1]._buf.dtype and xs[0]._weak == xs[1]._weak:
        return xs  # the eager fast path: nothing to do
    dtype, weak = result_dtype(*xs)
    return tuple(cast(x, dtype, weak, op) for x in xs)


def cast(x, dtype, weak=False, op="op"):
    """x as an operand of `dtype` (Python scalars convert without a primitive)."""
    if dtypes.is_python_scalar(x):
        return Array(_scalar_buf(x, dtype), weak)
    x = operand(x, op)
    if x.dtype == dtype:
        return x
    return elementwise_ops.convert_element_type(x, dtype, weak_type=weak)


def float_operand(x, op: str):
    """Integer and bool inputs of float-only functions (sin, exp, ...) go to float32."""
    x = operand(x, op)
    if not dtypes.is_float(x.dtype):
        return cast(x, dtypes.default_float, x.weak_type, op)
    return x


def same_shapes(op: str, xs, what: str = "operands") -> None:
    """Raise if the operands differ in shape (stack, multi-operand sort, ...)."""
    if len({tuple(x.shape) for x in xs}) > 1:
        raise ShapeError(f"{op}: {what} must share a shape, got "
                         f"{', '.join(short(x) for x in xs)}")


def normalize_axis(axis: int, ndim: int, op: str, x=None) -> int:
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"{op}: axis must be an int, got {type(axis).__name__}")
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        what = f" for {short(x)}" if x is not None else f" for an array of rank {ndim}"
        raise ValueError(f"{op}: axis {axis} is out of range{what}")
    return int(axis) % ndim if ndim else 0


def normalize_axes(axes, ndim: int, op: str, x=None) -> tuple[int, ...]:
    """None -> all axes; int or sequence -> sorted tuple of non-negative axes."""
    if axes is None:
        return tuple(range(ndim))
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    if isinstance(axes, (str, float)) or not hasattr(axes, "__iter__"):
        raise TypeError(f"{op}: axis must be an int or a tuple of ints, got "
                        f"{type(axes).__name__}")
    out = tuple(sorted(normalize_axis(a, ndim, op, x) for a in axes))
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {tuple(axes)}")
    return out


def broadcast_shapes(op: str, *xs) -> tuple[int, ...]:
    shapes = [tuple(x.shape) for x in xs]
    if all(s == shapes[0] for s in shapes):
        return shapes[0]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(f"{op}: shapes {' and '.join(short(x) for x in xs)} do not "
                         "broadcast together") from None


def static_int(x, op: str, what: str) -> int:
    """A Python int from a static argument (shape entry, size), with a clear error."""
    if isinstance(x, Tracer):
        explain = getattr(x._trace, "concretization_message", None)  # names the argument
        if explain is not None:
            raise ConcretizationError(explain(x, f"{op}: {what} must be static (a Python int);"
                                                 " got a value"))
        raise ConcretizationError(f"{op}: {what} must be static (a Python int), got a traced "
                                  f"{x.aval.str_short()}")
    try:
        return int(x)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: {what} must be an int, got {x!r}") from None


def static_shape(shape, op: str) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) or isinstance(shape, Tracer) and not shape.shape:
        shape = (shape,)
    out = tuple(static_int(d, op, "shape") for d in shape)
    if any(d < 0 for d in out):
        raise ValueError(f"{op}: negative dimension in shape {out}")
    return out


def batch_size(args, dims) -> int:
    """The vmapped axis size, read off the first batched operand of a vmap rule."""
    return next(aval_of(a).shape[d] for a, d in zip(args, dims) if d is not None)


def power_by_squaring(x, n: int, mul):
    """x ** n for a static int n >= 1 with the product `mul` (elementwise, matmul), by
    repeated squaring: about 2 log2(n) products."""
    acc, base = None, x
    while n:
        if n & 1:
            acc = base if acc is None else mul(acc, base)
        n >>= 1
        if n:
            base = mul(base, base)
    return acc


# NOTE: every family imports its helpers from this file, so the two families these helpers
# call (array-likes to arrays, dtype casts) are bound at the end, after the helpers exist.
from mirax.ops import creation as creation_ops  # noqa: E402
from mirax.ops import elementwise as elementwise_ops  # noqa: E402
