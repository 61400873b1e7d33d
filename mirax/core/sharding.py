"""Shardings: how an array is laid out over devices. `Mesh` (devices in a grid with named
axes), `PartitionSpec` (which mesh axes split which array dimension), `NamedSharding`
(a mesh and a spec), `PmapSharding` (pmap's stacked axis, one member per device).

A sharded array is an `Array` holding the whole value (the host sees one array) plus its
shards, one per local device, and its sharding (`x.sharding`, `x.addressable_shards`).

Where it sits: core (array metadata); mirax/sharding.py is the public face, pmap and
shard_map (transforms/) make sharded arrays.
"""
from __future__ import annotations

import math

import numpy as np

from mirax.core.array import Array


class PartitionSpec(tuple):
    """P('data', None): dimension 0 split over mesh axis 'data', dimension 1 whole; an
    entry may be a tuple of mesh axes (split over their product, row-major)."""

    def __new__(cls, *parts):
        return tuple.__new__(cls, parts)

    def __repr__(self):
        return f"PartitionSpec{tuple.__repr__(self)}"


P = PartitionSpec


def is_local(device) -> bool:
    """Whether a device belongs to this process (a Device has a backend; a remote one not)."""
    return hasattr(device, "backend")


class Mesh:
    """Devices in an n-d grid with one name per grid axis."""

    def __init__(self, devices, axis_names):
        arr = np.empty(np.shape(np.asarray(devices, dtype=object)), dtype=object)
        arr[...] = np.asarray(devices, dtype=object)
        names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        if arr.ndim != len(names):
            raise ValueError(f"Mesh: {arr.ndim}-d devices {arr.shape} but {len(names)} axis "
                             f"names {names}")
        if len(set(names)) != len(names):
            raise ValueError(f"Mesh: axis names repeat: {names}")
        self.devices, self.axis_names = arr, names
        self.axis_sizes = arr.shape
        self.shape = dict(zip(names, arr.shape))
        self.size = arr.size

    def __repr__(self):
        return f"Mesh({', '.join(f'{n}={s}' for n, s in self.shape.items())})"

    def __eq__(self, other):
        return isinstance(other, Mesh) and self.axis_names == other.axis_names and \
            self.devices.shape == other.devices.shape and \
            all(a == b for a, b in zip(self.devices.flat, other.devices.flat))

    def __hash__(self):
        return hash((self.axis_names, self.devices.shape))

    def local_members(self):
        """[(coords, device)] of this process's devices, row-major."""
        return [(c, self.devices[c]) for c in np.ndindex(*self.axis_sizes)
                if is_local(self.devices[c])]


def spec_names(entry) -> tuple:
    if entry is None:
        return ()
    return tuple(entry) if isinstance(entry, (tuple, list)) else (entry,)


class NamedSharding:
    """An array split over `mesh` as `spec` says; mesh axes the spec does not name hold
    replicas."""

    def __init__(self, mesh: Mesh, spec: PartitionSpec | None = None):
        spec = PartitionSpec() if spec is None else spec
        spec = spec if isinstance(spec, PartitionSpec) else PartitionSpec(*spec)
        used = [n for e in spec for n in spec_names(e)]
        for n in used:
            if n not in mesh.axis_names:
                raise ValueError(f"NamedSharding: {spec} names axis {n!r}, not an axis of "
                                 f"{mesh}")
        if len(set(used)) != len(used):
            raise ValueError(f"NamedSharding: {spec} uses a mesh axis twice")
        self.mesh, self.spec = mesh, spec

    def __repr__(self):
        return f"NamedSharding({self.mesh}, {self.spec})"

    def __eq__(self, other):
        return isinstance(other, NamedSharding) and self.mesh == other.mesh and \
            tuple(self.spec) == tuple(other.spec)

    def __hash__(self):
        return hash((self.mesh, tuple(self.spec)))

    def blocks(self, dim_entry) -> int:
        return math.prod(self.mesh.shape[n] for n in spec_names(dim_entry))

    def check(self, shape, op="device_put"):
        if len(self.spec) > len(shape):
            raise ValueError(f"{op}: {self.spec} has {len(self.spec)} entries for an array "
                             f"of shape {tuple(shape)}")
        for d, e in enumerate(self.spec):
            k = self.blocks(e)
            if shape[d] % k:
                raise ValueError(f"{op}: dimension {d} of shape {tuple(shape)} is not "
                                 f"divisible by the {k} devices of mesh axes "
                                 f"{spec_names(e)} ({self.spec})")

    def shard_shape(self, shape) -> tuple:
        return tuple(s // self.blocks(self.spec[d]) if d < len(self.spec) else s
                     for d, s in enumerate(shape))

    def index(self, coords, shape) -> tuple:
        """The slices of the global array held by the member at mesh `coords`."""
        out = []
        for d, s in enumerate(shape):
            names = spec_names(self.spec[d]) if d < len(self.spec) else ()
            b = 0
            for n in names:
                i = self.mesh.axis_names.index(n)
                b = b * self.mesh.axis_sizes[i] + coords[i]
            k = s // self.blocks(self.spec[d]) if names else s
            out.append(slice(b * k, (b + 1) * k))
        return tuple(out)


class PmapSharding:
    """pmap's layout: member k's value is index k along `axis`, on `devices[k]`."""

    def __init__(self, devices, axis: int = 0):
        self.devices, self.axis = tuple(devices), axis

    def __repr__(self):
        return f"PmapSharding(devices={list(self.devices)}, axis={self.axis})"


class Shard:
    """One device's piece of a sharded array."""
    __slots__ = ("device", "index", "data")

    def __init__(self, device, index, data: Array):
        self.device, self.index, self.data = device, index, data

    def __repr__(self):
        return f"Shard(device={self.device}, index={self.index}, data={self.data.aval})"


def sharded(value: Array, shards: list, sharding) -> Array:
    """`value` (an Array) marked as laid out by `sharding` with these local shards."""
    value._sharded = (tuple(shards), sharding)
    return value
