"""mirax.random: counter-based, splittable pseudo-random numbers (JAX's threefry2x32 scheme).

Where it sits: a public namespace written only on top of mirax.ops, so every sampler runs
eagerly, under jit and under vmap on any backend, and the same key gives the same numbers in
all three. A key is a plain uint32[2] array; it is never mutated: `split` and `fold_in` derive
new keys. The bit streams follow JAX's default ("partitionable") threefry layout, so for the
same seed `uniform`, `normal`, `split`, `fold_in`, `bernoulli`, `randint` and `permutation`
give JAX's numbers, and so do `gumbel`, `categorical`, `exponential`, `laplace`, `choice`
and the other samplers (gamma and the distributions built on it, poisson, logistic, ...),
built the way JAX builds them: equal bit for bit where only integer and rounding-exact float
ops are involved, else to a few ulps (NumPy's log/exp/tan are not XLA's). Tests check it when
JAX is installed. gamma's derivative with respect to its shape parameter is JAX's implicit
reparameterization gradient (d sample / d a = -(dF/da) / (dF/dx) for the CDF F).

    key = mx.random.key(0)
    k1, k2 = mx.random.split(key)
    x = mx.random.normal(k1, (3, 4))
"""
from __future__ import annotations

import math

import numpy as np

from mirax.core.errors import name_public_functions
from mirax.core import dtypes
from mirax.ops import elementwise as ew
from mirax.ops import reduction, shape as sh
from mirax.ops.common import normalize_axis, operand, short, static_int, static_shape
from mirax.ops.creation import asarray
from mirax.ops.sort import sort
import mirax.numpy as mnp
from mirax.numpy import take

__all__ = [
    "ball", "bernoulli", "beta", "binomial", "bits", "categorical", "cauchy", "chisquare",
    "choice", "clone", "dirichlet", "double_sided_maxwell", "exponential", "f", "fold_in",
    "gamma", "generalized_normal", "geometric", "gumbel", "key", "key_data", "laplace",
    "loggamma", "logistic", "lognormal", "maxwell", "multinomial", "multivariate_normal",
    "normal", "orthogonal", "pareto", "permutation", "poisson", "PRNGKey", "rademacher",
    "randint", "rayleigh", "split", "t", "threefry2x32", "triangular", "truncated_normal",
    "uniform", "wald", "weibull_min", "wrap_key_data",
]

_U32 = dtypes.uint32
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _u32(v: int):
    return np.uint32(v & 0xFFFFFFFF)


# --- the threefry2x32 block cipher ---------------------------------------------------------
def _rotl(x, r: int):
    # uint32 shifts drop the high bits, so (x << r) | (x >> (32 - r)) is the 32-bit rotation
    return ew.logical_or(ew.shift_left(x, _u32(r)), ew.shift_right(x, _u32(32 - r)))


def threefry2x32(k0, k1, x0, x1):
    """Threefry-2x32 with 20 rounds (Salmon et al., 2011) on uint32 arrays: the key words
    k0, k1 are scalars, the counter words x0, x1 share a shape; returns (y0, y1)."""
    ks = (k0, k1, ew.logical_xor(ew.logical_xor(k0, k1), _u32(0x1BD11BDA)))
    x0, x1 = ew.add(x0, ks[0]), ew.add(x1, ks[1])
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = ew.add(x0, x1)                    # uint32 adds wrap mod 2^32
            x1 = ew.logical_xor(_rotl(x1, r), x0)
        x0 = ew.add(x0, ks[(i + 1) % 3])
        x1 = ew.add(ew.add(x1, ks[(i + 2) % 3]), _u32(i + 1))
    return x0, x1


def _check_key(k, op: str):
    k = operand(k, op)
    if tuple(k.shape) != (2,) or k.dtype != _U32:
        raise TypeError(f"{op}: expected a key, a u32[2] array from mx.random.key/split, "
                        f"got {short(k)}")
    return k


def _shape(shape, op: str) -> tuple[int, ...]:
    if shape is None:
        return ()
    return static_shape(shape, op)


def _counters(shape: tuple[int, ...]):
    """The (hi, lo) words of each element's row-major index (JAX's iota_2x32_shape)."""
    n = math.prod(shape)
    if n >= 2 ** 32:
        raise ValueError(f"mx.random: {n} values at once is more than 2^32")
    lo = sh.reshape(sh.iota(_U32, (n,)), shape)
    return ew.zeros_like(lo), lo


