"""dot_general: the one contraction primitive behind matmul, dot, tensordot and einsum.

dimension_numbers = ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)); the output is
laid out as (batch..., lhs free..., rhs free...), as in XLA. Bilinear: the jvp is the sum
of the two partial products, the vjp contracts the cotangent with the other operand.

precision (JAX's semantics): a static param, "default", "high" or "highest", resolved when
the product is made: the explicit argument, else the `default_matmul_precision` knob at
that moment (so a function traced under `with default_matmul_precision(...)` keeps it),
and passed on to the products its jvp, vjp and vmap rules emit. The CPU is exact at every
setting; on CUDA, float32 products take TF32 tensor cores at "default", 3xTF32 at "high"
and exact float32 at "highest" (backends/cuda/library.py). Listings show it when it is not
"default".
"""
from __future__ import annotations

import contextlib
import enum

import numpy as np

from mirax.core import config, dtypes
from mirax.core.avals import ShapedArray
from mirax.core.primitive import Primitive
from mirax.core.trace import aval_of
from mirax.core.errors import DTypeError, ShapeError
from mirax.ops.common import operand, promote, short
from mirax.ops import elementwise as elementwise_ops
from mirax.ops import shape as shape_ops

dot_general_p = Primitive("dot_general")


class Precision(enum.Enum):
    """Matmul/conv precision (jax.lax.Precision). DEFAULT: the fastest the device has
    (TF32 tensor cores for float32 on CUDA), HIGH: about float32 (3xTF32 on CUDA),
    HIGHEST: exact float32. The CPU computes exactly at every setting."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value):
        if isinstance(value, str) and value.strip().lower() in _ALIASES:
            return cls[_ALIASES[value.strip().lower()].upper()]
        return None


PRECISIONS = ("default", "high", "highest")
# JAX's names (jax.default_matmul_precision takes the dtype-like ones too)
_ALIASES = {"default": "default", "fastest": "default", "bfloat16": "default",
            "high": "high", "tensorfloat32": "high", "highest": "highest",
            "float32": "highest"}


def _one_precision(p, op):
    if p is None:
        return _ALIASES[config.get("default_matmul_precision")]
    if isinstance(p, enum.Enum) and p.name in Precision.__members__:  # ours, or JAX's
        return p.name.lower()
    if isinstance(p, str) and p.strip().lower() in _ALIASES:
        return _ALIASES[p.strip().lower()]
    raise ValueError(f"{op}: precision must be None, a mirax.lax.Precision, one of "
                     f"{', '.join(sorted(_ALIASES))}, or a pair of those (lhs, rhs); got "
                     f"{p!r}")


def canonical_precision(precision, op: str) -> str:
    """The precision param of a product made by `op`: "default", "high" or "highest".
    None takes the `default_matmul_precision` knob now; a pair (lhs, rhs), as JAX takes
    it, the higher of the two (one device setting covers both operands)."""
    if isinstance(precision, (tuple, list)):
        if len(precision) != 2:
            raise ValueError(f"{op}: precision as a sequence must be a pair (lhs, rhs), got "
                             f"{precision!r}")
        a, b = (_one_precision(p, op) for p in precision)
        return max(a, b, key=PRECISIONS.index)
    return _one_precision(precision, op)


def hide_default_precision(params):
    """The params a listing shows: precision only where it is not "default"."""
    if params.get("precision", "default") == "default":
        return {k: v for k, v in params.items() if k != "precision"}
    return params


@contextlib.contextmanager
def default_matmul_precision(name):
    """`with mx.default_matmul_precision("highest"):` sets the precision of the products
    made in the block without an explicit one (this thread only; jax's context manager).
    `name`: default/high/highest or JAX's bfloat16/tensorfloat32/float32."""
    value = name.name.lower() if isinstance(name, enum.Enum) else name
    if not isinstance(value, str) or value.strip().lower() not in _ALIASES:
        raise ValueError(f"default_matmul_precision: expected one of "
                         f"{', '.join(sorted(_ALIASES))}, got {name!r}")
    with config.override(default_matmul_precision=value.strip().lower()):
        yield


def _free(ndim, contract, batch):
    return tuple(i for i in range(ndim) if i not in contract and i not in batch)


def dot_general(lhs, rhs, dimension_numbers, preferred_element_type=None, precision=None,
                op="dot_general"):
    """`op`: the user's operation, for errors (matmul, einsum, ...)."""
    prec = canonical_precision(precision, op)
    lhs, rhs = promote(op, operand(lhs, op), operand(rhs, op))
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))
    pet = None if preferred_element_type is None else dtypes.canonicalize(
        preferred_element_type)
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dn, preferred_element_type=pet,
                              precision=prec)


