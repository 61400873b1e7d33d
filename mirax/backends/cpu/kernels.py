"""CPU kernels the backend claims instead of a primitive's reference impl.

Two kinds, both computing what the reference impl computes:
- `specialize(node)`: a kernel built for one graph node at lowering time, when the static
  shapes let it skip per-call work (dot_general: the transposes, reshapes and sizes are
  worked out once; the BLAS calls are the reference impl's, so results are bitwise equal;
  a contraction of size 1 is an outer product, exact: stacks of them (per-example
  gradients) a compiled loop over the examples in parts (einsums on the pool without
  numba; W2 of benchmarks/suite.py, 128 products of 64 x 128: 0.31 ms as one einsum,
  0.13 as the loop on one thread), else one einsum; fusion: the
  compiled or cache-blocked loops; 2-d convolutions (conv.py): im2col in cache-sized
  blocks by a compiled loop and a product per block, which the loop itself asks of the
  BLAS library's gemm (loops.gemm_source), equal up to the products' rounding).
- `NATIVE[name]`: a faster kernel for any call (eager too). index_select gathers rows and
  index_add scatters them with compiled loops where numba is present (gathers.py; so
  does scatter_add into a leading axis, one index a row: an embedding's gradient); without
  numba index_add adds each block of rows into the flat output with one 1-d `np.add.at`
  (NumPy's fast path); both accumulate in index order, bitwise equal to the reference. gelu (tanh
  form), silu, softplus and their backwards run as one compiled loop per part in float32
  where numba is present (vecmath.py's tanh, logistic, exp and log1p: within a few ulp
  of NumPy's); gelu without numba in cache-sized blocks of NumPy calls with in-place
  temporaries (equal up to rounding).
  float32 attention without mask or bias (attention.py) is one compiled call over the
  (batch, head) pairs: each pair's products by the BLAS library's gemm, each score row's
  softmax and its backward in one pass; float32 layer_norm, softmax and log_softmax over
  the last axis and their backwards run as compiled rows (norms.py; float64 statistics:
  within rounding of the reference).
  fft runs with scipy.fft where SciPy is installed (its pocketfft keeps float32 /
  complex64 and vectorizes: several times NumPy's speed at large sizes; equal up to
  rounding), else NumPy's, the reference.
  Compiled loops run their parts on numba's native threads where they are ready
  (loops.run_parts), other blocks on the thread pool (threads.py). Big matrix products
  run on BLAS's own threads (or split over the pool), mid-size ones split on native
  threads (parallel.matmul).
Anything outside a kernel's fast case (dtypes, shapes) goes to the reference impl.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
from mirax.backends.cpu import attention, conv, gathers, loops, norms
from mirax.core.primitive import registry
from mirax.ops.graph_ops import valid_rows
from mirax.ops.nn import split_affine

from mirax.core import dtypes

try:  # optional: a faster FFT than NumPy's (same algorithm family, SIMD, single precision)
    import scipy.fft as _scipy_fft
except ImportError:  # pragma: no cover - SciPy is a test dependency
    _scipy_fft = None

from mirax.backends.cpu import parallel
from mirax.backends.cpu.threads import chain_threads, n_threads, native, parts, pool

BLOCK = 1 << 16   # elements per block of the blocked elementwise kernels (fits L2)
ROWS_BLOCK = 1 << 15  # elements per block of index_add's row scatter
_FAST = (np.dtype(np.float32), np.dtype(np.float64))

NATIVE: dict[str, Callable] = {}


def _native(name):
    def register(fn):
        NATIVE[name] = fn
        return fn
    return register


def impl_of(prim) -> Callable:
    """The function the CPU runs for `prim` (a claimed kernel, else the reference)."""
    return NATIVE.get(prim.name, prim.impl)


# --- primitives whose impl is a ufunc ----------------------------------------------------
# Primitives whose impl checks the dtype first (integer semantics) but is a plain ufunc
# (under the plan's errstate block) on floating-point outputs.
_FLOAT_UFUNCS = {"div": np.true_divide, "pow": np.power}


def ufunc_of(prim, node=None):
    """(ufunc, needs_errstate) when `prim`'s CPU impl is a ufunc, or wraps one only to
    silence floating-point warnings (or, given the `node`, is one for its dtypes); else
    (None, False)."""
    impl = prim.impl
    if isinstance(impl, np.ufunc):
        return impl, False
    u = getattr(impl, "ufunc", None)
    if isinstance(u, np.ufunc):
        return u, True
    u = _FLOAT_UFUNCS.get(prim.name)
    if u is not None and node is not None and len(node.outputs) == 1 and all(
            np.dtype(v.aval.dtype).kind in "fc" for v in (*node.inputs, *node.outputs)):
        return u, True
    return None, False


# --- dot_general, specialized per node ---------------------------------------------------
# outer products of examples b in [s, e): out[b] = x[b] y[b]^T (one multiply an element)
_OUTER = """
def kernel(x, y, out, s, e):
    for b in range(s, e):
        xb, yb, ob = x[b], y[b], out[b]
        for i in range(xb.size):
            xi, oi = xb[i], ob[i]
            for j in range(yb.size):
                oi[j] = xi * yb[j]
    return 0
