"""CPU lowering: generated source, direct ufunc calls, errstate grouping, MIRAX_DEBUG."""
import numpy as np

import mirax as mx
import mirax.numpy as mnp

from listing import f32


def _debug(monkeypatch, knobs, level):
    from mirax.compiler import pipeline
    knobs(debug=level)
    monkeypatch.setattr(pipeline, "_register_report", lambda: None)  # no report at exit


def test_generated_source_calls_ufuncs_with_out(knobs, monkeypatch, capsys):
    _debug(monkeypatch, knobs, 3)

    def f(x, y):
        return mnp.sum(mnp.sin(x * y) + 1.0)
    x, y = f32(8), f32(8)
    out = mx.jit(f)(x, y)
    err = capsys.readouterr().err
    np.testing.assert_allclose(float(out), np.sum(np.sin(np.asarray(x) * np.asarray(y)) + 1),
                               rtol=1e-5)
    src = err[err.index("def run("):]
    assert "_multiply(v0, v1)  # mul" in src
    assert "_sin(v3, out=v3)  # sin" in src
    assert "_add(v4, v2, out=v4)  # add" in src
    assert "[mirax] pass simplify:" in err and "[mirax] pass plan_memory:" in err


def test_errstate_ufuncs_grouped_in_one_block(knobs, monkeypatch, capsys):
    _debug(monkeypatch, knobs, 3)
    with np.errstate(all="raise"):
        out = mx.jit(lambda x: mnp.log(mnp.exp(x)) + mnp.sqrt(x))(mx.asarray(
            np.array([-1.0, 0.0, 1000.0], np.float32)))
    src = capsys.readouterr().err
    assert "with _np.errstate(" in src and "_exp(v0)" in src
    o = np.asarray(out)
    assert np.isnan(o[0]) and o[1] == 0 and np.isinf(o[2])


def test_single_errstate_op_calls_the_impl():
    f = mx.jit(lambda x: mnp.exp(x) * 2.0)
    with np.errstate(all="raise"):
        assert np.isinf(np.asarray(f(mx.asarray(np.float32([1000.0]))))[0])


def test_debug_report(knobs, monkeypatch):
    from mirax.compiler.pipeline import report
    mx.jit(lambda x: mnp.tanh(x) * 2.0)(f32(3))
    text = report()
    assert "pass timings" in text and "dispatch report, cpu" in text
    assert any(line.split()[:2] == ["tanh", str(int(line.split()[1]))]
               for line in text.splitlines() if line.strip().startswith("tanh"))


def test_debug_1_prints_report_at_exit():
    import os
    import subprocess
    import sys
    code = ("import numpy as np, mirax as mx, mirax.numpy as mnp\n"
            "mx.jit(lambda x: mnp.sin(x) * 2.0)(mx.asarray(np.ones(3, np.float32)))\n")
    env = dict(os.environ, MIRAX_DEBUG="1")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "[mirax] pass timings" in r.stderr and "dispatch report, cpu" in r.stderr
    assert r.stderr.rstrip().splitlines()[-1].split()[0] == "sin"


def test_jit_matches_eager_on_many_shapes():
    def f(x, y):
        z = mnp.tanh(x * y) - x / (y + 2.0)
        return mnp.exp(-z * z).sum(axis=0), mnp.maximum(z, 0.0).T
    for shape in [(3,), (2, 3), (4, 1)]:
        x, y = f32(*shape) / 10, f32(*shape) / 5
        for a, b in zip(mx.jit(f)(x, y), f(x, y)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)
