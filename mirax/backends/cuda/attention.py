"""Fused attention on CUDA: tiled online-softmax kernels (flash-attention style) for the
`dot_product_attention` composite and its backward composite `dot_product_attention_bwd`.

Where it sits: the CUDA backend (`__init__.py`) claims both primitives with `impl` below;
runtime.KEEP leaves them whole under jit. The kernels are CUDA C compiled by NVRTC
(cupy.RawModule), one module per (dtype, head dims, options), cached in memory.

Layout: q [B,T,H,D], k [B,S,H,D], v [B,S,H,Dv] as the composite takes them (contiguous;
no transposes). `mask` (bool, True = attend) and `bias` come 4-d and broadcast to the
scores [B,H,T,S]: the kernels read them through strides (0 on broadcast axes). Values are
loaded as float32 and every sum accumulates in float32 (f16/bf16 round on store).

Forward (`mx_attn_fwd`): one block of 128 threads per (query tile, head, batch); TPR
threads share one query row (each holds D/TPR of q and of the output accumulator, dot
products reduced by warp shuffles); K/V tiles of BK keys go through shared memory as
float4; per tile the row's scores are computed, then one rescale of the running
(max, sum, accumulator). Tiles that causal / sliding-window masking excludes entirely
are skipped. A fully masked row has sum 0: output 0, row logsumexp +inf.

Backward: the forward's outputs hold no logsumexp, so it is recomputed by the same
kernel in stats mode (no V); delta = rowsum(dO * O) in CuPy; then `mx_attn_dq` (one
block per query tile, loop over key tiles) and `mx_attn_dkdv` (one block per key tile,
loop over query tiles) recompute p = exp(s - lse) and write dq, dk, dv without atomics.
With a bias, `mx_attn_dkdv` also writes ds (float32 [B,H,T,S]), summed over the bias's
broadcast axes by CuPy. The +inf logsumexp of an empty row makes its p exactly 0, so
its gradients are 0 and finite.

Not covered (these run the composite's body compiled for CUDA, counted as "decomposed"
in the dispatch report and by reason in `fallbacks`): float64, head dims over 128
(shared memory), and dims whose per-thread share would exceed 32 registers.

Speed (H200, q/k/v [8, 1024, 16, 64], causal; benchmarks/gpu.py): forward 1.15 ms in
float32 and in bf16 (torch SDPA 0.64 / 0.08 ms); forward + backward 11.9 ms float32,
5.6 ms bf16 (torch 2.2 / 0.61 ms). All arithmetic is on CUDA cores (no tensor cores) and
the backward dominates; 4 threads per row (MIRAX_CUDA_ATTN_TPR=4) measured slower. Not
yet profiled per kernel: why the float32 backward takes 2.4x the bf16 one (suspects: the
CuPy row sum for delta, which could move into mx_attn_dq; dk/dv's 246 registers).
"""
from __future__ import annotations

import os
from collections import Counter

import cupy as cp
import numpy as np

from mirax.core import dtypes

NT = 128   # threads per block
BK = 32    # keys per shared-memory tile (forward, dq)
BQ = 32    # queries per shared-memory tile (dk/dv)
MAX_D = 128
_INF_CLAMP = 1 << 30

fallbacks: Counter = Counter()  # reason -> calls that ran the body instead of a kernel
_modules: dict = {}

_DTYPE_CODE = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, dtypes.bfloat16: 2}