""" + loops.PARTS_OF_3


def _dot_general(node):
    (lc, rc), (lb, rb) = node.params["dimension_numbers"]
    pref = node.params.get("preferred_element_type")
    la, ra = node.inputs[0].aval, node.inputs[1].aval
    dt = np.dtype(la.dtype)
    if np.dtype(ra.dtype) != dt or dt not in _FAST or (pref is not None and
                                                       np.dtype(pref) != dt):
        return None
    lf = tuple(i for i in range(len(la.shape)) if i not in lc and i not in lb)
    rf = tuple(i for i in range(len(ra.shape)) if i not in rc and i not in rb)
    pa, pb = tuple(lb) + lf + tuple(lc), tuple(rb) + tuple(rc) + rf
    size = (lambda shape, axes: math.prod(shape[a] for a in axes))
    b, m, k, n = size(la.shape, lb), size(la.shape, lf), size(la.shape, lc), size(ra.shape, rf)
    out_shape = tuple(node.outputs[0].aval.shape)
    ta = None if pa == tuple(range(len(pa))) else pa
    tb = None if pb == tuple(range(len(pb))) else pb
    if k == 1:  # outer products (per-example weight grads): exact products, no BLAS calls
        sa, sb = (b, m) if lb else (m,), (b, n) if lb else (n,)
        subs = "bi,bj->bij" if lb else "i,j->ij"
        ps = parts(b, max(1, parallel.GRAIN_CHEAP // (m * n))) if lb else []

        def outer(x, y):
            x = (x if ta is None else x.transpose(ta)).reshape(sa)
            y = (y if tb is None else y.transpose(tb)).reshape(sb)
            if lb and loops.available():   # stacks of examples as compiled loops
                out = np.empty((b, m, n), dt)
                loops.run_parts(_OUTER, (np.ascontiguousarray(x), np.ascontiguousarray(y),
                                         out), *loops.even_bounds(b, out.nbytes),
                                n_threads())
            elif len(ps) < 2:
                return np.einsum(subs, x, y).reshape(out_shape)
            else:                            # ... or einsums on the pool
                out = np.empty((b, m, n), dt)
                pool.map(lambda i: np.einsum(subs, x[ps[i][0]:ps[i][1]],
                                             y[ps[i][0]:ps[i][1]], out=out[ps[i][0]:ps[i][1]]),
                         len(ps))
            return out.reshape(out_shape)
        return outer
    # products on as many threads as their size pays for (parallel.matmul)
    if lb:  # stacked: contiguous stacks so that every matrix goes to BLAS
        sa, sb = (b, m, k), (b, k, n)

        def run(x, y):
            x = np.ascontiguousarray(x if ta is None else x.transpose(ta)).reshape(sa)
            y = np.ascontiguousarray(y if tb is None else y.transpose(tb)).reshape(sb)
            return parallel.matmul_stack(x, y).reshape(out_shape)
        return run
    sa, sb = (m, k), (k, n)
    plain = (ta is None and tb is None and la.shape == sa and ra.shape == sb)
    if plain:
        return parallel.matmul

    def run(x, y):  # 2-d matmul takes transposed views as they are (BLAS trans flags)
        x = (x if ta is None else x.transpose(ta)).reshape(sa)
        y = (y if tb is None else y.transpose(tb)).reshape(sb)
        return parallel.matmul(x, y).reshape(out_shape)
    return run


_SPECIALIZE = {"dot_general": _dot_general, "conv_general_dilated": conv.kernel,
               "reduce_sum": parallel.reduction,
               "reduce_max": parallel.reduction, "reduce_min": parallel.reduction}


def mul_sum(mul_node, sum_node) -> Callable | None:
    """reduce_sum(mul(a, b)) over trailing axes as one einsum (row-wise dot products: no
    product array; ~3x faster than multiply-then-sum), or None."""
    a, b = (v.aval for v in mul_node.inputs)
    shape, nd = tuple(mul_node.outputs[0].aval.shape), len(mul_node.outputs[0].aval.shape)
    axes = tuple(sum_node.params["axes"])
    dt = np.dtype(a.dtype)
    if tuple(a.shape) != shape or tuple(b.shape) != shape or np.dtype(b.dtype) != dt or \
            dt not in _FAST or not 0 < nd <= 26 or axes != tuple(range(nd - len(axes), nd)):
        return None
    letters = "abcdefghijklmnopqrstuvwxyz"[:nd]
    subs = f"{letters},{letters}->{letters[:nd - len(axes)]}"
    return lambda x, y: np.asarray(np.einsum(subs, x, y))


def mul_index_add(mul_node, add_node) -> Callable | None:
    """index_add(mul(x, w)) with w one factor a row of x (shape (n, 1, ...)) as one
    compiled loop that scales each row as it adds it (no product array; the same
    multiplications and additions, so bitwise the two ops), or None. The kernel takes
    (x, w, idx)."""
    a, b = (v.aval for v in mul_node.inputs)
    shape = tuple(mul_node.outputs[0].aval.shape)
    if not loops.available() or len(shape) < 2 or np.dtype(a.dtype) != np.dtype(b.dtype) or \
            np.dtype(a.dtype) not in _FAST:
        return None
    col = (shape[0],) + (1,) * (len(shape) - 1)
    swap = tuple(a.shape) == col   # the factors come (w, x)
    if (tuple(b.shape), tuple(a.shape)) != ((shape, col) if swap else (col, shape)):
        return None
    num_rows = add_node.params["num_rows"]

    def run(p, q, idx):
        x, w = (q, p) if swap else (p, q)
        out = gathers.index_add(x, idx, num_rows, w)
        return _index_add(np.multiply(x, w), idx, num_rows=num_rows) if out is None else out
    return run


def specialize(node) -> Callable | None:
    """A kernel for this one node (its params bound), or None."""
    make = _SPECIALIZE.get(node.prim.name)
    return make(node) if make is not None else None


NATIVE["dot_product_attention"] = attention.forward
NATIVE["dot_product_attention_bwd"] = attention.backward


# --- row-wise composites: rows split over the thread pool -----------------------------------
ROWS_PART = 1 << 16   # elements per part (whole rows; fixed: values do not depend on threads)


def _row_parts(name: str, lead: int):
    """A kernel running the reference impl of the row-wise composite `name`
    (normalized over the last axis) on parts of its rows on the thread pool: every operand
    of the row operand's shape (argument `lead`) is cut into the same rows, the others
    (weights) pass whole. Row results are bitwise the whole call's; results summed over the
    rows (a weight's gradient) are the parts' sums added in part order."""
    def run(*args, **params):
        fn = registry[name].impl
        x = args[lead]
        axes = params.get("axes", (-1,))
        if x.ndim < 2 or x.size < 2 * ROWS_PART or x.dtype not in _FAST or \
                tuple(axes) not in ((-1,), (x.ndim - 1,)):
            return fn(*args, **params)
        d = x.shape[-1]
        rows = x.size // d
        ps = parts(rows, max(1, ROWS_PART // d))
        if len(ps) < 2:
            return fn(*args, **params)
        flat = [a.reshape(rows, d) if np.shape(a) == x.shape else a for a in args]
        cut = [np.shape(a) == x.shape for a in args]
        if "axes" in params:
            params = {**params, "axes": (1,)}

        def part(i):
            s, e = ps[i]
            return fn(*(a[s:e] if c else a for a, c in zip(flat, cut)), **params)
        outs = pool.map(part, len(ps), chain_threads())
        if not isinstance(outs[0], list):
            return np.concatenate(outs).reshape(x.shape)
        res = []
        for j, y in enumerate(outs[0]):
            if np.ndim(y) == 2 and y.shape[-1] == d and y.shape[0] == ps[0][1]:
                res.append(np.concatenate([o[j] for o in outs]).reshape(x.shape))
            else:
                acc = np.array(y)
                for o in outs[1:]:
                    acc += o[j]
                res.append(acc)
        return res
    return run


def _last_axis(x, axes) -> bool:
    return tuple(axes) in ((-1,), (x.ndim - 1,))


def _compiled_rows(name: str, forward, backward):
    """NATIVE[name] and NATIVE[name + "_bwd"]: norms.py's compiled rows (`forward(x)`,
    `backward(ct, y)`: None where their dtypes or shapes do not apply) over the last axis,
    else the reference's row parts."""
    forward_rows, backward_rows = _row_parts(name, 0), _row_parts(name + "_bwd", 2)

    def fwd(x, *, axes):
        y = forward(x) if _last_axis(x, axes) else None
        return forward_rows(x, axes=axes) if y is None else y

    def bwd(ct, y, x, *, wrt, nout, axes):
        dx = backward(ct, y) if _last_axis(x, axes) else None
        return backward_rows(ct, y, x, wrt=wrt, nout=nout, axes=axes) if dx is None else [dx]
    NATIVE[name], NATIVE[name + "_bwd"] = fwd, bwd


