"""mirax.numpy elementwise math: NumPy semantics (broadcasting, promotion) on mirax ops."""
from __future__ import annotations

import math

from mirax.core import dtypes
from mirax.ops import elementwise as ew
from mirax.ops.common import float_operand, operand, promote, short
from mirax.numpy._indexing import nonzero
from mirax.ops.elementwise import stop_gradient

pi, e, inf, nan = math.pi, math.e, math.inf, math.nan
newaxis = None

add, subtract, multiply = ew.add, ew.sub, ew.mul
maximum, minimum = ew.max, ew.min
equal, not_equal, less, less_equal, greater, greater_equal = (
    ew.eq, ew.ne, ew.lt, ew.le, ew.gt, ew.ge)
negative, sign, abs, absolute = ew.neg, ew.sign, ew.abs, ew.abs
exp, exp2, expm1, log, log1p, sqrt, cbrt = ew.exp, ew.exp2, ew.expm1, ew.log, ew.log1p, \
    ew.sqrt, ew.cbrt
sin, cos, tan, arcsin, arccos, arctan = ew.sin, ew.cos, ew.tan, ew.asin, ew.acos, ew.atan
sinh, cosh, tanh, arcsinh, arccosh, arctanh = ew.sinh, ew.cosh, ew.tanh, ew.asinh, ew.acosh, \
    ew.atanh
arctan2 = ew.atan2
isfinite = ew.is_finite


def _float_pair(x, y, op):
    x, y = promote(op, x, y)
    if not dtypes.is_float(x.dtype):
        x, y = ew.convert_element_type(x, dtypes.float32, x.weak_type), \
            ew.convert_element_type(y, dtypes.float32, y.weak_type)
    return x, y


def true_divide(x, y):
    x, y = _float_pair(x, y, "true_divide")
    return ew.div(x, y)


divide = true_divide


def floor_divide(x, y):
    x, y = promote("floor_divide", x, y)
    if dtypes.is_float(x.dtype):
        return ew.floor(ew.div(x, y))
    q = ew.div(x, y)  # truncating
    fix = ew.logical_and(ew.ne(ew.rem(x, y), 0), ew.ne(ew.lt(x, 0), ew.lt(y, 0)))
    return ew.select(fix, ew.sub(q, 1), q)


def remainder(x, y):
    """Python-style modulo: the result has the sign of y."""
    x, y = promote("remainder", x, y)
    r = ew.rem(x, y)
    fix = ew.logical_and(ew.ne(r, 0), ew.ne(ew.lt(r, 0), ew.lt(y, 0)))
    return ew.select(fix, ew.add(r, y), r)


mod = remainder


def fmod(x, y):
    return ew.rem(*promote("fmod", x, y))


def power(x, y):
    if isinstance(y, int) and not isinstance(y, bool):
        x = operand(x, "power")
        if y < 0 and not dtypes.is_float(x.dtype):
            raise ValueError(f"power: integers cannot be raised to negative powers, got "
                             f"{short(x)} ** {y}")
        if 0 <= y <= 4:
            return _int_power(x, y)
    x, y = promote("power", x, y)
    return ew.pow(x, y)


def _int_power(x, n):
    """x ** n for a small static n by repeated multiplication (exact derivatives at 0)."""
    if n == 0:
        return ew.ones_like(x)
    out = x
    for _ in range(n - 1):
        out = ew.mul(out, x)
    return out


def square(x):
    x = operand(x, "square")
    return ew.mul(x, x)


def reciprocal(x):
    return true_divide(1.0, float_operand(x, "reciprocal"))


def fabs(x):
    return ew.abs(float_operand(x, "fabs"))


def floor(x):
    x = operand(x, "floor")
    return x if dtypes.is_int(x.dtype) or dtypes.is_bool(x.dtype) else ew.floor(x)


def ceil(x):
    x = operand(x, "ceil")
    return x if dtypes.is_int(x.dtype) or dtypes.is_bool(x.dtype) else ew.ceil(x)


def trunc(x):
    x = operand(x, "trunc")
    return x if dtypes.is_int(x.dtype) or dtypes.is_bool(x.dtype) else ew.trunc(x)


def round(x, decimals=0):
    x = operand(x, "round")
    if not dtypes.is_float(x.dtype):
        return x
    if decimals == 0:
        return ew.round(x)
    s = 10.0 ** decimals
    return ew.div(ew.round(ew.mul(x, s)), s)


around = round


def rint(x):
    return round(x)


def log2(x):
    return ew.div(ew.log(x), math.log(2.0))


def log10(x):
    return ew.div(ew.log(x), math.log(10.0))


def logaddexp(x, y):
    x, y = _float_pair(x, y, "logaddexp")
    return log_add_exp(x, y, 1.0)


def log_add_exp(x, y, scale):
    """log_b(b^x + b^y) with scale = ln b, stable and smooth to every order.

    With c = stop_gradient(max(x, y)) it is c + log1p(s)/scale, s = b^(x-c) + b^(y-c) - 1,
    so every derivative is that of log_b(b^x + b^y) (d/dx = sigmoid(scale (x - y)): the
    second derivative at x == y is scale / 4, not the 0 a max/abs form gives). s is
    written two ways, exp of the smaller + expm1 of the larger (exactly 0), so a tiny tail
    keeps its digits; both ways are the same function of x and y, so the select between
    them leaves the derivatives alone. Infinite or NaN maxima give the max itself."""
    m = ew.max(x, y)
    fin = ew.is_finite(m)
    zero = ew.zeros_like(m)
    x, y = ew.select(fin, x, zero), ew.select(fin, y, zero)  # no inf - inf in either branch
    c = stop_gradient(ew.select(fin, m, zero))
    dx, dy = ew.sub(x, c), ew.sub(y, c)
    if scale != 1.0:
        dx, dy = ew.mul(dx, scale), ew.mul(dy, scale)
    s = ew.select(ew.ge(x, y), ew.add(ew.exp(dy), ew.expm1(dx)),
                  ew.add(ew.exp(dx), ew.expm1(dy)))
    tail = ew.log1p(s)
    if scale != 1.0:
        tail = ew.div(tail, scale)
    return ew.select(fin, ew.add(c, tail), m)


