"""float32 exp, tanh, logistic, sin, cos, log, log1p and softplus that LLVM vectorizes
inside numba loops.

numba compiles `math.exp` / `np.tanh` on a float32 to a call of the C library's scalar
function per element (a 1M-element tanh took 28 ms, against NumPy's SIMD loop's 0.4 ms),
so fused loops with them used to stay NumPy calls, which hold the GIL between calls and
do not scale past a few threads. These are branch-free float32 arithmetic (selects, an
integer bit pattern for 2^n) that LLVM turns into vector code: a 1M-element tanh takes
1.3-1.7 ms on one core of this machine (2.1-2.3 while its e^2|x| went through exp32's
range checks and two-part scaling, for the same values), and a fused gelu backward 2.9 ms
against 4.3 ms of NumPy calls, on every core without the GIL.

Accuracy (tests/compiler/test_vecmath.py, against float64 over the whole float32 range
and the special values): exp within 1 ulp of the exact result (denormal results
included; NumPy's is within 2.5), tanh within 1.5 ulp (NumPy: 1.4), logistic within
2.5 (three roundings after exp's); sin and cos within 0.51 ulp below SIN_LIMIT (1.6e6),
libm's beyond (see below); log within 1 ulp (NumPy's float32 log measured 3.4 on the same
samples), log1p within 2.5 (NumPy: 1.9), softplus within 2. A 1M-element log takes 0.53
ms on one core (NumPy's SIMD loop 0.27): a loop with it wins by running on every core in
one call. softplus is max(x, 0) + log(1 + u), u = e^-|x| in [0, 1], without log1p's
division (a 100k-element softplus on one core 0.42 -> 0.27 ms: the VAE's likelihood in
benchmarks/training.py).
exp: Cody-Waite reduction x = n ln2 + r (ln2 in two parts), the degree-6 minimax
polynomial of Cephes' expf for e^r, and 2^n applied in two halves (results down to the
smallest denormal); tanh: Cephes' tanhf, an odd polynomial below |x| = 0.625 and
1 - 2 / (e^2|x| + 1) above; log: Cephes' logf (the mantissa in [sqrt(1/2), sqrt(2)) from
the bit pattern, a degree-8 polynomial), log1p: log(w) x / (w - 1), w = 1 + x. No
fast-math: every operation rounds as written, so the values are the same on every x86-64
CPU (with or without FMA, AVX2 or AVX-512).

Imported only by generated loop modules (loops.py), never at mirax's import: numba is
optional. numba inlines each function into the loops that call it (inline="always"):
left to LLVM's inliner, the call stayed a call on the GPU machine's numba 0.68.0 /
Python 3.12 (a 1M-element gelu took 16.7 ms on one core, scalar; 2.0 ms here), and in
the parallel wrappers here too (W4's third derivative 0.33 -> 0.22 ms on 2 cores, its
first call 2.5 -> 2.2 s). Loops must be compiled with error_model="numpy" (division
without a zero-divisor check, which would keep the loop scalar).
"""
import numba as nb
import numpy as np
from numba import types
from numba.extending import intrinsic

F = np.float32
EXP_HI = F(88.72283935546875)      # largest x with a finite e^x
EXP_LO = F(-103.97207641601562)    # below: e^x rounds to 0


@intrinsic
def _float_of_bits(typingctx, bits):
    """The float32 whose bit pattern is the low 32 bits of an integer."""
    if not isinstance(bits, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        v = args[0]
        if bits.bitwidth > 32:
            v = builder.trunc(v, context.get_value_type(types.int32))
        return builder.bitcast(v, context.get_value_type(types.float32))
    return types.float32(bits), codegen


@intrinsic
def _bits_of_float(typingctx, x):
    """The bit pattern of a float32, as an int32."""
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.int32))
    return types.int32(x), codegen


@nb.njit(error_model="numpy", cache=True, inline="always")
def _exp_parts32(x):
    """(e^r, n) with e^x = e^r 2^n, |r| <= ln2 / 2, for finite x."""
    n = np.floor(x * F(1.4426950408889634) + F(0.5))
    r = x - n * F(0.693359375)
    r = r - n * F(-2.12194440e-4)
    p = F(1.9875691500e-4)
    p = p * r + F(1.3981999507e-3)
    p = p * r + F(8.3334519073e-3)
    p = p * r + F(4.1665795894e-2)
    p = p * r + F(1.6666665459e-1)
    p = p * r + F(5.0000001201e-1)
    return p * (r * r) + r + F(1.0), np.int32(n)