_compiled_rows("softmax", norms.softmax, norms.softmax_bwd)
_compiled_rows("log_softmax", norms.log_softmax, norms.log_softmax_bwd)


@_native("layer_norm")
def _layer_norm(*args, eps, has_weight, has_bias):
    x, w, b = split_affine(args, has_weight, has_bias)
    y = norms.layer_norm(x, w, b, eps)
    return y if y is not None else _layer_norm_rows(*args, eps=eps, has_weight=has_weight,
                                                    has_bias=has_bias)


@_native("layer_norm_bwd")
def _layer_norm_bwd(ct, out, *args, wrt, nout, eps, has_weight, has_bias):
    x, w, b = split_affine(args, has_weight, has_bias)
    grads = norms.layer_norm_bwd(ct, x, w, b, eps)
    if grads is None:
        return _layer_norm_bwd_rows(ct, out, *args, wrt=wrt, nout=nout, eps=eps,
                                    has_weight=has_weight, has_bias=has_bias)
    return [grads[i] for i in wrt]


_layer_norm_rows = _row_parts("layer_norm", 0)   # (the other dtypes)
_layer_norm_bwd_rows = _row_parts("layer_norm_bwd", 2)
for _name, _lead in (("rms_norm", 0), ("rms_norm_bwd", 2)):
    NATIVE.setdefault(_name, _row_parts(_name, _lead))


