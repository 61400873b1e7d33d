"""`mx.sharding`: Mesh, PartitionSpec (P), NamedSharding, PmapSharding; `device_put(x,
sharding)` lays an array out over a mesh (mx.device_put takes a sharding too), and
`device_get(x)` brings arrays (sharded or not) to the host as NumPy arrays.

The classes live in core/sharding.py (array metadata); this is their public face."""
from mirax.core import tree
from mirax.core.sharding import (  # noqa: F401
    Mesh, NamedSharding, P, PartitionSpec, PmapSharding, Shard)
from mirax.ops.transfer import device_put  # noqa: F401

import numpy as np


def device_get(x):
    """Arrays of a pytree (sharded ones gathered) as NumPy arrays; other leaves as they are."""
    return tree.map(lambda a: np.asarray(a) if hasattr(a, "__array__") else a, x)