@nb.njit(error_model="numpy", cache=True, inline="always")
def exp32(x):
    # arguments past either end (and NaN) are computed as 0, then replaced below: computed
    # at EXP_LO their result would be a subnormal, ~10x slower on x86 (masked softmax rows
    # of -1e9: 1.4 ms against 0.23 for 4096 x 64)
    y, k = _exp_parts32(x if EXP_LO <= x <= EXP_HI else F(0.0))
    h = k >> 1   # 2^k as 2^h 2^(k-h): both halves are normal floats
    y = y * _float_of_bits((h + 127) << 23) * _float_of_bits((k - h + 127) << 23)
    y = np.float32(np.inf) if x > EXP_HI else y
    y = F(0.0) if x < EXP_LO else y
    return x if x != x else y


@nb.njit(error_model="numpy", cache=True, inline="always")
def tanh32(x):
    a = np.abs(x)
    # e^2a for 2a in [0, 88]: 2^n is a normal float (n <= 127), applied in one product
    # (exp32's two halves give the same value); NaN is replaced at the end
    y, k = _exp_parts32(F(2.0) * (a if a < F(44.0) else F(44.0)))
    e = y * _float_of_bits((k + 127) << 23)
    big = F(1.0) - F(2.0) / (e + F(1.0))
    z = x * x
    p = F(-5.70498872745e-3)
    p = p * z + F(2.06390887954e-2)
    p = p * z + F(-5.37397155531e-2)
    p = p * z + F(1.33314422036e-1)
    p = p * z + F(-3.33332819422e-1)
    small = p * z * a + a
    y = np.copysign(small if a < F(0.625) else big, x)   # (tanh(-0) = -0)
    return x if x != x else y


@nb.njit(error_model="numpy", cache=True, inline="always")
def logistic32(x):
    # e^-|x| never overflows: 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below (tiny,
    # down to the denormals, where 1 / (1 + e^-x) would give 0)
    e = exp32(-np.abs(x))
    d = F(1.0) + e
    return F(1.0) / d if x >= F(0.0) else e / d


@nb.njit(error_model="numpy", cache=True, inline="always")
def _log_reduced32(f, ef):
    """log((1 + f) 2^ef) for f in [sqrt(1/2) - 1, sqrt(2) - 1]: f - f^2 / 2 + f^3 P(f)
    (Cephes' logf polynomial) + ef ln 2 (in two parts)."""
    z = f * f
    p = F(7.0376836292e-2)
    p = p * f + F(-1.1514610310e-1)
    p = p * f + F(1.1676998740e-1)
    p = p * f + F(-1.2420140846e-1)
    p = p * f + F(1.4249322787e-1)
    p = p * f + F(-1.6668057665e-1)
    p = p * f + F(2.0000714765e-1)
    p = p * f + F(-2.4999993993e-1)
    p = p * f + F(3.3333331174e-1)
    y = p * f * z
    y = y + ef * F(-2.12194440e-4)
    y = y - F(0.5) * z
    return f + y + ef * F(0.693359375)


@nb.njit(error_model="numpy", cache=True, inline="always")
def log32(x):
    # x = m 2^e with m in [sqrt(1/2), sqrt(2)) from the bit pattern (subnormals scaled by
    # 2^25 first), log x = log m + e ln 2 (_log_reduced32)
    tiny = x < F(1.1754943508222875e-38)
    bits = _bits_of_float(x * F(33554432.0) if tiny else x)
    e = ((bits >> 23) & 0xff) - (151 if tiny else 126)
    m = _float_of_bits((bits & 0x007fffff) | 0x3f000000)   # [0.5, 1)
    low = m < F(0.7071067811865476)
    f = (m + m if low else m) - F(1.0)
    ef = F(e - 1 if low else e)
    y = _log_reduced32(f, ef)
    y = np.float32(-np.inf) if x == F(0.0) else y
    y = np.float32(np.nan) if x < F(0.0) else y
    y = x if x == np.float32(np.inf) else y
    return x if x != x else y


