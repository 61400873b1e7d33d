"""mirax.numpy 1-d convolution, polynomials and function vectorizers (jax.numpy's
behaviour)."""
from __future__ import annotations

import builtins
import re

import numpy as np

from mirax.core.array import Array
from mirax.core.errors import ConcretizationError, check_callable
from mirax.core.trace import Tracer
from mirax.numpy import _core as c
from mirax.numpy import _indexing as ixn
from mirax.numpy._sets import _flat
from mirax.numpy._stats import _inexact, _promote_inexact
from mirax.numpy import _math as m
from mirax.ops import elementwise as ew
from mirax.ops import shape as sh
from mirax.ops.common import normalize_axis, operand, promote, short
from mirax.ops.conv import conv_general_dilated
from mirax.ops.dot import canonical_precision
from mirax.numpy import linalg
from mirax.transforms.vmap import vmap

__all__ = [
    "convolve",
    "correlate",
    "polyval",
    "polyadd",
    "polysub",
    "polymul",
    "polyder",
    "polyint",
    "polyfit",
    "apply_along_axis",
    "apply_over_axes",
    "vectorize",
]



# --- convolution and polynomials --------------------------------------------------------------
def _conv1d(a, v, mode, op, precision=None):
    precision = canonical_precision(precision, op)
    x, y = _promote_inexact(op, a, v)
    if x.ndim != 1 or y.ndim != 1:
        raise ValueError(f"{op}: only 1-d inputs are supported, got {short(x)} and {short(y)}")
    if x.shape[0] == 0 or y.shape[0] == 0:
        raise ValueError(f"{op}: inputs cannot be empty, got {short(x)} and {short(y)}")
    flip_out = False
    if x.shape[0] < y.shape[0]:
        x, y = y, x
        flip_out = op == "correlate"
    if op == "convolve":
        y = sh.rev(y, (0,))
    k = y.shape[0]
    pads = {"valid": (0, 0), "same": (k // 2, k - k // 2 - 1), "full": (k - 1, k - 1)}
    if mode not in pads:
        raise ValueError(f"{op}: mode must be 'full', 'same' or 'valid', got {mode!r}")
    out = conv_general_dilated(sh.reshape(x, (1, 1, -1)), sh.reshape(y, (1, 1, -1)), (1,),
                               [pads[mode]], precision=precision)
    out = sh.reshape(out, (out.shape[-1],))
    return sh.rev(out, (0,)) if flip_out else out


def convolve(a, v, mode="full", *, precision=None, preferred_element_type=None):
    """1-d discrete convolution (differentiable in both inputs)."""
    return _conv1d(a, v, mode, "convolve", precision)


def correlate(a, v, mode="valid", *, precision=None, preferred_element_type=None):
    """1-d cross-correlation: out[k] = sum_n a[n + k] v[n] (real inputs)."""
    return _conv1d(a, v, mode, "correlate", precision)


def _poly(p, op):
    p = operand(p, op)
    if p.ndim != 1:
        raise ValueError(f"{op}: coefficients must be 1-d, got {short(p)}")
    return p


def polyval(p, x, *, unroll=16):
    """p[0] * x**(n-1) + ... + p[n-1], by Horner's rule."""
    p, x = _promote_inexact("polyval", p, x)
    if p.ndim != 1:
        raise ValueError(f"polyval: coefficients must be 1-d, got {short(p)}")
    y = ew.zeros_like(x)
    for i in builtins.range(p.shape[0]):
        y = ew.add(ew.mul(y, x), sh.index_in_dim(p, i, 0, False))
    return y


def polyadd(a1, a2):
    a, b = promote("polyadd", _poly(a1, "polyadd"), _poly(a2, "polyadd"))
    if a.shape[0] < b.shape[0]:
        a, b = b, a
    return ew.add(a, sh.pad(b, 0, ((a.shape[0] - b.shape[0], 0, 0),)))


def polysub(a1, a2):
    a, b = promote("polysub", _poly(a1, "polysub"), _poly(a2, "polysub"))
    return polyadd(a, ew.neg(b))


def polymul(a1, a2, *, trim_leading_zeros=False):
    a, b = _promote_inexact("polymul", _poly(a1, "polymul"), _poly(a2, "polymul"))
    if trim_leading_zeros:
        a, b = _trim_front(a), _trim_front(b)
    if a.shape[0] == 0:
        a = sh.full((1,), 0, a.dtype)
    if b.shape[0] == 0:
        b = sh.full((1,), 0, b.dtype)
    return convolve(a, b)


def _trim_front(p):
    v = ixn._concrete(p)
    if v is None:
        raise ConcretizationError("polymul: trim_leading_zeros=True needs concrete "
                                  f"coefficients, got a traced {short(p)}")
    nz = np.nonzero(np.asarray(v))[0]
    return sh.slice_in_dim(p, int(nz[0]) if nz.size else p.shape[0], p.shape[0])


def polyder(p, m=1):
    """The m-th derivative's coefficients."""
    p = _inexact(_poly(p, "polyder"))
    if int(m) < 0:
        raise ValueError(f"polyder: order m must be non-negative, got {m}")
    for _ in builtins.range(int(m)):
        n = p.shape[0]
        if n <= 1:
            return sh.full((0,), 0, p.dtype)
        p = ew.mul(sh.slice_in_dim(p, 0, n - 1), Array(np.arange(n - 1, 0, -1)
                                                     .astype(np.dtype(p.dtype))))
    return p


def polyint(p, m=1, k=None):
    """The m-th antiderivative's coefficients; k gives the integration constants (one, or m:
    the first for the first integration)."""
    p = _inexact(_poly(p, "polyint"))
    m_ = int(m)
    if m_ < 0:
        raise ValueError(f"polyint: order m must be non-negative, got {m}")
    if m_ == 0:
        return p
    ks = sh.full((m_,), 0, p.dtype) if k is None else \
        ew.convert_element_type(sh.broadcast_to(_flat(k, "polyint"), (m_,)), p.dtype)
    for j in builtins.range(m_):
        n = p.shape[0]
        div = Array(np.arange(n, 0, -1).astype(np.dtype(p.dtype)))
        p = sh.concatenate([ew.div(p, div), sh.slice_in_dim(ks, j, j + 1)], 0)
    return p


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """Least-squares polynomial fit (coefficients highest power first) via lstsq on the
    scaled Vandermonde matrix, as jnp.polyfit."""
    x, y = _promote_inexact("polyfit", x, y)
    if isinstance(deg, Tracer):
        raise ConcretizationError("polyfit: deg must be a static int")
    deg = int(deg)
    order = deg + 1
    if deg < 0:
        raise ValueError(f"polyfit: deg must be non-negative, got {deg}")
    if x.ndim != 1 or x.shape[0] == 0 or y.ndim not in (1, 2) or y.shape[0] != x.shape[0]:
        raise ValueError(f"polyfit: x must be 1-d and y 1-d or 2-d of the same length, got "
                         f"{short(x)} and {short(y)}")
    if rcond is None:
        rcond = x.shape[0] * float(np.finfo(np.dtype(x.dtype)).eps)
    cols = [ew.ones_like(x)]
    for _ in builtins.range(deg):
        cols.append(ew.mul(cols[-1], x))
    lhs = sh.stack(cols[::-1], 1)
    rhs = y
    if w is not None:
        ww = _flat(w, "polyfit")
        lhs = ew.mul(lhs, sh.expand_dims(ww, 1))
        rhs = ew.mul(rhs, ww if rhs.ndim == 1 else sh.expand_dims(ww, 1))
    scale = m.sqrt(c.sum(ew.mul(lhs, lhs), axis=0))
    lhs = ew.div(lhs, sh.expand_dims(scale, 0))
    coef, resids, rank, s = linalg.lstsq(lhs, rhs, rcond)
    coef = ew.div(coef, scale if coef.ndim == 1 else sh.expand_dims(scale, 1))
    if full:
        return coef, resids, rank, s, operand(rcond)
    if cov:
        vbase = ew.div(linalg.inv(c.matmul(sh.transpose(lhs, (1, 0)), lhs)),
                       c.outer(scale, scale))
        if cov == "unscaled":
            fac = 1.0
        else:
            if x.shape[0] <= order:
                raise ValueError("polyfit: the number of data points must exceed order to "
                                 "scale the covariance matrix")
            fac = ew.div(resids, float(x.shape[0] - order))
        if y.ndim == 1:
            return coef, ew.mul(vbase, fac if isinstance(fac, float) else
                                sh.reshape(fac, ()))
        return coef, ew.mul(sh.expand_dims(vbase, 2), fac)
    return coef


# --- function vectorizers ---------------------------------------------------------------------
def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """func1d applied to the 1-d slices along axis (by nested vmaps, as JAX)."""
    a = operand(arr, "apply_along_axis")
    ax = normalize_axis(axis, a.ndim, "apply_along_axis", a)

    def func(x):
        return func1d(x, *args, **kwargs)

    for i in builtins.range(1, a.ndim - ax):
        func = vmap(func, in_axes=i, out_axes=-1)
    for _ in builtins.range(ax):
        func = vmap(func, in_axes=0, out_axes=0)
    return func(a)


def apply_over_axes(func, a, axes):
    """func(a, axis) applied over each axis in turn, keeping the dimensions."""
    check_callable(func, "apply_over_axes")
    x = operand(a, "apply_over_axes")
    axes = [axes] if isinstance(axes, int) else axes
    if isinstance(axes, str) or not hasattr(axes, "__iter__"):
        raise TypeError(f"apply_over_axes: axes must be an int or a sequence of ints, got "
                        f"{axes!r}")
    for axis in axes:
        normalize_axis(axis, x.ndim, "apply_over_axes", x)
        b = operand(func(x, axis))
        if b.ndim == x.ndim - 1:
            b = sh.expand_dims(b, normalize_axis(axis, x.ndim, "apply_over_axes", x))
        elif b.ndim != x.ndim:
            raise ValueError(f"apply_over_axes: function is not returning an array of the "
                             f"correct shape (got {short(b)} for {short(x)})")
        x = b
    return x


_CORE = r"\((?:\w+(?:,\w+)*)?\)"
_SIG = rf"^{_CORE}(?:,{_CORE})*->{_CORE}(?:,{_CORE})*$"


def _parse_signature(signature):
    sig = re.sub(r"\s+", "", signature)
    if not re.match(_SIG, sig):
        raise ValueError(f"vectorize: not a valid gufunc signature: {signature!r}")
    ins, outs = sig.split("->")

    def parse(part):
        return [tuple(d for d in g.split(",") if d) for g in re.findall(r"\(([^)]*)\)", part)]

    return parse(ins), parse(outs)


def vectorize(pyfunc, *, excluded=frozenset(), signature=None):
    """A function mapping pyfunc over the broadcast leading (loop) dimensions of its
    arguments by nested vmaps. `excluded` names positions / keywords passed through as is;
    `signature` ('(n),(n)->()') names the core dimensions each argument keeps."""
    check_callable(pyfunc, "vectorize")
    if signature is not None and not isinstance(signature, str):
        raise TypeError(f"vectorize: signature must be a string like '(n),(n)->()', got "
                        f"{type(signature).__name__}")
    import functools

    excluded = frozenset(excluded)
    parsed = None if signature is None else _parse_signature(signature)

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        dyn_pos = [i for i in builtins.range(len(args)) if i not in excluded]
        dyn_kw = [k for k in kwargs if k not in excluded]
        static_kw = {k: v for k, v in kwargs.items() if k in excluded}
        dyn = [operand(args[i], "vectorize") for i in dyn_pos] + \
            [operand(kwargs[k], "vectorize") for k in dyn_kw]
        cores = parsed[0] if parsed else [()] * len(dyn)
        if len(cores) != len(dyn):
            raise TypeError(f"vectorize: signature {signature!r} has {len(cores)} inputs but "
                            f"{len(dyn)} arguments were given")
        sizes, loops = {}, []
        for x, core in zip(dyn, cores):
            if x.ndim < len(core):
                raise ValueError(f"vectorize: input {short(x)} has fewer dimensions than its "
                                 f"core signature {core}")
            lead = x.ndim - len(core)
            for name, n in zip(core, x.shape[lead:]):
                if sizes.setdefault(name, n) != n:
                    raise ValueError(f"vectorize: inconsistent size for core dimension "
                                     f"{name!r}: {sizes[name]} vs {n}")
            loops.append(tuple(x.shape[:lead]))
        loop = tuple(np.broadcast_shapes(*loops)) if loops else ()
        dyn = [sh.broadcast_to(x, loop + tuple(x.shape[x.ndim - len(core):]))
               for x, core in zip(dyn, cores)]

        def call(*vals):
            full = list(args)
            for j, i in enumerate(dyn_pos):
                full[i] = vals[j]
            kw = dict(static_kw, **dict(zip(dyn_kw, vals[len(dyn_pos):])))
            return pyfunc(*full, **kw)

        f = call
        for _ in loop:
            f = vmap(f)
        return f(*dyn)

    return wrapped
