"""mirax: an ML compiler and runtime for Python with JAX-shaped program transforms.

The public names of API.md, re-exported; no logic. The floors, each importing only the
ones before it: core (dtypes, trees, primitives, the interpreter context, arrays, config,
runtime) -> graph (Graph, listings, staging) -> interpreters (jvp, vjp tape, vmap) -> ops
(primitive families) -> transforms (grad, jit, vmap, ...) -> compiler (the pass pipeline)
-> backends (cpu, cuda) -> the public faces (ir, numpy, lax, nn, scipy, random, optim,
io, autograd, testing). Importing the compiler and the backends registers them with the
runtime.
"""
from mirax import ops  # noqa: F401  (registers every primitive)
from mirax import compiler, backends  # noqa: F401  (register the pipeline and the backends)
from mirax import distributed  # noqa: F401  (registers the SPMD runner)
from mirax.core import config, errors, tree  # noqa: F401
from mirax.core.array import AnyArray as Array  # noqa: F401  (tracers are Arrays too)
from mirax.core.dtypes import (  # noqa: F401
    bfloat16, bool_, complex64, complex128, float16, float32, float64, int8, int16, int32,
    int64, uint8)
from mirax.core.runtime import default_device  # noqa: F401
from mirax.distributed import (  # noqa: F401
    device_count, devices, local_device_count, local_devices, process_count, process_index)
from mirax.graph.build import make_graph  # noqa: F401
from mirax.ops.creation import asarray, from_dlpack  # noqa: F401
from mirax.ops.dot import default_matmul_precision  # noqa: F401
from mirax.ops.elementwise import stop_gradient  # noqa: F401
from mirax.ops.transfer import device_put  # noqa: F401
from mirax.transforms.checkpoint import checkpoint, remat  # noqa: F401
from mirax.transforms.custom import custom_jvp, custom_vjp  # noqa: F401
from mirax.transforms.derived import hessian, hvp, jacfwd, jacrev  # noqa: F401
from mirax.transforms.derived import jacrev as jacobian  # noqa: F401  (JAX's alias)
from mirax.transforms.jaxpr import make_jaxpr  # noqa: F401
from mirax.transforms.jit import jit  # noqa: F401
from mirax.transforms.jvp import jvp, linearize  # noqa: F401
from mirax.transforms.shape_eval import (  # noqa: F401
    ShapeDtypeStruct, block_until_ready, ensure_compile_time_eval, eval_shape, named_call)
from mirax.transforms.vjp import grad, value_and_grad, vjp  # noqa: F401
from mirax.transforms.vmap import vmap  # noqa: F401
from mirax.transforms.pmap import pmap  # noqa: F401
from mirax.transforms.shard_map import shard_map  # noqa: F401
from mirax import ir  # noqa: F401
from mirax import autograd, testing  # noqa: F401
from mirax import numpy  # noqa: F401
from mirax import lax  # noqa: F401
from mirax import nn, scipy  # noqa: F401
from mirax import io, optim, random  # noqa: F401
from mirax.io import to_dlpack  # noqa: F401
from mirax import debug, profiler, tree_util  # noqa: F401
from mirax import sharding  # noqa: F401
from mirax.sharding import device_get  # noqa: F401
from mirax.numpy import methods as _methods
from mirax.core.errors import name_public_functions as _name_public

_name_public(globals(), ["asarray", "block_until_ready", "checkpoint", "device_put",
                         "eval_shape", "from_dlpack", "grad", "hessian", "hvp", "jacfwd",
                         "jacobian", "jacrev", "jit", "jvp", "linearize", "make_graph",
                         "named_call", "remat", "stop_gradient", "to_dlpack", "value_and_grad",
                         "vjp", "vmap", "pmap", "shard_map", "device_get"])
del _name_public

_methods.install()
del _methods
