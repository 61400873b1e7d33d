"""CUDA row kernels: softmax, log_softmax, layer_norm, rms_norm and softmax_cross_entropy
(its forward and backward) over the last axis, generated per (op, dtype, row length) on
codegen.py's helpers.

One block per row, the row held in registers (ITEMS values per thread), block reductions
by warp shuffles; one read and one write of the data. 16-bit floats are computed in
float32 and rounded once on store. runtime.row_impl calls `row_kernel`.
"""
from __future__ import annotations

import cupy as cp
import numpy as np

from mirax.backends.cuda.codegen import (LOW, Unsupported, compiled, ctype, load, math_fn,
                                         prelude, storage, store)
from mirax.core import dtypes

_ROW_COMMON = r"""
#define BLOCK {block}
#define ITEMS {items}
#define D {d}
typedef {t} T;  // computed in
typedef {s} S;  // stored as
typedef {l} L;  // labels (softmax_cross_entropy)
#define LD(v) {ld}
#define ST(v) {st}
#define NEG_INF (-(T)__int_as_float(0x7f800000))
#define EXP {exp}
#define LOG {log}
#define SQRT {sqrt}
#define FMAX {fmax}
// block reductions (sum, max) of one value a thread: warp shuffles, then the warps'
// results in shared memory sh[32]; every thread gets the result
struct Sum {{
  static __device__ __forceinline__ T op(T a, T b) {{ return a + b; }}
  static __device__ __forceinline__ T id() {{ return (T)0; }}
}};
struct Max {{
  static __device__ __forceinline__ T op(T a, T b) {{ return FMAX(a, b); }}
  static __device__ __forceinline__ T id() {{ return NEG_INF; }}
}};
template <class R>
__device__ __forceinline__ T warp_reduce(T v) {{
  for (int o = 16; o > 0; o >>= 1) v = R::op(v, __shfl_xor_sync(0xffffffff, v, o));
  return v;
}}
template <class R>
__device__ T block_reduce(T v, T* sh) {{
  v = warp_reduce<R>(v);
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  if (lane == 0) sh[w] = v;
  __syncthreads();
  v = threadIdx.x < (BLOCK >> 5) ? sh[threadIdx.x] : R::id();
  if (w == 0) v = warp_reduce<R>(v);
  if (threadIdx.x == 0) sh[0] = v;
  __syncthreads();
  T r = sh[0];
  __syncthreads();
  return r;
}}
__device__ __forceinline__ T block_sum(T v, T* sh) {{ return block_reduce<Sum>(v, sh); }}
__device__ __forceinline__ T block_max(T v, T* sh) {{ return block_reduce<Max>(v, sh); }}
"""

# The row bodies share their opening (the row's values in registers), the max pass of the
# softmax pair and the scaled store of the norm pair; each op adds its own passes.
_ROW_OPEN = r"""
  __shared__ T sh[32];
  const size_t base = (size_t)blockIdx.x * D;
  T v[ITEMS];
"""
_ROW_MAX = _ROW_OPEN + r"""  T m = NEG_INF;
  #pragma unroll
  for (int i = 0; i < ITEMS; i++) {{
    const int j = threadIdx.x + i * BLOCK;
    v[i] = j < D ? LD(x[base + j]) : NEG_INF;
    m = FMAX(m, v[i]);
  }}
  m = block_max(m, sh);
  if (!isfinite(m)) m = 0;
  T s = 0;
  #pragma unroll
  for (int i = 0; i < ITEMS; i++) {{
    const int j = threadIdx.x + i * BLOCK;
"""


def _norm_store(bias: bool) -> str:
    return r"""  #pragma unroll
  for (int i = 0; i < ITEMS; i++) {{
    const int j = threadIdx.x + i * BLOCK;
    if (j < D) {{
      T r = v[i] * inv;
      if (HAS_W) r = r * LD(w[j]);
""" + ("      if (HAS_B) r = r + LD(b[j]);\n" if bias else "") + r"""      y[base + j] = ST(r);
    }}
  }}
}}
"""


