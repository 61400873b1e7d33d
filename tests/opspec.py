"""OpSpec registry: one entry per mirax.numpy (and friends) function, as Thunder's OpInfo.

Each spec names the function (a dotted path under `mirax`, resolved at collection so
functions still being written are skipped with a reason), a NumPy reference, a sample
generator over dtypes (shapes include 0-d, empty, size-1 axes and broadcasting pairs),
tolerances and whether it is differentiable. tests/numpy/test_numpy_ops.py checks values
(and result dtypes against JAX); tests/transforms/test_rules_generated.py checks jit, jvp,
vjp and vmap, and lists primitives with no rule or no spec.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np

import mirax

F32, F64, I32, BOOL = np.dtype("float32"), np.dtype("float64"), np.dtype("int32"), np.dtype("bool")
FLOATS = (F32, F64)
NUMERIC = (F32, F64, I32)
SHORT = {F32: "f32", F64: "f64", I32: "i32", BOOL: "bool", np.dtype("float16"): "f16"}


@dataclasses.dataclass
class Sample:
    args: tuple  # NumPy arrays are operands; anything else is a static argument
    kwargs: dict
    name: str  # the shape part of the test id, e.g. "3x1_1x4"

    def arrays(self):
        return [i for i, a in enumerate(self.args) if isinstance(a, np.ndarray)]


@dataclasses.dataclass
class OpSpec:
    name: str  # test id, e.g. "sin" or "pad_reflect"
    path: str  # under mirax: "numpy.sin", "numpy.linalg.inv"
    ref: Callable | None  # NumPy reference (None: value test skipped)
    samples: Callable[[np.random.Generator, np.dtype], list[Sample]]
    dtypes: tuple = FLOATS
    diff: bool = True  # differentiable in its float array arguments
    diff_args: tuple | None = None  # which array arguments (None: all float ones)
    rtol: float = 1e-5  # f32 value tolerance (f64: 1e-10)
    atol: float = 1e-6
    grad_rtol: float = 1e-5  # f64 derivative tolerance
    vmap: bool = True
    post: Callable | None = None  # applied to outputs of both (e.g. sign fixes)
    jax_name: str | None = ""  # jnp name for the dtype check ("": same, None: no)
    owner: str = ""  # the in-progress area providing it, if any
    seq: bool = False  # fn takes its arrays as one list (concatenate)
    adapt: Callable | None = None  # adapt(fn, *args, **kw): how to call fn and ref

    def call(self, fn, args, kwargs):
        """Call fn (mirax's or the reference) on a sample's args as this op expects."""
        if self.seq:
            arrays = [a for a in args if _is_array(a)]
            rest = [a for a in args if not _is_array(a)]
            return fn(arrays, *rest, **kwargs)
        if self.adapt is not None:
            return self.adapt(fn, *args, **kwargs)
        return fn(*args, **kwargs)

    @property
    def fn(self):
        return resolve(self.path)


def _is_array(a):
    return isinstance(a, np.ndarray) or hasattr(a, "aval")


def _scipy_special():
    import pytest

    return pytest.importorskip("scipy.special")


def reference(spec: OpSpec):
    """The NumPy reference; a string names a scipy.special function (scipy optional)."""
    if isinstance(spec.ref, str):
        return getattr(_scipy_special(), spec.ref.rsplit(".", 1)[1])
    return spec.ref


def resolve(path: str):
    """mirax.<path> or None when it does not exist (yet)."""
    obj: Any = mirax
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            import importlib

            try:
                obj = importlib.import_module("mirax." + path.rsplit(".", 1)[0])
                obj = getattr(obj, path.rsplit(".", 1)[1], None)
            except ImportError:
                return None
            return obj
    return obj


# --- sample builders ------------------------------------------------------------------------
def shape_id(shape) -> str:
    return "x".join(map(str, shape)) if shape else "s"


def arr(rng, shape, dtype, lo=-2.0, hi=2.0):
    dtype = np.dtype(dtype)
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(math.ceil(lo), math.floor(hi) + 1, size=shape).astype(dtype)
    return np.asarray(rng.uniform(lo, hi, size=shape)).astype(dtype)


def nonzero(rng, shape, dtype, lo=0.3, hi=2.0):
    """Magnitudes in [lo, hi] with random signs (no zeros, no ties near 0)."""
    a = arr(rng, shape, dtype, lo, hi)
    sign = np.where(rng.random(shape) < 0.5, -1, 1).astype(a.dtype)
    return (a * sign).astype(a.dtype)


UNARY_SHAPES = [(3, 4), (), (0,), (1, 5), (2, 1, 3)]
BINARY_SHAPES = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (2, 3)), ((4,), (2, 4)), ((0, 3), (1, 3))]


def unary(lo=-2.0, hi=2.0, gen=None, **kw):
    gen = gen or (lambda rng, s, d: arr(rng, s, d, lo, hi))

    def make(rng, dtype):
        return [Sample((gen(rng, s, dtype),), dict(kw), shape_id(s)) for s in UNARY_SHAPES]

    return make


def binary(lo=-2.0, hi=2.0, lo2=None, hi2=None, gen2=None, gen=None):
    gen = gen or (lambda rng, s, d: arr(rng, s, d, lo, hi))
    gen2 = gen2 or (
        lambda rng, s, d: arr(rng, s, d, lo if lo2 is None else lo2, hi if hi2 is None else hi2)
    )

    def make(rng, dtype):
        return [
            Sample((gen(rng, a, dtype), gen2(rng, b, dtype)), {}, f"{shape_id(a)}_{shape_id(b)}")
            for a, b in BINARY_SHAPES
        ]

    return make


def with_scalar(op_make):
    """Binary samples plus an array-with-Python-scalar case (weak typing)."""

    def make(rng, dtype):
        out = op_make(rng, dtype)
        out.append(Sample((arr(rng, (2, 3), dtype, 0.5, 2.0), 2), {}, "2x3_pyint"))
        return out

    return make


REDUCE_CASES = [
    ((3, 4), {}),
    ((3, 4), {"axis": 0}),
    ((3, 4), {"axis": -1, "keepdims": True}),
    ((2, 3, 4), {"axis": (0, 2)}),
    ((), {}),
    ((1, 5), {"axis": 1}),
]


def reduction(lo=-2.0, hi=2.0, empty=True, gen=None, cases=None, **extra):
    gen = gen or (lambda rng, s, d: arr(rng, s, d, lo, hi))
    cases = list(cases or REDUCE_CASES)
    if empty:
        cases.append(((0, 3), {"axis": 0}))

    def make(rng, dtype):
        out = []
        for s, kw in cases:
            kw = {**kw, **extra}
            tag = "_".join(f"{k}={_tag(v)}" for k, v in kw.items())
            out.append(Sample((gen(rng, s, dtype),), kw, shape_id(s) + (f"_{tag}" if tag else "")))
        return out

    return make


def _tag(v):
    if isinstance(v, (tuple, list)):
        return "(" + ",".join(map(_tag, v)) + ")"
    return str(v)


def S(shapes, *statics, **kw):
    """One explicit sample: array shapes, then static positional args, then kwargs."""
    return tuple(shapes), statics, kw


def cases(*items, lo=-2.0, hi=2.0, gen=None):
    """Explicit samples from S(...) items."""
    gen = gen or (lambda rng, s, d: arr(rng, s, d, lo, hi))

    def make(rng, dtype):
        out = []
        for shapes, statics, kw in items:
            args = tuple(gen(rng, s, dtype) for s in shapes) + tuple(statics)
            tag = "_".join(f"{k}={_tag(v)}" for k, v in kw.items())
            name = "_".join(shape_id(s) for s in shapes) or "noargs"
            if statics:
                name += "_" + "_".join(_tag(v) for v in statics)
            out.append(Sample(args, dict(kw), name + (f"_{tag}" if tag else "")))
        return out

    return make


def _spd(rng, shape, dtype):
    a = rng.normal(size=shape)
    n = shape[-1]
    m = a @ np.swapaxes(a, -1, -2) + n * np.eye(n)
    return m.astype(dtype)


def _wellcond(rng, shape, dtype):
    n = shape[-1]
    return (rng.normal(size=shape) * 0.3 + 2 * np.eye(n)).astype(dtype)


def _sym(rng, shape, dtype):
    a = rng.normal(size=shape)
    return ((a + np.swapaxes(a, -1, -2)) / 2).astype(dtype)


def _distinct(rng, shape, dtype):
    """Values without ties (sort/median/max derivatives are then well defined)."""
    n = int(np.prod(shape))
    vals = (rng.permutation(n) - n / 2) * 0.37 + rng.uniform(-0.1, 0.1, n)
    return vals.reshape(shape).astype(dtype)


def _col_sign_fix(outs, vec_index=1):
    """Eigen/singular vectors are defined up to sign: make row 0 of each column >= 0."""
    mnp = mirax.numpy
    outs = list(outs)
    v = outs[vec_index]
    if isinstance(v, np.ndarray):
        s = np.where(v[..., :1, :] < 0, -1.0, 1.0).astype(v.dtype)
        outs[vec_index] = v * s
    else:
        s = mnp.where(v[..., :1, :] < 0, -1.0, 1.0).astype(v.dtype)
        outs[vec_index] = v * s
    return tuple(outs)


# --- the registry ----------------------------------------------------------------------------
SPECS: list[OpSpec] = []


def spec(name, ref=None, samples=None, path=None, **kw):
    if ref is None and hasattr(np, name):
        ref = getattr(np, name)
    s = OpSpec(name, path or f"numpy.{name}", ref, samples or unary(), **kw)
    SPECS.append(s)
    return s


# unary math: (name, lo, hi, extra)
for _n, _lo, _hi, _kw in [
    ("sin", -3, 3, {}),
    ("cos", -3, 3, {}),
    ("tan", -1.2, 1.2, {"rtol": 1e-4}),
    ("arcsin", -0.9, 0.9, {}),
    ("arccos", -0.9, 0.9, {}),
    ("arctan", -3, 3, {}),
    ("sinh", -2, 2, {}),
    ("cosh", -2, 2, {}),
    ("tanh", -2, 2, {}),
    ("arcsinh", -2, 2, {}),
    ("arccosh", 1.2, 3, {}),
    ("arctanh", -0.9, 0.9, {}),
    ("exp", -2, 2, {}),
    ("exp2", -2, 2, {}),
    ("expm1", -2, 2, {}),
    ("log", 0.2, 3, {}),
    ("log1p", -0.8, 3, {}),
    ("log2", 0.2, 3, {}),
    ("log10", 0.2, 3, {}),
    ("sqrt", 0.2, 3, {}),
    ("cbrt", 0.2, 3, {}),
    ("square", -2, 2, {"dtypes": NUMERIC}),
    ("negative", -2, 2, {"dtypes": NUMERIC}),
    ("positive", -2, 2, {"dtypes": NUMERIC}),
    ("deg2rad", -90, 90, {}),
    ("rad2deg", -2, 2, {}),
    ("sinc", -2, 2, {"rtol": 1e-4}),
    ("reciprocal", 0.3, 2, {}),
    ("floor", -3, 3, {}),
    ("ceil", -3, 3, {}),
    ("trunc", -3, 3, {}),
    ("rint", -3, 3, {}),
    ("round", -3, 3, {}),
    ("sign", -2, 2, {"dtypes": NUMERIC}),
    ("fabs", -2, 2, {}),
]:
    spec(_n, samples=unary(_lo, _hi), **_kw)

spec("abs", samples=unary(gen=nonzero), dtypes=NUMERIC)
spec("absolute", samples=unary(gen=nonzero), dtypes=NUMERIC, jax_name="abs")
spec(
    "round_decimals",
    lambda x, decimals: np.round(x, decimals),
    path="numpy.round",
    samples=unary(-3, 3, decimals=2),
    jax_name=None,
    rtol=1e-4,
)
spec("logistic", lambda x: 1 / (1 + np.exp(-x)), path="ops.elementwise.logistic", jax_name=None)
spec(
    "rsqrt",
    lambda x: 1 / np.sqrt(x),
    path="ops.elementwise.rsqrt",
    samples=unary(0.2, 3),
    jax_name=None,
)
for _n in ("erf", "erfc"):
    spec(
        f"lax_{_n}",
        f"scipy.special.{_n}",
        path=f"ops.elementwise.{_n}",
        samples=unary(-2, 2),
        jax_name=None,
    )
spec(
    "lax_erf_inv",
    "scipy.special.erfinv",
    path="ops.elementwise.erf_inv",
    samples=unary(-0.8, 0.8),
    jax_name=None,
)
spec(
    "lax_lgamma",
    "scipy.special.gammaln",
    path="ops.elementwise.lgamma",
    samples=unary(0.5, 4),
    jax_name=None,
)
spec(
    "lax_digamma",
    "scipy.special.digamma",
    path="ops.elementwise.digamma",
    samples=unary(0.5, 4),
    jax_name=None,
    grad_rtol=1e-4,
)
spec(
    "lax_polygamma1",
    lambda x: _scipy_special().polygamma(1, x),
    path="ops.elementwise.polygamma1",
    samples=unary(0.5, 4),
    jax_name=None,
    diff=False,
)
spec(
    "scipy_erf",
    "scipy.special.erf",
    path="scipy.special.erf",
    samples=unary(-2, 2),
    jax_name=None,
    owner="nn composites",
)

spec("lax_nextafter", np.nextafter, path="ops.elementwise.nextafter", samples=binary(),
     diff=False, jax_name=None)

# predicates and bool-valued ops (not differentiable)
for _n in ("isfinite", "isnan", "isinf", "signbit", "logical_not", "isposinf", "isneginf"):
    spec(
        _n,
        samples=unary(gen=lambda rng, s, d: _with_specials(arr(rng, s, d))),
        dtypes=FLOATS,
        diff=False,
    )
spec("nan_to_num", samples=unary(gen=lambda rng, s, d: _with_specials(arr(rng, s, d))), diff=False)
spec("invert", dtypes=(I32, BOOL), diff=False)


def _with_specials(a):
    if a.dtype.kind == "f" and a.size >= 3:
        a = a.copy()
        flat = a.reshape(-1)
        flat[0], flat[1], flat[2] = np.nan, np.inf, -np.inf
    return a


# binary arithmetic
spec("add", samples=with_scalar(binary()), dtypes=NUMERIC)
spec("subtract", samples=with_scalar(binary()), dtypes=NUMERIC)
spec("multiply", samples=with_scalar(binary()), dtypes=NUMERIC)
spec("mul_strong", np.multiply, samples=binary(), path="ops.elementwise.mul_strong",
     jax_name=None)
spec("divide", samples=with_scalar(binary(gen2=nonzero)), dtypes=NUMERIC)
spec("true_divide", samples=binary(gen2=nonzero), dtypes=NUMERIC, jax_name="true_divide")
spec("floor_divide", samples=binary(-9, 9, gen2=nonzero), dtypes=NUMERIC, diff=False)
spec("remainder", samples=binary(-9, 9, gen2=nonzero), dtypes=NUMERIC, diff_args=(0,))
spec("mod", samples=binary(-9, 9, gen2=nonzero), dtypes=NUMERIC, diff_args=(0,))
spec("fmod", samples=binary(-9, 9, gen2=nonzero), dtypes=NUMERIC, diff_args=(0,))
spec("power", samples=binary(0.3, 2.0, -2, 2), rtol=1e-4)
spec(
    "power_int",
    np.power,
    path="numpy.power",
    samples=cases(S(((3, 4),), 3), S(((3,),), 0), lo=-2, hi=2),
    dtypes=NUMERIC,
    jax_name=None,
)
spec(
    "power_static",
    lambda x, y: np.power(x, y),
    path="numpy.power",
    samples=cases(S(((3, 4),), -1.5), lo=0.3, hi=2),
    jax_name=None,
)
spec("maximum", samples=binary(), dtypes=NUMERIC)
spec("minimum", samples=binary(), dtypes=NUMERIC)
spec("fmax", samples=binary())
spec("fmin", samples=binary())
spec("arctan2", samples=binary(gen=nonzero, gen2=nonzero))
spec("hypot", samples=binary(gen=nonzero, gen2=nonzero))
spec("logaddexp", samples=binary())
spec("copysign", samples=binary(gen=nonzero, gen2=nonzero), diff_args=(0,))
spec("heaviside", samples=binary(gen=nonzero), diff=False)
for _n in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
    spec(_n, samples=binary(-2, 2), dtypes=NUMERIC, diff=False)
for _n in ("logical_and", "logical_or", "logical_xor"):
    spec(_n, samples=binary(-1, 1), dtypes=(I32, BOOL, F32), diff=False)
for _n in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    spec(_n, samples=binary(-8, 8), dtypes=(I32, BOOL), diff=False)
for _n in ("left_shift", "right_shift"):
    spec(_n, samples=binary(0, 5), dtypes=(I32,), diff=False)
spec(
    "where",
    lambda c, x, y: np.where(c, x, y),
    samples=lambda rng, d: [
        Sample(
            (rng.random(sc) < 0.5, arr(rng, sx, d), arr(rng, sy, d)),
            {},
            f"{shape_id(sc)}_{shape_id(sx)}_{shape_id(sy)}",
        )
        for sc, sx, sy in [((3, 4),) * 3, ((3, 1), (1, 4), ()), ((), (2,), (2,))]
    ],
    dtypes=NUMERIC,
)
spec(
    "clip",
    lambda x, lo, hi: np.clip(x, lo, hi),
    samples=cases(S(((3, 4),), -0.5, 0.7)),
    dtypes=NUMERIC,
)
spec(
    "clip_arrays",
    lambda x, lo, hi: np.clip(x, lo, hi),
    path="numpy.clip",
    samples=cases(S(((3, 4), (4,), (3, 1))), lo=-1, hi=1),
    jax_name=None,
)

# reductions
spec("sum", samples=reduction(), dtypes=NUMERIC + (BOOL,))
spec("prod", samples=reduction(0.5, 1.5), dtypes=NUMERIC, grad_rtol=1e-4)
spec("mean", samples=reduction(), dtypes=NUMERIC, rtol=1e-5)
spec("var", samples=reduction(empty=False), dtypes=NUMERIC, rtol=1e-4)
spec("std", samples=reduction(empty=False), dtypes=NUMERIC, rtol=1e-4)
spec(
    "var_ddof",
    np.var,
    path="numpy.var",
    samples=reduction(empty=False, cases=REDUCE_CASES[:4], ddof=1),
    jax_name=None,
    rtol=1e-4,
)
spec("max", samples=reduction(gen=_distinct, empty=False), dtypes=NUMERIC)
spec("min", samples=reduction(gen=_distinct, empty=False), dtypes=NUMERIC)
spec(
    "max_initial",
    np.max,
    path="numpy.max",
    samples=reduction(gen=_distinct, empty=True, cases=REDUCE_CASES[:4], initial=0.5),
    jax_name=None,
)
spec(
    "argmax",
    samples=reduction(
        gen=_distinct,
        empty=False,
        cases=[
            ((3, 4), {}),
            ((3, 4), {"axis": 0}),
            ((3, 4), {"axis": -1, "keepdims": True}),
            ((), {}),
        ],
    ),
    dtypes=NUMERIC,
    diff=False,
)
spec(
    "argmin",
    samples=reduction(gen=_distinct, empty=False, cases=[((3, 4), {}), ((3, 4), {"axis": 1})]),
    dtypes=NUMERIC,
    diff=False,
)
spec("all", samples=reduction(-1, 1), dtypes=(BOOL, I32), diff=False)
spec("any", samples=reduction(-1, 1), dtypes=(BOOL, I32), diff=False)
spec("ptp", samples=reduction(gen=_distinct, empty=False), dtypes=NUMERIC)
spec(
    "count_nonzero",
    samples=reduction(-1, 1, cases=REDUCE_CASES[:4]),
    dtypes=(I32, BOOL, F32),
    diff=False,
)
spec("nansum", samples=reduction(gen=lambda rng, s, d: _with_nan(arr(rng, s, d))), dtypes=FLOATS)
spec(
    "nanmean",
    samples=reduction(gen=lambda rng, s, d: _with_nan(arr(rng, s, d)), empty=False),
    dtypes=FLOATS,
)
spec(
    "nanmax",
    samples=reduction(gen=lambda rng, s, d: _with_nan(_distinct(rng, s, d)), empty=False),
    dtypes=FLOATS,
)
spec("average", samples=reduction(), dtypes=NUMERIC)
spec(
    "average_weights",
    np.average,
    path="numpy.average",
    adapt=lambda f, x, w, **k: f(x, weights=w, **k),
    samples=lambda rng, d: [
        Sample((arr(rng, (3, 4), d), arr(rng, (3, 4), d, 0.5, 2)), {}, "3x4_3x4")
    ],
    jax_name=None,
)
spec("median", samples=reduction(gen=_distinct, empty=False, cases=REDUCE_CASES[:4]), owner="sort")
spec(
    "quantile",
    lambda x, q, **k: np.quantile(x, q, **k),
    samples=cases(S(((5, 4),), 0.3, axis=0), gen=_distinct),
    owner="sort",
)
spec(
    "cumsum",
    samples=reduction(
        cases=[((3, 4), {"axis": 0}), ((5,), {}), ((2, 3), {"axis": -1})], empty=False
    ),
    dtypes=NUMERIC,
    owner="cumulative",
)
spec(
    "cumprod",
    samples=reduction(0.5, 1.5, cases=[((3, 4), {"axis": 1}), ((5,), {})], empty=False),
    owner="cumulative",
)
spec(
    "logsumexp",
    lambda x, axis=None, keepdims=False: np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdims)),
    path="scipy.special.logsumexp",
    samples=reduction(empty=False),
    jax_name=None,
    owner="nn composites",
)


def _with_nan(a):
    if a.dtype.kind == "f" and a.size >= 2:
        a = a.copy()
        a.reshape(-1)[1] = np.nan
    return a


# shape
spec(
    "reshape",
    lambda x, s: np.reshape(x, s),
    dtypes=NUMERIC,
    samples=lambda rng, d: [
        Sample((arr(rng, (3, 4), d), (2, -1)), {}, "3x4_to_2x-1"),
        Sample((arr(rng, (), d), (1, 1)), {}, "s_to_1x1"),
        Sample((arr(rng, (0, 3), d), (3, 0)), {}, "0x3_to_3x0"),
    ],
)
spec("ravel", samples=unary(), dtypes=NUMERIC)
spec("transpose", samples=cases(S(((3, 4),))), dtypes=NUMERIC)
spec(
    "transpose_axes",
    lambda x, a: np.transpose(x, a),
    path="numpy.transpose",
    samples=cases(S(((2, 3, 4),), (1, 2, 0))),
    jax_name=None,
)
spec("moveaxis", samples=cases(S(((2, 3, 4),), 0, -1)))
spec("swapaxes", samples=cases(S(((2, 3, 4),), 0, 2)))
spec("squeeze", samples=cases(S(((1, 3, 1),)), S(((1, 3, 1),), axis=0)))
spec("expand_dims", samples=cases(S(((3, 4),), 1), S(((3,),), (0, 2))))
spec("broadcast_to", samples=cases(S(((3, 1),), (2, 3, 4))))
spec(
    "concatenate",
    np.concatenate,
    seq=True,
    samples=cases(S(((2, 3), (1, 3), (0, 3)), axis=0)),
    dtypes=NUMERIC,
    jax_name=None,
)
spec(
    "concatenate_axis1",
    np.concatenate,
    seq=True,
    path="numpy.concatenate",
    samples=cases(S(((2, 3), (2, 1)), axis=1)),
    jax_name=None,
)
spec(
    "stack",
    np.stack,
    seq=True,
    samples=cases(S(((2, 3), (2, 3)), axis=1)),
    jax_name=None,
)
spec("vstack", samples=cases(S(((3,), (2, 3)))), seq=True, jax_name=None)
spec("hstack", samples=cases(S(((2, 3), (2, 1)))), seq=True, jax_name=None)
spec("dstack", samples=cases(S(((2, 3), (2, 3)))), seq=True, jax_name=None)
spec("column_stack", samples=cases(S(((3,), (3, 2)))), seq=True, jax_name=None)
spec("atleast_1d", samples=unary())
spec("atleast_2d", samples=unary())
spec("atleast_3d", samples=unary())
# jax_name=None: JAX rejects some NumPy-valid static forms (negative split indices,
# list repeats without total_repeat_length)
spec(
    "split",
    samples=cases(S(((6, 2),), 3), S(((7,),), [2, -2]), S(((2, 6),), [1, 4, 9], axis=1)),
    jax_name=None,
)
spec("array_split", samples=cases(S(((7, 2),), 3)))
spec("tile", samples=cases(S(((2, 3),), (2, 1, 2)), S(((3,),), 2)), dtypes=NUMERIC)
spec(
    "repeat",
    samples=cases(S(((2, 3),), 2, axis=1), S(((3,),), [1, 0, 2]), S(((2, 2),), 3)),
    dtypes=NUMERIC,
    jax_name=None,
)
spec("flip", samples=cases(S(((3, 4),)), S(((3, 4),), axis=1), S(((2, 3, 4),), axis=(0, 2))))
spec(
    "roll",
    samples=cases(
        S(((5,),), 2), S(((3, 4),), -1, axis=1), S(((3, 4),), 5), S(((3, 4),), (1, 2), axis=(0, 1))
    ),
)
spec("rot90", samples=cases(S(((3, 4),)), S(((2, 3, 4),), k=3, axes=(1, 2))))
for _mode in ("constant", "edge", "reflect", "symmetric", "wrap"):
    spec(
        f"pad_{_mode}",
        lambda x, w, mode=_mode, **k: np.pad(x, w, mode=mode, **k),
        path="numpy.pad",
        samples=cases(S(((3, 4),), ((1, 2), (2, 3)), mode=_mode), S(((5,),), 2, mode=_mode)),
        dtypes=NUMERIC,
        jax_name=None,
    )
spec(
    "pad_constant_values",
    lambda x, w, **k: np.pad(x, w, **k),
    path="numpy.pad",
    samples=cases(S(((2, 3),), 1, constant_values=1.5)),
    jax_name=None,
)
spec("diff", samples=cases(S(((5,),)), S(((3, 4),), axis=0), S(((6,),), n=2)))
spec("append", samples=cases(S(((2, 3), (4,)))))
spec(
    "broadcast_arrays",
    lambda *xs: np.broadcast_arrays(*xs),
    samples=cases(S(((3, 1), (4,)))),
    jax_name=None,
)
spec(
    "meshgrid",
    lambda *xs, **k: np.meshgrid(*xs, **k),
    samples=cases(S(((3,), (2,))), S(((3,), (2,)), indexing="ij")),
    jax_name=None,
)

# products
spec(
    "matmul",
    samples=cases(
        S(((3, 4), (4, 2))),
        S(((4,), (4, 2))),
        S(((3, 4), (4,))),
        S(((4,), (4,))),
        S(((2, 1, 3, 4), (5, 4, 2))),
    ),
    dtypes=NUMERIC,
)
spec(
    "dot",
    samples=cases(S(((3, 4), (4, 2))), S(((4,), (4,))), S(((), (3,))), S(((2, 3, 4), (5, 4, 2)))),
    dtypes=NUMERIC,
)
spec("vdot", samples=cases(S(((3, 4), (3, 4)))))
spec("inner", samples=cases(S(((3, 4), (2, 4))), S(((4,), (4,)))))
spec("outer", samples=cases(S(((3,), (4,))), S(((2, 2), (3,)))), dtypes=NUMERIC)
spec(
    "tensordot",
    samples=cases(
        S(((2, 3, 4), (3, 4, 5))),
        S(((2, 3), (3, 2)), axes=1),
        S(((2, 3, 4), (4, 2)), axes=((2, 0), (0, 1))),
        S(((2,), (3,)), axes=0),
    ),
)
spec("kron", samples=cases(S(((2, 3), (2, 2))), S(((3,), (2, 2)))), dtypes=NUMERIC)
def _cross_ref(a, b):
    """np.cross with NumPy < 2.5's rule for 2-vectors (z = 0), which NumPy 2.5 dropped."""
    pad = lambda v: np.concatenate([v, np.zeros(v.shape[:-1] + (1,), v.dtype)], -1) \
        if v.shape[-1] == 2 else v
    return np.cross(pad(a), pad(b))


spec("cross", _cross_ref, samples=cases(S(((3,), (3,))), S(((4, 3), (3,))),
                                        S(((2, 3), (2, 2)))))
for _i, _sub in enumerate(
    [
        "ij,jk->ik",
        "ii->i",
        "ii",
        "ij->",
        "bij,bjk->bik",
        "i,j->ij",
        "...ij,...jk",
        "ij,ij->i",
        "ijk->kji",
        "ij,jk,kl->il",
    ]
):
    _shapes = {
        "ij,jk->ik": ((3, 4), (4, 2)),
        "ii->i": ((3, 3),),
        "ii": ((3, 3),),
        "ij->": ((3, 4),),
        "bij,bjk->bik": ((2, 3, 4), (2, 4, 2)),
        "i,j->ij": ((3,), (4,)),
        "...ij,...jk": ((2, 3, 4), (4, 2)),
        "ij,ij->i": ((3, 4), (3, 4)),
        "ijk->kji": ((2, 3, 4),),
        "ij,jk,kl->il": ((2, 3), (3, 4), (4, 2)),
    }[_sub]
    spec(
        f"einsum{_i}",
        np.einsum,
        path="numpy.einsum",
        jax_name=None,
        samples=(
            lambda sub, shapes: (
                lambda rng, d: [
                    Sample(
                        (sub,) + tuple(arr(rng, s, d) for s in shapes),
                        {},
                        sub.replace("->", "_to_").replace(",", "_").replace("...", "E"),
                    )
                ]
            )
        )(_sub, _shapes),
    )

# comparisons / dtype utilities
spec("isclose", samples=binary(), diff=False)
spec("allclose", samples=cases(S(((3, 4), (3, 4)))), diff=False, jax_name=None)
spec(
    "array_equal",
    lambda a, b: np.array_equal(a, b),
    samples=cases(S(((3,), (3,))), S(((3,), (4,)))),
    diff=False,
    dtypes=NUMERIC,
    jax_name=None,
)
spec("cov", samples=cases(S(((3, 5),))), jax_name=None, rtol=1e-4)
spec("corrcoef", samples=cases(S(((3, 5),))), jax_name=None, rtol=1e-4)

# creation (no array arguments: value only)
for _n, _args, _kw in [
    ("arange", (2, 11, 3), {}),
    ("arange_float", (0.0, 1.0, 0.1), {}),
    ("linspace", (0.0, 1.0, 7), {}),
    ("linspace_noend", (-1.0, 2.0, 6), {"endpoint": False}),
    ("eye", (3, 4), {"k": 1}),
    ("zeros", ((2, 3),), {}),
    ("ones", ((2,),), {}),
    ("full", ((2, 2), 1.5), {}),
    ("identity", (3,), {}),
]:
    _base = _n.split("_")[0]
    spec(
        _n,
        getattr(np, _base),
        path=f"numpy.{_base}",
        samples=(lambda a, k: lambda rng, d: [Sample(a, dict(k), "static")])(_args, _kw),
        dtypes=(F32,),
        diff=False,
        vmap=False,
        jax_name=None,
        rtol=1e-6,
    )

# in progress elsewhere: indexing, sorting, linalg (skipped until they exist)
spec(
    "take",
    lambda x, i, **k: np.take(x, i, **k),
    samples=lambda rng, d: [
        Sample((arr(rng, (4, 3), d), np.array([0, 2, 2, 3])), {"axis": 0}, "4x3_idx4")
    ],
    owner="indexing",
)
spec(
    "take_along_axis",
    lambda x, i, axis: np.take_along_axis(x, i, axis),
    samples=lambda rng, d: [
        Sample((arr(rng, (3, 4), d), rng.integers(0, 4, (3, 2)), 1), {}, "3x4_idx3x2")
    ],
    owner="indexing",
)
spec("diag", samples=cases(S(((3, 3),)), S(((3,),), k=1)), owner="indexing")
spec("diagonal", samples=cases(S(((3, 4),)), S(((2, 3, 3),), axis1=1, axis2=2)), owner="indexing")
spec("trace", samples=cases(S(((3, 4),))), owner="indexing")
spec("triu", samples=cases(S(((3, 4),)), S(((3, 3),), k=-1)), owner="indexing")
spec("tril", samples=cases(S(((3, 4),)), S(((3, 3),), k=1)), owner="indexing")
spec(
    "sort",
    samples=cases(S(((3, 4),)), S(((5,),)), S(((3, 4),), axis=0), gen=_distinct),
    dtypes=NUMERIC,
    owner="sort",
)
spec(
    "argsort",
    samples=cases(S(((3, 4),)), S(((5,),)), gen=_distinct),
    dtypes=NUMERIC,
    diff=False,
    owner="sort",
)
spec(
    "linalg_norm",
    lambda x, **k: np.linalg.norm(x, **k),
    path="numpy.linalg.norm",
    samples=cases(S(((3, 4),)), S(((5,),)), S(((3, 4),), axis=1)),
    jax_name=None,
    owner="linalg",
)
spec(
    "linalg_inv",
    np.linalg.inv,
    path="numpy.linalg.inv",
    rtol=1e-4,
    jax_name=None,
    samples=cases(S(((3, 3),)), S(((2, 3, 3),)), gen=_wellcond),
    owner="linalg",
)
spec(
    "linalg_solve",
    np.linalg.solve,
    path="numpy.linalg.solve",
    rtol=1e-4,
    jax_name=None,
    samples=lambda rng, d: [
        Sample((_wellcond(rng, (3, 3), d), arr(rng, (3, 2), d)), {}, "3x3_3x2")
    ],
    owner="linalg",
)
spec(
    "linalg_det",
    np.linalg.det,
    path="numpy.linalg.det",
    rtol=1e-4,
    jax_name=None,
    samples=cases(S(((3, 3),)), gen=_wellcond),
    owner="linalg",
)
spec(
    "linalg_slogdet",
    lambda x: tuple(np.linalg.slogdet(x)),
    path="numpy.linalg.slogdet",
    rtol=1e-4,
    jax_name=None,
    samples=cases(S(((3, 3),)), gen=_wellcond),
    owner="linalg",
    diff_args=(0,),
)
spec(
    "linalg_cholesky",
    np.linalg.cholesky,
    path="numpy.linalg.cholesky",
    rtol=1e-4,
    jax_name=None,
    samples=cases(S(((3, 3),)), gen=_spd),
    owner="linalg",
)
spec(
    "linalg_eigh",
    lambda x: tuple(np.linalg.eigh(x)),
    path="numpy.linalg.eigh",
    rtol=1e-4,
    atol=1e-5,
    jax_name=None,
    samples=cases(S(((3, 3),)), gen=_sym),
    post=_col_sign_fix,
    owner="linalg",
)
spec(
    "linalg_qr",
    lambda x: tuple(np.linalg.qr(x)),
    path="numpy.linalg.qr",
    rtol=1e-4,
    atol=1e-5,
    jax_name=None,
    samples=cases(S(((4, 3),))),
    owner="linalg",
    post=lambda o: _qr_sign_fix(o),
)

spec(
    "scipy_linalg_lu",
    lambda x: tuple(__import__("scipy.linalg", fromlist=["lu"]).lu(x)),
    path="scipy.linalg.lu",
    rtol=1e-4,
    atol=1e-5,
    jax_name=None,
    samples=cases(S(((4, 4),)), gen=_wellcond),
    owner="linalg",
)

def _qr_sign_fix(outs):
    """Q and R up to the signs of R's diagonal: make them non-negative."""
    q, r = outs
    n = r.shape[-2]
    d = r[..., np.arange(n), np.arange(n)] if isinstance(r, np.ndarray) else None
    if d is None:
        mnp = mirax.numpy
        d = mnp.diagonal(r, axis1=-2, axis2=-1)
        s = mnp.where(d < 0, -1.0, 1.0).astype(r.dtype)
        return q * s[..., None, :], r * s[..., :, None]
    s = np.where(d < 0, -1.0, 1.0).astype(r.dtype)
    return q * s[..., None, :], r * s[..., :, None]


def by_name() -> dict[str, OpSpec]:
    return {s.name: s for s in SPECS}


def value_tol(spec: OpSpec, dtype) -> tuple[float, float]:
    d = np.dtype(dtype)
    if d == F64:
        return 1e-9, 1e-10
    if d.kind in "iub":
        return 0.0, 0.0
    return spec.rtol, spec.atol
