"""Matmul precision (JAX's semantics): precision= on the products, the
default_matmul_precision knob and context manager, the static param through the
transforms and listings, validation, and the CPU being exact at every setting."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import mirax as mx
import mirax.numpy as mnp
from mirax import lax
from mirax.core import config

SETTINGS = ("default", "high", "highest", lax.Precision.DEFAULT, lax.Precision.HIGH,
            lax.Precision.HIGHEST, "bfloat16", "tensorfloat32", "float32",
            ("default", "highest"))


def _rng(seed=0):
    return np.random.default_rng(seed)


def _params(f, *args, prim="dot_general"):
    """The precision param of every `prim` node in f's graph (and its sub-graphs)."""
    g = mx.make_graph(f)(*args)
    out = []

    def walk(graph):
        for n in graph.nodes:
            if n.prim.name == prim:
                out.append(n.params["precision"])
            for v in n.params.values():
                if hasattr(v, "nodes"):
                    walk(v)
    walk(g)
    return out, str(g)


# --- the CPU is exact at every setting --------------------------------------------------------
@pytest.mark.parametrize("prec", SETTINGS, ids=str)
def test_cpu_products_equal_highest_at_every_setting(prec):
    rng = _rng(1)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    b = rng.standard_normal((7, 3)).astype(np.float32)
    t = rng.standard_normal((2, 5, 7)).astype(np.float32)
    cases = [
        lambda p: mnp.matmul(a, b, precision=p),
        lambda p: mnp.dot(a, b, precision=p),
        lambda p: mnp.tensordot(t, b, axes=1, precision=p),
        lambda p: mnp.einsum("bij,jk->bik", t, b, precision=p),
        lambda p: lax.dot_general(t, b, (((2,), (0,)), ((), ())), precision=p),
        lambda p: lax.dot(a, b, precision=p),
    ]
    for f in cases:
        got, want = np.asarray(f(prec)), np.asarray(f(lax.Precision.HIGHEST))
        np.testing.assert_array_equal(got, want)
    # against NumPy in float64: float32 rounding only (k = 7 terms)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    assert np.all(np.abs(np.asarray(mnp.matmul(a, b, precision=prec)) - ref)
                  <= 8 * 2.0 ** -24 * scale)


@pytest.mark.parametrize("prec", ["default", "high"])
def test_cpu_conv_and_attention_equal_highest(prec):
    rng = _rng(2)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    conv = (lambda p: lax.conv_general_dilated(x, w, (1, 1), "SAME", precision=p))
    np.testing.assert_array_equal(np.asarray(conv(prec)), np.asarray(conv("highest")))
    c1 = (lambda p: mnp.convolve(x[0, 0, 0], w[0, 0, 0], precision=p))
    np.testing.assert_array_equal(np.asarray(c1(prec)), np.asarray(c1("highest")))
    np.testing.assert_allclose(np.asarray(c1(prec)), np.convolve(x[0, 0, 0], w[0, 0, 0]),
                               rtol=1e-6, atol=1e-6)
    q, k, v = (rng.standard_normal((1, 4, 2, 8)).astype(np.float32) for _ in range(3))
    att = (lambda p: mx.nn.dot_product_attention(q, k, v, is_causal=True, precision=p))
    np.testing.assert_array_equal(np.asarray(att(prec)), np.asarray(att("highest")))
    with mx.default_matmul_precision(prec):
        np.testing.assert_array_equal(np.asarray(conv(None)), np.asarray(conv("highest")))
        np.testing.assert_array_equal(np.asarray(att(None)), np.asarray(att("highest")))


def test_gradients_equal_highest_on_cpu():
    rng = _rng(3)
    a = rng.standard_normal((4, 6)).astype(np.float32)
    b = rng.standard_normal((6, 5)).astype(np.float32)

    def loss(a, b, p):
        return mnp.sum(mnp.tanh(mnp.matmul(a, b, precision=p)))
    want = mx.grad(loss, argnums=(0, 1))(a, b, "highest")
    for p in ("default", "high"):
        got = mx.grad(loss, argnums=(0, 1))(a, b, p)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


