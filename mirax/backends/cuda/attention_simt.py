"""CUDA C source of the "simt" attention kernels (flash-attention-style, on CUDA cores, any
dtype: fwd (with the row logsumexp), dq, dk/dv; TPR threads share one query or key row).
attention_kernels.py prefixes it with its #defines and PRELUDE."""

SIMT = r"""
#define R (NT / TPR)
#define KC 8
#define C4 (D / (4 * TPR))
#define CV4 (DV / (4 * TPR))

#if DTYPE == 0
__device__ __forceinline__ float4 ld4(const T* p, long long i) {
  return *reinterpret_cast<const float4*>(p + i);
}
#else
__device__ __forceinline__ float4 ld4(const T* p, long long i) {
  const uint2 u = *reinterpret_cast<const uint2*>(p + i);
  return make_float4(tof((unsigned short)(u.x & 0xffff)), tof((unsigned short)(u.x >> 16)),
                     tof((unsigned short)(u.y & 0xffff)), tof((unsigned short)(u.y >> 16)));
}
#endif
__device__ __forceinline__ void st1(T* p, long long i, float v) { p[i] = fromf(v); }

__device__ __forceinline__ float dot4(float4 a, float4 b) {
  return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int o = TPR / 2; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
  return v;
}

__device__ __forceinline__ void attn_fwd(const T* __restrict__ q, const T* __restrict__ k,
                                         const T* __restrict__ v, T* __restrict__ o,
                                         float* __restrict__ lse, Extra e, int Tq, int S,
                                         int H, float scale) {
  __shared__ float4 Ks[BK][D / 4];
  __shared__ float4 Vs[BK][DV / 4];
  const int tid = threadIdx.x, row = tid / TPR, part = tid % TPR;
  const int b = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * R;
  const int t = q0 + row;
  const bool rowok = t < Tq;
  const int tc = rowok ? t : Tq - 1;
  float4 qr[C4];
  const long long qb = (((long long)b * Tq + tc) * H + h) * D;
#pragma unroll
  for (int c = 0; c < C4; c++) {
    float4 x = ld4(q, qb + (c * TPR + part) * 4);
    qr[c] = make_float4(x.x * scale, x.y * scale, x.z * scale, x.w * scale);
  }
  float m = -INF, l = 0.f;
  float4 acc[CV4];
#pragma unroll
  for (int c = 0; c < CV4; c++) acc[c] = make_float4(0.f, 0.f, 0.f, 0.f);
  int lo, hi;
  key_range(e, q0, R, S, BK, lo, hi);
  const long long kb = (long long)b * S * H + h;  // row s of k: (kb + s * H) * D
  for (int k0 = lo; k0 < hi; k0 += BK) {
    __syncthreads();
    for (int i = tid; i < BK * (D / 4); i += NT) {
      const int j = i / (D / 4), d4 = i % (D / 4), s = k0 + j;
      Ks[j][d4] = s < S ? ld4(k, (kb + (long long)s * H) * D + d4 * 4)
                        : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    for (int i = tid; i < BK * (DV / 4); i += NT) {
      const int j = i / (DV / 4), d4 = i % (DV / 4), s = k0 + j;
      Vs[j][d4] = s < S ? ld4(v, (kb + (long long)s * H) * DV + d4 * 4)
                        : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    __syncthreads();
#pragma unroll 1
    for (int j0 = 0; j0 < BK; j0 += KC) {  // chunks of KC keys: one rescale per chunk
      float sc[KC];
      float mt = -INF;
#pragma unroll
      for (int jj = 0; jj < KC; jj++) {
        const int j = j0 + jj;
        float p = 0.f;
#pragma unroll
        for (int c = 0; c < C4; c++) p += dot4(qr[c], Ks[j][c * TPR + part]);
        p = group_sum(p);
        const int s = k0 + j;
        const bool ok = s < S && attend(e, b, h, tc, s, p);
        sc[jj] = ok ? p : -INF;
        mt = fmaxf(mt, sc[jj]);
      }
      const float mn = fmaxf(m, mt);
      if (mn != -INF) {
        const float alpha = expf(m - mn);
        l *= alpha;
#pragma unroll
        for (int c = 0; c < CV4; c++) {
          acc[c].x *= alpha; acc[c].y *= alpha; acc[c].z *= alpha; acc[c].w *= alpha;
        }
#pragma unroll
        for (int jj = 0; jj < KC; jj++) {
          const float pj = expf(sc[jj] - mn);
          l += pj;
#pragma unroll
          for (int c = 0; c < CV4; c++) {
            const float4 vv = Vs[j0 + jj][c * TPR + part];
            acc[c].x += pj * vv.x; acc[c].y += pj * vv.y;
            acc[c].z += pj * vv.z; acc[c].w += pj * vv.w;
          }
        }
        m = mn;
      }
    }
  }
  if (!rowok) return;
  const float inv = l > 0.f ? 1.f / l : 0.f;
  const long long ob = (((long long)b * Tq + t) * H + h) * DV;
#pragma unroll
  for (int c = 0; c < CV4; c++) {
    const long long i = ob + (c * TPR + part) * 4;
    st1(o, i, acc[c].x * inv); st1(o, i + 1, acc[c].y * inv);
    st1(o, i + 2, acc[c].z * inv); st1(o, i + 3, acc[c].w * inv);
  }
  if (part == 0)
    lse[((long long)b * H + h) * Tq + t] = l > 0.f ? m + logf(l) : INF;
}

extern "C" __global__ void __launch_bounds__(NT)
mx_attn_fwd(const T* q, const T* k, const T* v, T* o, float* lse, EXTRA_PARAMS, int Tq,
            int S, int H, float scale) {
  EXTRA_INIT;
  attn_fwd(q, k, v, o, lse, e, Tq, S, H, scale);
}

// dq = scale * sum_s ds[t, s] k[s], ds = p * (dp - delta), p = exp(s - lse), dp = dO . v
extern "C" __global__ void __launch_bounds__(NT)
mx_attn_dq(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
           const T* __restrict__ dout, const float* __restrict__ lse,
           const float* __restrict__ delta, T* __restrict__ dq, EXTRA_PARAMS, int Tq, int S,
           int H, float scale) {
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
  for (int c = 0; c < C4; c++) {
    float4 x = ld4(q, qb + (c * TPR + part) * 4);
    qr[c] = make_float4(x.x * scale, x.y * scale, x.z * scale, x.w * scale);
    dqa[c] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int c = 0; c < CV4; c++) dor[c] = ld4(dout, ob + (c * TPR + part) * 4);
  const long long li = ((long long)b * H + h) * Tq + tc;
  const float lt = lse[li], dl = delta[li];
  int lo, hi;
  key_range(e, q0, R, S, BK, lo, hi);
  const long long kb = (long long)b * S * H + h;
  for (int k0 = lo; k0 < hi; k0 += BK) {
    __syncthreads();
    for (int i = tid; i < BK * (D / 4); i += NT) {
      const int j = i / (D / 4), d4 = i % (D / 4), s = k0 + j;
      Ks[j][d4] = s < S ? ld4(k, (kb + (long long)s * H) * D + d4 * 4)
                        : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    for (int i = tid; i < BK * (DV / 4); i += NT) {
      const int j = i / (DV / 4), d4 = i % (DV / 4), s = k0 + j;
      Vs[j][d4] = s < S ? ld4(v, (kb + (long long)s * H) * DV + d4 * 4)
                        : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    __syncthreads();
#pragma unroll 2
    for (int j = 0; j < BK; j++) {
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
      for (int c = 0; c < C4; c++) {
        const float4 kk = Ks[j][c * TPR + part];
        dqa[c].x += ds * kk.x; dqa[c].y += ds * kk.y;
        dqa[c].z += ds * kk.z; dqa[c].w += ds * kk.w;
      }
    }
  }
  if (!rowok) return;
  const long long gb = (((long long)b * Tq + t) * H + h) * D;
#pragma unroll
  for (int c = 0; c < C4; c++) {
    const long long i = gb + (c * TPR + part) * 4;
    st1(dq, i, dqa[c].x * scale); st1(dq, i + 1, dqa[c].y * scale);
    st1(dq, i + 2, dqa[c].z * scale); st1(dq, i + 3, dqa[c].w * scale);
  }
}

// dv = sum_t p[t, s] dO[t]; dk = scale * sum_t ds[t, s] q[t]; optionally ds itself (dbias).
extern "C" __global__ void __launch_bounds__(NT)
mx_attn_dkdv(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
             const T* __restrict__ dout, const float* __restrict__ lse,
             const float* __restrict__ delta, T* __restrict__ dk, T* __restrict__ dv,
             float* __restrict__ dbias, EXTRA_PARAMS, int Tq, int S, int H, float scale) {
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
  for (int c = 0; c < C4; c++) {
    float4 x = ld4(k, kb * D + (c * TPR + part) * 4);
    kr[c] = make_float4(x.x * scale, x.y * scale, x.z * scale, x.w * scale);
    dka[c] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int c = 0; c < CV4; c++) {
    vr[c] = ld4(v, kb * DV + (c * TPR + part) * 4);
    dva[c] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  int lo, hi;
  query_range(e, s0, R, Tq, BQ, lo, hi);
  const long long qrow = (long long)b * Tq * H + h;  // row t of q: (qrow + t * H) * D
  const long long lrow = ((long long)b * H + h) * Tq;
  for (int t0 = lo; t0 < hi; t0 += BQ) {
    __syncthreads();
    for (int i = tid; i < BQ * (D / 4); i += NT) {
      const int j = i / (D / 4), d4 = i % (D / 4), t = t0 + j;
      Qs[j][d4] = t < Tq ? ld4(q, (qrow + (long long)t * H) * D + d4 * 4)
                         : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    for (int i = tid; i < BQ * (DV / 4); i += NT) {
      const int j = i / (DV / 4), d4 = i % (DV / 4), t = t0 + j;
      Os[j][d4] = t < Tq ? ld4(dout, (qrow + (long long)t * H) * DV + d4 * 4)
                         : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    for (int i = tid; i < BQ; i += NT) {
      const int t = t0 + i;
      Ls[i] = t < Tq ? lse[lrow + t] : INF;
      Dl[i] = t < Tq ? delta[lrow + t] : 0.f;
    }
    __syncthreads();
#pragma unroll 2
    for (int i = 0; i < BQ; i++) {
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
      for (int c = 0; c < CV4; c++) {
        const float4 g = Os[i][c * TPR + part];
        dva[c].x += p * g.x; dva[c].y += p * g.y; dva[c].z += p * g.z; dva[c].w += p * g.w;
      }
#pragma unroll
      for (int c = 0; c < C4; c++) {
        const float4 g = Qs[i][c * TPR + part];
        dka[c].x += ds * g.x; dka[c].y += ds * g.y; dka[c].z += ds * g.z; dka[c].w += ds * g.w;
      }
      if (dbias != nullptr && ok && rowok && part == 0)
        dbias[(lrow + t) * S + s] = ds;
    }
  }
  if (!rowok) return;
#pragma unroll
  for (int c = 0; c < C4; c++) {
    const long long i = kb * D + (c * TPR + part) * 4;
    st1(dk, i, dka[c].x * scale); st1(dk, i + 1, dka[c].y * scale);
    st1(dk, i + 2, dka[c].z * scale); st1(dk, i + 3, dka[c].w * scale);
  }
#pragma unroll
  for (int c = 0; c < CV4; c++) {
    const long long i = kb * DV + (c * TPR + part) * 4;
    st1(dv, i, dva[c].x); st1(dv, i + 1, dva[c].y);
    st1(dv, i + 2, dva[c].z); st1(dv, i + 3, dva[c].w);
  }
}
"""