@nb.njit(error_model="numpy", cache=True, inline="always")
def log1p32(x):
    # log(1 + x) = log(w) x / (w - 1) with w = 1 + x rounded (the quotient corrects w's
    # rounding), x itself where w rounds to 1
    w = F(1.0) + x
    d = w - F(1.0)
    y = log32(w) * (x / (d if d != F(0.0) else F(1.0)))
    y = x if d == F(0.0) else y
    y = x if x == np.float32(np.inf) else y
    return y


@nb.njit(error_model="numpy", cache=True, inline="always")
def softplus32(x):
    # log(1 + e^x) = max(x, 0) + log(1 + u), u = e^-|x| in [0, 1]: 1 + u = (1 + f) 2^e with
    # f = u itself below sqrt(2) - 1 (no rounding of 1 + u to correct: log1p32's division
    # is not needed) and f = (u - 1) / 2, e = 1 above (_log_reduced32)
    # (below 2^-40 log(1 + u) rounds to u: f = 0 there keeps the polynomial's products
    # out of the subnormal range, which costs x86 a microcode assist an operation)
    u = exp32(-np.abs(x))
    hi = u > F(0.41421356237309503)
    tiny = u < F(9.094947017729282e-13)
    f = (u - F(1.0)) * F(0.5) if hi else (F(0.0) if tiny else u)
    ef = F(1.0) if hi else F(0.0)
    y = _log_reduced32(f, ef)
    y = (x if x > F(0.0) else F(0.0)) + (u if tiny else y)
    return x if x != x else y


# --- sin and cos ----------------------------------------------------------------------------
# x = k pi/2 + r, |r| <= pi/4, in float64: pi/2 in three parts of 33 bits, so k * part is
# exact for |k| < 2^20 (|x| below SIN_LIMIT); then sin r and cos r by their Taylor series
# in float64 (degree 13 and 14: truncation below 1e-16), rounded once to float32 (within
# 0.5 ulp plus a hair). Above SIN_LIMIT the loop reports it and the caller runs the part
# again with libm's own sin / cos (`sin_exact`, `cos_exact`).
SIN_LIMIT = F(1.6e6)
_PIO2_1 = 1.57079632673412561417e+00
_PIO2_2 = 6.07710050650619224932e-11
_PIO2_3 = 2.02226624879595063154e-21
_TWO_OVER_PI = 6.36619772367581382433e-01


@nb.njit(error_model="numpy", cache=True, inline="always")
def _sincos_reduced(x):
    """(sin r, cos r, k mod 4) for x = k pi/2 + r."""
    xd = np.float64(x)
    k = np.floor(xd * _TWO_OVER_PI + 0.5)
    r = ((xd - k * _PIO2_1) - k * _PIO2_2) - k * _PIO2_3
    z = r * r
    s = 1.0 / 6227020800.0
    s = s * z - 1.0 / 39916800.0
    s = s * z + 1.0 / 362880.0
    s = s * z - 1.0 / 5040.0
    s = s * z + 1.0 / 120.0
    s = s * z - 1.0 / 6.0
    sin_r = r + r * z * s
    c = -1.0 / 87178291200.0
    c = c * z + 1.0 / 479001600.0
    c = c * z - 1.0 / 3628800.0
    c = c * z + 1.0 / 40320.0
    c = c * z - 1.0 / 720.0
    c = c * z + 1.0 / 24.0
    c = c * z - 0.5
    cos_r = 1.0 + z * c
    q = k - 4.0 * np.floor(k * 0.25)   # k mod 4, as a float (NaN for NaN and inf)
    return sin_r, cos_r, q


@nb.njit(error_model="numpy", cache=True, inline="always")
def sin32(x):
    s, c, q = _sincos_reduced(x)
    y = s if q == 0.0 else (c if q == 1.0 else (-s if q == 2.0 else -c))
    return x if x == F(0.0) else np.float32(y)   # (sin(-0) = -0)


@nb.njit(error_model="numpy", cache=True, inline="always")
def cos32(x):
    s, c, q = _sincos_reduced(x)
    y = c if q == 0.0 else (-s if q == 1.0 else (-c if q == 2.0 else s))
    return np.float32(y)


@nb.njit(error_model="numpy", cache=True, inline="always")
def sin_exact(x):
    return np.float32(np.sin(np.float64(x)))


@nb.njit(error_model="numpy", cache=True, inline="always")
def cos_exact(x):
    return np.float32(np.cos(np.float64(x)))