# --- index_select / index_add / row scatter_add: compiled rows (gathers.py), else blocked
# flat scatter ------------------------------------------------------------------------------
@_native("scatter_add")
def _scatter_add(x, idx, upd, *, axes, mode):
    out = gathers.scatter_add_rows(x, idx, upd, axes, mode)
    return registry["scatter_add"].impl(x, idx, upd, axes=axes, mode=mode) if out is None \
        else out


@_native("index_select")
def _index_select(x, idx):
    out = gathers.index_select(x, idx)
    return registry["index_select"].impl(x, idx) if out is None else out


@_native("index_add")
def _index_add(x, idx, *, num_rows):
    out = gathers.index_add(x, idx, num_rows)
    if out is not None:
        return out
    if x.ndim < 2 or x.dtype not in _FAST or x.size == 0:
        return registry["index_add"].impl(x, idx, num_rows=num_rows)
    # without numba: each block of rows into the flat output with one 1-d np.add.at
    x, idx = valid_rows(x, idx, num_rows)  # out-of-range rows are dropped
    row = math.prod(x.shape[1:])
    out = np.zeros(num_rows * row, x.dtype)
    flat_x = np.ascontiguousarray(x).reshape(-1)
    it = np.int32 if num_rows * row < 2 ** 31 else np.int64
    cols = np.arange(row, dtype=it)
    step = max(1, ROWS_BLOCK // row)
    for s in range(0, len(idx), step):
        i = idx[s:s + step].astype(it, copy=False)
        np.add.at(out, (i[:, None] * it(row) + cols).reshape(-1),
                  flat_x[s * row:(s + len(i)) * row])
    return out.reshape((num_rows,) + x.shape[1:])


# --- activations: compiled loops (gelu's tanh form also blocked NumPy calls) ----------------
_S2PI = math.sqrt(2.0 / math.pi)
_C = 0.044715
# float32 with numba: one loop per part (the parts on numba's native threads where they
# are ready, loops.run_parts), tanh and logistic from vecmath.py (vectorized), every
# thread without the GIL (NumPy calls hold the GIL between calls and stop scaling past a
# few threads). The loop runs over slices of the part, indexed from 0: indexed x[i]
# for i in range(s, e), numba's wrap-around of negative indices kept LLVM from vectorizing
# it (a 1M-element gelu backward took 19 ms on one core against 5.5 ms of blocked NumPy
# calls; over slices 5.3 ms, as the blocked NumPy calls). v is x's element, g ct's.
_LOOP = """
def kernel(x, ct, out, s, e):
    half, one, s2pi, c = _np.float32(0.5), _np.float32(1.0), _np.float32(%r), _np.float32(%r)
    xs, cs, ys = x[s:e], ct[s:e], out[s:e]
    for i in range(xs.size):
        v, g = xs[i], cs[i]
        BODY
    return 0
""" % (_S2PI, _C) + loops.PARTS_OF_3
_BODIES = {
    "gelu": ["t = _tanh32(s2pi * v * (one + c * v * v))", "ys[i] = half * v * (one + t)"],
    "gelu_bwd": ["t = _tanh32(s2pi * v * (one + c * v * v))",
                 "ys[i] = g * (half * (one + t) + half * s2pi * v * "
                 "(one + _np.float32(3.0) * c * v * v) * (one - t * t))"],
    "softplus": ["ys[i] = _softplus32(v)"],
    "softplus_bwd": ["ys[i] = g * _logistic32(v)"],            # d softplus = sigmoid
    "silu": ["ys[i] = v * _logistic32(v)"],
    "silu_bwd": ["t = _logistic32(v)", "ys[i] = g * t * (one + v * (one - t))"],
}
_ACTIVATIONS = {name: _LOOP.replace("BODY", "\n        ".join(body))
                for name, body in _BODIES.items()}


def _elementwise_loop(name: str, x, ct=None):
    """`name`'s loop over float32 x (and ct, of x's shape), or None where it does not
    apply (dtype, shapes, numba)."""
    if x.dtype != np.float32 or x.ndim == 0 or (ct is not None and (
            ct.dtype != x.dtype or ct.shape != x.shape)) or not loops.available():
        return None
    out = np.empty(x.shape, x.dtype)
    xf, cf, of = (np.ascontiguousarray(a).reshape(-1)
                  for a in (x, x if ct is None else ct, out))
    on_native = native.ready()
    ps = parts(xf.size, loops.heavy_part(on_native))
    loops.run_parts(_ACTIVATIONS[name], (xf, cf, of), *loops.bounds(ps), n_threads(),
                    on_native)
    return out


def _blocks(*arrays):
    """Flat contiguous views of `arrays`, and the (start, stop) of each block."""
    flat = [np.ascontiguousarray(a).reshape(-1) for a in arrays]
    n = flat[0].size
    return flat, [(s, min(s + BLOCK, n)) for s in range(0, n, BLOCK)]


@_native("gelu")
def _gelu(x, *, approximate):
    if not approximate or x.dtype not in _FAST or x.ndim == 0:
        return registry["gelu"].impl(x, approximate=approximate)
    if (out := _elementwise_loop("gelu", x)) is not None:
        return out
    out = np.empty(x.shape, x.dtype)
    (xf, of), blocks = _blocks(x, out)

    def block(i):   # blocks run on the thread pool
        s, e = blocks[i]
        with np.errstate(over="ignore", invalid="ignore"):
            # 0.5 x (1 + tanh(sqrt(2/pi) x (1 + c x^2)))
            xs, t = xf[s:e], np.empty(e - s, x.dtype)
            np.multiply(xs, xs, out=t)
            t *= _C
            t += 1
            t *= xs
            t *= _S2PI
            np.tanh(t, out=t)
            t += 1
            np.multiply(xs, t, out=of[s:e])
            of[s:e] *= 0.5
    pool.map(block, len(blocks), chain_threads())
    return out


@_native("gelu_bwd")
def _gelu_bwd(ct, out, x, *, wrt, nout, approximate):
    if not approximate or x.dtype not in _FAST or ct.dtype != x.dtype or x.ndim == 0 or \
            ct.shape != x.shape:
        return registry["gelu_bwd"].impl(ct, out, x, wrt=wrt, nout=nout,
                                         approximate=approximate)
    if (res := _elementwise_loop("gelu_bwd", x, ct)) is not None:
        return [res]
    res = np.empty(x.shape, x.dtype)
    (xf, cf, rf), blocks = _blocks(x, ct, res)

    def block(i):   # blocks run on the thread pool
        s, e = blocks[i]
        with np.errstate(over="ignore", invalid="ignore"):
            # d = 0.5 (1 + t) + 0.5 sqrt(2/pi) x (1 + 3c x^2) (1 - t^2)
            xs = xf[s:e]
            x2, t, w = (np.empty(e - s, x.dtype) for _ in range(3))
            np.multiply(xs, xs, out=x2)
            np.multiply(x2, _C, out=t)
            t += 1
            t *= xs
            t *= _S2PI
            np.tanh(t, out=t)
            x2 *= 3 * _C
            x2 += 1
            x2 *= xs
            x2 *= 0.5 * _S2PI
            np.multiply(t, t, out=w)
            np.subtract(1, w, out=w)
            x2 *= w
            t += 1
            t *= 0.5
            x2 += t
            np.multiply(cf[s:e], x2, out=rf[s:e])
    pool.map(block, len(blocks), chain_threads())
    return [res]


@_native("softplus")
def _softplus(x):
    out = _elementwise_loop("softplus", x)
    return out if out is not None else registry["softplus"].impl(x)


@_native("softplus_bwd")
def _softplus_bwd(ct, out, x, *, wrt, nout):
    res = _elementwise_loop("softplus_bwd", x, ct)
    return [res] if res is not None else registry["softplus_bwd"].impl(ct, out, x, wrt=wrt,
                                                                        nout=nout)


@_native("silu")
def _silu(x):
    out = _elementwise_loop("silu", x)
    return out if out is not None else registry["silu"].impl(x)


@_native("silu_bwd")
def _silu_bwd(ct, out, x, *, wrt, nout):
    res = _elementwise_loop("silu_bwd", x, ct)
    return [res] if res is not None else registry["silu_bwd"].impl(ct, out, x, wrt=wrt,
                                                                    nout=nout)


# --- fft through scipy.fft -------------------------------------------------------------------
if _scipy_fft is not None:
    @_native("fft")
    def _fft(x, *, fft_type, fft_lengths):
        axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
        if fft_type == "fft":
            out, dt = _scipy_fft.fftn(x, axes=axes), x.dtype
        elif fft_type == "ifft":
            out, dt = _scipy_fft.ifftn(x, axes=axes), x.dtype
        elif fft_type == "rfft":
            out, dt = _scipy_fft.rfftn(x, axes=axes), dtypes.complex_dtype(x.dtype)
        else:
            out = _scipy_fft.irfftn(x, s=fft_lengths, axes=axes)
            dt = dtypes.real_dtype(x.dtype)
        return np.asarray(out).astype(dt, copy=False)
