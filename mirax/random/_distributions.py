"""The parametrized samplers of mirax.random (cauchy ... multinomial, gamma and the
distributions built on it), on the bits and helpers of mirax/random/__init__.py and in
JAX's constructions (see that module's docstring for how close to JAX's numbers)."""
from __future__ import annotations

import math

import numpy as np

from mirax.core import dtypes
from mirax.core.errors import ShapeError
from mirax.ops import elementwise as ew
from mirax.ops import reduction, shape as sh
from mirax.ops.common import operand, promote, short
from mirax.random import (  # the base samplers these are built on
    _check_key, _float_dtype, _shape, bernoulli, exponential, normal, split, uniform)
import mirax.numpy as mnp
from mirax.ops.loops import while_loop
from mirax.transforms.custom import custom_jvp
from mirax.transforms.jit import jit
from mirax.transforms.vmap import vmap
from mirax.ops.nn import softmax
from mirax.numpy import cumsum, moveaxis, where
from mirax.ops.scan import scan

# --- helpers for parametrized samplers ---------------------------------------------------------
def _out_shape(op: str, shape, *params) -> tuple[int, ...]:
    """`shape`, or the parameters' broadcast shape when None; the parameters must broadcast
    to it (JAX's _check_broadcast_shapes)."""
    pshapes = [tuple(p.shape) for p in params]
    try:
        pb = np.broadcast_shapes(*pshapes)
    except ValueError:
        raise ShapeError(f"random.{op}: the parameters {', '.join(map(short, params))} do not "
                         "broadcast together") from None
    if shape is None:
        return tuple(pb)
    shape = _shape(shape, f"random.{op}")
    try:
        ok = np.broadcast_shapes(shape, pb) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ShapeError(f"random.{op}: shape {shape} is not compatible with the parameters "
                         f"{', '.join(map(short, params))} (they must broadcast to it)")
    return shape


def _param(x, dtype, op: str):
    return ew.convert_element_type(operand(x, f"random.{op}"), dtype)


def _setup(op: str, key, shape, dtype, *params):
    """Validate a parametrized float sampler's arguments: (key, dtype, params cast to dtype,
    output shape)."""
    key = _check_key(key, f"random.{op}")
    dtype = _float_dtype(dtype, f"random.{op}")
    params = [_param(p, dtype, op) for p in params]
    return key, dtype, params, _out_shape(op, shape, *params)


def _recip(x, dtype, op: str):
    """1 / x, folded on the host for a Python number as JAX's `1. / x` is."""
    if isinstance(x, (int, float, np.number)) and not isinstance(x, bool):
        return np.array(1.0 / float(x), dtype)
    return ew.div(np.array(1.0, dtype), _param(x, dtype, op))


# --- more continuous samplers (JAX's constructions, on the same bits) -------------------------
def cauchy(key, shape=(), dtype=None):
    """Standard Cauchy samples, tan(pi (u - 1/2))."""
    key = _check_key(key, "random.cauchy")
    shape, dtype = _shape(shape, "random.cauchy"), _float_dtype(dtype, "random.cauchy")
    u = uniform(key, shape, dtype, float(dtypes.finfo(dtype).eps), 1.0)
    return ew.tan(ew.mul(np.array(np.pi, dtype), ew.sub(u, np.array(0.5, dtype))))


def logistic(key, shape=(), dtype=None):
    """Standard logistic samples, log(u) - log(1 - u)."""
    key = _check_key(key, "random.logistic")
    shape, dtype = _shape(shape, "random.logistic"), _float_dtype(dtype, "random.logistic")
    u = uniform(key, shape, dtype, float(dtypes.finfo(dtype).tiny), 1.0)
    return ew.sub(ew.log(u), ew.log1p(ew.neg(u)))


def pareto(key, b, shape=None, dtype=None):
    """Pareto samples with shape parameter b (scale 1): exp(E / b), E standard exponential."""
    key, dtype, [b], shape = _setup("pareto", key, shape, dtype, b)
    return ew.exp(ew.div(exponential(key, shape, dtype), b))


def lognormal(key, sigma=1.0, shape=None, dtype=None):
    """exp(sigma * N(0, 1))."""
    key, dtype, [sigma], shape = _setup("lognormal", key, shape, dtype, sigma)
    return ew.exp(ew.mul(normal(key, shape, dtype), sigma))


def weibull_min(key, scale, concentration, shape=(), dtype=None):
    """Weibull samples by the inverse CDF: scale * (-log(1 - u))^(1 / concentration)."""
    key = _check_key(key, "random.weibull_min")
    shape, dtype = _shape(shape, "random.weibull_min"), _float_dtype(dtype, "random.weibull_min")
    u = uniform(key, shape, dtype)
    inv = _recip(concentration, dtype, "weibull_min")
    return ew.mul(ew.pow(ew.neg(ew.log1p(ew.neg(u))), inv), _param(scale, dtype, "weibull_min"))


def rayleigh(key, scale, shape=None, dtype=None):
    """Rayleigh samples, scale * sqrt(-2 log u)."""
    key, dtype, [scale], shape = _setup("rayleigh", key, shape, dtype, scale)
    u = uniform(key, shape, dtype)
    return ew.mul(sh.broadcast_to(scale, shape), ew.sqrt(ew.mul(ew.log(u), np.array(-2, dtype))))


