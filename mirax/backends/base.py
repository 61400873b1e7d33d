"""What a backend is: its buffer type, host transfer, native impls and compilation.

A backend claims primitives natively (`impls`); anything it does not claim runs through
the host (copy to NumPy, the reference impl, copy back) and is counted in the dispatch
report (`MIRAX_DEBUG=1`).
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable


class Device:
    """A place arrays live: `cpu` or `cuda:N`."""
    __slots__ = ("platform", "id", "backend")

    def __init__(self, platform: str, id: int, backend: Backend):
        self.platform, self.id, self.backend = platform, id, backend

    def __repr__(self):
        return "cpu" if self.platform == "cpu" else f"{self.platform}:{self.id}"

    __str__ = __repr__

    def __eq__(self, other):
        if isinstance(other, str):
            return str(self) == other or (other == self.platform and self.id == 0)
        return isinstance(other, Device) and (self.platform, self.id) == (other.platform,
                                                                           other.id)

    def __hash__(self):
        return hash((self.platform, self.id))


class Backend:
    """The protocol. Subclasses set `platform` and implement the buffer methods."""
    platform: str = "?"

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