def _hash(k, shape: tuple[int, ...]):
    """threefry(key, index) for every index of `shape`: two uint32 words per element."""
    hi, lo = _counters(shape)
    return threefry2x32(k[0], k[1], hi, lo)


# --- keys ----------------------------------------------------------------------------------
def key(seed):
    """A key from an integer seed (Python int, or an integer array, also traced):
    [seed >> 32, seed & 0xffffffff] as uint32, like jax.random.key_data(jax.random.key(seed))."""
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        s = int(seed)
        if not -2**63 <= s < 2**64:  # NOTE: the masks below would silently drop high bits
            raise ValueError(f"random.key: seed {s} does not fit in 64 bits")
        return asarray(np.array([(s >> 32) & 0xFFFFFFFF, s & 0xFFFFFFFF], np.uint32))
    s = operand(seed, "random.key")
    if s.ndim != 0 or not np.issubdtype(s.dtype, np.integer):
        raise TypeError(f"random.key: the seed must be an integer scalar, got {short(s)}")
    if s.dtype.itemsize == 8:
        hi = ew.convert_element_type(ew.shift_right(s, np.array(32, s.dtype)), _U32)
    else:
        hi = ew.zeros_like(ew.convert_element_type(s, _U32))
    lo = ew.convert_element_type(s, _U32)
    return sh.stack([hi, lo])


PRNGKey = key


def split(key, num: int = 2):
    """`num` new keys, a u32[num, 2] array (unpack it: `k1, k2 = split(key)`)."""
    key = _check_key(key, "random.split")
    if isinstance(num, (tuple, list)):
        shape = tuple(static_int(d, "random.split", "num") for d in num)
    else:
        shape = (static_int(num, "random.split", "num"),)
    y0, y1 = _hash(key, shape)
    return sh.stack([y0, y1], axis=len(shape))


def fold_in(key, data):
    """A new key from `key` and an integer `data` (e.g. a step number or a device index)."""
    key = _check_key(key, "random.fold_in")
    d = ew.convert_element_type(operand(data, "random.fold_in"), _U32)
    if d.ndim != 0:
        raise TypeError(f"random.fold_in: data must be a scalar, got {short(d)}")
    y0, y1 = threefry2x32(key[0], key[1], ew.zeros_like(d), d)
    return sh.stack([y0, y1])


def bits(key, shape=(), dtype=_U32):
    """Uniform random bits: uint32 (or uint8/16/64) of `shape`."""
    key = _check_key(key, "random.bits")
    shape = _shape(shape, "random.bits")
    dtype = dtypes.canonicalize(dtype)
    y0, y1 = _hash(key, shape)
    if dtype.itemsize == 8:   # hi word from y0, lo word from y1
        hi, lo = (ew.convert_element_type(y, dtype) for y in (y0, y1))
        return ew.logical_or(ew.shift_left(hi, np.array(32, dtype)), lo)
    out = ew.logical_xor(y0, y1)
    return out if dtype == _U32 else ew.convert_element_type(out, dtype)


# --- continuous samplers -------------------------------------------------------------------
def _float_dtype(dtype, op: str):
    dtype = dtypes.canonicalize(dtype if dtype is not None else dtypes.default_float)
    if dtype not in dtypes.FLOATS:
        raise TypeError(f"{op}: dtype must be a floating dtype, got {dtype}")
    return dtype