def maxwell(key, shape=(), dtype=None):
    """Maxwell samples: the norm of a 3-d standard normal vector."""
    key = _check_key(key, "random.maxwell")
    shape, dtype = _shape(shape, "random.maxwell"), _float_dtype(dtype, "random.maxwell")
    z = normal(key, (*shape, 3), dtype)
    return ew.sqrt(reduction.reduce_sum(ew.mul(z, z), (len(shape),)))


def rademacher(key, shape=(), dtype=None):
    """-1 or +1 with probability 1/2 each (an integer dtype by default)."""
    key = _check_key(key, "random.rademacher")
    shape = _shape(shape, "random.rademacher")
    dtype = dtypes.canonicalize(dtype if dtype is not None else dtypes.default_int)
    b = ew.convert_element_type(bernoulli(key, 0.5, shape), dtype)
    return ew.sub(ew.mul(np.array(2, dtype), b), np.array(1, dtype))


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
    """A Maxwell sample with a random sign, times scale, plus loc. As in JAX the result's
    shape is `shape` followed by the parameters' broadcast shape."""
    op = "random.double_sided_maxwell"
    key = _check_key(key, op)
    shape, dtype = _shape(shape, op), _float_dtype(dtype, op)
    loc, scale = _param(loc, dtype, op), _param(scale, dtype, op)
    pshape = _out_shape("double_sided_maxwell", None, loc, scale)
    shape = (shape or pshape) + pshape
    k_maxwell, k_sign = split(key)
    m = maxwell(k_maxwell, shape, dtype)
    return ew.add(ew.mul(ew.mul(rademacher(k_sign, shape, dtype), m), scale), loc)


def triangular(key, left, mode, right, shape=None, dtype=None):
    """Triangular samples on [left, right] with peak at mode (inverse CDF)."""
    key, dtype, [left, mode, right], shape = _setup("triangular", key, shape, dtype, left,
                                                    mode, right)
    left, mode, right = (sh.broadcast_to(v, shape) for v in (left, mode, right))
    width = ew.sub(right, left)
    u = uniform(key, shape, dtype)
    lo = ew.add(left, ew.sqrt(ew.mul(ew.mul(u, width), ew.sub(mode, left))))
    hi = ew.sub(right, ew.sqrt(ew.mul(ew.mul(ew.sub(1.0, u), width), ew.sub(right, mode))))
    return ew.select(ew.lt(u, ew.div(ew.sub(mode, left), width)), lo, hi)


def wald(key, mean, shape=None, dtype=None):
    """Wald (inverse Gaussian) samples with the given mean and unit shape (Michael, Schucany
    and Haas' transformation)."""
    key, dtype, [mean], shape = _setup("wald", key, shape, dtype, mean)
    k1, k2 = split(key)
    mean = sh.broadcast_to(mean, shape)
    v, z = normal(k1, shape, dtype), uniform(k2, shape, dtype)
    y = ew.mul(v, v)
    mean_sq = ew.mul(mean, mean)
    root = ew.sqrt(ew.add(ew.mul(ew.mul(4.0, mean), y), ew.mul(mean_sq, ew.mul(y, y))))
    x = ew.sub(ew.add(mean, ew.div(ew.mul(mean_sq, y), 2.0)), ew.mul(ew.div(mean, 2.0), root))
    return ew.select(ew.le(z, ew.div(mean, ew.add(mean, x))), x, ew.div(mean_sq, x))


def geometric(key, p, shape=None, dtype=None):
    """The number of Bernoulli(p) trials up to the first success: floor(log u / log(1-p)) + 1
    (integers, int32 by default)."""
    key = _check_key(key, "random.geometric")
    dtype = dtypes.canonicalize(dtype if dtype is not None else dtypes.default_int)
    if not np.issubdtype(dtype, np.integer):
        raise TypeError(f"random.geometric: dtype must be an integer dtype, got {dtype}")
    p = operand(p, "random.geometric")
    if p.dtype not in dtypes.FLOATS:
        p = ew.convert_element_type(p, dtypes.default_float)
    shape = _out_shape("geometric", shape, p)
    u = uniform(key, shape, p.dtype)
    u = ew.select(ew.eq(u, 0.0), ew.ones_like(u), u)     # u = 0 -> 1, as JAX does
    log_q = sh.broadcast_to(ew.log1p(ew.neg(p)), shape)
    g = ew.add(ew.floor(ew.div(ew.log(u), log_q)), 1.0)
    return ew.convert_element_type(g, dtype)


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky"):
    """Samples of N(mean, cov): mean + A z with A A^T = cov from a Cholesky ('cholesky'),
    eigen ('eigh') or singular value ('svd') factorization (the last two allow a singular
    cov). Shape `shape + mean.shape[-1:]`; shape defaults to the broadcast batch shape."""
    op = "random.multivariate_normal"
    key = _check_key(key, op)
    if method not in ("svd", "eigh", "cholesky"):
        raise ValueError(f"{op}: method must be one of 'svd', 'eigh', 'cholesky', got "
                         f"{method!r}")
    mean, cov = promote(op, mean, cov)
    if dtype is None:
        dtype = mean.dtype if mean.dtype in dtypes.FLOATS else dtypes.default_float
    dtype = _float_dtype(dtype, op)
    mean, cov = ew.convert_element_type(mean, dtype), ew.convert_element_type(cov, dtype)
    if mean.ndim < 1 or cov.ndim < 2 or tuple(cov.shape[-2:]) != (mean.shape[-1],) * 2:
        raise ValueError(f"{op}: needs mean (..., n) and cov (..., n, n), got {short(mean)} "
                         f"and {short(cov)}")
    batch = np.broadcast_shapes(tuple(mean.shape[:-1]), tuple(cov.shape[:-2]))
    if shape is None:
        shape = tuple(batch)
    else:
        shape = _shape(shape, op)
        if np.broadcast_shapes(shape, batch) != shape:
            raise ValueError(f"{op}: shape {shape} is not compatible with the batch shapes of "
                             f"{short(mean)} and {short(cov)}")
    if method == "svd":
        u, s, _ = mnp.linalg.svd(cov)
        factor = ew.mul(u, ew.sqrt(sh.expand_dims(s, (s.ndim - 1,))))
    elif method == "eigh":
        w, v = mnp.linalg.eigh(cov)
        factor = ew.mul(v, ew.sqrt(sh.expand_dims(w, (w.ndim - 1,))))
    else:
        factor = mnp.linalg.cholesky(cov)
    z = normal(key, shape + tuple(mean.shape[-1:]), dtype)
    return ew.add(mean, mnp.einsum("...ij,...j->...i", factor, z))


