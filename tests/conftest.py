"""Test session setup: single-threaded BLAS (the CI machine has 2 shared cores, and
multi-threaded OpenBLAS on tiny matrices is slower than one thread under contention)."""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# mirax's own CPU threads too (tests of the threaded kernels set cpu_threads themselves)
os.environ.setdefault("MIRAX_CPU_THREADS", "1")

import sys  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _restore_jax_x64():
    """Oracle tests may switch JAX to x64; keep that from leaking into later tests."""
    jax = sys.modules.get("jax")
    before = jax.config.jax_enable_x64 if jax is not None else None
    yield
    jax = sys.modules.get("jax")
    if jax is not None:
        jax.config.update("jax_enable_x64", bool(before))


@pytest.fixture
def knobs():
    """`knobs(name=value, ...)` sets mx.config knobs for the rest of one test (this thread)."""
    import contextlib

    from mirax.core import config
    with contextlib.ExitStack() as stack:
        yield lambda **values: stack.enter_context(config.override(**values))


@pytest.fixture
def x64():
    """JAX with float64 on for one test (_restore_jax_x64 above turns it back)."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
