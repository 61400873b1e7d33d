"""Run a corpus program under mirax and under JAX from the same source text.

A program file is a public JAX program ported to mirax by its imports only (`import mirax
as jax`, `import mirax.numpy as jnp`, `from mirax import grad`, ...). For the JAX run the
import lines get `mirax` -> `jax` back; nothing else in the source changes. Each program's
`main()` returns its key outputs (a dict of arrays, numbers, bools, lists).
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import types

import numpy as np

PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")
_IMPORT = re.compile(r"^(\s*)(import|from)(\s+)mirax\b", re.M)


def names() -> list[str]:
    return sorted(f[:-3] for f in os.listdir(PROGRAMS)
                  if f.endswith(".py") and not f.startswith("_"))


def source(name: str, lib: str) -> str:
    with open(os.path.join(PROGRAMS, name + ".py")) as f:
        src = f.read()
    if lib == "jax":
        src = _IMPORT.sub(r"\1\2\3jax", src)
        src = re.sub(r"^((?:import|from)\s.*)\bmirax\b", r"\1jax", src, flags=re.M)
    return src


def run(name: str, lib: str) -> dict:
    """Execute the program as a fresh module and return main()'s outputs (stdout hidden)."""
    mod_name = f"corpus_{lib}_{name}"
    mod = types.ModuleType(mod_name)
    mod.__file__ = os.path.join(PROGRAMS, name + ".py")
    sys.modules[mod_name] = mod          # dataclasses and NamedTuples look their module up
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(source(name, lib), mod.__file__, "exec"), mod.__dict__)
            out = mod.main()
        return out, mod
    finally:
        sys.modules.pop(mod_name, None)


def check(got, want, mod, dtype_notes=None):
    """Compare main()'s outputs; keys the program lists in KNOWN_DIFFERENCES (with why)
    must still differ, so the list stays true."""
    known = getattr(mod, "KNOWN_DIFFERENCES", {})
    nan_ok = getattr(mod, "EXPECTED_NAN", ())
    for k, v in want.items():   # a NaN-filled result would compare equal and prove nothing
        leaves = [np.asarray(x) for x in _leaves(v)]
        assert k in nan_ok or not any(x.dtype.kind == "f" and np.isnan(x).any()
                                      for x in leaves), f"JAX's out[{k!r}] holds NaN"
    rtol, atol = getattr(mod, "RTOL", 1e-4), getattr(mod, "ATOL", 1e-5)
    for k in known:
        try:
            compare(got[k], want[k], rtol, atol, f"out[{k!r}]")
        except AssertionError:
            continue
        raise AssertionError(f"out[{k!r}] now agrees with JAX: drop it from KNOWN_DIFFERENCES")
    compare({k: v for k, v in got.items() if k not in known},
            {k: v for k, v in want.items() if k not in known}, rtol, atol,
            dtype_notes=dtype_notes)


def _leaves(v):
    if isinstance(v, dict):
        return [x for k in v for x in _leaves(v[k])]
    if isinstance(v, (list, tuple)):
        return [x for e in v for x in _leaves(e)]
    return [] if isinstance(v, str) or v is None else [v]


def compare(got, want, rtol, atol, path="out", dtype_notes=None):
    """Assert got (mirax) matches want (JAX) leaf by leaf; note differing dtypes."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), (path, got, want)
        for k in want:
            compare(got[k], want[k], rtol, atol, f"{path}[{k!r}]", dtype_notes)
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), (path, got, want)
        for i, (g, w) in enumerate(zip(got, want)):
            compare(g, w, rtol, atol, f"{path}[{i}]", dtype_notes)
    elif isinstance(want, str) or want is None:
        assert got == want, (path, got, want)
    else:
        g, w = np.asarray(got), np.asarray(want)
        assert g.shape == w.shape, f"{path}: shape {g.shape} != JAX's {w.shape}"
        assert g.dtype.kind == w.dtype.kind or {g.dtype.kind, w.dtype.kind} <= set("iu"), \
            f"{path}: dtype {g.dtype} is not of the kind of JAX's {w.dtype}"
        if g.dtype != w.dtype and dtype_notes is not None:
            dtype_notes.append(f"{path}: {g.dtype} (JAX {w.dtype})")
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                                       atol=atol, err_msg=path)
        else:
            np.testing.assert_array_equal(g, w, err_msg=path)