def orthogonal(key, n, shape=(), dtype=None, m=None):
    """Haar-distributed matrices with orthonormal rows or columns: shape (*shape, n, m),
    m = n by default (QR of a normal matrix with the signs of R's diagonal fixed)."""
    op = "random.orthogonal"
    key = _check_key(key, op)
    shape, dtype = _shape(shape, op), _float_dtype(dtype, op)
    n = int(n)
    m = n if m is None else int(m)
    z = normal(key, (*shape, max(n, m), min(n, m)), dtype)
    q, r = mnp.linalg.qr(z)
    d = mnp.diagonal(r, axis1=-2, axis2=-1)
    x = ew.mul(q, sh.expand_dims(ew.sign(d), (d.ndim - 1,)))
    return mnp.swapaxes(x, -1, -2) if n < m else x


# --- gamma and the samplers built on it ---------------------------------------------------------
def _gamma_one(key, alpha, log_space: bool):
    """One Gamma(alpha, 1) sample from one key (Marsaglia and Tsang's rejection method), the
    way JAX draws it, so that the same key gives JAX's sample. Runs under vmap."""
    dtype = alpha.dtype
    zero, one = ew.zeros_like(alpha), ew.ones_like(alpha)
    boost_mask = ew.ge(alpha, 1.0)
    alpha_orig = alpha
    # alpha < 1: Gamma(alpha) = Gamma(alpha + 1) * U^(1 / alpha)
    alpha = ew.select(boost_mask, alpha, ew.add(alpha, 1.0))
    d = ew.sub(alpha, np.array(1.0 / 3.0, dtype))
    c = ew.div(np.array(1.0 / 3.0, dtype), ew.sqrt(d))

    def rejected(s):
        _, x, v, u = s
        squeeze = ew.ge(u, ew.sub(1.0, ew.mul(np.array(0.0331, dtype), ew.mul(x, x))))
        bound = ew.add(ew.mul(x, 0.5), ew.mul(d, ew.add(ew.sub(1.0, v), ew.log(v))))
        return ew.logical_and(squeeze, ew.ge(ew.log(u), bound))

    def draw_v(s):
        k, sub = split(s[0])
        x = normal(sub, (), dtype)
        return k, x, ew.add(1.0, ew.mul(x, c))

    def propose(s):
        k, x_key, u_key = split(s[0], 3)
        _, x, v = while_loop(lambda t: ew.le(t[2], 0.0), draw_v, (x_key, zero, ew.neg(one)))
        return k, ew.mul(x, x), ew.mul(ew.mul(v, v), v), uniform(u_key, (), dtype)

    key, sub = split(key)
    _, _, v, _ = while_loop(rejected, propose, (key, zero, one, ew.add(one, 1.0)))
    if log_space:
        log_u = ew.neg(exponential(sub, (), dtype))
        log_boost = ew.select(ew.logical_or(boost_mask, ew.eq(log_u, 0.0)), zero,
                              ew.mul(log_u, ew.div(1.0, alpha_orig)))
        return ew.add(ew.add(ew.log(d), ew.log(v)), log_boost)
    u = ew.sub(1.0, uniform(sub, (), dtype))
    boost = ew.select(boost_mask, one, ew.pow(u, ew.div(1.0, alpha_orig)))
    return ew.mul(ew.mul(d, v), boost)


def _any(x):
    return ew.gt(reduction.reduce_max(ew.convert_element_type(x, dtypes.int32)), 0)


