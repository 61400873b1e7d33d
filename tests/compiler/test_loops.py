"""CPU compiled loops for fusion nodes (backends/cpu/loops.py, numba): which groups they
take, and values equal to the unfused plan's."""
import subprocess
import sys
import types

import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax.core import runtime
cpu_backend = runtime.backend("cpu")
from mirax.backends.cpu import loops
from mirax.compiler import optimize
from mirax.ops.elementwise import mul_strong

pytest.importorskip("numba")

UNFUSED = types.SimpleNamespace(fuses=False, writes_into=cpu_backend.writes_into)
RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, knobs):
    knobs(cache_dir=str(tmp_path))
    knobs(numba=True)
    return tmp_path


def _plans(f, *args):
    g = mx.make_graph(f)(*(mx.asarray(a) for a in args))
    fused = optimize(g, cpu_backend)
    fused.typecheck()
    loops_run = [n for n in fused.nodes if n.prim.name == "fusion"
                 and loops.eligible(n.params["graph"].nodes)]
    got = cpu_backend.compile(fused)(*args)
    want = cpu_backend.compile(optimize(g, UNFUSED))(*args)
    return len(loops_run), got, want


def _bitwise(f, *args, n_loops=1):
    n, got, want = _plans(f, *args)
    assert n == n_loops
    for a, b in zip(got, want):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    return got


def adam(p, g, m, v):
    m = 0.9 * m + 0.1 * g
    v = 0.999 * v + 0.001 * (g * g)
    return p - 1e-3 * (m / 0.1) / (mnp.sqrt(v / 0.001) + 1e-8), m, v


@pytest.mark.parametrize("shape", [(300, 70), (5000,), (2, 3, 1000)])
def test_adam_update_is_bitwise_equal(shape):
    p, g, m = (RNG.normal(size=shape).astype(np.float32) for _ in range(3))
    v = np.abs(RNG.normal(size=shape)).astype(np.float32)
    _bitwise(adam, p, g, m, v)


def test_one_kernel_serves_every_shape():
    loops._kernels.clear()
    for shape in [(4096,), (64, 80), (8, 9, 100)]:
        args = [RNG.normal(size=shape).astype(np.float32) for _ in range(4)]
        args[3] = np.abs(args[3])
        _bitwise(adam, *args)
    assert len(loops._kernels) == 1


def test_bias_rows_columns_and_leading_sums():
    x = RNG.normal(size=(128, 96)).astype(np.float32)
    b = RNG.normal(size=96).astype(np.float32)
    c = RNG.normal(size=(128, 1)).astype(np.float32)

    def f(x, b, c):
        h = mnp.maximum(x + b, 0.0) * c - 1.0
        return h, mnp.sum(h * (x > 0), axis=0)
    _bitwise(f, x, b, c)


def test_masks_selects_casts_and_special_values():
    x = RNG.normal(size=(70, 90)).astype(np.float32)
    x[0, :6] = [0.0, -0.0, np.inf, -np.inf, np.nan, -1.0]
    y = RNG.normal(size=(70, 90)).astype(np.float32)
    y[0, :6] = [0.0, np.nan, 0.0, 2.0, 1.0, 0.0]

    def f(x, y):
        both = (x > y) | ~(x <= 0.5)
        z = mnp.where(both, x / y, mnp.sqrt(x) - y)
        w = mnp.maximum(z, y) + mnp.minimum(x, z) * mnp.abs(y) + mnp.sign(x)
        return w, mnp.isfinite(w).astype(np.float32) + (x == y), mul_strong(y, x / y)
    _bitwise(f, x, y)


def test_float64_and_noncontiguous_inputs():
    x, y = RNG.normal(size=(96, 80)), RNG.normal(size=(160, 96))
    _bitwise(lambda x, y: (x * 2.0 - y) / (y * y + 1.0), x.T, y[::2])