_SOURCE = r"""
#define D {d}
#define DV {dv}
#define TPR {tpr}
#define NT {nt}
#define R (NT / TPR)
#define BK {bk}
#define BQ {bq}
#define KC 8
#define C4 (D / (4 * TPR))
#define CV4 (DV / (4 * TPR))
#define DTYPE {dtype}
#define INF __int_as_float(0x7f800000)

#if DTYPE == 0
typedef float T;
__device__ __forceinline__ float4 ld4(const T* p, long long i) {{
  return *reinterpret_cast<const float4*>(p + i);
}}
__device__ __forceinline__ void st1(T* p, long long i, float v) {{ p[i] = v; }}
#else
typedef unsigned short T;
__device__ __forceinline__ float h2f(unsigned short h) {{
#if DTYPE == 1
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
#else
  return __uint_as_float(((unsigned int)h) << 16);
#endif
}}
__device__ __forceinline__ float4 ld4(const T* p, long long i) {{
  const uint2 u = *reinterpret_cast<const uint2*>(p + i);
  return make_float4(h2f((unsigned short)(u.x & 0xffff)), h2f((unsigned short)(u.x >> 16)),
                     h2f((unsigned short)(u.y & 0xffff)), h2f((unsigned short)(u.y >> 16)));
}}
__device__ __forceinline__ void st1(T* p, long long i, float v) {{
  unsigned short h;
#if DTYPE == 1
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
#else
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
#endif
  p[i] = h;
}}
#endif

__device__ __forceinline__ float dot4(float4 a, float4 b) {{
  return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}}
__device__ __forceinline__ float group_sum(float v) {{
#pragma unroll
  for (int o = TPR / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}}

struct Extra {{  // flags: 1 causal, 2 sliding window (wl, wr), 4 mask, 8 bias
  const unsigned char* mask;
  const float* bias;
  long long ms0, ms1, ms2, ms3, bs0, bs1, bs2, bs3;
  int wl, wr, flags;
}};
// The kernels take the Extra fields as separate parameters (plain scalars and pointers).
#define EXTRA_PARAMS const unsigned char* mask, const float* bias, long long ms0, \
  long long ms1, long long ms2, long long ms3, long long bs0, long long bs1, long long bs2, \
  long long bs3, int wl, int wr, int flags
#define EXTRA_INIT const Extra e = {{mask, bias, ms0, ms1, ms2, ms3, bs0, bs1, bs2, bs3, wl, wr, \
  flags}}

// Does query t attend key s (both in range)? Adds the bias to `sc` when it does.
__device__ __forceinline__ bool attend(const Extra& e, int b, int h, int t, int s, float& sc) {{
  bool ok = true;
  if (e.flags & 1) ok = s <= t;
  if (e.flags & 2) ok = ok && (t - s <= e.wl) && (s - t <= e.wr);
  if (e.flags & 4) ok = ok && e.mask[b * e.ms0 + h * e.ms1 + t * e.ms2 + s * e.ms3] != 0;
  if ((e.flags & 8) && ok) sc += e.bias[b * e.bs0 + h * e.bs1 + t * e.bs2 + s * e.bs3];
  return ok;
}}

// Key range [lo, hi) that queries [q0, q0 + n) may attend.
__device__ __forceinline__ void key_range(const Extra& e, int q0, int n, int S, int& lo,
                                          int& hi) {{
  lo = 0; hi = S;
  if (e.flags & 1) hi = min(hi, q0 + n);
  if (e.flags & 2) {{
    lo = max(lo, q0 - e.wl);
    hi = min(hi, q0 + n + e.wr);
  }}
  lo = max(lo, 0) / BK * BK;
}}

template <bool STATS>
__device__ __forceinline__ void attn_fwd(const T* __restrict__ q, const T* __restrict__ k,
                                         const T* __restrict__ v, T* __restrict__ o,
                                         float* __restrict__ lse, Extra e, int Tq, int S,
                                         int H, float scale) {{
  __shared__ float4 Ks[BK][D / 4];
  __shared__ float4 Vs[STATS ? 1 : BK][DV / 4];
  const int tid = threadIdx.x, row = tid / TPR, part = tid % TPR;
  const int b = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * R;
  const int t = q0 + row;
  const bool rowok = t < Tq;
  const int tc = rowok ? t : Tq - 1;
  float4 qr[C4];
  const long long qb = (((long long)b * Tq + tc) * H + h) * D;
#pragma unroll
  for (int c = 0; c < C4; c++) {{
    float4 x = ld4(q, qb + (c * TPR + part) * 4);
    qr[c] = make_float4(x.x * scale, x.y * scale, x.z * scale, x.w * scale);
  }}
  float m = -INF, l = 0.f;
  float4 acc[STATS ? 1 : CV4];
#pragma unroll
  for (int c = 0; c < (STATS ? 1 : CV4); c++) acc[c] = make_float4(0.f, 0.f, 0.f, 0.f);
  int lo, hi;
  key_range(e, q0, R, S, lo, hi);
  const long long kb = (long long)b * S * H + h;  // row s of k: (kb + s * H) * D
  for (int k0 = lo; k0 < hi; k0 += BK) {{
    __syncthreads();
    for (int i = tid; i < BK * (D / 4); i += NT) {{
      const int j = i / (D / 4), d4 = i % (D / 4), s = k0 + j;
      Ks[j][d4] = s < S ? ld4(k, (kb + (long long)s * H) * D + d4 * 4)
                        : make_float4(0.f, 0.f, 0.f, 0.f);
    }}
    if (!STATS) {{
      for (int i = tid; i < BK * (DV / 4); i += NT) {{
        const int j = i / (DV / 4), d4 = i % (DV / 4), s = k0 + j;
        Vs[j][d4] = s < S ? ld4(v, (kb + (long long)s * H) * DV + d4 * 4)
                          : make_float4(0.f, 0.f, 0.f, 0.f);
      }}
    }}
    __syncthreads();
#pragma unroll 1
    for (int j0 = 0; j0 < BK; j0 += KC) {{  // chunks of KC keys: one rescale per chunk
      float sc[KC];
      float mt = -INF;
#pragma unroll
      for (int jj = 0; jj < KC; jj++) {{
        const int j = j0 + jj;
        float p = 0.f;
#pragma unroll
        for (int c = 0; c < C4; c++) p += dot4(qr[c], Ks[j][c * TPR + part]);
        p = group_sum(p);
        const int s = k0 + j;
        const bool ok = s < S && attend(e, b, h, tc, s, p);
        sc[jj] = ok ? p : -INF;
        mt = fmaxf(mt, sc[jj]);
      }}
      const float mn = fmaxf(m, mt);
      if (mn != -INF) {{
        const float alpha = expf(m - mn);
        l *= alpha;
        if (!STATS) {{
#pragma unroll
          for (int c = 0; c < CV4; c++) {{
            acc[c].x *= alpha; acc[c].y *= alpha; acc[c].z *= alpha; acc[c].w *= alpha;
          }}
        }}
#pragma unroll
        for (int jj = 0; jj < KC; jj++) {{
          const float pj = expf(sc[jj] - mn);
          l += pj;
          if (!STATS) {{
#pragma unroll
            for (int c = 0; c < CV4; c++) {{
              const float4 vv = Vs[j0 + jj][c * TPR + part];
              acc[c].x += pj * vv.x; acc[c].y += pj * vv.y;
              acc[c].z += pj * vv.z; acc[c].w += pj * vv.w;
            }}
          }}
        }}
        m = mn;
      }}
    }}
  }}
  if (!rowok) return;
  if (!STATS) {{
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const long long ob = (((long long)b * Tq + t) * H + h) * DV;
#pragma unroll
    for (int c = 0; c < CV4; c++) {{
      const long long i = ob + (c * TPR + part) * 4;
      st1(o, i, acc[c].x * inv); st1(o, i + 1, acc[c].y * inv);
      st1(o, i + 2, acc[c].z * inv); st1(o, i + 3, acc[c].w * inv);
    }}
  }}
  if (lse != nullptr && part == 0)
    lse[((long long)b * H + h) * Tq + t] = l > 0.f ? m + logf(l) : INF;
}}

extern "C" __global__ void __launch_bounds__(NT)
mx_attn_fwd(const T* q, const T* k, const T* v, T* o, float* lse, EXTRA_PARAMS, int Tq,
            int S, int H, float scale) {{
  EXTRA_INIT;
  attn_fwd<false>(q, k, v, o, lse, e, Tq, S, H, scale);
}}

extern "C" __global__ void __launch_bounds__(NT)
mx_attn_stats(const T* q, const T* k, float* lse, EXTRA_PARAMS, int Tq, int S, int H,
              float scale) {{
  EXTRA_INIT;
  attn_fwd<true>(q, k, k, nullptr, lse, e, Tq, S, H, scale);
}}

// dq = scale * sum_s ds[t, s] k[s], ds = p * (dp - delta), p = exp(s - lse), dp = dO . v
extern "C" __global__ void __launch_bounds__(NT)
mx_attn_dq(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
           const T* __restrict__ dout, const float* __restrict__ lse,
           const float* __restrict__ delta, T* __restrict__ dq, EXTRA_PARAMS, int Tq, int S,
           int H, float scale) {{
  EXTRA_INIT;
  __shared__ float4 Ks[BK][D / 4];
  __shared__ float4 Vs[BK][DV / 4];
  const int tid = threadIdx.x, row = tid / TPR, part = tid % TPR;
  const int b = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * R;
  const int t = q0 + row;
  const bool rowok = t < Tq;
  const int tc = rowok ? t : Tq - 1;
  const long long qb = (((long long)b * Tq + tc) * H + h) * D;
  const long long ob = (((long long)b * Tq + tc) * H + h) * DV;
  float4 qr[C4], dqa[C4], dor[CV4];
#pragma unroll
  for (int c = 0; c < C4; c++) {{
    float4 x = ld4(q, qb + (c * TPR + part) * 4);
    qr[c] = make_float4(x.x * scale, x.y * scale, x.z * scale, x.w * scale);
    dqa[c] = make_float4(0.f, 0.f, 0.f, 0.f);
  }}
#pragma unroll
  for (int c = 0; c < CV4; c++) dor[c] = ld4(dout, ob + (c * TPR + part) * 4);
  const long long li = ((long long)b * H + h) * Tq + tc;
  const float lt = lse[li], dl = delta[li];
  int lo, hi;
  key_range(e, q0, R, S, lo, hi);
  const long long kb = (long long)b * S * H + h;
  for (int k0 = lo; k0 < hi; k0 += BK) {{
    __syncthreads();
    for (int i = tid; i < BK * (D / 4); i += NT) {{
      const int j = i / (D / 4), d4 = i % (D / 4), s = k0 + j;
      Ks[j][d4] = s < S ? ld4(k, (kb + (long long)s * H) * D + d4 * 4)
                        : make_float4(0.f, 0.f, 0.f, 0.f);
    }}
    for (int i = tid; i < BK * (DV / 4); i += NT) {{
      const int j = i / (DV / 4), d4 = i % (DV / 4), s = k0 + j;
      Vs[j][d4] = s < S ? ld4(v, (kb + (long long)s * H) * DV + d4 * 4)
                        : make_float4(0.f, 0.f, 0.f, 0.f);
    }}
    __syncthreads();
#pragma unroll 2
    for (int j = 0; j < BK; j++) {{
      float sc = 0.f, dp = 0.f;
#pragma unroll
      for (int c = 0; c < C4; c++) sc += dot4(qr[c], Ks[j][c * TPR + part]);
#pragma unroll
      for (int c = 0; c < CV4; c++) dp += dot4(dor[c], Vs[j][c * TPR + part]);
      sc = group_sum(sc);
      dp = group_sum(dp);
      const int s = k0 + j;
      const bool ok = s < S && attend(e, b, h, tc, s, sc);
      const float p = ok ? expf(sc - lt) : 0.f;
      const float ds = p * (dp - dl);
#pragma unroll
      for (int c = 0; c < C4; c++) {{
        const float4 kk = Ks[j][c * TPR + part];
        dqa[c].x += ds * kk.x; dqa[c].y += ds * kk.y;
        dqa[c].z += ds * kk.z; dqa[c].w += ds * kk.w;
      }}
    }}
  }}
  if (!rowok) return;
  const long long gb = (((long long)b * Tq + t) * H + h) * D;
#pragma unroll
  for (int c = 0; c < C4; c++) {{
    const long long i = gb + (c * TPR + part) * 4;
    st1(dq, i, dqa[c].x * scale); st1(dq, i + 1, dqa[c].y * scale);
    st1(dq, i + 2, dqa[c].z * scale); st1(dq, i + 3, dqa[c].w * scale);
  }}
}}

// dv = sum_t p[t, s] dO[t]; dk = scale * sum_t ds[t, s] q[t]; optionally ds itself (dbias).
extern "C" __global__ void __launch_bounds__(NT)
mx_attn_dkdv(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
             const T* __restrict__ dout, const float* __restrict__ lse,
             const float* __restrict__ delta, T* __restrict__ dk, T* __restrict__ dv,
             float* __restrict__ dbias, EXTRA_PARAMS, int Tq, int S, int H, float scale) {{
  EXTRA_INIT;
  __shared__ float4 Qs[BQ][D / 4];
  __shared__ float4 Os[BQ][DV / 4];
  __shared__ float Ls[BQ], Dl[BQ];
  const int tid = threadIdx.x, row = tid / TPR, part = tid % TPR;
  const int b = blockIdx.z, h = blockIdx.y, s0 = blockIdx.x * R;
  const int s = s0 + row;
  const bool rowok = s < S;
  const int sc_ = rowok ? s : S - 1;
  const long long kb = (((long long)b * S + sc_) * H + h);
  float4 kr[C4], vr[CV4], dka[C4], dva[CV4];
#pragma unroll
  for (int c = 0; c < C4; c++) {{
    float4 x = ld4(k, kb * D + (c * TPR + part) * 4);
    kr[c] = make_float4(x.x * scale, x.y * scale, x.z * scale, x.w * scale);
    dka[c] = make_float4(0.f, 0.f, 0.f, 0.f);
  }}
#pragma unroll
  for (int c = 0; c < CV4; c++) {{
    vr[c] = ld4(v, kb * DV + (c * TPR + part) * 4);
    dva[c] = make_float4(0.f, 0.f, 0.f, 0.f);
  }}
  // queries that keys [s0, s0 + R) may be attended by
  int lo = 0, hi = Tq;
  if (e.flags & 1) lo = max(lo, s0);
  if (e.flags & 2) {{
    lo = max(lo, s0 - e.wr);
    hi = min(hi, s0 + R + e.wl);
  }}
  lo = max(lo, 0) / BQ * BQ;
  const long long qrow = (long long)b * Tq * H + h;  // row t of q: (qrow + t * H) * D
  const long long lrow = ((long long)b * H + h) * Tq;
  for (int t0 = lo; t0 < hi; t0 += BQ) {{
    __syncthreads();
    for (int i = tid; i < BQ * (D / 4); i += NT) {{
      const int j = i / (D / 4), d4 = i % (D / 4), t = t0 + j;
      Qs[j][d4] = t < Tq ? ld4(q, (qrow + (long long)t * H) * D + d4 * 4)
                         : make_float4(0.f, 0.f, 0.f, 0.f);
    }}
    for (int i = tid; i < BQ * (DV / 4); i += NT) {{
      const int j = i / (DV / 4), d4 = i % (DV / 4), t = t0 + j;
      Os[j][d4] = t < Tq ? ld4(dout, (qrow + (long long)t * H) * DV + d4 * 4)
                         : make_float4(0.f, 0.f, 0.f, 0.f);
    }}
    for (int i = tid; i < BQ; i += NT) {{
      const int t = t0 + i;
      Ls[i] = t < Tq ? lse[lrow + t] : INF;
      Dl[i] = t < Tq ? delta[lrow + t] : 0.f;
    }}
    __syncthreads();
#pragma unroll 2
    for (int i = 0; i < BQ; i++) {{
      float sc = 0.f, dp = 0.f;
#pragma unroll
      for (int c = 0; c < C4; c++) sc += dot4(kr[c], Qs[i][c * TPR + part]);
#pragma unroll
      for (int c = 0; c < CV4; c++) dp += dot4(vr[c], Os[i][c * TPR + part]);
      sc = group_sum(sc);
      dp = group_sum(dp);
      const int t = t0 + i;
      const bool ok = t < Tq && attend(e, b, h, t, sc_, sc);
      const float p = ok ? expf(sc - Ls[i]) : 0.f;
      const float ds = p * (dp - Dl[i]);
#pragma unroll
      for (int c = 0; c < CV4; c++) {{
        const float4 g = Os[i][c * TPR + part];
        dva[c].x += p * g.x; dva[c].y += p * g.y; dva[c].z += p * g.z; dva[c].w += p * g.w;
      }}
#pragma unroll
      for (int c = 0; c < C4; c++) {{
        const float4 g = Qs[i][c * TPR + part];
        dka[c].x += ds * g.x; dka[c].y += ds * g.y; dka[c].z += ds * g.z; dka[c].w += ds * g.w;
      }}
      if (dbias != nullptr && ok && rowok && part == 0)
        dbias[(lrow + t) * S + s] = ds;
    }}
  }}
  if (!rowok) return;
#pragma unroll
  for (int c = 0; c < C4; c++) {{
    const long long i = kb * D + (c * TPR + part) * 4;
    st1(dk, i, dka[c].x * scale); st1(dk, i + 1, dka[c].y * scale);
    st1(dk, i + 2, dka[c].z * scale); st1(dk, i + 3, dka[c].w * scale);
  }}
#pragma unroll
  for (int c = 0; c < CV4; c++) {{
    const long long i = kb * DV + (c * TPR + part) * 4;
    st1(dv, i, dva[c].x); st1(dv, i + 1, dva[c].y);
    st1(dv, i + 2, dva[c].z); st1(dv, i + 3, dva[c].w);
  }}
}}
"""