def _igamma_series_dx(a, x, enabled):
    """The series part of d(sample)/da (JAX's _igamma_series, SAMPLE_DERIVATIVE mode)."""
    eps = float(dtypes.finfo(a.dtype).eps)

    def body(s):
        on, r, c, ans, dc_da, dans_da = s
        r2 = ew.add(r, 1.0)
        dc2 = ew.sub(ew.mul(dc_da, ew.div(x, r2)), ew.div(ew.mul(c, x), ew.mul(r2, r2)))
        dans2 = ew.add(dans_da, dc2)
        c2 = ew.mul(c, ew.div(x, r2))
        ans2 = ew.add(ans, c2)
        more = ew.logical_and(on, ew.gt(ew.abs(ew.div(dc2, dans2)), eps))
        return (more,) + tuple(ew.select(on, new, old) for new, old in
                               zip((r2, c2, ans2, dc2, dans2), s[1:]))

    one, zero = ew.ones_like(a), ew.zeros_like(a)
    s = while_loop(lambda s: _any(s[0]), body, (enabled, a, one, one, zero, zero))
    ans, dans_da = s[3], s[5]
    dlogax_da = ew.sub(ew.log(x), ew.digamma(ew.add(a, 1.0)))
    return ew.div(ew.mul(ew.neg(ew.add(dans_da, ew.mul(ans, dlogax_da))), x), a)


def _igammac_cf_dx(a, x, enabled):
    """The continued-fraction part of d(sample)/da (JAX's _igammac_continued_fraction,
    SAMPLE_DERIVATIVE mode)."""
    eps = float(dtypes.finfo(a.dtype).eps)

    def body(s):
        (on, ans, y, z, c, pkm1, qkm1, pkm2, qkm2, dpkm2, dqkm2, dpkm1, dqkm1, dans) = s
        c, y, z = ew.add(c, 1.0), ew.add(y, 1.0), ew.add(z, 2.0)
        yc = ew.mul(y, c)
        pk = ew.sub(ew.mul(pkm1, z), ew.mul(pkm2, yc))
        qk = ew.sub(ew.mul(qkm1, z), ew.mul(qkm2, yc))
        nz = ew.ne(qk, 0.0)
        ans2 = ew.select(nz, ew.div(pk, ew.select(nz, qk, ew.ones_like(qk))), ans)
        dpk = ew.add(ew.sub(ew.sub(ew.mul(dpkm1, z), pkm1), ew.mul(dpkm2, yc)), ew.mul(pkm2, c))
        dqk = ew.add(ew.sub(ew.sub(ew.mul(dqkm1, z), qkm1), ew.mul(dqkm2, yc)), ew.mul(qkm2, c))
        safe_qk = ew.select(nz, qk, ew.ones_like(qk))
        dans2 = ew.select(nz, ew.div(ew.sub(dpk, ew.mul(ans2, dqk)), safe_qk), dans)
        change = ew.select(nz, ew.abs(ew.sub(dans2, dans)), ew.ones_like(dans))
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        dpkm2, dqkm2, dpkm1, dqkm1 = dpkm1, dqkm1, dpk, dqk
        big = ew.gt(ew.abs(pk), 1.0 / eps)      # rescale to keep the recurrences finite
        pkm2, pkm1, qkm2, qkm1, dpkm2, dqkm2, dpkm1, dqkm1 = (
            ew.select(big, ew.mul(v, eps), v)
            for v in (pkm2, pkm1, qkm2, qkm1, dpkm2, dqkm2, dpkm1, dqkm1))
        more = ew.logical_and(on, ew.gt(change, eps))
        new = (ans2, y, z)
        out = tuple(ew.select(on, n, o) for n, o in zip(new, s[1:4]))
        rest = tuple(ew.select(on, n, o) for n, o in zip(
            (pkm1, qkm1, pkm2, qkm2, dpkm2, dqkm2, dpkm1, dqkm1, dans2), s[5:]))
        return (more,) + out + (c,) + rest

    y = ew.sub(1.0, a)
    z = ew.add(ew.add(x, y), 1.0)
    pkm1, qkm1 = ew.add(x, 1.0), ew.mul(z, x)
    ans = ew.div(pkm1, qkm1)
    zero = ew.zeros_like(x)
    dqkm1 = ew.neg(x)
    dans = ew.div(ew.neg(ew.mul(ans, dqkm1)), qkm1)
    init = (enabled, ans, y, z, zero, pkm1, qkm1, ew.ones_like(x), x, zero, zero, zero, dqkm1,
            dans)
    s = while_loop(lambda s: ew.logical_and(ew.lt(reduction.reduce_max(s[4]), 2000.0),
                                            _any(s[0])), body, init)
    ans, dans = s[1], s[13]
    dlogax_da = ew.sub(ew.log(x), ew.digamma(a))
    return ew.mul(ew.neg(ew.add(dans, ew.mul(ans, dlogax_da))), x)


