"""mirax.numpy: a NumPy-compatible namespace written on mirax ops (results are mx.Array)."""
from mirax.core.dtypes import finfo, iinfo, promote_types  # noqa: F401
from mirax.numpy._scalar_types import (  # noqa: F401
    bfloat16, bool_, float16, float32, float64, int8, int16, int32, int64, uint8, uint16,
    uint32, uint64)
from mirax.numpy._core import *  # noqa: F401,F403
from mirax.numpy._core import all, any, max, min, sum  # noqa: F401
from mirax.numpy._math import *  # noqa: F401,F403
from mirax.numpy._math import abs, e, inf, nan, pi, round  # noqa: F401
from mirax.numpy._shape_extra import *  # noqa: F401,F403
from mirax.numpy._einsum import einsum, einsum_path  # noqa: F401
from mirax.numpy._sorting import *  # noqa: F401,F403
from mirax.numpy import linalg  # noqa: F401
from mirax.numpy._indexing import *  # noqa: F401,F403
from mirax.numpy._indexing import (  # noqa: F401
    argwhere, compress, diag, diagonal, flatnonzero, nonzero, put_along_axis, take,
    take_along_axis, trace, tril, triu)
from mirax.numpy._extra import *  # noqa: F401,F403
from mirax.core.array import AnyArray as ndarray  # noqa: F401
from mirax.numpy._sets import *  # noqa: F401,F403
from mirax.numpy._stats import *  # noqa: F401,F403
from mirax.numpy._select import *  # noqa: F401,F403
from mirax.numpy._poly import *  # noqa: F401,F403

# lax.reduce / reduce_window recognise these as monoids (lax sits a floor below numpy)
from mirax.lax._windows import MONOIDS as _MONOIDS  # noqa: E402

_MONOIDS.update({add: "add", multiply: "mul", maximum: "max", minimum: "min"})  # noqa: F405
del _MONOIDS