_ROW_BODY = {
    "softmax": r"""
extern "C" __global__ void mirax_softmax(const S* __restrict__ x, S* __restrict__ y) {{"""
    + _ROW_MAX + r"""    v[i] = j < D ? EXP(v[i] - m) : (T)0;
    s += v[i];
  }}
  s = block_sum(s, sh);
  #pragma unroll
  for (int i = 0; i < ITEMS; i++) {{
    const int j = threadIdx.x + i * BLOCK;
    if (j < D) y[base + j] = ST(v[i] / s);
  }}
}}
""",
    "log_softmax": r"""
extern "C" __global__ void mirax_log_softmax(const S* __restrict__ x, S* __restrict__ y) {{"""
    + _ROW_MAX + r"""    v[i] = v[i] - m;
    s += j < D ? EXP(v[i]) : (T)0;
  }}
  const T ls = LOG(block_sum(s, sh));
  #pragma unroll
  for (int i = 0; i < ITEMS; i++) {{
    const int j = threadIdx.x + i * BLOCK;
    if (j < D) y[base + j] = ST(v[i] - ls);
  }}
}}
""",
    # a row's loss: its logsumexp minus its label's logit (NaN for a label outside the row,
    # as the reference); the backward: (softmax - one_hot(label)) times the row's cotangent
    "softmax_cross_entropy": r"""
extern "C" __global__ void mirax_softmax_cross_entropy(const S* __restrict__ x,
                                                       const L* __restrict__ labels,
                                                       S* __restrict__ loss) {{"""
    + _ROW_MAX + r"""    v[i] = v[i] - m;
    s += j < D ? EXP(v[i]) : (T)0;
  }}
  const T ls = LOG(block_sum(s, sh));
  if (threadIdx.x == 0) {{
    const long long c = (long long)labels[blockIdx.x];
    loss[blockIdx.x] = ST(c >= 0 && c < D ? ls - (LD(x[base + c]) - m) : (T)nan(""));
  }}
}}
""",
    "softmax_cross_entropy_bwd": r"""
extern "C" __global__ void mirax_softmax_cross_entropy_bwd(const S* __restrict__ ct,
                                                           const S* __restrict__ x,
                                                           const L* __restrict__ labels,
                                                           S* __restrict__ dx) {{"""
    + _ROW_MAX + r"""    v[i] = j < D ? EXP(v[i] - m) : (T)0;
    s += v[i];
  }}
  s = block_sum(s, sh);
  const T g = LD(ct[blockIdx.x]) / s;
  const long long c = (long long)labels[blockIdx.x];
  #pragma unroll
  for (int i = 0; i < ITEMS; i++) {{
    const int j = threadIdx.x + i * BLOCK;
    if (j < D) dx[base + j] = ST(v[i] * g - (j == c ? LD(ct[blockIdx.x]) : (T)0));
  }}
}}
""",
    "layer_norm": r"""
extern "C" __global__ void mirax_layer_norm(const S* __restrict__ x, const S* __restrict__ w,
                                            const S* __restrict__ b, S* __restrict__ y, T eps) {{"""
    + _ROW_OPEN + r"""  T s = 0;
  #pragma unroll
  for (int i = 0; i < ITEMS; i++) {{
    const int j = threadIdx.x + i * BLOCK;
    v[i] = j < D ? LD(x[base + j]) : (T)0;
    s += v[i];
  }}
  const T mean = block_sum(s, sh) / D;
  T q = 0;
  #pragma unroll
  for (int i = 0; i < ITEMS; i++) {{
    const int j = threadIdx.x + i * BLOCK;
    v[i] = v[i] - mean;
    q += j < D ? v[i] * v[i] : (T)0;
  }}
  const T inv = (T)1 / SQRT(block_sum(q, sh) / D + eps);
""" + _norm_store(True),
    "rms_norm": r"""
extern "C" __global__ void mirax_rms_norm(const S* __restrict__ x, const S* __restrict__ w,
                                          S* __restrict__ y, T eps) {{"""
    + _ROW_OPEN + r"""  T q = 0;
  #pragma unroll
  for (int i = 0; i < ITEMS; i++) {{
    const int j = threadIdx.x + i * BLOCK;
    v[i] = j < D ? LD(x[base + j]) : (T)0;
    q += v[i] * v[i];
  }}
  const T inv = (T)1 / SQRT(block_sum(q, sh) / D + eps);
""" + _norm_store(False),
}

MAX_ITEMS = 32


def row_geometry(d: int) -> tuple[int, int]:
    """(threads per block, values per thread) for rows of length d."""
    block = 32
    while block < 1024 and block * 8 < d:
        block *= 2
    return block, -(-d // block)


_LABELS = {np.dtype(t): c for t, c in ((np.int8, "signed char"), (np.int16, "short"),
                                         (np.int32, "int"), (np.int64, "long long"),
                                         (np.uint8, "unsigned char"),
                                         (np.uint16, "unsigned short"))}


def row_kernel(op: str, dtype, d: int, has_w=False, has_b=False, label_dtype=np.int32):
    """The compiled row kernel for `op` on rows of `d` values, or Unsupported. 16-bit
    floats are computed in float32 and rounded once on store."""
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)) and dtype not in LOW:
        raise Unsupported(f"{op} row kernel on {dtypes.short_name(dtype)}")
    if np.dtype(label_dtype) not in _LABELS:
        raise Unsupported(f"{op} with {dtypes.short_name(label_dtype)} labels")
    block, items = row_geometry(d)
    if d == 0 or items > MAX_ITEMS:
        raise Unsupported(f"{op} row of {d}")
    t = ctype(dtype)
    src = (f"#define HAS_W {int(has_w)}\n#define HAS_B {int(has_b)}\n"
           + _ROW_COMMON.format(block=block, items=items, d=d, t=t,
                                l=_LABELS[np.dtype(label_dtype)],
                                **{f: math_fn(t, f) for f in ("exp", "log", "sqrt", "fmax")},
                                s=storage(dtype), ld=load(dtype, "(v)"), st=store(dtype, "(v)"))
           + _ROW_BODY[op].format())
    src = prelude(src) + src
    kern = compiled("row kernel", src, lambda: cp.RawKernel(src, f"mirax_{op}"), op)
    return kern, block