def _unit(key, shape, dtype):
    """Uniform floats in [0, 1) on the 2^-nmant grid: the mantissa trick. JAX ORs random
    mantissa bits into 1.0 and subtracts 1; m * 2^-nmant is the same number, exactly."""
    finfo = dtypes.finfo(dtype)
    nbits, nmant = np.dtype(dtype).itemsize * 8, int(finfo.nmant)
    rng_bits = 8 if nmant < 8 else nbits     # bfloat16 draws 8 bits, as JAX does
    ubits = bits(key, shape, {8: dtypes.uint8, 16: np.uint16, 32: _U32,
                              64: np.uint64}[rng_bits])
    ubits = ew.shift_right(ubits, np.array(rng_bits - nmant, ubits.dtype))
    mant = ew.convert_element_type(ubits, dtype)   # < 2^nmant: exact
    return ew.mul(mant, np.array(2.0 ** -nmant, dtype))


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Uniform floats in [minval, maxval)."""
    key = _check_key(key, "random.uniform")
    shape, dtype = _shape(shape, "random.uniform"), _float_dtype(dtype, "random.uniform")
    lo = ew.convert_element_type(operand(minval, "random.uniform"), dtype)
    hi = ew.convert_element_type(operand(maxval, "random.uniform"), dtype)
    u = _unit(key, shape, dtype)
    return ew.max(lo, ew.add(ew.mul(u, ew.sub(hi, lo)), lo))


def normal(key, shape=(), dtype=None):
    """Standard normal samples: sqrt(2) * erfinv(u), u uniform in (-1, 1)."""
    key = _check_key(key, "random.normal")
    shape, dtype = _shape(shape, "random.normal"), _float_dtype(dtype, "random.normal")
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    u = uniform(key, shape, dtype, lo, 1.0)
    return ew.mul(np.array(np.sqrt(2), dtype), ew.erf_inv(u))


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Standard normal samples conditioned on lower < x < upper (inverse-CDF method)."""
    key = _check_key(key, "random.truncated_normal")
    dtype = _float_dtype(dtype, "random.truncated_normal")
    lower = ew.convert_element_type(operand(lower, "random.truncated_normal"), dtype)
    upper = ew.convert_element_type(operand(upper, "random.truncated_normal"), dtype)
    if shape is None:
        shape = np.broadcast_shapes(tuple(lower.shape), tuple(upper.shape))
    shape = _shape(shape, "random.truncated_normal")
    sqrt2 = np.array(np.sqrt(2), dtype)
    a, b = ew.erf(ew.div(lower, sqrt2)), ew.erf(ew.div(upper, sqrt2))
    out = ew.mul(sqrt2, ew.erf_inv(uniform(key, shape, dtype, a, b)))
    # clamp into the open interval: rounding may land on a bound
    lo = ew.nextafter(lower, np.array(np.inf, dtype))
    hi = ew.nextafter(upper, np.array(-np.inf, dtype))
    return ew.min(ew.max(out, lo), hi)


def gumbel(key, shape=(), dtype=None):
    """Standard Gumbel samples, -log(-log(u))."""
    key = _check_key(key, "random.gumbel")
    shape, dtype = _shape(shape, "random.gumbel"), _float_dtype(dtype, "random.gumbel")
    u = uniform(key, shape, dtype, float(dtypes.finfo(dtype).tiny), 1.0)
    return ew.neg(ew.log(ew.neg(ew.log(u))))


def exponential(key, shape=(), dtype=None):
    """Standard exponential samples, -log(1 - u)."""
    key = _check_key(key, "random.exponential")
    shape, dtype = _shape(shape, "random.exponential"), _float_dtype(dtype, "random.exponential")
    return ew.neg(ew.log1p(ew.neg(uniform(key, shape, dtype))))


def laplace(key, shape=(), dtype=None):
    """Standard Laplace samples, sign(u) log(1 - |u|) for u uniform in (-1, 1)."""
    key = _check_key(key, "random.laplace")
    shape, dtype = _shape(shape, "random.laplace"), _float_dtype(dtype, "random.laplace")
    u = uniform(key, shape, dtype, -1.0 + float(dtypes.finfo(dtype).epsneg), 1.0)
    return ew.mul(ew.sign(u), ew.log1p(ew.neg(ew.abs(u))))


# --- discrete samplers ---------------------------------------------------------------------
def bernoulli(key, p=0.5, shape=None):
    """Booleans that are True with probability p (uniform(key) < p)."""
    key = _check_key(key, "random.bernoulli")
    p = operand(p, "random.bernoulli")
    dtype = p.dtype if p.dtype in dtypes.FLOATS else dtypes.default_float
    shape = tuple(p.shape) if shape is None else _shape(shape, "random.bernoulli")
    return ew.lt(uniform(key, shape, dtype), ew.convert_element_type(p, dtype))


