"""mirax.numpy.fft against np.fft (values, n=/s=/axes=/norm=) and against JAX (first and
second derivatives of real losses, jvp and vjp), with vmap and jit."""
from __future__ import annotations

import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp

jax = pytest.importorskip("jax")
jnp = jax.numpy



_rng = np.random.default_rng(0)
Z = _rng.normal(size=(4, 6)) + 1j * _rng.normal(size=(4, 6))
R = _rng.normal(size=(4, 6))
Z3 = _rng.normal(size=(2, 3, 4)) + 1j * _rng.normal(size=(2, 3, 4))
Z4 = _rng.normal(size=(2, 3, 2, 4)) + 1j * _rng.normal(size=(2, 3, 2, 4))  # > 3 axes

CASES = [
    ("fft", Z, {}), ("fft", Z, {"n": 4, "axis": 0}), ("ifft", Z, {"n": 8}),
    ("ifft", Z, {"norm": "forward"}), ("fft2", Z, {"norm": "ortho"}),
    ("ifft2", Z, {"s": (5, 4)}), ("fftn", Z, {"s": (3, 5), "axes": (0, 1)}), ("fftn", Z3, {}),
    ("ifftn", Z3, {"axes": (0, 2), "norm": "ortho"}), ("rfft", R, {}),
    ("rfft", R, {"axis": 0, "n": 3}), ("irfft", Z, {}), ("irfft", Z, {"n": 9}),
    ("irfft", Z, {"axis": 0, "norm": "ortho"}), ("rfft2", R, {"norm": "forward"}),
    ("irfft2", Z, {"s": (5, 7)}), ("rfftn", R, {"s": (3, 8), "axes": (0, 1)}), ("irfftn", Z3, {}),
    ("hfft", Z, {}), ("hfft", Z, {"n": 7, "norm": "ortho"}), ("ihfft", R, {}),
    ("ihfft", R, {"norm": "forward"}), ("fftn", Z4, {}), ("irfftn", Z4, {"norm": "ortho"}),
    ("rfftn", Z4.real.copy(), {}),
]
IDS = [f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'default'}-{i}"
       for i, (n, _, kw) in enumerate(CASES)]


@pytest.mark.parametrize("name,arg,kw", CASES, ids=IDS)
def test_values(name, arg, kw):
    got = getattr(mnp.fft, name)(mnp.asarray(arg), **kw)
    want = getattr(np.fft, name)(arg, **kw)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)
    got32 = getattr(mnp.fft, name)(mnp.asarray(arg.astype(np.complex64 if arg.dtype.kind == "c"
                                                          else np.float32)), **kw)
    assert got32.dtype == (np.float32 if want.dtype.kind == "f" else np.complex64)
    np.testing.assert_allclose(np.asarray(got32), want, rtol=1e-4, atol=1e-4 * np.abs(
        want).max())


def _loss(m, name, kw):
    def loss(a):
        y = getattr(m.fft, name)(a, **kw)
        w = m.cos(m.reshape(m.arange(y.size, dtype=m.float64), y.shape))
        return m.sum(m.real(y * y * w)) + m.sum(m.abs(y) ** 3)
    return loss


_FAST = {0, 12, 18}


@pytest.mark.parametrize("name,arg,kw", [
    pytest.param(*c, id=i, marks=() if k in _FAST else pytest.mark.slow)
    for k, (c, i) in enumerate(zip(CASES, IDS))])
def test_derivatives_against_jax(name, arg, kw, x64):
    rng = np.random.default_rng(1)
    lm, lj = _loss(mnp, name, kw), _loss(jnp, name, kw)
    a = mnp.asarray(arg)
    g, jg = mx.grad(lm)(a), jax.grad(lj)(arg)
    scale = np.abs(jg).max()
    np.testing.assert_allclose(np.asarray(g), jg, rtol=1e-9, atol=1e-11 * scale)
    t = rng.normal(size=arg.shape) + (1j * rng.normal(size=arg.shape)
                                      if arg.dtype.kind == "c" else 0)
    h = mx.jvp(mx.grad(lm), (a,), (mnp.asarray(t),))[1]
    jh = jax.jvp(jax.grad(lj), (arg,), (t,))[1]
    np.testing.assert_allclose(np.asarray(h), jh, rtol=1e-9, atol=1e-11 * np.abs(jh).max())
    f_m = (lambda x: getattr(mnp.fft, name)(x, **kw))
    f_j = (lambda x: getattr(jnp.fft, name)(x, **kw))
    out, tout = mx.jvp(f_m, (a,), (mnp.asarray(t),))
    np.testing.assert_allclose(np.asarray(tout), jax.jvp(f_j, (arg,), (t,))[1], rtol=1e-9,
                               atol=1e-11 * scale)
    ct = rng.normal(size=out.shape) + (1j * rng.normal(size=out.shape)
                                       if out.dtype.kind == "c" else 0)
    np.testing.assert_allclose(np.asarray(mx.vjp(f_m, a)[1](mnp.asarray(ct))[0]),
                               jax.vjp(f_j, arg)[1](ct)[0], rtol=1e-9, atol=1e-11 * scale)
    # jit of the gradient
    np.testing.assert_allclose(np.asarray(mx.jit(mx.grad(lm))(a)), jg, rtol=1e-9,
                               atol=1e-11 * scale)


