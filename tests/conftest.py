"""Test session setup: single-threaded BLAS (the CI machine has 2 shared cores, and
multi-threaded OpenBLAS on tiny matrices is slower than one thread under contention)."""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