def _gamma_sample_grad(a, x):
    """d x / d a for a Gamma(a, 1) sample x held at its CDF value (implicit
    reparameterization: -(dF/da) / (dF/dx)), elementwise; JAX's random_gamma_grad."""
    fmax = float(dtypes.finfo(a.dtype).max)
    nan = ew.logical_or(ew.ne(a, a), ew.ne(x, x))
    x_zero = ew.eq(x, 0.0)
    domain = ew.logical_or(ew.lt(x, 0.0), ew.le(a, 0.0))
    use_cf = ew.logical_and(ew.gt(x, 1.0), ew.gt(x, a))
    safe_x = ew.select(ew.gt(x, 0.0), x, ew.ones_like(x))
    safe_a = ew.select(ew.gt(a, 0.0), a, ew.ones_like(a))
    log_ax = ew.sub(ew.sub(ew.mul(safe_a, ew.log(safe_x)), safe_x), ew.lgamma(safe_a))
    off = ew.logical_or(ew.logical_or(x_zero, domain),
                        ew.logical_or(ew.lt(log_ax, -math.log(fmax)), nan))
    on = ew.logical_not(off)
    cf = _igammac_cf_dx(safe_a, safe_x, ew.logical_and(on, use_cf))
    series = _igamma_series_dx(safe_a, safe_x, ew.logical_and(on, ew.logical_not(use_cf)))
    out = ew.select(use_cf, ew.neg(cf), series)
    out = ew.select(x_zero, ew.zeros_like(out), out)
    return ew.select(ew.logical_or(domain, nan), ew.add(ew.zeros_like(out), np.nan), out)


def _gamma_sampler(log_space: bool):
    """The sampler for one `log_space` choice: a custom_jvp (the implicit gradient) around a
    jitted, vmapped _gamma_one. NOTE: jit caches the traced rejection loops per element
    count and dtype; tracing them is most of the cost of a call."""

    @jit
    def flat_sample(key, a):
        keys = split(key, a.shape[0])   # one key per element, as JAX splits them
        return vmap(lambda k, al: _gamma_one(k, al, log_space))(keys, a)

    @jit
    def flat_grad(a, out):
        if not log_space:
            return _gamma_sample_grad(a, out)
        # d log x = dx / x; exp(log x) may round to 0: use the smallest normal float instead
        x = ew.exp(out)
        x = ew.select(ew.eq(x, 0.0), ew.add(ew.zeros_like(x), float(dtypes.finfo(x.dtype).tiny)),
                      x)
        return ew.div(_gamma_sample_grad(a, x), x)

    def sample(key, a):
        n = math.prod(a.shape)
        if n == 0:
            return ew.zeros_like(a)
        return sh.reshape(flat_sample(key, sh.reshape(a, (n,))), tuple(a.shape))

    f = custom_jvp(sample)

    @f.defjvp
    def _jvp(primals, tangents):
        key, a = primals
        out = f(key, a)
        n = math.prod(a.shape)
        if n == 0:
            return out, ew.zeros_like(out)
        grad = sh.reshape(flat_grad(sh.reshape(a, (n,)), sh.reshape(out, (n,))), tuple(a.shape))
        return out, ew.mul(tangents[1], grad)
    return f


_GAMMA = {}


def _gamma(op: str, key, a, shape, dtype, log_space: bool):
    key, dtype, [a], shape = _setup(op, key, shape, dtype, a)
    if tuple(a.shape) != shape:
        a = sh.broadcast_to(a, shape)
    sampler = _GAMMA.get(log_space)
    if sampler is None:  # threads may both build one: the first stored is kept
        sampler = _GAMMA.setdefault(log_space, _gamma_sampler(log_space))
    return sampler(key, a)


def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) samples (divide by a rate or multiply by a scale for others). Its
    derivative with respect to `a` is the implicit reparameterization gradient, as JAX's."""
    return _gamma("gamma", key, a, shape, dtype, False)


def loggamma(key, a, shape=None, dtype=None):
    """log of Gamma(a, 1) samples, computed in log space (accurate for small a):
    exp(loggamma(key, a)) is close to gamma(key, a)."""
    return _gamma("loggamma", key, a, shape, dtype, True)


def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) samples, G_a / (G_a + G_b) from two log-gamma draws."""
    key, dtype, [a, b], shape = _setup("beta", key, shape, dtype, a, b)
    key_a, key_b = split(key)
    log_ga = loggamma(key_a, sh.broadcast_to(a, shape), shape, dtype)
    log_gb = loggamma(key_b, sh.broadcast_to(b, shape), shape, dtype)
    log_max = ew.max(log_ga, log_gb)
    ga, gb = ew.exp(ew.sub(log_ga, log_max)), ew.exp(ew.sub(log_gb, log_max))
    return ew.div(ga, ew.add(ga, gb))


def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet(alpha) samples over alpha's last axis: the softmax of log-gamma draws.
    Shape `shape + alpha.shape[-1:]`; shape defaults to alpha.shape[:-1]."""
    key = _check_key(key, "random.dirichlet")
    dtype = _float_dtype(dtype, "random.dirichlet")
    alpha = _param(alpha, dtype, "dirichlet")
    if alpha.ndim < 1:
        raise ValueError(f"random.dirichlet: alpha must have ndim >= 1, got {short(alpha)}")
    batch = tuple(alpha.shape[:-1])
    if shape is None:
        shape = batch
    else:
        shape = _shape(shape, "random.dirichlet")
        if np.broadcast_shapes(shape, batch) != shape:
            raise ValueError(f"random.dirichlet: shape {shape} is not compatible with the "
                             f"batch shape of {short(alpha)}")
    full = shape + tuple(alpha.shape[-1:])
    return softmax(loggamma(key, alpha, full, dtype), axis=-1)