def _dot_general_format(params):
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    shown = {"contract": (lc, rc)}
    if lb:
        shown["batch"] = (lb, rb)
    shown["out"] = params["preferred_element_type"]
    if params.get("precision", "default") != "default":
        shown["precision"] = params["precision"]
    return shown


dot_general_p.format_params = _dot_general_format


@dot_general_p.def_abstract_eval
def _dot_general_abstract_eval(lhs, rhs, *, dimension_numbers, preferred_element_type,
                               precision="default"):
    (lc, rc), (lb, rb) = dimension_numbers
    ok = (len(lc) == len(rc) and len(lb) == len(rb)
          and all(0 <= a < lhs.ndim for a in lc + lb) and all(0 <= a < rhs.ndim for a in rc + rb)
          and all(lhs.shape[a] == rhs.shape[b] for a, b in zip(lc + lb, rc + rb)))
    if not ok:
        raise ShapeError(f"dot_general: cannot contract {short(lhs)} with {short(rhs)} "
                         f"(dimension_numbers={dimension_numbers})")
    if lhs.dtype != rhs.dtype:
        raise DTypeError(f"dot_general: operands must share a dtype, got {short(lhs)} and "
                        f"{short(rhs)}")
    shape = (tuple(lhs.shape[a] for a in lb) + tuple(lhs.shape[a] for a in _free(lhs.ndim, lc, lb))
             + tuple(rhs.shape[a] for a in _free(rhs.ndim, rc, rb)))
    return ShapedArray(shape, preferred_element_type or lhs.dtype)


@dot_general_p.def_impl
def _dot_general_impl(lhs, rhs, *, dimension_numbers, preferred_element_type,
                      precision="default"):
    """Exact at every precision (NumPy's GEMM in the operands' dtype)."""
    (lc, rc), (lb, rb) = dimension_numbers
    lf, rf = _free(lhs.ndim, lc, lb), _free(rhs.ndim, rc, rb)
    out_dtype = preferred_element_type or lhs.dtype
    acc = np.float32 if lhs.dtype in dtypes.LOW_FLOATS else lhs.dtype
    bshape = tuple(lhs.shape[a] for a in lb)
    m = int(np.prod([lhs.shape[a] for a in lf]))
    n = int(np.prod([rhs.shape[a] for a in rf]))
    k = int(np.prod([lhs.shape[a] for a in lc]))
    b = int(np.prod(bshape))
    a_ = np.transpose(lhs, lb + lf + lc).astype(acc, copy=False)
    b_ = np.transpose(rhs, rb + rc + rf).astype(acc, copy=False)
    if b == 1:  # NOTE: 2-d matmul goes to BLAS for any strides; stacked matmul may not
        out = np.matmul(a_.reshape(m, k), b_.reshape(k, n))
    else:
        out = np.matmul(np.ascontiguousarray(a_).reshape(b, m, k),
                        np.ascontiguousarray(b_).reshape(b, k, n))
    shape = bshape + tuple(lhs.shape[a] for a in lf) + tuple(rhs.shape[a] for a in rf)
    return out.reshape(shape).astype(out_dtype, copy=False)


