"""The CUDA backend: buffers are CuPy arrays on `cuda:N`; an optional extra (needs CuPy).

Importing this package without CuPy raises ImportError, which the registry
(backends/__init__.py) reads as "no CUDA". What it claims, per primitive (library.py):
explicit CuPy impls, NumPy reference impls that run unchanged on CuPy buffers, row
kernels for softmax & co, fused attention kernels (attention.py), and composites' bodies
compiled for CUDA ("decomposed"); everything else runs through the host and is counted
so in the dispatch report (`MIRAX_DEBUG=1`). `compile(graph)` is runtime.lower: fusion
nodes become generated kernels (codegen.py), and a launch-bound plan is replayed as a CUDA
graph (graphs.py). Nothing outside this package imports CuPy.
"""
from __future__ import annotations


import cupy as cp
import numpy as np

from mirax.backends.cuda import attention, graphs, library, nccl, runtime
from mirax.core import config, profile_events
from mirax.core import runtime as core_runtime
from mirax.core.runtime import Backend, Device

# --- the claims, in one place --------------------------------------------------------------
# composites run whole by a hand-written kernel (every other composite is inlined by the
# pipeline): row kernels of row_kernels.py, and attention.py's kernels
ROW_KERNELS = {"softmax": "softmax", "log_softmax": "log_softmax",
               "layer_norm": "layer_norm", "rms_norm": "rms_norm",
               "softmax_cross_entropy": "softmax_cross_entropy",
               "softmax_cross_entropy_bwd": "softmax_cross_entropy_bwd"}
ATTENTION = ("dot_product_attention", "dot_product_attention_bwd")
KERNELS = frozenset(ROW_KERNELS) | frozenset(ATTENTION)
# then per primitive (`_make`): library.explicit_impls() (CuPy code), REFERENCE_OK below
# (NumPy reference impls that run on CuPy buffers), a composite's body compiled for CUDA,
# else the host fallback, counted in the dispatch report.
# Reference impls verified to run on CuPy buffers (tests/cuda/test_cuda.py checks each).
REFERENCE_OK = {
    # elementwise (ufuncs, or ufuncs under np.errstate, or np.where/np.sign compositions)
    "neg", "sign", "floor", "ceil", "round", "trunc", "abs", "exp", "exp2", "expm1", "log",
    "log1p", "sqrt", "rsqrt", "cbrt", "tanh", "logistic", "sin", "cos", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "not", "is_finite",
    "add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "nextafter", "and",
    "or", "xor", "shift_left", "shift_right", "eq", "ne", "lt", "le", "gt", "ge", "select",
    "mul_strong", "real", "imag", "conj",
    # shape
    "broadcast_in_dim", "reshape", "transpose", "concatenate", "rev", "slice",
    # transforms whose impl runs a Python body on Arrays (eager dispatch keeps it on device)
    "custom_jvp_call", "custom_vjp_call", "checkpoint", "stop_gradient",
    # collectives: their impl hands the buffers to the member's engine (NCCL on CuPy ones)
    "psum", "pmax", "pmin", "all_gather", "psum_scatter", "ppermute", "all_to_all",
    "axis_index",
}
# sub-graph primitives: one driver for every backend (their sub-graphs compiled for CUDA).
# Not guarded: a failure inside is its node's own (each node's impl is guarded), and must
# not mark the primitive itself as failing for every later graph.
SUBGRAPHS = ("cond", "while", "scan", "call")