def categorical(key, logits, axis: int = -1, shape=None):
    """Samples of class indices from unnormalized log-probabilities (the Gumbel-max trick)."""
    key = _check_key(key, "random.categorical")
    logits = operand(logits, "random.categorical")
    if logits.dtype not in dtypes.FLOATS:
        logits = ew.convert_element_type(logits, dtypes.default_float)
    nd = logits.ndim
    if not -nd <= axis < nd:
        raise ValueError(f"random.categorical: axis {axis} is out of range for {short(logits)}")
    axis = axis - nd if axis >= 0 else axis
    batch_shape = tuple(np.delete(np.array(logits.shape, dtype=np.int64), axis))
    shape = batch_shape if shape is None else _shape(shape, "random.categorical")
    if shape[len(shape) - len(batch_shape):] != batch_shape:
        raise ValueError(f"random.categorical: shape {shape} must end with the batch shape "
                         f"{batch_shape} of {short(logits)}")
    prefix = shape[:len(shape) - len(batch_shape)]
    full = list(shape[len(shape) - len(batch_shape):])
    full.insert(axis % nd, logits.shape[axis])
    g = gumbel(key, (*prefix, *full), logits.dtype)
    lg = sh.reshape(logits, (1,) * len(prefix) + tuple(logits.shape))
    return reduction.argmax(ew.add(g, lg), axis=len(prefix) + nd + axis)


