"""dtype promotion: the pairwise table against JAX's lattice, and weak-type cases.

mirax has no x64 switch: 64-bit types are used whenever they are asked for, so the table is
JAX's in x64 mode, with one documented deviation: where JAX's lattice lands on the weak
float `f*` for two strong integer types (uint64 with a signed int), JAX x64 picks float64
and mirax its default float, float32.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax.core import dtypes

NAMES = ["bool", "u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64", "bf16", "f16", "f32",
         "f64"]
BY_NAME = {v: k for k, v in dtypes.SHORT_NAMES.items()}

# promote_types(row, column), from JAX's lattice (x64)
TABLE = """
      bool   u8  u16  u32  u64   i8  i16  i32  i64 bf16  f16  f32  f64
bool  bool   u8  u16  u32  u64   i8  i16  i32  i64 bf16  f16  f32  f64
u8      u8   u8  u16  u32  u64  i16  i16  i32  i64 bf16  f16  f32  f64
u16    u16  u16  u16  u32  u64  i32  i32  i32  i64 bf16  f16  f32  f64
u32    u32  u32  u32  u32  u64  i64  i64  i64  i64 bf16  f16  f32  f64
u64    u64  u64  u64  u64  u64  f32  f32  f32  f32 bf16  f16  f32  f64
i8      i8  i16  i32  i64  f32   i8  i16  i32  i64 bf16  f16  f32  f64
i16    i16  i16  i32  i64  f32  i16  i16  i32  i64 bf16  f16  f32  f64
i32    i32  i32  i32  i64  f32  i32  i32  i32  i64 bf16  f16  f32  f64
i64    i64  i64  i64  i64  f32  i64  i64  i64  i64 bf16  f16  f32  f64
bf16  bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16 bf16  f32  f32  f64
f16    f16  f16  f16  f16  f16  f16  f16  f16  f16  f32  f16  f32  f64
f32    f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f32  f64
f64    f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64  f64
"""
# JAX x64 gives float64 for these (its default float); mirax's default float is float32
DEVIATIONS = {frozenset(("u64", s)) for s in ("i8", "i16", "i32", "i64")}


def _table():
    rows = [line.split() for line in TABLE.strip().splitlines()]
    cols = rows[0]
    return {(r[0], c): v for r in rows[1:] for c, v in zip(cols, r[1:])}


EXPECTED = _table()
PAIRS = list(itertools.product(NAMES, NAMES))


def test_table_is_symmetric():
    for a, b in PAIRS:
        assert EXPECTED[a, b] == EXPECTED[b, a]


@pytest.mark.parametrize("a,b", PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_promote_types_table(a, b):
    got = mnp.promote_types(BY_NAME[a], BY_NAME[b])
    assert dtypes.short_name(got) == EXPECTED[a, b]
    # and what arrays actually do
    x = mnp.zeros((2,), BY_NAME[a])
    y = mnp.zeros((2,), BY_NAME[b])
    assert dtypes.short_name((x + y).dtype) == EXPECTED[a, b]


def test_table_matches_jax_x64():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    enable = getattr(jax, "enable_x64", None)
    if enable is None:
        pytest.skip("this JAX has no enable_x64 context")
    with enable(True):
        for a, b in PAIRS:
            want = dtypes.short_name(jnp.promote_types(BY_NAME[a], BY_NAME[b]))
            if frozenset((a, b)) in DEVIATIONS:
                assert want == "f64" and EXPECTED[a, b] == "f32"
            else:
                assert EXPECTED[a, b] == want, (a, b)


# --- weak types ------------------------------------------------------------------------------
def _dt(x):
    return dtypes.short_name(x.dtype)


@pytest.mark.parametrize("expr,want", [
    (lambda: mnp.ones(3) * 2.0, "f32"),
    (lambda: mnp.ones(3, mnp.float16) * 2.0, "f16"),
    (lambda: mnp.ones(3, mnp.bfloat16) * 2.0, "bf16"),
    (lambda: mnp.ones(3, mnp.bfloat16) + 1, "bf16"),
    (lambda: mnp.arange(3) + 2.5, "f32"),
    (lambda: mnp.arange(3) + 2, "i32"),
    (lambda: mnp.arange(3) / mnp.arange(1, 4), "f32"),
    (lambda: mnp.arange(3) / 2, "f32"),
    (lambda: mnp.mean(mnp.arange(3)), "f32"),
    (lambda: mnp.asarray(np.array([1], np.uint8)) + 1, "u8"),
    (lambda: mnp.asarray(np.array([1], np.int8)) * 3, "i8"),
    (lambda: mnp.asarray(np.array([1], np.uint8)) + 1.0, "f32"),
    (lambda: mnp.asarray(np.array([1.0], np.float64)) * 2.0, "f64"),
    (lambda: mnp.asarray(np.array([1.0], np.float64)) + mnp.ones(1), "f64"),
    (lambda: mnp.asarray([1.0, 2.0]), "f32"),
    (lambda: mnp.asarray([1, 2]), "i32"),
    (lambda: mnp.asarray([True]), "bool"),
    (lambda: mnp.asarray(np.array([1, 2], np.int64)), "i64"),
    (lambda: mnp.asarray(2.0) * mnp.ones(2, mnp.float16), "f16"),
    (lambda: mnp.ones(2, mnp.float16) * np.float32(2), "f32"),  # NumPy scalars are strong
    (lambda: mnp.ones(2) * np.float64(2), "f32"),  # ... but 64-bit ones are weak
    (lambda: mnp.asarray([True]) + 1, "i32"),
    (lambda: mnp.asarray([True]) * 1.5, "f32"),
    (lambda: mnp.sum(mnp.asarray([True, False])), "i32"),
    (lambda: mnp.zeros(2, mnp.int16) + mnp.zeros(2, mnp.uint8), "i16"),
    (lambda: mnp.sqrt(mnp.arange(3)), "f32"),
    (lambda: mnp.exp(mnp.ones(2, mnp.float64)), "f64"),
    (lambda: mnp.maximum(mnp.arange(3), 1.5), "f32"),
    (lambda: mnp.where(mnp.arange(3) > 1, mnp.ones(3, mnp.bfloat16), 0.0), "bf16"),
    (lambda: mnp.ones((2, 2), mnp.float16) @ mnp.ones((2, 2), mnp.float32), "f32"),
], ids=lambda v: "" if callable(v) else v)
def test_weak_type_cases(expr, want):
    assert _dt(expr()) == want


def test_python_scalar_results_are_weak():
    x = mnp.asarray(2.0)
    assert x.weak_type and (x * 3).weak_type
    assert not mnp.asarray([2.0]).weak_type
    assert not mnp.asarray(np.float32(2)).weak_type
    assert not (x * mnp.ones(2)).weak_type


def test_jit_keeps_weak_types():
    f = mx.jit(lambda a, b: a * b)
    assert _dt(f(mnp.ones(2, mnp.bfloat16), 2.0)) == "bf16"
    assert _dt(f(mnp.ones(2, mnp.float16), mnp.asarray(3.0))) == "f16"


def test_weak_types_match_jax_sample():
    """A sample of mixed array/scalar expressions against JAX (x32, dtypes mirax shares)."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    if not hasattr(jax, "enable_x64"):
        pytest.skip("this JAX has no enable_x64 context")
    cases = [(np.float32, 2.0), (np.float16, 2.0), (np.int32, 2.5), (np.int32, 2),
             (np.uint8, 1), (np.int8, 1.5), (np.bool_, 1), (np.bool_, 1.0)]
    for dt, scalar in cases:
        a = np.ones(2, dt)
        with jax.enable_x64(False):  # other test files switch x64 on globally
            want = (jnp.asarray(a) + scalar).dtype
        got = (mnp.asarray(a) + scalar).dtype
        assert np.dtype(got) == np.dtype(want), (dt, scalar)