@dot_general_p.def_jvp
def _dot_general_jvp(primals, tangents, **params):
    (x, y), (tx, ty) = primals, tangents
    out = dot_general_p.bind(x, y, **params)
    t = None
    if tx is not None:
        t = dot_general_p.bind(tx, y, **params)
    if ty is not None:
        t2 = dot_general_p.bind(x, ty, **params)
        t = t2 if t is None else elementwise_ops.add(t, t2)
    return out, t


def _ranges_like(*xs):
    start = 0
    for x in xs:
        yield tuple(range(start, start + len(x)))
        start += len(x)


def _transpose_lhs(ct, x_aval, y, dimension_numbers, precision, swap_ans=False):
    (xc, yc), (xb, yb) = dimension_numbers
    y_ndim = aval_of(y).ndim
    x_kept = _free(x_aval.ndim, xc, xb)
    y_kept = _free(y_ndim, yc, yb)
    if swap_ans:
        ans_batch, ans_y, _ = _ranges_like(xb, y_kept, x_kept)
    else:
        ans_batch, _, ans_y = _ranges_like(xb, x_kept, y_kept)
    dims = ((ans_y, y_kept), (ans_batch, yb))
    xc_sorted_by_y = tuple(np.take(xc, np.argsort(yc)).tolist()) if xc else ()
    out_axes = tuple(np.argsort(xb + x_kept + xc_sorted_by_y).tolist())
    res = shape_ops.transpose(dot_general(ct, y, dims, precision=precision), out_axes)
    return elementwise_ops.convert_element_type(res, x_aval.dtype, weak_type=x_aval.weak_type)


@dot_general_p.def_vjp
def _dot_general_vjp(ct, out, x, y, *, dimension_numbers, preferred_element_type,
                     precision="default", needs=(True, True)):
    (xc, yc), (xb, yb) = dimension_numbers
    xa, ya = aval_of(x), aval_of(y)
    if not dtypes.is_inexact(xa.dtype):
        return [None, None]
    ct = ct if preferred_element_type is None else _cast(ct, xa.dtype)
    swapped = ((yc, xc), (yb, xb))
    return [_transpose_lhs(ct, xa, y, dimension_numbers, precision) if needs[0] else None,
            _transpose_lhs(ct, ya, x, swapped, precision, swap_ans=True) if needs[1]
            else None]


dot_general_p.vjp_takes_needs = True


def _cast(x, dtype):
    return elementwise_ops.convert_element_type(x, dtype)


def _shift(axes, d):
    return tuple(a + (a >= d) for a in axes)


@dot_general_p.def_vmap
def _dot_general_vmap(args, dims, *, dimension_numbers, preferred_element_type,
                      precision="default"):
    (x, y), (dx, dy) = args, dims
    (xc, yc), (xb, yb) = dimension_numbers
    if dx is not None and dy is not None:
        x, y = shape_ops.moveaxis(x, dx, 0), shape_ops.moveaxis(y, dy, 0)
        dn = ((tuple(a + 1 for a in xc), tuple(a + 1 for a in yc)),
              ((0,) + tuple(a + 1 for a in xb), (0,) + tuple(a + 1 for a in yb)))
        return dot_general(x, y, dn, preferred_element_type, precision), 0
    if dx is not None:
        xc2, xb2 = _shift(xc, dx), _shift(xb, dx)
        x_free = _free(aval_of(x).ndim, xc2, xb2)
        out_dim = len(xb) + x_free.index(dx)
        return dot_general(x, y, ((xc2, yc), (xb2, yb)), preferred_element_type,
                           precision), out_dim
    yc2, yb2 = _shift(yc, dy), _shift(yb, dy)
    y_free = _free(aval_of(y).ndim, yc2, yb2)
    x_free = _free(aval_of(x).ndim, xc, xb)
    out_dim = len(xb) + len(x_free) + y_free.index(dy)
    return dot_general(x, y, ((xc, yc2), (xb, yb2)), preferred_element_type,
                       precision), out_dim