def chisquare(key, df, shape=None, dtype=None):
    """Chi-square samples with df degrees of freedom: 2 Gamma(df / 2)."""
    key, dtype, [df], shape = _setup("chisquare", key, shape, dtype, df)
    half = ew.div(df, np.array(2, dtype))
    return ew.mul(ew.exp(loggamma(key, half, shape, dtype)), np.array(2, dtype))


def f(key, dfnum, dfden, shape=None, dtype=None):
    """F-distribution samples: (chi2(dfnum) / dfnum) / (chi2(dfden) / dfden)."""
    key, dtype, [dfnum, dfden], shape = _setup("f", key, shape, dtype, dfnum, dfden)
    key_den, key_num = split(key)
    num = ew.div(chisquare(key_num, dfnum, shape, dtype), dfnum)
    den = ew.div(chisquare(key_den, dfden, shape, dtype), dfden)
    return ew.div(num, den)


def t(key, df, shape=None, dtype=None):
    """Student's t samples with df degrees of freedom: N * sqrt((df / 2) / Gamma(df / 2))."""
    key, dtype, [df], shape = _setup("t", key, shape, dtype, df)
    key_n, key_g = split(key)
    n = normal(key_n, shape, dtype)
    half = ew.div(df, np.array(2, dtype))
    g = gamma(key_g, half, shape, dtype)
    return ew.mul(n, ew.sqrt(ew.div(half, g)))


def generalized_normal(key, p, shape=(), dtype=None):
    """Generalized normal samples, density proportional to exp(-|x|^p):
    sign * Gamma(1 / p)^(1 / p)."""
    key = _check_key(key, "random.generalized_normal")
    shape = _shape(shape, "random.generalized_normal")
    dtype = _float_dtype(dtype, "random.generalized_normal")
    k_g, k_r = split(key)
    inv_p = _recip(p, dtype, "generalized_normal")
    g = gamma(k_g, inv_p, shape, dtype)
    r = rademacher(k_r, shape, dtype)
    return ew.mul(r, ew.pow(g, inv_p))


def ball(key, d, p=2, shape=(), dtype=None):
    """Uniform samples from the unit p-norm ball in d dimensions: shape (*shape, d)."""
    key = _check_key(key, "random.ball")
    shape, dtype = _shape(shape, "random.ball"), _float_dtype(dtype, "random.ball")
    d = int(d)
    k1, k2 = split(key)
    g = generalized_normal(k1, p, (*shape, d), dtype)
    e = exponential(k2, shape, dtype)
    pp = _param(p, dtype, "ball")
    s = ew.add(reduction.reduce_sum(ew.pow(ew.abs(g), pp), (len(shape),)), e)
    r = ew.pow(s, _recip(p, dtype, "ball"))
    return ew.div(g, sh.expand_dims(r, (len(shape),)))


# --- poisson ----------------------------------------------------------------------------------
def _poisson_knuth(key, lam, shape, dtype):
    """Knuth's method (lam < 10): multiply uniforms until the product drops below e^-lam."""

    def body(s):
        i, k, rng, log_prod = s
        rng, sub = split(rng)
        k = ew.select(ew.gt(log_prod, ew.neg(lam)), ew.add(k, np.array(1, dtype)), k)
        return ew.add(i, 1), k, rng, ew.add(log_prod, ew.log(uniform(sub, shape, lam.dtype)))

    init = (np.array(0, np.int32), sh.full(shape, 0, dtype), key, sh.full(shape, 0.0, lam.dtype))
    k = while_loop(lambda s: _any(ew.gt(s[3], ew.neg(lam))), body, init)[1]
    return ew.sub(k, np.array(1, dtype))


def _poisson_rejection(key, lam, shape, dtype):
    """Hormann's transformed rejection (PTRS, lam >= 10)."""
    log_lam = ew.log(lam)
    b = ew.add(0.931, ew.mul(2.53, ew.sqrt(lam)))
    a = ew.add(-0.059, ew.mul(0.02483, b))
    inv_alpha = ew.add(1.1239, ew.div(1.1328, ew.sub(b, 3.4)))
    v_r = ew.sub(0.9277, ew.div(3.6224, ew.sub(b, 2.0)))

    def body(s):
        i, k_out, accepted, rng = s
        rng, s0, s1 = split(rng, 3)
        u = ew.sub(uniform(s0, shape, lam.dtype), 0.5)
        v = uniform(s1, shape, lam.dtype)
        us = ew.sub(0.5, ew.abs(u))
        k = ew.floor(ew.add(ew.add(ew.mul(ew.add(ew.div(ew.mul(2.0, a), us), b), u), lam), 0.43))
        s_ = ew.log(ew.div(ew.mul(v, inv_alpha), ew.add(ew.div(a, ew.mul(us, us)), b)))
        t_ = ew.sub(ew.add(ew.neg(lam), ew.mul(k, log_lam)), ew.lgamma(ew.add(k, 1.0)))
        accept1 = ew.logical_and(ew.ge(us, 0.07), ew.le(v, v_r))
        reject = ew.logical_or(ew.lt(k, 0.0),
                               ew.logical_and(ew.lt(us, 0.013), ew.gt(v, us)))
        accept = ew.logical_or(accept1, ew.logical_and(ew.logical_not(reject), ew.le(s_, t_)))
        return (ew.add(i, 1), ew.select(accept, k, k_out), ew.logical_or(accepted, accept), rng)

    init = (np.array(0, np.int32), sh.full(shape, -1.0, lam.dtype),
            sh.full(shape, False, dtypes.bool_), key)
    k = while_loop(lambda s: _any(ew.logical_not(s[2])), body, init)[1]
    return ew.convert_element_type(k, dtype)