def randint(key, shape, minval, maxval, dtype=None):
    """Uniform integers in [minval, maxval) (JAX's two-draw construction, nearly unbiased)."""
    key = _check_key(key, "random.randint")
    shape = _shape(shape, "random.randint")
    dtype = dtypes.canonicalize(dtype if dtype is not None else dtypes.default_int)
    if not np.issubdtype(dtype, np.integer):
        raise TypeError(f"random.randint: dtype must be an integer dtype, got {dtype}")
    info = np.iinfo(dtype)
    lo = _clip_int(minval, dtype, info)
    hi = _clip_int(maxval, dtype, info)
    udt = np.dtype(f"uint{info.bits}")
    k1, k2 = split(key)
    higher, lower = bits(k1, shape, udt), bits(k2, shape, udt)
    span = ew.convert_element_type(ew.sub(hi, lo), udt)
    span = ew.select(ew.le(hi, lo), ew.ones_like(span), span)   # empty range -> minval
    mult = ew.rem(np.array(2 ** (info.bits // 2), udt), span)
    mult = ew.rem(ew.mul(mult, mult), span)                      # 2^bits mod span
    offset = ew.add(ew.mul(ew.rem(higher, span), mult), ew.rem(lower, span))
    offset = ew.rem(offset, span)
    return ew.add(lo, ew.convert_element_type(offset, dtype))


def _clip_int(v, dtype, info):
    v = operand(v, "random.randint")
    if not np.issubdtype(v.dtype, np.integer):
        v = ew.convert_element_type(v, dtypes.int64 if info.bits == 64 else dtypes.int32)
    if v.dtype != dtype:
        if np.iinfo(v.dtype).max > info.max:
            v = ew.min(v, np.array(info.max, v.dtype))
        if np.iinfo(v.dtype).min < info.min:
            v = ew.max(v, np.array(info.min, v.dtype))
        v = ew.convert_element_type(v, dtype)
    return v


def _shuffle(key, x, axis: int):
    # sort by random 32-bit keys, repeated until collisions are negligible (as JAX does)
    rounds = int(np.ceil(3 * np.log(max(1, math.prod(x.shape))) / np.log(2 ** 32 - 1)))
    for _ in range(rounds):
        key, sub = split(key)
        x = sort([bits(sub, tuple(x.shape)), x], axis=axis, num_keys=1)[1]
    return x


def permutation(key, x, axis: int = 0, independent: bool = False):
    """A random permutation of range(x) (x an int) or of x's entries along `axis`."""
    key = _check_key(key, "random.permutation")
    if isinstance(x, (int, np.integer)):
        n = static_int(x, "random.permutation", "x")
        if n < 0:
            raise ValueError(f"random.permutation: x must be non-negative, got {n}")
        return _shuffle(key, sh.iota(dtypes.default_int, (n,)), 0)
    x = operand(x, "random.permutation")
    if x.ndim == 0:
        raise ValueError("random.permutation: x must be an int or an array with ndim >= 1")
    axis = normalize_axis(axis, x.ndim, "random.permutation", x)
    if independent or x.ndim == 1:
        return _shuffle(key, x, axis)
    perm = _shuffle(key, sh.iota(dtypes.default_int, (x.shape[axis],)), 0)
    return take(x, perm, axis=axis)


def choice(key, a, shape=(), replace=True, p=None, axis=0):
    """Samples from range(a) (a an int) or from a's entries along `axis`: uniform or with
    probabilities p, with or without replacement (JAX's construction: randint or a
    permutation; with p, inverse-CDF search or Gumbel top-k)."""
    op = "random.choice"
    key = _check_key(key, op)
    shape = _shape(shape, op)
    scalar = isinstance(a, (int, np.integer))
    arr = None if scalar else operand(a, op)
    if arr is not None and arr.ndim == 0:
        raise ValueError(f"{op}: a must be an int or an array with ndim >= 1, got {short(arr)}")
    axis = 0 if scalar else normalize_axis(axis, arr.ndim, op, arr)
    n = int(a) if scalar else arr.shape[axis]
    draws = math.prod(shape)
    if draws and n <= 0:
        raise ValueError(f"{op}: a must be greater than 0 unless no samples are taken")
    if not replace and draws > n:
        raise ValueError(f"{op}: cannot take {draws} samples from {n} without replacement")
    if p is None:
        if replace:
            ind = randint(key, shape, 0, n)
        else:
            pool = permutation(key, n if scalar else arr, axis)
            out = sh.slice_in_dim(pool, 0, draws, axis=axis)
            return sh.reshape(out, shape if scalar else
                              arr.shape[:axis] + shape + arr.shape[axis + 1:])
    else:
        p = operand(p, op)
        if p.dtype not in dtypes.FLOATS:
            p = ew.convert_element_type(p, dtypes.default_float)
        if tuple(p.shape) != (n,):
            raise ValueError(f"{op}: p must be a vector of the {n} choices, got {short(p)}")
        if replace:
            cdf = mnp.cumsum(p)
            r = ew.mul(mnp.take(cdf, -1), ew.sub(1.0, uniform(key, shape, p.dtype)))
            ind = mnp.searchsorted(cdf, r)
        else:   # Gumbel top-k: the draws largest of log p + Gumbel noise, in order
            g = ew.add(gumbel(key, (n,), p.dtype), ew.log(p))
            ind = sh.reshape(sh.slice_in_dim(mnp.argsort(g, descending=True), 0, draws),
                             shape)
    ind = ew.convert_element_type(ind, dtypes.default_int)
    if scalar:
        return ind
    out = mnp.take(arr, sh.reshape(ind, (draws,)), axis=axis)
    return sh.reshape(out, arr.shape[:axis] + shape + arr.shape[axis + 1:])


# --- keys as data ----------------------------------------------------------------------------
def clone(key):
    """The key itself (JAX's clone matters only to its key-reuse checker)."""
    return _check_key(key, "random.clone")


def key_data(keys):
    """The uint32 words of a key or a batch of keys: mirax keys are already u32[..., 2]."""
    keys = operand(keys, "random.key_data")
    if keys.ndim < 1 or keys.shape[-1] != 2 or keys.dtype != _U32:
        raise TypeError(f"random.key_data: expected keys, a u32[..., 2] array, got {short(keys)}")
    return keys


def wrap_key_data(key_bits_array, *, impl=None, dtype=None):
    """Keys from their uint32 words (u32[..., 2]); only the threefry2x32 scheme exists."""
    for spec in (impl, dtype):
        if spec is not None and "threefry2x32" not in str(spec):
            raise ValueError(f"random.wrap_key_data: only the threefry2x32 scheme exists, "
                             f"got {spec!r}")
    k = operand(key_bits_array, "random.wrap_key_data")
    if k.ndim < 1 or k.shape[-1] != 2 or not np.issubdtype(k.dtype, np.integer):
        raise TypeError(f"random.wrap_key_data: expected u32[..., 2] key words, got {short(k)}")
    return k if k.dtype == _U32 else ew.convert_element_type(k, _U32)


from mirax.random._distributions import (  # noqa: E402 (built on the samplers above)
    ball, beta, binomial, cauchy, chisquare, dirichlet, double_sided_maxwell, f, gamma,
    generalized_normal, geometric, loggamma, logistic, lognormal, maxwell, multinomial,
    multivariate_normal, orthogonal, pareto, poisson, rademacher, rayleigh, t, triangular,
    wald, weibull_min)


name_public_functions(globals(), __all__, "random.")  # every message names the op
