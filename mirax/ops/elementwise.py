"""Elementwise primitives: unary and binary math, comparisons, select, casts.

Binary primitives take operands of one dtype (wrappers promote) and broadcast like NumPy.
Derivatives are declared once per operand as a function linear in `g`
(`d=lambda g, x, y: g * y` for exp): the jvp feeds it the tangent, the vjp the cotangent
(then sums over broadcast axes), so both modes share one formula, and since formulas are
written with wrappers every derivative is itself differentiable.

Strong zeros (API.md): where the local derivative can be inf/NaN at a finite point (sqrt,
log, division, pow, ...), `_guard` makes a zero g contribute exactly 0, so `where(x > 0,
sqrt(x), 0)` has a finite gradient at 0. Ops whose derivative is finite need no guard.
"""
from __future__ import annotations

import builtins
import enum
import math
import warnings

import numpy as np

from mirax.core import dtypes, tree
from mirax.core import runtime
from mirax.core import trace as _trace
from mirax.core.array import Array
from mirax.core.avals import ShapedArray
from mirax.core.primitive import Primitive
from mirax.core.trace import aval_of
from mirax.core.errors import DTypeError
from mirax.ops import special_impl
from mirax.ops import shape as shape_ops
from mirax.ops import reduction as reduction_ops
from mirax.ops.common import (_scalar_buf, broadcast_shapes, float_operand, operand, promote,
                              short)

UNARY_OPS: dict[str, Primitive] = {}
BINARY_OPS: dict[str, Primitive] = {}


def _is_diff(x) -> bool:
    return dtypes.is_inexact(aval_of(x).dtype)


