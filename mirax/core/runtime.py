"""The runtime: what a device and a backend are, the registry backends register into, and
the executable cache.

Where it sits: at the bottom (core), so that eager dispatch (core/trace.py), arrays
(printing, transfers), `jit` and the `call` primitive reach backends without importing
them. Backends (mirax/backends/) register themselves here when mirax is imported; the
compiler registers the pass pipeline (`set_pipeline`). A graph's executable for a platform
is made once: pipeline(graph, backend) -> backend.compile(graph), and kept in
`graph.cache`.

A backend claims primitives natively (`impls`); anything it does not claim runs through
the host (copy to NumPy, the reference impl, copy back) and is counted in the dispatch
report (`debug=1`).
"""
from __future__ import annotations

import threading
from collections import Counter
from typing import Any, Callable

from mirax.core import config, profile_events


class Device:
    """A place arrays live: `cpu` (or `cpu:N` with several CPU devices) or `cuda:N`."""
    __slots__ = ("platform", "id", "backend")

    def __init__(self, platform: str, id: int, backend: Backend):
        self.platform, self.id, self.backend = platform, id, backend

    def __repr__(self):
        return "cpu" if self.platform == "cpu" and self.id == 0 else f"{self.platform}:{self.id}"

    __str__ = __repr__

    def __eq__(self, other):
        if isinstance(other, str):
            return str(self) == other or other == f"{self.platform}:{self.id}" or \
                (other == self.platform and self.id == 0)
        return isinstance(other, Device) and (self.platform, self.id) == (other.platform,
                                                                           other.id)

    def __hash__(self):
        return hash((self.platform, self.id))


class Backend:
    """The protocol. Subclasses set `platform` and implement the buffer methods.

    Compilation: `decomposes(prim)` says which composites the pipeline inlines for this
    backend (default: none), `passes` are the backend's own Graph -> Graph passes (run after
    fusion), `fuses` / `fuse_group` / `writes_into` steer fusion and buffer reuse, and
    `compile(graph)` turns the optimized graph into an executable."""
    platform: str = "?"
    fuses: bool = False
    passes: tuple = ()   # (name, Graph -> Graph) pairs, run after `fuse`

    def __init__(self):
        self.impls: dict[str, Callable] = {}   # primitive name -> native impl
        self.report: Counter = Counter()       # (primitive, how) -> count

    def devices(self) -> list[Device]:
        raise NotImplementedError

    def owns(self, buf) -> bool:
        raise NotImplementedError

    def to_host(self, buf) -> Any:
        raise NotImplementedError

    def from_host(self, host, device: Device) -> Any:
        raise NotImplementedError

    def decomposes(self, prim) -> bool:
        return False

    def adopt(self, buf):
        """A buffer of this backend for `buf` (a host value, or one of its own as it is)."""
        raise NotImplementedError

    def empty(self, shape, dtype):
        """A new buffer of this backend, contents undefined."""
        raise NotImplementedError

    def group_comm(self, device: Device, host, key):
        """The collective engine (core/comm.py's Comm) for `device`'s member of a group,
        or None when the group's host engine `host` (threads, MPI on host buffers) serves
        it. A backend with its own engine makes it here, bootstrapped over `host`, once
        per `key` (the group and this member)."""
        return None

    def impl(self, prim) -> Callable:
        """The function that runs `prim` on this backend's buffers."""
        native = self.impls.get(prim.name)
        if native is not None:
            self.report[(prim.name, "native")] += 1
            return native
        self.report[(prim.name, "host-fallback")] += 1
        return self._host_fallback(prim)

    def _host_fallback(self, prim) -> Callable:
        def run(*bufs, **params):
            host = [self.to_host(b) if self.owns(b) else b for b in bufs]
            out = prim.impl(*host, **params)
            dev = self.devices()[0]
            if prim.multiple_results:
                return [self.from_host(o, dev) for o in out]
            return self.from_host(out, dev)
        return run

    def compile(self, graph):
        """An Executable: a callable on buffers running the whole graph."""
        raise NotImplementedError


# --- the registry ---------------------------------------------------------------------------
_backends: dict[str, Backend] = {}
_loaders: dict[str, Callable[[], Backend | None]] = {}   # optional backends, made on demand
_lock = threading.RLock()
host: Backend | None = None   # the CPU backend (always present)
nonhost_buffers = [False]  # set by a non-CPU backend when it makes its first buffer: eager
# dispatch then asks the registry which backend owns each argument