# --- the param: resolved at bind, carried by the rules, listed when not default ----------------
def test_param_resolution_and_aliases():
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    f = (lambda p: (lambda a, b: mnp.matmul(a, b, precision=p)))
    for given, want in [(None, "default"), ("default", "default"), ("HIGH", "high"),
                        ("highest", "highest"), (lax.Precision.HIGH, "high"),
                        ("bfloat16", "default"), ("tensorfloat32", "high"),
                        ("float32", "highest"), ("fastest", "default"),
                        ((lax.Precision.DEFAULT, lax.Precision.HIGH), "high"),
                        (("highest", None), "highest"), ((None, None), "default")]:
        assert _params(f(given), a, b)[0] == [want], given
    # the knob fills in None (also inside a pair)
    with mx.default_matmul_precision("tensorfloat32"):
        assert _params(f(None), a, b)[0] == ["high"]
        assert _params(f((None, "default")), a, b)[0] == ["high"]
        assert _params(f("default"), a, b)[0] == ["default"]  # explicit wins
    jlax = pytest.importorskip("jax").lax   # JAX's enum is taken by name
    assert _params(f(jlax.Precision.HIGHEST), a, b)[0] == ["highest"]
    assert lax.Precision("float32") is lax.Precision.HIGHEST
    assert lax.Precision("high") is lax.Precision.HIGH


def test_listing_shows_precision_only_when_not_default():
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    _, text = _params(lambda a, b: a @ b, a, b)
    assert "dot_general[" in text and "precision=" not in text
    _, text = _params(lambda a, b: mnp.matmul(a, b, precision="high"), a, b)
    assert "precision=high]" in text
    x = np.ones((1, 2, 5, 5), np.float32)
    w = np.ones((3, 2, 3, 3), np.float32)
    _, text = _params(lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "VALID"), x, w,
                      prim="conv_general_dilated")
    assert "conv_general_dilated[" in text and "precision=" not in text
    params, text = _params(lambda x, w: lax.conv_general_dilated(
        x, w, (1, 1), "VALID", precision="highest"), x, w, prim="conv_general_dilated")
    assert params == ["highest"] and "precision=highest" in text


@pytest.mark.parametrize("prec", ["default", "high", "highest"])
def test_rules_pass_precision_on(prec):
    """jvp, vjp and vmap emit products of the same precision (JAX's rules do too)."""
    rng = _rng(4)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    mm = (lambda a, b: mnp.matmul(a, b, precision=prec))
    grad = (lambda a, b: mx.grad(lambda a, b: mnp.sum(mm(a, b)), argnums=(0, 1))(a, b))
    jvp = (lambda a, b: mx.jvp(mm, (a, b), (a, b))[1])
    vm = (lambda a, b: mx.vmap(mm, in_axes=(0, None))(mnp.stack([a, a]), b))
    hess = (lambda a, b: mx.jacfwd(mx.grad(lambda a: mnp.sum(mm(a, b) ** 2)))(a))
    for f, n in ((grad, 3), (jvp, 3), (vm, 1), (hess, 4)):
        params, _ = _params(f, a, b)
        assert len(params) >= n and set(params) == {prec}, (f, params)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)

    def closs(x, w):
        return mnp.sum(lax.conv_general_dilated(x, w, (2, 1), "SAME", precision=prec) ** 2)
    params, _ = _params(lambda x, w: mx.grad(closs, argnums=(0, 1))(x, w), x, w,
                        prim="conv_general_dilated")
    assert len(params) == 3 and set(params) == {prec}


def test_attention_precision_reaches_the_composite_and_its_backward():
    rng = _rng(5)
    q, k, v = (rng.standard_normal((1, 4, 2, 8)).astype(np.float32) for _ in range(3))

    def loss(q, k, v):
        return mnp.sum(mx.nn.dot_product_attention(q, k, v, precision="high") ** 2)
    for prim in ("dot_product_attention", "dot_product_attention_bwd"):
        params, text = _params(lambda q, k, v: mx.grad(loss, argnums=(0, 1, 2))(q, k, v),
                               q, k, v, prim=prim)
        assert params == ["high"] and "precision=high" in text
    _, text = _params(lambda q, k, v: mx.nn.dot_product_attention(q, k, v), q, k, v,
                      prim="dot_product_attention")
    assert "precision=" not in text


