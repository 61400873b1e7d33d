"""Every CUDA test runs with the default_matmul_precision knob at "highest", deliberately:
the tests compare float32 products on the GPU with NumPy's at float32 tolerances, and the
knob's own default ("default": TF32 tensor cores, 10 mantissa bits) would put those
products a thousand times further off. The knob is set for the process (not a thread-local
override), so products made in threads a test starts follow it too. test_precision.py
measures each setting explicitly (precision= or `mx.default_matmul_precision`, both of
which take precedence over the process value)."""
import pytest

from mirax.core import config


@pytest.fixture(autouse=True)
def _matmul_precision_highest():
    before = config.get("default_matmul_precision")
    config.update("default_matmul_precision", "highest")
    try:
        yield
    finally:
        config.update("default_matmul_precision", before)
