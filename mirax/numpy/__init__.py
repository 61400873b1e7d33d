"""mirax.numpy: a NumPy-compatible namespace written on mirax ops (results are mx.Array)."""
from mirax.core.dtypes import (  # noqa: F401
    bfloat16, bool_, complex64, complex128, float16, float32, float64, int8, int16, int32,
    int64, uint8, uint16, uint32, uint64, finfo, iinfo, promote_types)
from mirax.numpy._core import *  # noqa: F401,F403
from mirax.numpy._core import all, any, max, min, sum  # noqa: F401
from mirax.numpy._math import *  # noqa: F401,F403
from mirax.numpy._math import abs, e, inf, nan, pi, round  # noqa: F401
from mirax.numpy._shape_extra import *  # noqa: F401,F403
from mirax.numpy._einsum import einsum, einsum_path  # noqa: F401
from mirax.numpy._sorting import *  # noqa: F401,F403
from mirax.numpy import linalg  # noqa: F401
from mirax.numpy import fft  # noqa: F401
from mirax.numpy._indexing import *  # noqa: F401,F403
from mirax.numpy._indexing import (  # noqa: F401
    argwhere, compress, diag, diagonal, flatnonzero, nonzero, put_along_axis, take,
    take_along_axis, trace, tril, triu)
from mirax.numpy._extra import *  # noqa: F401,F403
from mirax.core.array import Array as ndarray  # noqa: F401
from mirax.numpy._sets import *  # noqa: F401,F403
from mirax.numpy._stats import *  # noqa: F401,F403
from mirax.numpy._select import *  # noqa: F401,F403
from mirax.numpy._poly import *  # noqa: F401,F403
from mirax.numpy._complex import *  # noqa: F401,F403
