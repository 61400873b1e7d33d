"""Quantization ops: the straight-through estimators ste_round / ste_sign and
fake_quantize (quantize-dequantize with a straight-through gradient).

Where it sits: mirax.nn.functional re-exports these wrappers (and mirax.ops.nn, where they
lived before); each is a primitive with its NumPy impl and jvp / vjp / vmap rules.
"""
from __future__ import annotations

import numpy as np

from mirax.core.avals import ShapedArray
from mirax.core.primitive import Primitive
from mirax.core.errors import ShapeError
from mirax.ops.common import float_operand, promote, short
from mirax.ops.composite import cast_like
from mirax.ops.elementwise import add, div, ge, select, zeros_like
from mirax.ops import elementwise as elementwise_ops
from mirax.ops import common as common_ops


# --- straight-through estimators ----------------------------------------------------------
# Forward: the quantized value; backward: the identity (fake_quantize: the identity where
# the value is representable, 0 where it was clipped).
def _ste(name, np_fn):
    p = Primitive(name, keeps_weak=True)
    p.def_impl(np_fn)
    p.def_abstract_eval(lambda x: ShapedArray(x.shape, x.dtype))
    p.def_jvp(lambda primals, tangents: (p.bind(*primals), tangents[0]))
    p.def_vjp(lambda ct, out, x: [ct])
    p.def_vmap(lambda args, dims: (p.bind(*args), dims[0]))
    return p


ste_round_p = _ste("ste_round", np.round)
ste_sign_p = _ste("ste_sign", np.sign)


def ste_round(x):
    return ste_round_p.bind(float_operand(x, "ste_round"))


def ste_sign(x):
    return ste_sign_p.bind(float_operand(x, "ste_sign"))


fake_quantize_p = Primitive("fake_quantize")


@fake_quantize_p.def_impl
def _fake_quantize_impl(x, scale, zero_point, *, bits):
    q = np.clip(np.round(x / scale) + zero_point, 0, 2 ** bits - 1)
    return cast_like((q - zero_point) * scale, x)


fake_quantize_p.def_abstract_eval(lambda x, s, z, *, bits: ShapedArray(
    x.shape, x.dtype))


def _fq_in_range(x, scale, zero_point, bits):
    r = add(elementwise_ops.round(div(x, scale)), zero_point)
    return elementwise_ops.logical_and(ge(r, 0), elementwise_ops.le(r, float(2 ** bits - 1)))


@fake_quantize_p.def_jvp
def _fake_quantize_jvp(primals, tangents, *, bits):
    out = fake_quantize_p.bind(*primals, bits=bits)
    t = tangents[0]
    if t is None:
        return out, None
    return out, select(_fq_in_range(*primals, bits), t, zeros_like(t))


@fake_quantize_p.def_vjp
def _fake_quantize_vjp(ct, out, x, scale, zero_point, *, bits):
    ct = select(_fq_in_range(x, scale, zero_point, bits), ct, zeros_like(ct))
    return [ct, None, None]


def _fake_quantize_vmap(args, dims, *, bits):
    return elementwise_ops._nary_vmap(fake_quantize_p)(args, dims, bits=bits)


fake_quantize_p.def_vmap(_fake_quantize_vmap)


def fake_quantize(x, scale, zero_point, bits=8):
    """(clip(round(x / scale) + zero_point, 0, 2^bits - 1) - zero_point) * scale, with the
    straight-through gradient (identity inside the representable range, 0 outside)."""
    x = float_operand(x, "fake_quantize")
    x, scale, zero_point = promote("fake_quantize", x, scale, zero_point)
    if common_ops.broadcast_shapes("fake_quantize", x, scale, zero_point) != tuple(x.shape):
        raise ShapeError(f"fake_quantize: scale {short(scale)} and zero_point "
                         f"{short(zero_point)} must broadcast to {short(x)}")
    return fake_quantize_p.bind(x, scale, zero_point, bits=int(bits))
