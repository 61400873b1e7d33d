"""The jit cache: hits, misses, evictions, the fast path, and MIRAX_EXPLAIN_CACHE_MISSES."""
import numpy as np

import mirax as mx
import mirax.numpy as mnp

from listing import f32


def test_hits_misses_and_fast_path():
    f = mx.jit(lambda x, y: x * y + 1.0)
    x, y = f32(3), f32(3)
    f(x, y)
    assert f.cache_info()[:3] == (0, 1, 1)
    f(x, y)
    f(x, y)
    assert f.cache_info()[:3] == (2, 1, 1)
    f(f32(4), f32(4))
    assert f.cache_info()[:3] == (2, 2, 2)
    f(x, y=y)  # keyword: the general path, same signature as a different tree
    assert f.cache_info().misses == 3


def test_weak_type_and_dtype_are_part_of_the_key():
    f = mx.jit(lambda x: x * 2)
    f(f32(3))
    f(mx.asarray(np.ones(3, np.float64)))
    f(2.0)
    f(2)
    assert f.cache_info().misses == 4
    assert f(f32(3)).dtype == np.float32 and f.cache_info().hits == 1


def test_eviction_lru():
    f = mx.jit(lambda x: x + 1.0, cache_size=2)
    a, b, c = f32(1), f32(2), f32(3)
    f(a)
    f(b)
    f(a)          # a is now most recent
    f(c)          # evicts b
    info = f.cache_info()
    assert (info.size, info.maxsize, info.evictions) == (2, 2, 1)
    f(a)
    assert f.cache_info().hits == 2
    f(b)
    assert f.cache_info().misses == 4 and f.cache_info().evictions == 2
    np.testing.assert_array_equal(np.asarray(f(b)), np.asarray(b) + 1)


def test_cache_size_from_environment():
    import os
    import subprocess
    import sys
    code = ("import mirax as mx\n"
            "print(mx.jit(lambda x: x).cache_info().maxsize)\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, MIRAX_JIT_CACHE_SIZE="3")
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.stdout.strip() == "3", r.stderr


def test_static_args_in_key():
    f = mx.jit(lambda x, n: x * n, static_argnums=1)
    f(f32(3), 2)
    f(f32(3), 2)
    f(f32(3), 3)
    assert f.cache_info()[:2] == (1, 2)


def test_explain_cache_misses(knobs, monkeypatch, capsys):
    knobs(explain_cache_misses="1")

    def loss(params, x, n):
        return mnp.sum(params["w"] * x) * n
    f = mx.jit(loss, static_argnames="n")
    p = {"w": f32(3)}
    f(p, f32(3), n=2)
    assert "jit(loss): first compilation" in capsys.readouterr().err
    f(p, f32(3), n=2)
    assert capsys.readouterr().err == ""
    f({"w": f32(4)}, f32(4), n=2)
    err = capsys.readouterr().err
    assert "recompiling because" in err
    assert "params['w']: f32[3] -> f32[4]" in err and "x: f32[3] -> f32[4]" in err
    f({"w": f32(4)}, f32(4), n=3)
    assert "static n: 2 -> 3" in capsys.readouterr().err
    f({"w": f32(4)}, mx.asarray(np.ones(4, np.float64)), n=3)
    assert "x: f32[4] -> f64[4]" in capsys.readouterr().err


def test_fast_path_outputs_and_structure():
    f = mx.jit(lambda x, y: {"s": x + y, "p": (x * y, x)})
    x, y = f32(2), f32(2)
    for _ in range(3):
        out = f(x, y)
        assert sorted(out) == ["p", "s"] and isinstance(out["p"], tuple)
        np.testing.assert_array_equal(np.asarray(out["p"][1]), np.asarray(x))
    g = mx.jit(lambda x: x * 2.0)
    for _ in range(2):
        assert isinstance(g(x), mx.Array)


def test_fast_path_not_taken_under_transforms():
    f = mx.jit(lambda x: mnp.sin(x) * x)
    x = f32(3) / 10
    f(x)
    f(x)
    g = mx.grad(lambda x: mnp.sum(f(x)))(x)
    xn = np.asarray(x)
    np.testing.assert_allclose(np.asarray(g), np.cos(xn) * xn + np.sin(xn), rtol=1e-6)
    v = mx.vmap(f)(mx.asarray(np.ones((2, 3), np.float32)))
    assert v.shape == (2, 3)
