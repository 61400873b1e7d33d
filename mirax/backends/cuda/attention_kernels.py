"""CUDA C sources of the fused attention kernels (attention.py compiles and launches them).

Four families, each a source string (simt, tc and wg in their own files) that `source(kind, ...)`
prefixes with #defines:
- "simt": flash-attention-style kernels on CUDA cores, any dtype (fwd, dq, dk/dv);
  TPR threads share one query (or key) row.
- "tc": flash attention on tensor cores for f16/bf16 (mma.sync m16n8k16, float32
  accumulation, ldmatrix fragments): fwd, dq and dk/dv, warps of 16 rows (or 16 MTF
  in the forward), tile sizes set by #defines (attention.tc_tiles); the streamed K/V (or
  Q/dO) tiles are double-buffered in shared memory by cp.async; P and dS go from the
  accumulator fragments straight into the next product's A operand (no shared memory).
- "wg": the kernels on Hopper (sm_90a) for f16/bf16 head dims that are multiples of 64:
  tc's fwd, dq and dk/dv with warpgroup MMAs (wgmma) reading swizzled shared-memory tiles
  through descriptors (attention_wg.py; it shares TC's helpers).
- "aux": delta = rowsum(dO * O) (16-byte loads for f16/bf16) and the row kernels of the
  cuBLAS path (masked softmax of a score matrix; dS = P * (dP - delta)).

All share PRELUDE: the storage type T (float, or the raw 16 bits of f16/bf16), the
causal / sliding-window / mask / bias test `attend`, and the key range of a query tile.
No headers are included (NVRTC needs no include path); PTX is written inline.
"""
from __future__ import annotations

from mirax.backends.cuda.attention_simt import SIMT
from mirax.backends.cuda.attention_tc import TC, TC_COMMON
from mirax.backends.cuda.attention_wg import WG, wgmma_ops

PRELUDE = r"""
#define INF __int_as_float(0x7f800000)
#define FULL_MASK 0xffffffffu
#if DTYPE == 0
typedef float T;
__device__ __forceinline__ float tof(float x) { return x; }
__device__ __forceinline__ float fromf(float v) { return v; }
#else
typedef unsigned short T;
__device__ __forceinline__ float tof(unsigned short h) {
#if DTYPE == 1
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
#else
  return __uint_as_float(((unsigned int)h) << 16);
#endif
}
__device__ __forceinline__ unsigned short fromf(float v) {
  unsigned short h;
#if DTYPE == 1
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
#else
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
#endif
  return h;
}
#endif

struct Extra {  // flags: 1 causal, 2 sliding window (wl, wr), 4 mask, 8 bias
  const unsigned char* mask;
  const float* bias;
  long long ms0, ms1, ms2, ms3, bs0, bs1, bs2, bs3;
  int wl, wr, flags;
};
// The kernels take the Extra fields as separate parameters (plain scalars and pointers).
#define EXTRA_PARAMS const unsigned char* mask, const float* bias, long long ms0, \
  long long ms1, long long ms2, long long ms3, long long bs0, long long bs1, long long bs2, \
  long long bs3, int wl, int wr, int flags
#define EXTRA_INIT const Extra e = {mask, bias, ms0, ms1, ms2, ms3, bs0, bs1, bs2, bs3, wl, wr, \
  flags}

// Does query t attend key s (both in range)? Adds the bias to `sc` when it does.
__device__ __forceinline__ bool attend(const Extra& e, int b, int h, int t, int s, float& sc) {
  bool ok = true;
  if (e.flags & 1) ok = s <= t;
  if (e.flags & 2) ok = ok && (t - s <= e.wl) && (s - t <= e.wr);
  if (e.flags & 4) ok = ok && e.mask[b * e.ms0 + h * e.ms1 + t * e.ms2 + s * e.ms3] != 0;
  if ((e.flags & 8) && ok) sc += e.bias[b * e.bs0 + h * e.bs1 + t * e.bs2 + s * e.bs3];
  return ok;
}

// Key range [lo, hi) that queries [q0, q0 + n) may attend; lo rounded down to a tile.
__device__ __forceinline__ void key_range(const Extra& e, int q0, int n, int S, int tile,
                                          int& lo, int& hi) {
  lo = 0; hi = S;
  if (e.flags & 1) hi = min(hi, q0 + n);
  if (e.flags & 2) {
    lo = max(lo, q0 - e.wl);
    hi = min(hi, q0 + n + e.wr);
  }
  lo = max(lo, 0) / tile * tile;
}

// Query range [lo, hi) that may attend keys [s0, s0 + n); lo rounded down to a tile.
__device__ __forceinline__ void query_range(const Extra& e, int s0, int n, int Tq, int tile,
                                            int& lo, int& hi) {
  lo = 0; hi = Tq;
  if (e.flags & 1) lo = max(lo, s0);
  if (e.flags & 2) {
    lo = max(lo, s0 - e.wr);
    hi = min(hi, s0 + n + e.wl);
  }
  lo = max(lo, 0) / tile * tile;
}
"""