def poisson(key, lam, shape=None, dtype=None):
    """Poisson(lam) counts (int32 by default): Knuth's method for lam < 10, transformed
    rejection above, on JAX's bits (lam is used in float32, as JAX does)."""
    key = _check_key(key, "random.poisson")
    dtype = dtypes.canonicalize(dtype if dtype is not None else dtypes.default_int)
    if not np.issubdtype(dtype, np.integer):
        raise TypeError(f"random.poisson: dtype must be an integer dtype, got {dtype}")
    lam = operand(lam, "random.poisson")
    shape = tuple(lam.shape) if shape is None else _shape(shape, "random.poisson")
    lam = ew.convert_element_type(sh.broadcast_to(lam, shape), dtypes.float32)
    use_knuth = ew.logical_or(ew.ne(lam, lam), ew.lt(lam, 10.0))
    lam_knuth = ew.select(use_knuth, lam, ew.zeros_like(lam))
    lam_rej = ew.select(use_knuth, ew.add(ew.zeros_like(lam), 1e5), lam)
    out = ew.select(use_knuth, _poisson_knuth(key, lam_knuth, shape, dtype),
                    _poisson_rejection(key, lam_rej, shape, dtype))
    return ew.select(ew.eq(lam, 0.0), ew.zeros_like(out), out)


# --- binomial and multinomial -------------------------------------------------------------------
_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                  0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                  0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                  0.00833056343336287)


def _stirling_tail(k):
    """log k! - Stirling's approximation of it: a table for k <= 9, the series above."""
    dtype = k.dtype
    kc = ew.min(ew.max(k, 0.0), 9.0)
    kp1 = ew.add(kc, 1.0)
    kp1sq = ew.mul(kp1, kp1)
    approx = ew.div(ew.sub(1.0 / 12, ew.div(ew.sub(1.0 / 360, ew.div(1.0 / 1260, kp1sq)), kp1sq)),
                    kp1)
    table = mnp.take(np.array(_STIRLING_TAIL, dtype), ew.convert_element_type(ew.floor(kc),
                                                                           dtypes.int32))
    return ew.select(ew.le(k, 9.0), table, approx)


def _binomial_inversion(key, count, prob, shape):
    """Count geometric waiting times until they pass `count` (small count * p)."""
    log_q = ew.log1p(ew.neg(prob))

    def body(s):
        num_geom, geom_sum, rng = s
        sub, rng = split(rng)          # (sic) JAX takes the first key as the subkey here
        num_geom = ew.select(ew.le(geom_sum, count), ew.add(num_geom, 1.0), num_geom)
        geom = ew.ceil(ew.div(ew.log(uniform(sub, shape, prob.dtype)), log_q))
        return num_geom, ew.add(geom_sum, geom), rng

    zeros = sh.full(shape, 0.0, prob.dtype)
    k = while_loop(lambda s: _any(ew.le(s[1], count)), body, (zeros, zeros, key))[0]
    return ew.sub(k, 1.0)


def _btrs(key, count, prob, shape):
    """Hormann's transformed rejection with squeeze (BTRS) for count * p > 10."""
    stddev = ew.sqrt(ew.mul(ew.mul(count, prob), ew.sub(1.0, prob)))
    b = ew.add(1.15, ew.mul(2.53, stddev))
    a = ew.add(ew.add(-0.0873, ew.mul(0.0248, b)), ew.mul(0.01, prob))
    c = ew.add(ew.mul(count, prob), 0.5)
    v_r = ew.sub(0.92, ew.div(4.2, b))
    r = ew.div(prob, ew.sub(1.0, prob))
    alpha = ew.mul(ew.add(2.83, ew.div(5.1, b)), stddev)
    m = ew.floor(ew.mul(ew.add(count, 1.0), prob))
    t_m = ew.mul(ew.add(m, 0.5), ew.log(ew.div(ew.add(m, 1.0),
                                             ew.mul(r, ew.add(ew.sub(count, m), 1.0)))))
    tail_m, tail_cm = _stirling_tail(m), _stirling_tail(ew.sub(count, m))

    def body(s):
        k_out, accepted, rng = s
        rng, s0, s1 = split(rng, 3)
        u = ew.sub(uniform(s0, shape, prob.dtype), 0.5)
        v = uniform(s1, shape, prob.dtype)
        us = ew.sub(0.5, ew.abs(u))
        accept1 = ew.logical_and(ew.ge(us, 0.07), ew.le(v, v_r))
        k = ew.floor(ew.add(ew.mul(ew.add(ew.div(ew.mul(2.0, a), us), b), u), c))
        reject = ew.logical_or(ew.lt(k, 0.0), ew.gt(k, count))
        v = ew.log(ew.div(ew.mul(v, alpha), ew.add(ew.div(a, ew.mul(us, us)), b)))
        cmk1 = ew.add(ew.sub(count, k), 1.0)
        terms = (t_m, ew.mul(ew.add(count, 1.0), ew.log(ew.div(ew.add(ew.sub(count, m), 1.0),
                                                               cmk1))),
                 ew.mul(ew.add(k, 0.5), ew.log(ew.div(ew.mul(r, cmk1), ew.add(k, 1.0)))),
                 tail_m, tail_cm)
        ub = terms[0]
        for term in terms[1:]:          # summed in JAX's order
            ub = ew.add(ub, term)
        ub = ew.sub(ew.sub(ub, _stirling_tail(k)), _stirling_tail(ew.sub(count, k)))
        accept = ew.logical_or(accept1, ew.logical_and(ew.logical_not(reject), ew.le(v, ub)))
        return ew.select(accept, k, k_out), ew.logical_or(accepted, accept), rng

    init = (sh.full(shape, -1.0, prob.dtype), sh.full(shape, False, dtypes.bool_), key)
    return while_loop(lambda s: _any(ew.logical_not(s[1])), body, init)[0]