def register(backend: Backend) -> None:
    global host
    with _lock:
        _backends[backend.platform] = backend
        if backend.platform == "cpu":
            host = backend


def register_loader(platform: str, load: Callable[[], Backend | None]) -> None:
    """An optional backend (CUDA): `load()` makes it, or returns None when its library or
    hardware is missing; tried once, on first need."""
    _loaders[platform] = load


def backend(platform: str) -> Backend | None:
    be = _backends.get(platform)
    if be is None and platform in _loaders:
        with _lock:
            load = _loaders.pop(platform, None)
            be = load() if load is not None else _backends.get(platform)
            if be is not None:
                _backends[platform] = be
    return be


def backends() -> list[Backend]:
    for p in list(_loaders):
        backend(p)
    return list(_backends.values())


def devices(platform: str | None = None) -> list[Device]:
    out = []
    for be in backends():
        if platform is None or be.platform == platform:
            out.extend(be.devices())
    return out


def default_device() -> Device:
    want = config.get("device").lower()
    if want.startswith("cuda") or want == "gpu":
        be = backend("cuda")
        if be is None:
            raise RuntimeError("device=cuda (MIRAX_DEVICE) but no CUDA device is available "
                               "(install the `cuda` extra: CuPy, and run on a GPU machine)")
        return be.devices()[int(want[5:] or 0) if want.startswith("cuda:") else 0]
    return host.devices()[0]


def get_device(device) -> Device:
    if device is None:
        return default_device()
    if isinstance(device, Device):
        return device
    name = str(device).lower()
    for d in devices():
        if d == name:
            return d
    raise ValueError(f"device_put: unknown device {device!r}; available: {devices()}")


def backend_of_buffer(buf) -> Backend:
    if host.owns(buf):
        return host
    for be in _backends.values():
        if be.owns(buf):
            return be
    raise TypeError(f"{type(buf).__name__} is not a buffer of any mirax backend")


def device_of_buffer(buf) -> Device:
    be = backend_of_buffer(buf)
    if be is host:
        return be.devices()[0]
    return be.device_of(buf)


def to_host(buf):
    return backend_of_buffer(buf).to_host(buf)


def from_dlpack_device(obj):
    """A device buffer for a DLPack object living outside host memory (a CUDA tensor)."""
    be = backend("cuda")
    if be is None:
        raise TypeError(f"asarray: {type(obj).__name__} lives on device "
                        f"{obj.__dlpack_device__()} and mirax has no CUDA backend here "
                        "(install CuPy and run on a GPU machine)")
    return be.from_dlpack(obj)


def synchronize(buf):
    """Wait until the work producing `buf` is done (no-op on the CPU)."""
    sync = getattr(backend_of_buffer(buf), "synchronize", None)
    if sync is not None:
        sync(buf)


def platform_of(bufs) -> str:
    """The platform of the first device buffer among `bufs` ("cpu" when there is none)."""
    for b in bufs:
        if hasattr(b, "shape") and not host.owns(b):
            return backend_of_buffer(b).platform
    return "cpu"


def impl_for(prim, bufs):
    """The impl of `prim` for the backend owning the first device buffer among `bufs`."""
    for b in bufs:
        if hasattr(b, "shape") and not host.owns(b):
            return backend_of_buffer(b).impl(prim)
    return host.impl(prim)


# --- the executable cache -----------------------------------------------------------------
_pipeline: list = [None]   # compiler.pipeline.optimize, registered by the compiler
_compile_lock = threading.RLock()   # re-entrant: compiling a plan compiles its bodies


def set_pipeline(fn: Callable) -> None:
    """The compiler's pass pipeline: fn(graph, backend) -> optimized graph."""
    _pipeline[0] = fn


def executable(graph, platform: str = "cpu", optimized: bool = False):
    """graph's executable on `platform`: optimized for that backend (unless `optimized`:
    a fusion node's body, compiled as it is), compiled, cached in `graph.cache` (made once
    even when several threads ask at the same time)."""
    key = ("exe", platform)
    exe = graph.cache.get(key)
    if exe is None:
        with _compile_lock:
            exe = graph.cache.get(key)
            if exe is None:
                be = backend(platform)
                if be is None:
                    raise ValueError(f"no {platform} backend on this machine")
                with profile_events.span(f"compile {graph.name}", "compile",
                                         {"nodes": len(graph.nodes), "platform": platform}):
                    g = graph if optimized else _pipeline[0](graph, be)
                    with profile_events.span(f"lower ({platform})", "compile"):
                        exe = be.compile(g)
                graph.cache[key] = exe
    return exe
