"""mirax.scipy.special: special functions on mirax ops (scipy.special / jax.scipy.special
names). logsumexp is the fused composite of mirax/ops/nn.py."""
from __future__ import annotations

from mirax.ops import elementwise as el
from mirax.ops.common import float_operand, promote
from mirax.ops.nn import logsumexp as _logsumexp


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """log(sum(b * exp(a))) over axis, computed stably; with return_sign=True, b may be
    negative and the result is (log|sum|, sign(sum)), as scipy."""
    return _logsumexp(a, axis=axis, keepdims=keepdims, b=b, return_sign=return_sign)


def erf(x):
    return el.erf(x)


def erfc(x):
    return el.erfc(x)


def erfinv(x):
    return el.erf_inv(x)


def gammaln(x):
    return el.lgamma(x)


def digamma(x):
    return el.digamma(x)


def expit(x):
    return el.logistic(x)


def logit(x):
    x = float_operand(x, "logit")
    return el.log(el.div(x, el.sub(1.0, x)))


def xlogy(x, y):
    """x * log(y), and 0 where x == 0 (also for y == 0)."""
    x, y = promote("xlogy", float_operand(x, "xlogy"), float_operand(y, "xlogy"))
    zero = el.eq(x, 0)
    safe_y = el.select(zero, el.ones_like(y), y)
    return el.select(zero, el.zeros_like(x), el.mul(x, el.log(safe_y)))


def xlog1py(x, y):
    """x * log1p(y), and 0 where x == 0."""
    x, y = promote("xlog1py", float_operand(x, "xlog1py"), float_operand(y, "xlog1py"))
    zero = el.eq(x, 0)
    safe_y = el.select(zero, el.zeros_like(y), y)
    return el.select(zero, el.zeros_like(x), el.mul(x, el.log1p(safe_y)))


from mirax.scipy._special_more import *  # noqa: F401,F403,E402  (ndtr, gammainc, ...)
from mirax.scipy import _special_more  # noqa: E402

__all__ = ["logsumexp", "erf", "erfc", "erfinv", "gammaln", "digamma", "expit", "logit",
           "xlogy", "xlog1py"] + _special_more.__all__