def test_float32_transcendental_groups_run_as_loops_float64_ones_stay_with_numpy():
    """float32 exp, tanh, logistic, sin, cos, log and log1p are vecmath.py's vectorized
    versions in the loop (within 1, 1.5, 2.5, 0.5, 0.5, 1 and 2.5 ulp:
    tests/compiler/test_vecmath.py); float64 ones and the other transcendental functions
    stay NumPy calls (numba would call scalar libm)."""
    x = RNG.normal(size=(128, 512)).astype(np.float32)
    f = lambda x: mnp.tanh(x * 2.0 + 1.0) * x - mnp.exp(-x * x) + mx.nn.sigmoid(x)  # noqa: E731
    n, got, want = _plans(f, x)
    assert n == 1
    # terms within 2.5 ulp each, of size <= |x| (about 5) and 1
    np.testing.assert_allclose(got[0], want[0], rtol=0, atol=8 * np.spacing(np.float32(8)))
    n, got, want = _plans(f, x.astype(np.float64))
    assert n == 0
    np.testing.assert_array_equal(got[0], want[0])
    n, got, want = _plans(lambda x: mnp.log(x * x + 1.0) * x - mnp.log1p(x * x), x)
    assert n == 1
    # terms within 2.5 ulp each, of size <= |x| log(x^2 + 1) (about 20) and log1p(x^2)
    np.testing.assert_allclose(got[0], want[0], rtol=0, atol=8 * np.spacing(np.float32(32)))
    n, got, want = _plans(lambda x: mnp.expm1(x * x + 1.0) * x - 3.0, x)
    assert n == 0
    np.testing.assert_array_equal(got[0], want[0])


def test_sin_and_cos_far_from_zero_fall_back_to_libm():
    """Arguments beyond vecmath.SIN_LIMIT (where the float64 reduction by pi/2 loses
    bits) make the loop run again with libm's sin and cos: values as NumPy's."""
    x = RNG.normal(size=(64, 512)).astype(np.float32)
    x[3, 7], x[40, 100] = 3.0e7, -1.0e30
    f = lambda x: mnp.sin(x * 2.0) * x + mnp.cos(x) - 1.0  # noqa: E731
    n, got, want = _plans(f, x)
    assert n == 1
    np.testing.assert_allclose(got[0], want[0], rtol=4e-7, atol=4e-7)
    exact = (np.sin(2.0 * x.astype(np.float64)) * x + np.cos(x.astype(np.float64)) - 1.0)
    assert abs(got[0][40, 100] - exact[40, 100]) <= 4e-7 * abs(exact[40, 100])


def test_long_row_and_full_sums_stay_with_numpy():
    x = RNG.normal(size=(128, 512)).astype(np.float32)
    for axis in (1, None):
        n, got, want = _plans(lambda x: mnp.sum((x * 2.0 + 1.0) * x, axis=axis), x)
        assert n == 0
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6)


@pytest.mark.parametrize("shape,axis", [((3000, 64), 1), ((5000, 5), 1), ((900, 128), 1),
                                        ((1000, 77), 1), ((40, 50, 24), 2),
                                        ((30, 20, 6, 4), (2, 3))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_short_row_sums_run_as_loops_in_numpys_order(shape, axis, dtype):
    """Row sums of at most 128 values fuse with their producers (a W6-like group: a
    product written, another one's row sums, a broadcast column) and add in NumPy's
    pairwise order: bitwise NumPy's sum of the products, for rows below 8, of multiples
    of 8, with a remainder; a row of negative zeros sums to +0 as NumPy's. (The unfused
    plan sums a product by einsum, whose order differs: within the sum's rounding.)"""
    x, y = (RNG.normal(size=shape).astype(dtype) for _ in range(2))
    x[0] = -0.0
    y[0] = 1.0
    col = RNG.normal(size=shape[:-1 if axis != (2, 3) else -2] + (1,) * (
        1 if axis != (2, 3) else 2)).astype(dtype)

    def f(x, y, col):
        return x * col, mnp.sum(x * y, axis=axis)
    n, got, want = _plans(f, x, y, col)
    assert n == 1
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], np.sum(x * y, axis=axis))
    assert got[1].dtype == dtype and not np.signbit(got[1].reshape(shape[0], -1)[0]).any()
    # against the einsum of the unfused plan: each within n eps sum |x y| of the other
    terms = np.prod([shape[a] for a in np.atleast_1d(axis)])
    bound = terms * np.finfo(dtype).eps * np.sum(np.abs(x * y), axis=axis)
    assert np.all(np.abs(got[1] - want[1]) <= 2 * bound)