class CudaBackend(Backend):
    platform = "cuda"
    fuses = True  # fusion nodes become one generated kernel each
    # this backend's own passes, run by the compiler's pipeline after `fuse`
    passes = (("regroup", runtime.regroup), ("merge_elementwise", runtime.merge))

    def group_comm(self, device, host, key):
        return nccl.group_comm(device, host, key)   # NCCL on CuPy buffers

    def decomposes(self, prim) -> bool:
        """The pipeline inlines a composite's body unless a kernel here runs it whole, or it
        is a custom rule's call (its body is the user's function, run as it is)."""
        return prim.decomposition is not None and prim.name not in KERNELS and \
            not hasattr(prim, "tape_rule")

    def __init__(self):
        super().__init__()
        try:
            n = cp.cuda.runtime.getDeviceCount()
        except Exception:  # noqa: BLE001 - no driver: no devices
            n = 0
        self._devices = [Device("cuda", i, self) for i in range(n)]
        self._explicit = library.explicit_impls()
        self._table: dict = {}   # primitive name -> (impl, how)
        self.failures: dict = {}  # (name, dtypes) -> the error of a native impl that raised;
        # such signatures run on the host from then on (MIRAX_CUDA_STRICT=1 raises instead)
        self.strict = config.get("cuda_strict")
        self.host_calls = 0  # host-fallback runs so far (plans that make any are not captured
        # as CUDA graphs: graphs.py)

    # --- buffers ----------------------------------------------------------------------------
    def devices(self):
        return self._devices

    def owns(self, buf) -> bool:
        return isinstance(buf, cp.ndarray)

    def to_host(self, buf):
        if profile_events.active is not None:
            with profile_events.span("to_host", "transfer", {"bytes": buf.nbytes}):
                return cp.asnumpy(buf)
        return cp.asnumpy(buf)

    def from_host(self, host, device: Device):
        core_runtime.nonhost_buffers[0] = True
        host = np.asarray(host)
        with cp.cuda.Device(device.id), profile_events.span(
                "from_host", "transfer", {"bytes": host.nbytes}):
            return cp.asarray(host)

    def from_dlpack(self, obj):
        core_runtime.nonhost_buffers[0] = True
        return cp.from_dlpack(obj).copy()  # a copy: mx.Array is immutable

    def adopt(self, buf):
        return library.to_device(buf)

    def empty(self, shape, dtype):
        return cp.empty(shape, dtype)

    def device_of(self, buf) -> Device:
        return self._devices[buf.device.id]

    def synchronize(self, buf=None):
        cp.cuda.get_current_stream().synchronize()

    def writes_into(self, node) -> bool:
        return False

    # --- dispatch ---------------------------------------------------------------------------
    def impl(self, prim):
        entry = self._table.get(prim.name)
        if entry is None:
            entry = self._table[prim.name] = self._make(prim)
        fn, how = entry
        self.report[(prim.name, how)] += 1
        return fn

    def _make(self, prim):
        name = prim.name
        if name in ROW_KERNELS:
            return self._guarded(prim, runtime.row_impl(prim, ROW_KERNELS[name])), "native"
        if name in ATTENTION:
            return self._guarded(prim, attention.impl(self, prim)), "native"
        if name in self._explicit:
            return self._guarded(prim, self._explicit[name]), "native"
        if name in SUBGRAPHS:
            return self._on_device(prim.impl), "native"
        if name in REFERENCE_OK and prim.impl is not None:
            return self._guarded(prim, prim.impl), "native"
        if prim.decomposition is not None:
            return self._guarded(prim, runtime.body_impl(prim)), "decomposed"
        return self._host_fallback(prim), "host-fallback"

    @staticmethod
    def _on_device(fn):
        """`fn` on device buffers (host arguments moved first)."""
        to_device = library.to_device

        def run(*bufs, **params):
            return fn(*[to_device(b) for b in bufs], **params)
        return run

    def _guarded(self, prim, fn):
        """Run `fn` on device buffers; if CuPy cannot (a dtype or case it lacks), run on
        the host instead, count it, and remember the signature."""
        host = self._host_fallback(prim)
        to_device, multiple, name = library.to_device, prim.multiple_results, prim.name

        def run(*bufs, **params):
            bufs = [to_device(b) for b in bufs]
            sig = (name, tuple(getattr(b, "dtype", None) for b in bufs))
            if sig not in self.failures:
                try:
                    out = fn(*bufs, **params)
                except Exception as e:  # noqa: BLE001 - the host impl raises real errors again
                    if self.strict or graphs.flags.capturing:  # a capture failed: not the op
                        raise
                    self.failures[sig] = f"{type(e).__name__}: {e}"[:300]
                else:
                    if multiple:
                        return [to_device(o) for o in out]
                    return to_device(out)
            self.report[(name, "host-fallback")] += 1
            return host(*bufs, **params)
        return run

    def _host_fallback(self, prim):
        def run(*bufs, **params):
            self.host_calls += 1
            host = [cp.asnumpy(b) if isinstance(b, cp.ndarray) else b for b in bufs]
            out = prim.impl(*host, **params)
            if prim.multiple_results:
                return [cp.asarray(np.asarray(o)) for o in out]
            return cp.asarray(np.asarray(out))
        return run

    def compile(self, graph):
        return runtime.lower(self, graph)