# --- geometry and compilation ----------------------------------------------------------------
def _pad4(n: int) -> int:
    return -(-n // 4) * 4


def geometry(d: int, dv: int):
    """Threads per row (1, 2 or 4) for head dims padded to multiples of 4, or None: the
    smallest TPR whose per-thread share is at most 32 values and divides into float4s."""
    d, dv = _pad4(d), _pad4(dv)
    if max(d, dv) > MAX_D or min(d, dv) == 0:
        return None
    least = int(os.environ.get("MIRAX_CUDA_ATTN_TPR", "1"))  # benchmarks try 4 at d 64
    for tpr in (t for t in (1, 2, 4) if t >= least):
        if d % (4 * tpr) == 0 and dv % (4 * tpr) == 0 and max(d, dv) // tpr <= 32:
            return tpr
    return None


def source(dtype, d, dv, tpr) -> str:
    return _SOURCE.format(d=d, dv=dv, tpr=tpr, nt=NT, bk=BK, bq=BQ,
                          dtype=_DTYPE_CODE[np.dtype(dtype)])


def module(*key):
    mod = _modules.get(key)
    if mod is None:
        src = source(*key)
        from mirax.backends.cuda.codegen import _debug
        _debug("attention", "mx_attn", src)
        mod = _modules[key] = cp.RawModule(code=src, options=("-std=c++14",))
    return mod


def _bstrides(x):
    """Element strides of a contiguous 4-d array, 0 on axes of size 1 (broadcast)."""
    st = [s // x.itemsize for s in x.strides]
    return [0 if n == 1 else s for n, s in zip(x.shape, st)]


def _ptr(x) -> np.uint64:
    return np.uint64(0 if x is None else x.data.ptr)


def _contig(x):
    x = cp.ascontiguousarray(x)
    if x.data.ptr % 16:
        x = x.copy()
    return x


def _padded(x, n):
    """x [..., d] zero-padded to [..., n] (contiguous, 16-byte aligned)."""
    if x.shape[-1] == n:
        return _contig(x)
    out = cp.zeros(x.shape[:-1] + (n,), x.dtype)
    out[..., :x.shape[-1]] = x
    return out


class _Call:
    """The launch arguments shared by all kernels of one call."""

    def __init__(self, q, k, v, mask, bias, scale, is_causal, window, has_mask, has_bias):
        self.B, self.T, self.H, self.D0 = q.shape
        self.S, self.DV0 = k.shape[1], v.shape[3]
        self.D, self.DV = _pad4(self.D0), _pad4(self.DV0)
        self.dtype = q.dtype
        self.tpr = geometry(self.D0, self.DV0)
        self.q, self.k = _padded(q, self.D), _padded(k, self.D)
        self.v = _padded(v, self.DV)
        self.mask = None if mask is None else _contig(mask.astype(cp.bool_, copy=False))
        self.bias = None if bias is None else _contig(bias.astype(cp.float32, copy=False))
        self.scale = np.float32(scale)
        self.causal, self.window = bool(is_causal), window is not None
        ms = _bstrides(self.mask) if self.mask is not None else [0] * 4
        bs = _bstrides(self.bias) if self.bias is not None else [0] * 4
        wl = wr = 0
        if window is not None:
            lim = self.T + self.S + 1
            wl, wr = (max(-lim, min(lim, int(w))) for w in window)
        # the kernels' EXTRA_PARAMS
        flags = (1 * bool(is_causal) + 2 * (window is not None) + 4 * (mask is not None)
                 + 8 * (bias is not None))
        self.extra = (_ptr(self.mask), _ptr(self.bias), *map(np.int64, ms), *map(np.int64, bs),
                      np.int32(wl), np.int32(wr), np.int32(flags))
        self.mod = module(self.dtype, self.D, self.DV, self.tpr)
        self.rows = NT // self.tpr
        self.dims = (np.int32(self.T), np.int32(self.S), np.int32(self.H))

    def grid(self, n):
        return (-(-n // self.rows), self.H, self.B)

    def lse(self):
        lse = cp.empty((self.B, self.H, self.T), cp.float32)
        self.mod.get_function("mx_attn_stats")(
            self.grid(self.T), (NT,), (_ptr(self.q), _ptr(self.k), _ptr(lse), *self.extra,
                                       *self.dims, self.scale))
        return lse


def supported(q, k, v) -> str | None:
    """None when the kernels cover these operands, else the reason they do not."""
    if np.dtype(q.dtype) not in _DTYPE_CODE:
        return f"dtype {dtypes.short_name(q.dtype)}"
    if geometry(q.shape[3], v.shape[3]) is None:
        return f"head dims {q.shape[3]}, {v.shape[3]}"
    if q.shape[0] > 65535 or q.shape[2] > 65535:
        return "grid"
    return None


def forward(q, k, v, mask, bias, *, scale, is_causal, window):
    c = _Call(q, k, v, mask, bias, scale, is_causal, window, mask is not None,
              bias is not None)
    o = cp.empty((c.B, c.T, c.H, c.DV), c.dtype)
    if c.T and c.S:
        c.mod.get_function("mx_attn_fwd")(
            c.grid(c.T), (NT,), (_ptr(c.q), _ptr(c.k), _ptr(c.v), _ptr(o), np.uint64(0),
                                 *c.extra, *c.dims, c.scale))
    elif c.T:
        o[...] = 0
    return o if c.DV == c.DV0 else cp.ascontiguousarray(o[..., :c.DV0])


def backward(ct, out, q, k, v, mask, bias, *, scale, is_causal, window):
    """[dq, dk, dv, dbias or None]."""
    c = _Call(q, k, v, mask, bias, scale, is_causal, window, mask is not None,
              bias is not None)
    dq = cp.zeros((c.B, c.T, c.H, c.D), c.dtype)
    dk = cp.zeros((c.B, c.S, c.H, c.D), c.dtype)
    dv = cp.zeros((c.B, c.S, c.H, c.DV), c.dtype)
    dbias = None
    if bias is not None:
        dbias = cp.zeros((c.B, c.H, c.T, c.S), cp.float32)
    if c.T and c.S:
        do = _padded(ct.astype(c.dtype, copy=False), c.DV)
        delta = cp.sum(ct.astype(cp.float32) * out.astype(cp.float32), axis=-1)  # [B,T,H]
        delta = cp.ascontiguousarray(delta.transpose(0, 2, 1))                    # [B,H,T]
        lse = c.lse()
        common = (_ptr(c.q), _ptr(c.k), _ptr(c.v), _ptr(do), _ptr(lse), _ptr(delta))
        c.mod.get_function("mx_attn_dq")(
            c.grid(c.T), (NT,), (*common, _ptr(dq), *c.extra, *c.dims, c.scale))
        c.mod.get_function("mx_attn_dkdv")(
            c.grid(c.S), (NT,), (*common, _ptr(dk), _ptr(dv), _ptr(dbias), *c.extra, *c.dims,
                                 c.scale))
    if c.D != c.D0:
        dq, dk = (cp.ascontiguousarray(g[..., :c.D0]) for g in (dq, dk))
    if c.DV != c.DV0:
        dv = cp.ascontiguousarray(dv[..., :c.DV0])
    if dbias is not None:
        axes = tuple(i for i, n in enumerate(bias.shape) if n == 1)
        dbias = (dbias.sum(axis=axes, keepdims=True) if axes else dbias).astype(c.dtype)
    return [dq, dk, dv, dbias]


# --- the backend's impls ------------------------------------------------------------------------
def _split(args, has_mask, has_bias):
    q, k, v, rest = args[0], args[1], args[2], list(args[3:])
    mask = rest.pop(0) if has_mask else None
    bias = rest.pop(0) if has_bias else None
    return q, k, v, mask, bias


def impl(be, prim):
    """The CUDA impl of `dot_product_attention` or `dot_product_attention_bwd`: the kernels,
    or the composite's body compiled for CUDA where they do not apply (counted)."""
    from mirax.backends.cuda.runtime import body_impl
    body = body_impl(prim)
    name = prim.name
    is_bwd = name.endswith("_bwd")

    def fallback(reason, bufs, params):
        fallbacks[reason] += 1
        be.report[(name, "decomposed")] += 1
        return body(*bufs, **params)

    def run(*bufs, **params):
        opts = {k: params[k] for k in ("scale", "is_causal", "window")}
        if is_bwd:
            nout = params["nout"]
            cts, outs, primals = bufs[:nout], bufs[nout:2 * nout], bufs[2 * nout:]
        else:
            primals = bufs
        q, k, v, mask, bias = _split(primals, params["has_mask"], params["has_bias"])
        reason = supported(q, k, v)
        if reason is not None:
            return fallback(reason, bufs, params)
        if not is_bwd:
            return forward(q, k, v, mask, bias, **opts)
        dq, dk, dv, dbias = backward(cts[0], outs[0], q, k, v, mask, bias, **opts)
        grads = {0: dq, 1: dk, 2: dv}
        if bias is not None:
            grads[3 + params["has_mask"]] = dbias
        return [grads[i] for i in params["wrt"]]
    return run