# --- generic rules ----------------------------------------------------------------------
def _nary_jvp(prim, derivs):
    def jvp(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        t_out = None
        for d, x, t in zip(derivs, primals, tangents):
            if t is None or d is None:
                continue
            c = d(t, *primals, out)
            if c is None:
                continue
            # (the sum broadcasts as the op did: a lower-rank contribution, the tangent of
            # a bias, say, is not materialized at the output's shape)
            t_out = c if t_out is None else add(t_out, c)
        if t_out is not None and t_out.shape != out.shape:
            t_out = shape_ops.broadcast_to(t_out, out.shape)
        return out, t_out
    return jvp


def _nary_vjp(derivs):
    """The vjp from per-operand derivative formulas (each linear in the cotangent). For a
    holomorphic op the jvp formula g f'(z) is its own transpose (JAX's convention: plain
    transposition, no conjugation); non-holomorphic ones (abs, real, conj) give their own."""
    def vjp(ct, out, *primals, needs=None, **params):
        cts = []
        for i, (d, x) in enumerate(zip(derivs, primals)):
            if d is None or not _is_diff(x) or (needs is not None and not needs[i]):
                cts.append(None)
                continue
            c = d(ct, *primals, out)
            cts.append(None if c is None else unbroadcast(c, aval_of(x).shape))
        return cts
    return vjp


def _nary_vmap(prim):
    def vmap(args, dims, **params):
        out_ndim = builtins.max(aval_of(a).ndim - (d is not None) for a, d in zip(args, dims))
        moved = []
        for a, d in zip(args, dims):
            if d is None:
                moved.append(a)
                continue
            a = shape_ops.moveaxis(a, d, 0) if d != 0 else a
            logical = aval_of(a).shape[1:]
            if len(logical) < out_ndim:
                a = shape_ops.reshape(a, (a.shape[0],) + (1,) * (out_ndim - len(logical)) + logical)
            moved.append(a)
        return prim.bind(*moved, **params), 0
    return vmap


def unary(name, impl, d=None, *, float_only=True, keeps_weak=True, out_dtype=None,
          complex_ok=True, dt=None):
    """Declare an elementwise unary primitive `name` with derivative d(g, x, y) (jvp and
    vjp), or d for the jvp and its transpose dt for the vjp where they differ (complex
    non-holomorphic ops). complex_ok=False: the op has no complex form (floor, erf)."""
    p = Primitive(name, keeps_weak=keeps_weak)
    p.def_impl(impl)
    p.def_abstract_eval(lambda x: ShapedArray(x.shape, out_dtype or x.dtype))
    p.def_jvp(_nary_jvp(p, [d]))
    p.def_vjp(_nary_vjp([d if dt is None else dt]))
    p.vjp_takes_needs = True
    p.def_vmap(_nary_vmap(p))
    p.float_only = float_only
    p.complex_ok = complex_ok
    UNARY_OPS[name] = p
    return p


def _binary_abstract_eval(name, out_dtype):
    def rule(x, y):
        if x.dtype != y.dtype:
            raise DTypeError(f"{name}: operands must have one dtype, got {short(x)} and "
                            f"{short(y)} (the mirax.numpy wrappers promote)")
        return ShapedArray(broadcast_shapes(name, x, y), out_dtype or x.dtype)
    return rule


def binary(name, impl, d=(None, None), *, keeps_weak=True, out_dtype=None, dt=None):
    """Declare an elementwise binary primitive with per-operand derivatives d(g, x, y, out)
    (dt: their transposes for the vjp, where they differ)."""
    p = Primitive(name, keeps_weak=keeps_weak)
    p.def_impl(impl)
    p.def_abstract_eval(_binary_abstract_eval(name, out_dtype))
    derivs = list(d)
    p.def_jvp(_nary_jvp(p, derivs))
    p.def_vjp(_nary_vjp(derivs if dt is None else list(dt)))
    p.vjp_takes_needs = True
    p.def_vmap(_nary_vmap(p))
    BINARY_OPS[name] = p
    return p


def _guard(g, d):
    """g * d, where a zero g gives exactly 0 even when d is inf or NaN (strong zero)."""
    return mul_strong(g, d)


def _mul_strong_impl(g, d):
    # NOTE: g * d is NaN exactly where a fix may be needed (0 * inf, 0 * NaN), so the
    # common case costs one multiply and one isnan pass.
    with np.errstate(invalid="ignore", over="ignore"):
        out = np.multiply(g, d)
    nan = np.isnan(out)
    if nan.any():
        out = np.where(nan & (np.broadcast_to(g, out.shape) == 0), 0, out).astype(out.dtype)
    return out


# --- arithmetic ---------------------------------------------------------------------------
# Each line: the primitive, its NumPy impl, and its derivative (math in the comment).
add_p = binary("add", np.add, (lambda g, x, y, o: g, lambda g, x, y, o: g))
sub_p = binary("sub", np.subtract, (lambda g, x, y, o: g, lambda g, x, y, o: neg(g)))
mul_p = binary("mul", np.multiply, (lambda g, x, y, o: mul(g, y), lambda g, x, y, o: mul(x, g)))
# mul_strong: multiplication in which 0 * inf = 0 * NaN = 0 (the strong-zero product that
# derivative rules use); its own derivatives are strong products again.
mul_strong_p = binary("mul_strong", lambda g, d: _mul_strong_impl(g, d),
                      (lambda t, g, d, o: mul_strong(t, d), lambda t, g, d, o: mul_strong(g, t)))
# d(x/y) = dx / y - (x/y) dy / y
div_p = binary("div", lambda x, y: _div_impl(x, y),
               (lambda g, x, y, o: _guard(g, reciprocal(y)),
                lambda g, x, y, o: _guard(g, neg(div(o, y)))))
# rem(x, y) = x - y * trunc(x / y): d/dx = 1, d/dy = -trunc(x / y)
rem_p = binary("rem", lambda x, y: _rem_impl(x, y),
               (lambda g, x, y, o: g, lambda g, x, y, o: mul(g, neg(trunc(div(x, y))))))
# d x^y = y x^(y-1) dx + log(x) x^y dy, with the dy term 0 at x = 0 (as JAX); y x^(y-1) is
# a strong product, so x^0 has derivative 0 at x = 0 (JAX: NaN) and x^1 second derivative 0
pow_p = binary("pow", lambda x, y: _pow_impl(x, y),
               (lambda g, x, y, o: _guard(g, mul_strong(y, pow(x, sub(y, 1)))),
                lambda g, x, y, o: _guard(g, select(eq(x, 0), zeros_like(o),
                                                    mul(log(select(eq(x, 0), ones_like(x), x)),
                                                        o)))))
# max/min: the winner takes g; ties split it evenly
max_p = binary("max", np.maximum,
               (lambda g, x, y, o: mul(g, _win(x, y)), lambda g, x, y, o: mul(g, _win(y, x))))
min_p = binary("min", np.minimum,
               (lambda g, x, y, o: mul(g, _win(y, x)), lambda g, x, y, o: mul(g, _win(x, y))))
# d atan2(x, y) = (y dx - x dy) / (x^2 + y^2)
atan2_p = binary("atan2", np.arctan2,
                 (lambda g, x, y, o: _guard(g, div(y, add(mul(x, x), mul(y, y)))),
                  lambda g, x, y, o: _guard(g, div(neg(x), add(mul(x, x), mul(y, y))))))
nextafter_p = binary("nextafter", np.nextafter)
# complex(x, y) = x + iy on real operands of one dtype: linear; its transpose maps ct to
# (Re ct, -Im ct) (JAX's convention: the transpose of y -> iy is ct -> Re(i ct))
complex_p = binary("complex", lambda x, y: _complex_impl(x, y),
                   (lambda g, x, y, o: complex(g, zeros_like(g)),
                    lambda g, x, y, o: complex(zeros_like(g), g)),
                   dt=(lambda ct, x, y, o: real(ct), lambda ct, x, y, o: neg(imag(ct))))


@complex_p.def_abstract_eval
def _complex_abstract_eval(x, y):
    base = _binary_abstract_eval("complex", None)(x, y)
    if not dtypes.is_float(x.dtype):
        raise TypeError(f"complex: expected float operands, got {short(x)}")
    return ShapedArray(base.shape, dtypes.complex_dtype(x.dtype))


def _complex_impl(x, y):
    out = np.empty(np.broadcast_shapes(np.shape(x), np.shape(y)),
                   dtypes.complex_dtype(np.result_type(x)))
    out.real, out.imag = x, y
    return out
and_p = binary("and", np.bitwise_and)
or_p = binary("or", np.bitwise_or)
xor_p = binary("xor", np.bitwise_xor)
shift_left_p = binary("shift_left", np.left_shift)
shift_right_p = binary("shift_right", np.right_shift)


def _win(x, y):
    """1 where x > y, 0.5 on ties, 0 where x < y (as x's dtype)."""
    a = aval_of(x)  # two converted masks (cheap) rather than two selects (slow on the CPU)
    return add(convert_element_type(gt(x, y), a.dtype, a.weak_type),
               mul(convert_element_type(eq(x, y), a.dtype, a.weak_type), 0.5))


def _div_impl(x, y):
    if x.dtype.kind in "iu":  # C-style truncating division, as lax.div
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.where(y == 0, 0, np.abs(x) // np.where(y == 0, 1, np.abs(y)))
        return (np.sign(x) * np.sign(y) * q).astype(x.dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.true_divide(x, y)


def _rem_impl(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        if x.dtype.kind in "iu":
            return np.fmod(x, np.where(y == 0, 1, y)).astype(x.dtype)
        return np.fmod(x, y)


def _pow_impl(x, y):
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if x.dtype.kind in "iu":
            # negative exponents as lax.pow: 1 / x^-y truncated, so only |x| == 1 survives
            out = np.power(x, np.maximum(y, 0))
            if (y < 0).any():
                odd = np.where(np.remainder(y, 2) == 1, -1, 1)
                out = np.where(y < 0, np.where(x == 1, 1, np.where(x == -1, odd, 0)), out)
            return np.asarray(out).astype(x.dtype)
        return np.power(x, y)


# Floating-point RuntimeWarnings (inf - inf, 0 * inf, log(0)) raised inside mirax's own
# code are not shown: XLA and JAX compute the IEEE result (NaN, inf) silently, and an
# errstate block around every cheap op costs more than the op. Warnings from the user's
# own NumPy calls are untouched (the filter matches the module that called the ufunc).
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"mirax(\.|$)")


def _errstate(fn):
    def run(x):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return fn(x)
    run.__name__ = getattr(fn, "__name__", "impl")
    run.ufunc = fn  # lowering may call the ufunc directly inside one errstate block
    return run


neg_p = unary("neg", np.negative, lambda g, x, y: neg(g), float_only=False)
sign_p = unary("sign", np.sign, None, float_only=False)        # d sign = 0 (also at 0)
floor_p = unary("floor", np.floor, None, complex_ok=False)
ceil_p = unary("ceil", np.ceil, None, complex_ok=False)
round_p = unary("round", np.round, None, complex_ok=False)    # half to even, as NumPy
trunc_p = unary("trunc", np.trunc, None, complex_ok=False)
# d|x| = sign(x) dx, 0 at 0; for complex z: d|z| = Re(conj(sign z) dz), whose transpose
# takes a real ct to ct conj(sign z) (JAX's convention)
abs_p = unary("abs", np.abs,
              lambda g, x, y: _abs_d(g, x), float_only=False,
              dt=lambda ct, x, y: mul(ct, _conj_sign(x)))
abs_p.def_abstract_eval(lambda x: ShapedArray(x.shape, dtypes.real_dtype(x.dtype)))
exp_p = unary("exp", _errstate(np.exp), lambda g, x, y: mul(g, y))              # d exp = exp
exp2_p = unary("exp2", _errstate(np.exp2), lambda g, x, y: mul(g, mul(y, math.log(2.0))))
expm1_p = unary("expm1", _errstate(np.expm1), lambda g, x, y: mul(g, add(y, 1.0)))
log_p = unary("log", _errstate(np.log), lambda g, x, y: _guard(g, reciprocal(x)))  # 1/x
log1p_p = unary("log1p", _errstate(np.log1p), lambda g, x, y: _guard(g, reciprocal(add(x, 1.0))))
sqrt_p = unary("sqrt", _errstate(np.sqrt), lambda g, x, y: _guard(g, div(0.5, y)))  # 1/(2 sqrt)
# rsqrt: y = x^-1/2, dy = -y / (2x)
rsqrt_p = unary("rsqrt", _errstate(lambda x: 1 / np.sqrt(x)),
                lambda g, x, y: _guard(g, div(mul(y, -0.5), x)))
cbrt_p = unary("cbrt", np.cbrt, lambda g, x, y: _guard(g, div(y, mul(x, 3.0))),  # y / 3x
               complex_ok=False)
tanh_p = unary("tanh", np.tanh, lambda g, x, y: mul(g, sub(1.0, mul(y, y))))       # 1 - y^2
logistic_p = unary("logistic", _errstate(lambda x: _logistic_impl(x)),
                   lambda g, x, y: mul(g, mul(y, sub(1.0, y))))                    # y (1 - y)
sin_p = unary("sin", np.sin, lambda g, x, y: mul(g, cos(x)))
cos_p = unary("cos", np.cos, lambda g, x, y: mul(g, neg(sin(x))))
tan_p = unary("tan", np.tan, lambda g, x, y: mul(g, add(1.0, mul(y, y))))           # 1 + y^2
asin_p = unary("asin", _errstate(np.arcsin),
               lambda g, x, y: _guard(g, rsqrt(sub(1.0, mul(x, x)))))              # 1/sqrt(1-x^2)
acos_p = unary("acos", _errstate(np.arccos),
               lambda g, x, y: _guard(g, neg(rsqrt(sub(1.0, mul(x, x))))))
atan_p = unary("atan", np.arctan, lambda g, x, y: div(g, add(1.0, mul(x, x))))     # 1/(1+x^2)
sinh_p = unary("sinh", _errstate(np.sinh), lambda g, x, y: mul(g, cosh(x)))
cosh_p = unary("cosh", _errstate(np.cosh), lambda g, x, y: mul(g, sinh(x)))
asinh_p = unary("asinh", np.arcsinh, lambda g, x, y: mul(g, rsqrt(add(mul(x, x), 1.0))))
# d acosh = 1 / (sqrt(x - 1) sqrt(x + 1)) (= 1/sqrt(x^2 - 1) for real x > 1; the product
# form is the principal branch's derivative for complex x too)
acosh_p = unary("acosh", _errstate(np.arccosh),
                lambda g, x, y: _guard(g, mul(rsqrt(sub(x, 1.0)), rsqrt(add(x, 1.0)))))
atanh_p = unary("atanh", _errstate(np.arctanh),
                lambda g, x, y: _guard(g, reciprocal(sub(1.0, mul(x, x)))))
# d erf = 2/sqrt(pi) exp(-x^2);  d erf_inv = sqrt(pi)/2 exp(y^2)
erf_p = unary("erf", special_impl.erf,
              lambda g, x, y: mul(g, mul(exp(neg(mul(x, x))), 2.0 / math.sqrt(math.pi))),
              complex_ok=False)
erfc_p = unary("erfc", special_impl.erfc,
               lambda g, x, y: mul(g, mul(exp(neg(mul(x, x))), -2.0 / math.sqrt(math.pi))),
               complex_ok=False)
erf_inv_p = unary("erf_inv", special_impl.erfinv,
                  lambda g, x, y: _guard(g, mul(exp(mul(y, y)), math.sqrt(math.pi) / 2.0)),
                  complex_ok=False)
lgamma_p = unary("lgamma", special_impl.lgamma, lambda g, x, y: _guard(g, digamma(x)),
                 complex_ok=False)
digamma_p = unary("digamma", special_impl.digamma,
                  lambda g, x, y: _guard(g, polygamma1(x)), complex_ok=False)
polygamma1_p = unary("polygamma1", special_impl.polygamma1, None, complex_ok=False)
not_p = unary("not", lambda x: np.logical_not(x) if x.dtype == np.bool_ else np.invert(x),
              None, float_only=False, complex_ok=False)
is_finite_p = unary("is_finite", np.isfinite, None, keeps_weak=False, out_dtype=np.bool_)
is_finite_p.def_abstract_eval(lambda x: ShapedArray(x.shape, np.bool_))


def _logistic_impl(x):
    if x.dtype.kind == "c":
        return (1 / (1 + np.exp(-x))).astype(x.dtype)
    # stable for both signs: 1/(1+e^-x) for x >= 0, e^x/(1+e^x) otherwise
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)


# --- complex parts: real, imag, conj ------------------------------------------------------
# All three are R-linear. Transposes in JAX's convention: real: ct -> ct + 0i; imag:
# ct -> -i ct (= complex(0, -ct)); conj: ct -> conj(ct).
real_p = unary("real", np.real, lambda g, x, y: real(g), float_only=False,
               dt=lambda ct, x, y: complex(ct, zeros_like(ct)))
real_p.def_abstract_eval(lambda x: ShapedArray(x.shape, dtypes.real_dtype(x.dtype)))
imag_p = unary("imag", np.imag, lambda g, x, y: imag(g), float_only=False,
               dt=lambda ct, x, y: complex(zeros_like(ct), neg(ct)))
imag_p.def_abstract_eval(lambda x: ShapedArray(x.shape, dtypes.real_dtype(x.dtype)))
conj_p = unary("conj", np.conj, lambda g, x, y: conj(g), float_only=False)


def _conj_sign(x):
    """conj(x) / |x| for complex x (0 at 0), sign(x) for real x. NOTE: for complex x it is
    built from conj, div and abs (not sign, whose derivative is 0) so that second
    derivatives of |z| are right."""
    if not dtypes.is_complex(aval_of(x).dtype):
        return sign(x)
    a = abs(x)
    safe = select(eq(a, 0), ones_like(a), a)
    return div(conj(x), convert_element_type(safe, aval_of(x).dtype))


def _abs_d(g, x):
    if dtypes.is_complex(aval_of(x).dtype):
        return real(mul(g, _conj_sign(x)))
    return mul(g, sign(x))


# --- comparisons and select ---------------------------------------------------------------
def _compare(name, impl):
    p = binary(name, impl, keeps_weak=False, out_dtype=np.bool_)
    p.def_abstract_eval(lambda x, y: ShapedArray(
        _binary_abstract_eval(name, None)(x, y).shape, np.bool_))
    return p


eq_p = _compare("eq", np.equal)
ne_p = _compare("ne", np.not_equal)
lt_p = _compare("lt", np.less)
le_p = _compare("le", np.less_equal)
gt_p = _compare("gt", np.greater)
ge_p = _compare("ge", np.greater_equal)

# select(pred, on_true, on_false): the cotangent goes to the branch that was taken, the
# other branch gets exactly zero (a strong zero), never ct * garbage.
select_p = Primitive("select", keeps_weak=True)
select_p.def_impl(lambda p, a, b: np.where(p, a, b))


@select_p.def_abstract_eval
def _select_abstract_eval(p, a, b):
    if p.dtype != np.bool_:
        raise TypeError(f"select: predicate must be bool, got {short(p)}")
    if a.dtype != b.dtype:
        raise DTypeError(f"select: branches must have one dtype, got {short(a)} and {short(b)}")
    return ShapedArray(broadcast_shapes("select", p, a, b), a.dtype)


select_p.keeps_weak = False
select_p.def_jvp(_nary_jvp(select_p, [None, lambda g, p, a, b, o: select(p, g, zeros_like(g)),
                                      lambda g, p, a, b, o: select(p, zeros_like(g), g)]))
select_p.vjp_takes_needs = True
select_p.def_vjp(_nary_vjp([None, lambda g, p, a, b, o: select(p, g, zeros_like(g)),
                            lambda g, p, a, b, o: select(p, zeros_like(g), g)]))
select_p.def_vmap(_nary_vmap(select_p))


# --- convert_element_type -----------------------------------------------------------------
convert_element_type_p = Primitive("convert_element_type")
convert_element_type_p.def_impl(
    lambda x, *, new_dtype, weak_type=False: _convert_impl(x, new_dtype))


def _convert_impl(x, dtype):
    if np.iscomplexobj(x) and np.dtype(dtype).kind != "c":  # the real part, as JAX
        x = np.real(x)
    if dtypes.is_int(dtype) and x.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            return np.asarray(x).astype(dtype)
    return np.asarray(x).astype(dtype)


@convert_element_type_p.def_abstract_eval
def _convert_abstract_eval(x, *, new_dtype, weak_type=False):
    return ShapedArray(x.shape, new_dtype, weak_type)


@convert_element_type_p.def_jvp
def _convert_jvp(primals, tangents, *, new_dtype, weak_type=False):
    (x,), (t,) = primals, tangents
    out = convert_element_type(x, new_dtype, weak_type=weak_type)
    if t is None or not dtypes.is_inexact(new_dtype):
        return out, None
    return out, convert_element_type(t, new_dtype, weak_type=weak_type)


@convert_element_type_p.def_vjp
def _convert_vjp(ct, out, x, *, new_dtype, weak_type=False):
    # real -> complex transposes to the real part; complex -> real (the real part) to ct + 0i
    a = aval_of(x)
    if not dtypes.is_inexact(a.dtype) or not dtypes.is_inexact(new_dtype):
        return [None]
    if dtypes.is_complex(aval_of(ct).dtype) and not dtypes.is_complex(a.dtype):
        ct = real(ct)
    return [convert_element_type(ct, a.dtype, weak_type=a.weak_type)]


@convert_element_type_p.def_vmap
def _convert_vmap(args, dims, **params):
    return convert_element_type_p.bind(args[0], **params), dims[0]


# --- wrappers -----------------------------------------------------------------------------
# lax-level: operands of one dtype (Python scalars are weak and adopt it).
# NOTE: the eager fast paths below skip promote/bind/eager when no interpreter is active
# and every buffer is on the host; they compute exactly what the general path computes
# (same impl, same dtype and weak bit), only with less Python in between.
_state, _busy, _nonhost = _trace.state, _trace.busy, runtime.nonhost_buffers


def _bind2(p, x, y):
    if not (_busy[0] and _state.active) and not _nonhost[0]:
        tx, ty = type(x), type(y)
        if tx is Array:
            bx = x._buf
            if ty is Array:
                by = y._buf
                if bx.dtype == by.dtype and x._weak == y._weak:
                    try:
                        return Array(p.impl(bx, by), p.keeps_weak and x._weak)
                    except Exception:  # the op's own error (shapes), as in eager()
                        _trace.explain_failure(p, (x, y), {})
                        raise
            elif (ty is float or ty is int) and bx.dtype.kind in "fc" and not x._weak:
                return Array(p.impl(bx, _scalar_buf(y, bx.dtype)), False)
        elif ty is Array and (tx is float or tx is int):
            by = y._buf
            if by.dtype.kind in "fc" and not y._weak:
                return Array(p.impl(_scalar_buf(x, by.dtype), by), False)
    x, y = promote(p.name, x, y)
    return p.bind(x, y)


def add(x, y):
    return _bind2(add_p, x, y)


def sub(x, y):
    return _bind2(sub_p, x, y)


def mul(x, y):
    return _bind2(mul_p, x, y)


def div(x, y):
    return _bind2(div_p, x, y)


def mul_strong(x, y):
    return _bind2(mul_strong_p, x, y)


def rem(x, y):
    return _bind2(rem_p, x, y)


def pow(x, y):
    return _bind2(pow_p, x, y)


def max(x, y):
    return _bind2(max_p, x, y)


def min(x, y):
    return _bind2(min_p, x, y)


def atan2(x, y):
    x, y = promote("atan2", x, y)
    if not dtypes.is_float(x.dtype):  # JAX: lax.atan2 takes floats only (NumPy's: float64)
        raise TypeError(f"atan2: requires floating-point operands, got {short(x)} and "
                        f"{short(y)}; mirax.numpy.arctan2 converts integers")
    return atan2_p.bind(x, y)


def nextafter(x, y):
    return _bind2(nextafter_p, x, y)


def eq(x, y):
    return _bind2(eq_p, x, y)


def ne(x, y):
    return _bind2(ne_p, x, y)


def lt(x, y):
    return _bind2(lt_p, x, y)


def le(x, y):
    return _bind2(le_p, x, y)


def gt(x, y):
    return _bind2(gt_p, x, y)


def ge(x, y):
    return _bind2(ge_p, x, y)


def _bitwise(p, x, y):
    x, y = promote(p.name, x, y)
    if dtypes.is_float(x.dtype):
        raise TypeError(f"{p.name}: expected integer or bool operands, got {short(x)}")
    return p.bind(x, y)


def logical_and(x, y):
    return _bitwise(and_p, x, y)


def logical_or(x, y):
    return _bitwise(or_p, x, y)


def logical_xor(x, y):
    return _bitwise(xor_p, x, y)


def shift_left(x, y):
    return _bitwise(shift_left_p, x, y)


def shift_right(x, y):
    return _bitwise(shift_right_p, x, y)


def logical_not(x):
    return not_p.bind(operand(x, "not"))


def _unary_wrapper(p, kinds=None):
    kinds = (kinds or ("f" if p.float_only else "fiub")) + ("c" if p.complex_ok else "")

    def wrapper(x):
        if type(x) is Array and not (_busy[0] and _state.active) and not _nonhost[0]:
            b = x._buf
            if b.dtype.kind in kinds:
                return Array(p.impl(b), p.keeps_weak and x._weak)
        if p.float_only:
            x = float_operand(x, p.name)
        else:
            x = operand(x, p.name)
            if x.dtype == np.bool_ and "b" not in kinds:
                raise TypeError(f"{p.name}: does not accept {short(x)} (JAX: integer, "
                                "floating or complex operands)")
        if not p.complex_ok and dtypes.is_complex(x.dtype):
            raise TypeError(f"{p.name}: complex input {short(x)} is not supported")
        return p.bind(x)
    wrapper.__name__ = p.name
    return wrapper


floor, ceil, round, trunc, abs = map(_unary_wrapper, (floor_p, ceil_p, round_p, trunc_p, abs_p))
neg, sign = _unary_wrapper(neg_p, "fiu"), _unary_wrapper(sign_p, "fiu")  # bool: JAX raises


class RoundingMethod(enum.IntEnum):
    """lax.round's tie rule (JAX's names and values)."""
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def lax_round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):
    """lax.round: ties away from zero by default, as JAX (mnp.round: to even, as NumPy).
    Away from zero is trunc(x) moved one step out where |x - trunc(x)| >= 1/2; x - trunc(x)
    is exact, so large values (already integers) are never moved."""
    if rounding_method == RoundingMethod.TO_NEAREST_EVEN:
        return round(x)
    if rounding_method != RoundingMethod.AWAY_FROM_ZERO:
        raise ValueError(f"round: rounding_method must be a RoundingMethod (0 or 1), got "
                         f"{rounding_method!r}")
    x = float_operand(x, "round")
    t = trunc(x)
    return select(ge(abs(sub(x, t)), 0.5), add(t, sign(x)), t)


exp, exp2, expm1, log, log1p, sqrt, rsqrt, cbrt = map(
    _unary_wrapper, (exp_p, exp2_p, expm1_p, log_p, log1p_p, sqrt_p, rsqrt_p, cbrt_p))
tanh, logistic, sin, cos, tan, asin, acos, atan = map(
    _unary_wrapper, (tanh_p, logistic_p, sin_p, cos_p, tan_p, asin_p, acos_p, atan_p))
sinh, cosh, asinh, acosh, atanh = map(_unary_wrapper, (sinh_p, cosh_p, asinh_p, acosh_p, atanh_p))
erf, erfc, erf_inv, lgamma, digamma, polygamma1 = map(
    _unary_wrapper, (erf_p, erfc_p, erf_inv_p, lgamma_p, digamma_p, polygamma1_p))


def real(x):
    """The real part (a real input is returned as is)."""
    x = operand(x, "real")
    return real_p.bind(x) if dtypes.is_complex(x.dtype) else x


def imag(x):
    """The imaginary part (zeros for a real input)."""
    x = operand(x, "imag")
    return imag_p.bind(x) if dtypes.is_complex(x.dtype) else zeros_like(x)


def conj(x):
    """The complex conjugate (a real input is returned as is)."""
    x = operand(x, "conj")
    return conj_p.bind(x) if dtypes.is_complex(x.dtype) else x


def complex(x, y):
    """x + iy from real parts (lax.complex); ints and bools become float32 first."""
    x, y = promote("complex", float_operand(x, "complex"), float_operand(y, "complex"))
    if dtypes.is_complex(x.dtype):
        raise TypeError(f"complex: expected real operands, got {short(x)}")
    return complex_p.bind(x, y)


def is_finite(x):
    x = operand(x, "is_finite")
    return is_finite_p.bind(x)


def reciprocal(x):
    return div(1.0, x)


def select(pred, on_true, on_false):
    pred = operand(pred, "select")
    if pred.dtype != np.bool_:
        raise TypeError(f"select: predicate must be bool, got {short(pred)}")
    a, b = promote("select", on_true, on_false)
    return select_p.bind(pred, a, b)


def convert_element_type(x, new_dtype, weak_type=False):
    x = operand(x, "convert_element_type")
    new_dtype = dtypes.canonicalize(new_dtype)
    if x.dtype == new_dtype and x.weak_type == weak_type:
        return x
    return convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type)


