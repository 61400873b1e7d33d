"""mx.config: knobs declared once, read from the environment at import, update /
thread-local override / describe; bad values name the knob."""
import os
import subprocess
import sys
import threading

import pytest

import mirax as mx
from mirax.core import config


def test_get_update_override():
    before = mx.config.get("jit_cache_size")
    try:
        mx.config.update("jit_cache_size", 7)
        assert mx.config.get("jit_cache_size") == 7
        with mx.config.override(jit_cache_size=3, explain_cache_misses=True):
            assert mx.config.get("jit_cache_size") == 3
            assert mx.config.get("explain_cache_misses") is True
            with mx.config.override(jit_cache_size=5):
                assert mx.config.get("jit_cache_size") == 5
            assert mx.config.get("jit_cache_size") == 3
        assert mx.config.get("jit_cache_size") == 7
    finally:
        mx.config.update("jit_cache_size", before)


def test_override_is_per_thread():
    seen = {}
    inside, release = threading.Event(), threading.Event()

    def worker():
        with mx.config.override(debug=2):
            inside.set()
            release.wait(5)
            seen["worker"] = mx.config.get("debug")

    t = threading.Thread(target=worker)
    t.start()
    inside.wait(5)
    seen["main"] = mx.config.get("debug")
    release.set()
    t.join()
    assert seen == {"worker": 2, "main": 0}


def test_bad_values_name_the_knob():
    with pytest.raises(ValueError, match="jit_cache_size.*non-negative integer"):
        mx.config.update("jit_cache_size", -1)
    with pytest.raises(ValueError, match="cpu_malloc.*reuse, default"):
        with mx.config.override(cpu_malloc="sometimes"):
            pass
    with pytest.raises(KeyError, match="unknown knob 'no_such'"):
        mx.config.get("no_such")


def test_environment_is_read_at_import():
    env = dict(os.environ, MIRAX_JIT_CACHE_SIZE="9", MIRAX_EXPLAIN_CACHE_MISSES="yes")
    out = subprocess.run([sys.executable, "-c", "import mirax as mx; print("
                          "mx.config.get('jit_cache_size'), "
                          "mx.config.get('explain_cache_misses'))"],
                         env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["9", "True"]
    env["MIRAX_DEBUG"] = "loud"
    bad = subprocess.run([sys.executable, "-c", "import mirax"], env=env,
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "debug (MIRAX_DEBUG): expected an integer" in bad.stderr


def test_describe_lists_every_public_knob():
    table = mx.config.describe()
    for k in config.KNOBS.values():
        assert (k.name in table) == (not k.internal)
        if not k.internal:
            assert k.env in table
