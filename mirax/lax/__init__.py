"""`mx.lax`: the primitive ops and control flow, JAX's lax namespace.

Re-exports of the mirax.ops families, plus compositions written on top of them (_extra,
_windows, _special, _control)."""
from mirax.ops.control_flow import cond, switch  # noqa: F401
from mirax.ops.loops import fori_loop, while_loop  # noqa: F401
from mirax.ops.scan import scan  # noqa: F401
from mirax.lax._control import map  # noqa: F401
from mirax.ops.dot import dot_general  # noqa: F401
from mirax.ops.elementwise import (  # noqa: F401
    abs, acos, acosh, add, asin, asinh, atan, atan2, atanh, cbrt, ceil, complex, conj,
    convert_element_type, cos, cosh, digamma, div, eq, erf, erf_inv, erfc, exp, expm1, floor,
    ge, gt, imag, is_finite, le, lgamma, log, log1p, logistic, lt, max, min, mul, ne, neg,
    nextafter, pow, real, reciprocal, rem, RoundingMethod, rsqrt, select, sign, sin, sinh, sqrt,
    sub, tan, tanh)
from mirax.ops.elementwise import lax_round as round  # noqa: F401  (ties away from zero)
from mirax.ops.reduction import (  # noqa: F401
    argmax, argmin, reduce_max, reduce_min, reduce_prod, reduce_sum)
from mirax.ops.shape import (  # noqa: F401
    broadcast_in_dim, concatenate, expand_dims, full, iota, pad, reshape, rev, slice,
    slice_in_dim, squeeze, transpose)
from mirax.ops.indexing import (  # noqa: F401
    dynamic_slice, dynamic_slice_in_dim, dynamic_update_slice, dynamic_update_slice_in_dim,
    gather, scatter_add)
from mirax.ops.elementwise import stop_gradient  # noqa: F401
from mirax.ops.conv import conv_general_dilated  # noqa: F401
from mirax.ops.fft import FftType, fft  # noqa: F401
from mirax.ops.collective import (  # noqa: F401
    all_gather, all_to_all, axis_index, pmax, pmean, pmin, ppermute, psum, psum_scatter)
from mirax.lax._extra import *  # noqa: F401,F403,E402  (compositions: cumlogsumexp, top_k, ...)
from mirax.lax._shapes import *  # noqa: F401,F403,E402  (conv / window shape arithmetic)

from mirax.core.errors import name_public_functions as _name_public  # noqa: E402

_name_public(globals(), [_n for _n in dir() if not _n.startswith("_")])  # errors name the op