def sinc(x):
    x = float_operand(x, "sinc")
    px = ew.mul(x, math.pi)
    zero = ew.eq(x, 0)
    safe = ew.select(zero, ew.ones_like(px), px)
    return ew.select(zero, ew.ones_like(px), ew.div(ew.sin(safe), safe))


def deg2rad(x):
    return ew.mul(float_operand(x, "deg2rad"), math.pi / 180)


def rad2deg(x):
    return ew.mul(float_operand(x, "rad2deg"), 180 / math.pi)


radians, degrees = deg2rad, rad2deg


def hypot(x, y):
    x, y = _float_pair(x, y, "hypot")
    return ew.sqrt(ew.add(ew.mul(x, x), ew.mul(y, y)))


def logical_not(x):
    return ew.logical_not(_as_bool(x))


def logical_and(x, y):
    return ew.logical_and(_as_bool(x), _as_bool(y))


def logical_or(x, y):
    return ew.logical_or(_as_bool(x), _as_bool(y))


def logical_xor(x, y):
    return ew.logical_xor(_as_bool(x), _as_bool(y))


def _as_bool(x):
    x = operand(x, "logical")
    return x if x.dtype == dtypes.bool_ else ew.ne(x, 0)


def bitwise_and(x, y):
    return ew.logical_and(x, y)


def bitwise_or(x, y):
    return ew.logical_or(x, y)


def bitwise_xor(x, y):
    return ew.logical_xor(x, y)


def invert(x):
    return ew.logical_not(x)


bitwise_not = invert
left_shift, right_shift = ew.shift_left, ew.shift_right


def isnan(x):
    x = operand(x, "isnan")
    return ew.ne(x, x) if dtypes.is_float(x.dtype) else ew.ne(x, x)


def isinf(x):
    x = operand(x, "isinf")
    if not dtypes.is_float(x.dtype):
        return ew.ne(x, x)
    return ew.logical_and(ew.logical_not(ew.is_finite(x)), ew.eq(x, x))


def isposinf(x):
    return ew.logical_and(isinf(x), ew.gt(x, 0))


def isneginf(x):
    return ew.logical_and(isinf(x), ew.lt(x, 0))


def signbit(x):
    x = operand(x, "signbit")
    if not dtypes.is_float(x.dtype):
        return ew.lt(x, 0)
    # -0.0 has its sign bit set: 1 / -0.0 = -inf
    zero = ew.eq(x, 0)
    inv = ew.div(1.0, ew.select(zero, x, ew.ones_like(x)))
    return ew.select(zero, ew.lt(inv, 0), ew.lt(x, 0))


def where(condition, x=None, y=None, *, size=None, fill_value=None):
    """np.where. With the condition alone it is nonzero(condition): eager on a concrete
    condition, or with `size=` (and `fill_value=`) under jit and vmap, as in JAX."""
    if x is None and y is None:
        return nonzero(condition, size=size, fill_value=fill_value)
    if size is not None or fill_value is not None:
        raise ValueError("where: size and fill_value go with the one-argument form only")
    if x is None or y is None:
        raise ValueError("where: either both or neither of x and y must be given")
    cond = _as_bool(condition)
    return ew.select(cond, x, y)


def clip(a, a_min=None, a_max=None, *, min=None, max=None):
    a = operand(a, "clip")
    a_min = min if a_min is None else a_min
    a_max = max if a_max is None else a_max
    if a_min is not None:
        a = ew.max(a, a_min)
    if a_max is not None:
        a = ew.min(a, a_max)
    return a


def heaviside(x, h0):
    x, h0 = promote("heaviside", x, h0)
    return ew.select(ew.lt(x, 0), ew.zeros_like(x), ew.select(ew.gt(x, 0), ew.ones_like(x), h0))


def copysign(x, y):
    x, y = _float_pair(x, y, "copysign")
    return ew.select(signbit(y), ew.neg(ew.abs(x)), ew.abs(x))


def positive(x):
    return operand(x, "positive")


def conj(x):
    return operand(x, "conj")


conjugate = conj


def real(x):
    return operand(x, "real")


def fmax(x, y):
    x, y = promote("fmax", x, y)
    return ew.select(isnan(x), y, ew.select(isnan(y), x, ew.max(x, y)))


def fmin(x, y):
    x, y = promote("fmin", x, y)
    return ew.select(isnan(x), y, ew.select(isnan(y), x, ew.min(x, y)))


def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    x = operand(x, "nan_to_num")
    if not dtypes.is_float(x.dtype):
        return x
    fi = dtypes.finfo(x.dtype)
    x = ew.select(isnan(x), ew.mul(ew.ones_like(x), nan), x)
    x = ew.select(isposinf(x), ew.mul(ew.ones_like(x), float(fi.max) if posinf is None
                                      else posinf), x)
    return ew.select(isneginf(x), ew.mul(ew.ones_like(x), float(fi.min) if neginf is None
                                         else neginf), x)
