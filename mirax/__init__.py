"""mirax: an ML compiler and runtime for Python with JAX-shaped program transforms."""
from mirax import ops  # noqa: F401  (registers every primitive)
from mirax.backends import default_device, devices  # noqa: F401
from mirax.core import tree  # noqa: F401
from mirax.core.array import Array  # noqa: F401
from mirax.core.dtypes import (  # noqa: F401
    bfloat16, bool_, float16, float32, float64, int8, int16, int32, int64, uint8)
from mirax.core import config, errors  # noqa: F401
from mirax.ir.build import make_graph  # noqa: F401
from mirax.ops.creation import asarray, from_dlpack  # noqa: F401
from mirax.ops.transfer import device_put  # noqa: F401
from mirax.transforms.derived import hessian, hvp, jacfwd, jacrev  # noqa: F401
from mirax.transforms.jit import jit  # noqa: F401
from mirax.transforms.jvp import jvp, linearize  # noqa: F401
from mirax.transforms.vjp import grad, value_and_grad, vjp  # noqa: F401
from mirax.transforms.vmap import vmap  # noqa: F401
from mirax.transforms.checkpoint import checkpoint, remat  # noqa: F401
from mirax.transforms.custom import custom_jvp, custom_vjp, stop_gradient  # noqa: F401
from mirax import ir  # noqa: F401
from mirax import autograd, testing  # noqa: F401
from mirax import numpy  # noqa: F401
from mirax import lax  # noqa: F401
from mirax import nn, scipy  # noqa: F401
from mirax import io, optim, random  # noqa: F401
from mirax.io import to_dlpack  # noqa: F401
from mirax.transforms.shape_eval import (  # noqa: F401
    ShapeDtypeStruct, block_until_ready, ensure_compile_time_eval, eval_shape, named_call)
from mirax import debug, profiler, tree_util  # noqa: F401
from mirax.numpy import methods as _methods

_methods.install()
del _methods