def test_off_switch_and_small_groups(knobs, monkeypatch):
    x = RNG.normal(size=8192).astype(np.float32)
    assert _plans(lambda x: x * 2.0 + 1.0, x)[0] == 1
    assert _plans(lambda x: x * 2.0 + 1.0, x[:100])[0] == 0
    knobs(numba="0")
    assert _plans(lambda x: x * 2.0 + 1.0, x)[0] == 0


def test_jit_grad_step_matches_eager():
    """jit and eager agree with a float64 reference within the error bound of the float32
    computation. NOTE: not with a fixed rtol against each other: the first Adam step is
    g / (|g| + eps), whose derivative eps / (|g| + eps)^2 amplifies the rounding of a tiny
    gradient (a cancelling sum, summed in a machine-dependent order) without bound."""
    w = RNG.normal(size=(256, 64)).astype(np.float32) * 0.1
    x = RNG.normal(size=(32, 256)).astype(np.float32)

    def step(w, m, v):
        g = mx.grad(lambda w: mnp.sum(mnp.maximum(x @ w, 0.0) ** 2))(w)
        return adam(w, g, m, v)
    z = np.zeros_like(w)
    got, want = mx.jit(step)(w, z, z), step(w, z, z)
    # float64 reference from the same float32 inputs, with first-order error bounds: a dot
    # product of length n in float32 errs by at most n u sum|terms| in any summation order
    u = 2.0 ** -24
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    h = x64 @ w64
    g = x64.T @ (2 * np.maximum(h, 0))
    dh = 256 * u * (np.abs(x64) @ np.abs(w64))
    dg = 2 * np.abs(x64).T @ dh + 32 * u * (np.abs(x64).T @ (2 * np.abs(h))) + 4 * u * np.abs(g)
    eps = 1e-8
    step64 = g / (np.abs(g) + eps)
    dstep = eps / (np.abs(g) + eps) ** 2 * dg + 10 * u * np.abs(step64)
    refs = (w64 - 1e-3 * step64, 0.1 * g, 0.001 * g * g)
    tols = (1e-3 * dstep + 2 * u * np.abs(w64), 0.1 * dg + 2 * u * 0.1 * np.abs(g),
            0.002 * np.abs(g) * dg + 4 * u * 0.001 * g * g)
    for out in (got, want):
        for a, ref, tol in zip(out, refs, tols):
            err = np.abs(np.asarray(a, np.float64) - ref)
            assert np.all(err <= 2 * tol + 1e-30), float(np.max(err / (2 * tol + 1e-30)))


def test_compiled_kernels_load_from_the_disk_cache(cache_dir):
    x = RNG.normal(size=5000).astype(np.float32)
    _bitwise(lambda x: x * 3.0 - 1.0 / (x * x + 1.0), x)
    assert list(cache_dir.glob("loops/k_*.py"))
    assert list(cache_dir.glob("loops/__pycache__/*.nbi"))   # numba's compiled cache
    code = ("import numpy as np, mirax as mx, mirax.numpy as mnp\n"
            "from mirax.backends.cpu import loops\n"
            "x = np.linspace(-2, 2, 5000, dtype=np.float32)\n"
            "y = mx.jit(lambda x: x * 3.0 - 1.0 / (x * x + 1.0))(x)\n"
            "assert np.array_equal(np.asarray(y), x * np.float32(3) - "
            "np.float32(1) / (x * x + np.float32(1)))\n"
            "assert len(loops._kernels) == 1\n")
    env = {"MIRAX_CACHE_DIR": str(cache_dir), "PATH": ""}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_unwritable_cache_compiles_in_memory(knobs, monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    knobs(cache_dir=str(blocker))   # a file: no directory there
    loops._kernels.clear()
    x = RNG.normal(size=5000).astype(np.float32)
    _bitwise(lambda x: x * 5.0 + 2.0, x)


def test_a_failing_compile_falls_back_to_blocked(monkeypatch, capsys):
    def broken(*args):
        raise RuntimeError("no compiler here")
    monkeypatch.setattr(loops, "compiled_parts", broken)
    x = RNG.normal(size=(64, 128)).astype(np.float32)
    _bitwise(lambda x: (x * 2.0 + 1.0) / (x * x + 3.0), x)
    assert "running it as NumPy calls" in capsys.readouterr().err