def zeros_like(x):
    a = aval_of(x)
    return shape_ops.full(a.shape, 0, a.dtype, weak_type=a.weak_type)


def ones_like(x):
    a = aval_of(x)
    return shape_ops.full(a.shape, 1, a.dtype, weak_type=a.weak_type)


def unbroadcast(ct, shape):
    """Sum `ct` down to `shape`: the adjoint of NumPy broadcasting."""
    if tuple(ct.shape) == tuple(shape):
        return ct
    lead = len(ct.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, d in enumerate(shape)
                                      if d == 1 and ct.shape[i + lead] != 1)
    out = reduction_ops.reduce_sum(ct, axes) if axes else ct
    return shape_ops.reshape(out, shape) if tuple(out.shape) != tuple(shape) else out




# --- stop_gradient --------------------------------------------------------------------------
stop_gradient_p = Primitive("stop_gradient", keeps_weak=True)
stop_gradient_p.def_impl(lambda x: x)
stop_gradient_p.def_abstract_eval(lambda x: x)
stop_gradient_p.def_jvp(lambda primals, tangents: (stop_gradient_p.bind(primals[0]), None))
stop_gradient_p.def_vjp(lambda ct, out, x: [None])
stop_gradient_p.def_vmap(lambda args, dims: (stop_gradient_p.bind(args[0]), dims[0]))


def stop_gradient(x):
    """x unchanged, with zero derivative in every mode (applies to each leaf of a pytree)."""
    def leaf(v):
        v = operand(v, "stop_gradient")
        return stop_gradient_p.bind(v) if dtypes.is_float(v.dtype) else v
    return tree.map(leaf, x)