def test_vmap_and_jit():
    f = (lambda x: mnp.fft.irfft(mnp.fft.rfft(x) * mnp.exp(-0.1 * mnp.arange(4.0)), n=6))
    batched = mx.vmap(f, in_axes=1, out_axes=1)(mnp.asarray(R.T))
    loop = np.stack([np.asarray(f(mnp.asarray(r))) for r in R], axis=1)
    np.testing.assert_allclose(np.asarray(batched), loop, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(mx.jit(mx.vmap(f))(mnp.asarray(R))), loop.T,
                               rtol=1e-12, atol=1e-12)
    g = mx.jit(mx.vmap(mx.grad(lambda x: mnp.sum(f(x) ** 2))))(mnp.asarray(R))
    want = [np.asarray(mx.grad(lambda x: mnp.sum(f(x) ** 2))(mnp.asarray(r))) for r in R]
    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-12, atol=1e-12)


def test_third_order_through_fft():
    """d^3/dx^3 of sum |fft(x)|^4 along one direction against the closed form (Parseval
    makes |fft(x)|^2 quadratic, so the quartic's third derivative is linear in x)."""
    x = mnp.asarray(R[0])
    v = mnp.asarray(R[1])

    def f(s):
        return mnp.sum(mnp.abs(mnp.fft.fft(x + s * v)) ** 4)

    d3 = mx.grad(mx.grad(mx.grad(f)))(mnp.asarray(0.0, dtype=mnp.float64))
    # f(s) = sum_k |X_k + s V_k|^4, a quartic in s: third derivative at 0 by finite
    # differences of the exact polynomial (fitted from 5 exact values)
    ss = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    coef = np.polyfit(ss, [float(f(s)) for s in ss], 4)
    np.testing.assert_allclose(float(d3), 6 * coef[-4], rtol=1e-8)


def test_frequencies_and_shifts():
    np.testing.assert_allclose(mnp.fft.fftfreq(7, 0.5), np.fft.fftfreq(7, 0.5), rtol=1e-6)
    np.testing.assert_allclose(mnp.fft.fftfreq(8), np.fft.fftfreq(8), rtol=1e-6)
    np.testing.assert_allclose(mnp.fft.rfftfreq(9, 2.0), np.fft.rfftfreq(9, 2.0), rtol=1e-6)
    assert mnp.fft.fftfreq(4).dtype == np.float32
    a = np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(mnp.fft.fftshift(mnp.asarray(a)), np.fft.fftshift(a))
    np.testing.assert_array_equal(mnp.fft.ifftshift(mnp.asarray(a), axes=1),
                                  np.fft.ifftshift(a, axes=1))


def test_errors():
    with pytest.raises(ValueError, match="norm"):
        mnp.fft.fft(mnp.ones(4), norm="bad")
    with pytest.raises(TypeError, match="rfft"):
        mnp.fft.rfft(mnp.asarray(Z))
    with pytest.raises(ValueError, match="repeated"):
        mnp.fft.fftn(mnp.asarray(Z), axes=(0, 0))
    with pytest.raises(ValueError, match="fft"):
        mnp.fft.fft(mnp.ones(4), n=0)


def test_lax_fft_and_sort_grad(x64):
    x = np.random.default_rng(3).normal(size=(2, 4, 6))
    got = mx.lax.fft(mnp.asarray(x), mx.lax.FftType.RFFT, (4, 6))
    np.testing.assert_allclose(np.asarray(got), jax.lax.fft(x, jax.lax.FftType.RFFT, (4, 6)),
                               rtol=1e-12, atol=1e-12)
    back = mx.lax.fft(got, "irfft", (4, 6))
    np.testing.assert_allclose(np.asarray(back), x, rtol=1e-12, atol=1e-12)
    # sorting complex values (lexicographic) and its gradient against JAX
    z = np.array([2 + 1j, 1 + 3j, 2 - 1j, 1 + 0.5j])
    w = np.arange(4.0) + 1j

    def loss(m):
        return lambda a: m.sum(m.real(m.sort(a) * w) + m.abs(m.sort(a)) ** 2)
    np.testing.assert_allclose(np.asarray(mx.grad(loss(mnp))(mnp.asarray(z))),
                               jax.grad(loss(jnp))(z), rtol=1e-12)


def test_cpu_native_fft_matches_reference():
    """The CPU backend's fft kernel (scipy.fft when installed) against the reference impl
    (NumPy), every kind, f32 and f64."""
    from mirax.backends.cpu.kernels import impl_of
    from mirax.ops.fft import fft_p
    native = impl_of(fft_p)
    rng = np.random.default_rng(5)
    for dt in (np.float32, np.float64):
        r = rng.normal(size=(3, 8, 6)).astype(dt)
        c = (r + 1j * rng.normal(size=r.shape)).astype(np.result_type(dt, np.complex64))
        half = np.ascontiguousarray(c[..., :4])
        for x, kind, lengths in ((c, "fft", (8, 6)), (c, "ifft", (6,)), (r, "rfft", (8, 6)),
                                 (half, "irfft", (8, 6)), (half, "irfft", (7,))):
            got = native(x, fft_type=kind, fft_lengths=lengths)
            want = fft_p.impl(x, fft_type=kind, fft_lengths=lengths)
            assert got.dtype == want.dtype and got.shape == want.shape
            tol = 1e-5 if dt == np.float32 else 1e-12
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