def binomial(key, n, p, shape=None, dtype=None):
    """Binomial(n, p) counts as floats (float32 by default), as JAX: the inversion method for
    n * min(p, 1-p) <= 10, BTRS above; NaN for a NaN or negative n or an invalid p."""
    key = _check_key(key, "random.binomial")
    dtype = _float_dtype(dtype, "random.binomial")
    p = operand(p, "random.binomial")
    if p.dtype not in dtypes.FLOATS:
        p = ew.convert_element_type(p, dtypes.default_float)
    count = ew.convert_element_type(operand(n, "random.binomial"), p.dtype)
    shape = _out_shape("binomial", shape, count, p)
    count, p = sh.broadcast_to(count, shape), sh.broadcast_to(p, shape)
    p_lt_half = ew.lt(p, 0.5)
    q = ew.select(p_lt_half, p, ew.sub(1.0, p))
    bad_count = ew.logical_or(ew.ne(count, count), ew.lt(count, 0.0))
    inf_count = ew.eq(ew.abs(count), np.inf)
    q_nan, q_neg = ew.ne(q, q), ew.lt(q, 0.0)
    q = ew.select(ew.logical_or(q_nan, q_neg), ew.add(ew.zeros_like(q), 0.01), q)
    use_inv = ew.logical_or(bad_count, ew.le(ew.mul(count, q), 10.0))
    count = ew.floor(count)
    zeros = ew.zeros_like(count)
    inv = _binomial_inversion(key, ew.select(use_inv, count, zeros), q, shape)
    btrs = _btrs(key, ew.select(use_inv, ew.add(zeros, 1e4), count),
                 ew.select(use_inv, ew.add(zeros, 0.5), q), shape)
    out = ew.convert_element_type(ew.select(use_inv, inv, btrs), dtype)
    invalid = ew.logical_or(ew.logical_or(q_neg, q_nan), bad_count)
    out = ew.select(invalid, ew.add(ew.zeros_like(out), np.nan), out)
    out = ew.select(ew.logical_and(inf_count, ew.logical_not(invalid)),
                    ew.add(ew.zeros_like(out), np.inf), out)
    keep = ew.logical_or(ew.logical_or(p_lt_half, bad_count), ew.logical_or(q_nan, inf_count))
    finite_count = ew.select(inf_count, zeros, count)     # (inf - inf would warn)
    return ew.select(keep, out, ew.sub(ew.convert_element_type(finite_count, dtype), out))


def multinomial(key, n, p, *, shape=None, dtype=None, unroll=1):
    """Multinomial(n, p) counts over p's last axis (floats, as JAX): one binomial draw per
    outcome, each on the trials left. `shape` is the full result shape (p.shape by default).
    `unroll` is accepted for JAX's signature and ignored."""
    key = _check_key(key, "random.multinomial")
    n, p = promote("random.multinomial", n, p)
    if p.dtype not in dtypes.FLOATS:
        n, p = (ew.convert_element_type(v, dtypes.default_float) for v in (n, p))
    if p.ndim < 1:
        raise ValueError(f"random.multinomial: p must have ndim >= 1, got {short(p)}")
    shape = tuple(p.shape) if shape is None else _shape(shape, "random.multinomial")
    n, p = sh.broadcast_to(n, shape[:-1]), sh.broadcast_to(p, shape)
    p = moveaxis(p, -1, 0)
    rest = sh.rev(cumsum(sh.rev(p, (0,)), axis=0), (0,))     # p[i] + p[i+1] + ...
    ratios = ew.div(p, where(ew.eq(rest, 0.0), 1.0, rest))

    def step(remainder, ratio_key):
        ratio, k = ratio_key
        count = binomial(k, remainder, ew.min(ew.max(ratio, 0.0), 1.0), dtype=remainder.dtype)
        return ew.sub(remainder, count), count

    _, counts = scan(step, n, (ratios, split(key, ratios.shape[0])))
    out = moveaxis(counts, 0, -1)
    return ew.convert_element_type(out, _float_dtype(dtype, "random.multinomial"))