# --- validation -------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["fast", 3, ("high",), ("high", "low"), 1.5, "tf32"])
def test_bad_precision_names_the_op(bad):
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    t = np.ones((2, 2, 3), np.float32)
    x, w = np.ones((1, 1, 4, 4), np.float32), np.ones((1, 1, 2, 2), np.float32)
    q = np.ones((1, 2, 1, 4), np.float32)
    cases = {
        "matmul": lambda: mnp.matmul(a, b, precision=bad),
        "dot": lambda: mnp.dot(a, b, precision=bad),
        "tensordot": lambda: mnp.tensordot(a, b, axes=1, precision=bad),
        "einsum": lambda: mnp.einsum("ij,jk->ik", a, b, precision=bad),
        "dot_general": lambda: lax.dot_general(a, b, (((1,), (0,)), ((), ())),
                                               precision=bad),
        "batch_matmul": lambda: lax.batch_matmul(t, t.transpose(0, 2, 1), precision=bad),
        "conv_general_dilated": lambda: lax.conv_general_dilated(x, w, (1, 1), "VALID",
                                                                 precision=bad),
        "dot_product_attention": lambda: mx.nn.dot_product_attention(q, q, q, precision=bad),
        "convolve": lambda: mnp.convolve(a[0], b[0], precision=bad),
        "inner": lambda: mnp.inner(a, a, precision=bad),
    }
    for op, f in cases.items():
        with pytest.raises(ValueError, match=f"^{op}: precision (must be|as a sequence)"):
            f()


def test_context_manager_and_knob_validate():
    with pytest.raises(ValueError, match="default_matmul_precision: expected one of"):
        with mx.default_matmul_precision("tf32"):
            pass
    with pytest.raises(ValueError, match="default_matmul_precision.*expected one of"):
        mx.config.update("default_matmul_precision", "fast")
    assert mx.config.get("default_matmul_precision") == "default"


def test_context_manager_is_thread_local_and_nests():
    seen = {}
    inside, release = threading.Event(), threading.Event()
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)

    def worker():
        with mx.default_matmul_precision("highest"):
            inside.set()
            release.wait(5)
            seen["worker"] = _params(lambda a, b: a @ b, a, b)[0]

    t = threading.Thread(target=worker)
    t.start()
    inside.wait(5)
    seen["main"] = _params(lambda a, b: a @ b, a, b)[0]
    release.set()
    t.join()
    assert seen == {"worker": ["highest"], "main": ["default"]}
    with mx.default_matmul_precision(lax.Precision.HIGH):
        with mx.default_matmul_precision("float32"):
            assert _params(lambda a, b: a @ b, a, b)[0] == ["highest"]
        assert _params(lambda a, b: a @ b, a, b)[0] == ["high"]


def test_knob_from_the_environment():
    env = dict(os.environ, MIRAX_DEFAULT_MATMUL_PRECISION="tensorfloat32")
    code = ("import numpy as np, mirax as mx; a = np.ones((2, 2), np.float32); "
            "g = mx.make_graph(lambda a: a @ a)(a); "
            "print(mx.config.get('default_matmul_precision'), g.nodes[0].params['precision'])")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["tensorfloat32", "high"]


# --- jit: traced under the knob, keyed by it ----------------------------------------------------
def test_jit_keeps_the_precision_it_was_traced_under_and_retraces_on_change():
    a = np.ones((2, 3), np.float32)
    b = np.ones((3, 4), np.float32)
    f = mx.jit(lambda a, b: a @ b)
    xa, xb = mx.asarray(a), mx.asarray(b)
    f(xa, xb)
    f(xa, xb)                       # the fast path
    assert f.cache_info()[:2] == (1, 1)
    with mx.default_matmul_precision("highest"):
        f(xa, xb)                   # a new key: traced again under "highest"
        f(xa, xb)
        assert f.cache_info()[:2] == (2, 2)
    f(xa, xb)                       # back to the first entry (fast path included)
    assert f.cache_info()[:3] == (3, 2, 2)
    precisions = sorted(entry[0].nodes[0].params["precision"]
                        for entry in f.cache.values())
    assert precisions == ["default", "highest"]
    np.testing.assert_array_equal(np.asarray(f(xa, xb)), a @ b)


def test_explain_cache_misses_names_the_precision(capsys):
    with config.override(explain_cache_misses=True):
        f = mx.jit(lambda a: a @ a)
    x = mx.asarray(np.ones((2, 2), np.float32))
    f(x)
    with mx.default_matmul_precision("high"):
        f(x)
    err = capsys.readouterr().err
    assert "default_matmul_precision: default -> high" in err