# --- delta and the row kernels of the cuBLAS path ----------------------------------------------
AUX = r"""
// delta[b, h, t] = sum_d dO[b, t, h, d] * O[b, t, h, d] - dlse[b, h, t]: one warp per
// (b, t, h) row. dlse, the cotangent of the logsumexp output, shifts every dS of the row as
// delta does (d lse / d score = P), so the kernels after take it through delta.
extern "C" __global__ void mx_attn_delta(const T* __restrict__ dout, const T* __restrict__ out,
                                         const float* __restrict__ dlse,
                                         float* __restrict__ delta, int rows, int Tq, int H,
                                         int DV0) {
  const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= rows) return;
  const long long base = (long long)row * DV0;
  float acc = 0.f;
  for (int d = lane; d < DV0; d += 32) acc += tof(dout[base + d]) * tof(out[base + d]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(FULL_MASK, acc, o);
  if (lane == 0) {
    const int h = row % H, bt = row / H, t = bt % Tq, b = bt / Tq;
    const long long i = ((long long)b * H + h) * Tq + t;
    delta[i] = acc - dlse[i];
  }
}

#if DTYPE != 0
// The same with 16-byte loads, 8 lanes a row (16-bit types, DV0 a multiple of 8).
__device__ __forceinline__ float dot2(unsigned a, unsigned b) {
  return tof((unsigned short)(a & 0xffffu)) * tof((unsigned short)(b & 0xffffu)) +
         tof((unsigned short)(a >> 16)) * tof((unsigned short)(b >> 16));
}
extern "C" __global__ void __launch_bounds__(256)
mx_attn_delta8(const T* __restrict__ dout, const T* __restrict__ out,
               const float* __restrict__ dlse, float* __restrict__ delta, int rows, int Tq,
               int H, int DV0) {
  const int row = blockIdx.x * 32 + (threadIdx.x >> 3), part = threadIdx.x & 7;
  float acc = 0.f;
  if (row < rows) {
    const uint4* a = reinterpret_cast<const uint4*>(dout + (long long)row * DV0);
    const uint4* c = reinterpret_cast<const uint4*>(out + (long long)row * DV0);
    for (int i = part; i < DV0 / 8; i += 8) {
      const uint4 x = a[i], y = c[i];
      acc += dot2(x.x, y.x) + dot2(x.y, y.y) + dot2(x.z, y.z) + dot2(x.w, y.w);
    }
  }
#pragma unroll
  for (int o = 4; o > 0; o >>= 1) acc += __shfl_xor_sync(FULL_MASK, acc, o);
  if (row < rows && part == 0) {
    const int h = row % H, bt = row / H, t = bt % Tq, b = bt / Tq;
    const long long i = ((long long)b * H + h) * Tq + t;
    delta[i] = acc - dlse[i];
  }
}
#endif

// p = softmax over the attended keys of scale * sc + bias, one warp per row of the scores
// sc [nh, Tq, S] of batch b, heads h0 ..; 0 where masked, all 0 for an empty row. p may be
// sc itself (float32). With lse [B, H, Tq], also the row's logsumexp (+inf for an empty
// row).
extern "C" __global__ void __launch_bounds__(128)
mx_rows_softmax(const float* sc, T* p, float* __restrict__ lse, EXTRA_PARAMS, int b, int h0,
                int nh, int H, int Tq, int S, float scale) {
  EXTRA_INIT;
  const int row = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (row >= nh * Tq) return;
  const int h = h0 + row / Tq, t = row % Tq;
  const float* x = sc + (long long)row * S;
  T* y = p + (long long)row * S;
  int lo = 0, hi = S;
  if (e.flags & 1) hi = min(hi, t + 1);
  if (e.flags & 2) {
    lo = max(lo, t - e.wl);
    hi = min(hi, t + e.wr + 1);
  }
  lo = max(lo, 0);
  float m = -INF, l = 0.f;
#pragma unroll 4
  for (int s = lo + lane; s < hi; s += 32) {
    float val = x[s] * scale;
    if (attend(e, b, h, t, s, val)) {
      if (val > m) {
        l = l * expf(m - val) + 1.f;
        m = val;
      } else {
        l += expf(val - m);
      }
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float mo = __shfl_xor_sync(FULL_MASK, m, o), lo2 = __shfl_xor_sync(FULL_MASK, l, o);
    const float mn = fmaxf(m, mo);
    l = mn == -INF ? 0.f : l * expf(m - mn) + lo2 * expf(mo - mn);
    m = mn;
  }
  const float inv = l > 0.f ? 1.f / l : 0.f;
  if (lse != nullptr && lane == 0)
    lse[((long long)b * H + h) * Tq + t] = l > 0.f ? m + logf(l) : INF;
#pragma unroll 4
  for (int s = lane; s < S; s += 32) {
    float r = 0.f;
    if (s >= lo && s < hi) {
      float val = x[s] * scale;
      if (attend(e, b, h, t, s, val)) r = expf(val - m) * inv;
    }
    y[s] = fromf(r);
  }
}

// ds = p * (dp - delta[row]) over the scores [nh, Tq, S] of batch b, heads h0 ..; ds may be
// dp itself (float32); with dbias, also a float32 copy into dbias [B, H, Tq, S].
extern "C" __global__ void __launch_bounds__(256)
mx_rows_ds(const T* p, const float* dp, const float* __restrict__ delta, T* ds,
           float* __restrict__ dbias, int b, int h0, int nh, int Tq, int S, int H) {
  const int row = blockIdx.x;
  const int h = h0 + row / Tq, t = row % Tq;
  const long long hrow = ((long long)b * H + h) * Tq + t;
  const float dl = delta[hrow];
  const long long base = (long long)row * S;
  float* db = dbias == nullptr ? nullptr : dbias + hrow * S;
  for (int s = threadIdx.x; s < S; s += blockDim.x) {
    const float val = tof(p[base + s]) * (dp[base + s] - dl);
    ds[base + s] = fromf(val);
    if (db != nullptr) db[s] = val;
  }
}
"""

_BODIES = {"simt": SIMT, "tc": TC, "aux": AUX}


def source(kind: str, dtype_code: int, **defines) -> str:
    """The CUDA source of one kernel family: #defines (DTYPE and the family's tile sizes)
    + PRELUDE + the family's kernels."""
    head = [f"#define DTYPE {dtype_code}"] + [f"#define {k} {v}" for k, v in defines.items()]
    if kind == "wg":  # the warpgroup products at the widths of its kernels' accumulators
        widths = {defines[n] for n in ("BNW", "DQ_BN", "DK_BM", "D", "DV")}
        body = TC_COMMON + WG.replace("WGMMA_OPS", wgmma_ops(sorted(widths)))
    else:
        body = _BODIES[kind]
    return "\n".join(head) + "\n" + PRELUDE + body
