"""CUDA C source of the Hopper attention kernels ("wg", sm_90a): the flash forward, dq and
dk/dv of attention_tc.py with warpgroup MMAs (wgmma.mma_async m64nNk16, float32
accumulation) reading their shared-memory operands through matrix descriptors, for f16/bf16
with head dims that are multiples of 64. attention_kernels.py puts it after PRELUDE and
TC_COMMON (attention_tc.py), whose masked scores, online softmax, dS, fragment packing and
tile stores it shares: a wgmma accumulator holds, in each warp of the warpgroup, the same
fragments as mma.sync's for that warp's 16 rows, and P (or dS) goes from them into the next
product's A registers unchanged.

Shared-memory tiles are in the 128-byte swizzle the descriptors name: a W-wide tile of R rows
is W / 64 column blocks, each R rows of 128 bytes, with 16-byte chunk c of row r stored at
chunk c ^ (r % 8) (every block 1024-byte aligned). A tile is read K-major where its rows run
along the product's k (Q and K for the scores, dO and V for dP) and MN-major, with the
instruction's B-transpose flag, where they run along the output's columns (V in the
forward, K in dq, Q and dO in dk/dv), so no tile is transposed in memory.

`wgmma_ops(ns)` writes the inline-PTX wrappers for each accumulator width N in ns: the
register lists are long (N / 2 floats a thread), so they are generated, not typed."""

WG = r"""
// The warpgroup products and their ordering. An async product reads its A registers and
// writes its accumulators after the instruction issues: keep() ties those registers to the
// point after wg_wait0, so the compiler neither reads them early nor reuses them meanwhile.
#if DTYPE == 1
#define WG_AB "f16.f16"
#else
#define WG_AB "bf16.bf16"
#endif
__device__ __forceinline__ void wg_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wg_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wg_wait0() {
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}
// Shared memory written by cp.async (the generic proxy) before the tensor cores read it.
__device__ __forceinline__ void proxy_fence() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
template <int NJ>
__device__ __forceinline__ void keep(float (*x)[4]) {
#pragma unroll
  for (int j = 0; j < NJ; j++) {
#pragma unroll
    for (int i = 0; i < 4; i++) asm volatile("" : "+f"(x[j][i]) :: "memory");
  }
}
template <int NK>
__device__ __forceinline__ void keep_a(unsigned (*a)[4]) {
#pragma unroll
  for (int j = 0; j < NK; j++) {
#pragma unroll
    for (int i = 0; i < 4; i++) asm volatile("" : "+r"(a[j][i]) :: "memory");
  }
}
// Matrix descriptors of 128-byte-swizzled tiles: the high word is the same for all (8-row
// groups 1024 bytes apart, the swizzle mode); sw_desc is the low word of the tile at p, lbo
// bytes between 64-column blocks (read only MN-major). The address is in 16-byte units,
// so the descriptor of the same tile e elements on is sw_desc(p) + DESC(e): a kernel makes
// each tile's once and adds constants in its loop.
#define SW_HI 0x40000040u
#define DESC(e) ((e) * (int)sizeof(T) / 16)
__device__ __forceinline__ unsigned sw_desc(const T* p, unsigned lbo) {
  return ((saddr(p) & 0x3FFFF) >> 4) | (((lbo >> 4) & 0x3FFF) << 16);
}
template <int N> struct WG;
WGMMA_OPS

// Rows [row0, row0 + NR) of a W-wide operand (global row r at src + r * gs) into the
// swizzled tile dst by cp.async, 16 bytes a thread (NTH threads); rows at or past n are zeros.
// Where the threads cover whole rows a pass, in steps of 8 rows (every tile here), a thread
// copies the same column at the same swizzle every pass: its addresses are computed once a
// call (Stream below, for the tiles a kernel streams, once before its loop), and a tile
// inside the operand (all but the last) checks no row.
template <int NR, int W, int NTH>
__device__ __forceinline__ void load_sw(T* dst, const T* __restrict__ src, long long gs,
                                        int row0, int n) {
  constexpr int PER_ROW = W / 8, ALL = NR * PER_ROW, STEP = NTH / PER_ROW;
  if (NTH % PER_ROW == 0 && STEP % 8 == 0 && ALL % NTH == 0) {
    const int c = threadIdx.x % PER_ROW, r = threadIdx.x / PER_ROW;
    const unsigned d = saddr(dst + ((c >> 3) * NR + r) * 64 + (((c & 7) ^ (r & 7)) << 3));
    const T* p = src + (long long)(row0 + r) * gs + c * 8;
    const long long ps = STEP * gs;
    if (row0 + NR <= n) {
#pragma unroll
      for (int j = 0; j < ALL / NTH; j++)
        cp16s(d + j * STEP * 128, p + j * ps, true);
    } else {
#pragma unroll
      for (int j = 0; j < ALL / NTH; j++) {
        const bool ok = row0 + r + j * STEP < n;
        cp16s(d + j * STEP * 128, ok ? p + j * ps : src, ok);
      }
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < (ALL + NTH - 1) / NTH; j++) {
    const int i = threadIdx.x + j * NTH;
    if (ALL % NTH == 0 || i < ALL) {
      const int r = i / PER_ROW, c = i - r * PER_ROW;
      const bool ok = row0 + r < n;
      cp16(dst + ((c >> 3) * NR + r) * 64 + (((c & 7) ^ (r & 7)) << 3),
           src + (ok ? row0 + r : 0) * gs + c * 8, ok);
    }
  }
}

// The tiles a kernel streams through two shared-memory stages (load_sw's tiles of NR rows
// from row0 on, stage st at dst + st * NR * W): where load_sw's threads cover whole rows a
// pass, each thread's shared and global addresses are made once, before the kernel's loop,
// and a tile adds its row offset (the loop made them anew every tile: about 40 integer
// instructions a thread a tile in the forward); other shapes go through load_sw.
template <int NR, int W, int NTH>
struct Stream {
  static constexpr int PER_ROW = W / 8, ALL = NR * PER_ROW, STEP = NTH / PER_ROW;
  static constexpr bool ROWS = NTH % PER_ROW == 0 && STEP % 8 == 0 && ALL % NTH == 0;
  T* dst;
  const T* src;
  long long gs;
  unsigned d;   // this thread's first chunk in stage 0
  const T* p;   // its chunk of row r of the operand
  int r;
  __device__ __forceinline__ Stream(T* dst_, const T* src_, long long gs_)
      : dst(dst_), src(src_), gs(gs_) {
    const int c = threadIdx.x % PER_ROW;
    r = threadIdx.x / PER_ROW;
    d = saddr(dst + ((c >> 3) * NR + r) * 64 + (((c & 7) ^ (r & 7)) << 3));
    p = src + r * gs + c * 8;
  }
  __device__ __forceinline__ void load(int st, int row0, int n) const {
    if (!ROWS) {
      load_sw<NR, W, NTH>(dst + st * NR * W, src, gs, row0, n);
      return;
    }
    const unsigned ds = d + st * NR * W * (int)sizeof(T);
    const T* q = p + row0 * gs;
    if (row0 + NR <= n) {
#pragma unroll
      for (int j = 0; j < ALL / NTH; j++) cp16s(ds + j * STEP * 128, q + j * STEP * gs, true);
    } else {
#pragma unroll
      for (int j = 0; j < ALL / NTH; j++) {
        const bool ok = row0 + r + j * STEP < n;
        cp16s(ds + j * STEP * 128, ok ? q + j * STEP * gs : src, ok);
      }
    }
  }
};

// acc (N columns) += X B: X this thread's part of the warpgroup's scores s (NK columns),
// packed into A registers; B the tile of NK rows at descriptor bd, 16 rows a step (two
// 8-row groups); acc is ready on return. The forward's P V and dq's dS K.
template <int NK, int N>
__device__ __forceinline__ void rs_accumulate(float (*acc)[4], float (*s)[4], unsigned bd) {
  unsigned pa[NK / 2][4];
#pragma unroll
  for (int kb = 0; kb < NK / 2; kb++) pack_a(pa[kb], s, kb);
  keep<N / 8>(acc);
  wg_fence();
#pragma unroll
  for (int kb = 0; kb < NK / 2; kb++) WG<N>::rs(acc, pa[kb], bd + DESC(kb * 16 * 64));
  wg_commit();
  wg_wait0();
  keep<N / 8>(acc);
  keep_a<NK / 2>(pa);
}

// The forward's work on one K/V tile once its scores s are ready (log2 units once times c,
// as scores_log2 leaves them): the online softmax, then O += P V from the V tile's
// descriptor vs.
template <int NJ, int NO>
__device__ __forceinline__ void fwd_tile(float (*s)[4], float c, float* mr, float* lr,
                                         float (*acc)[4], unsigned vs) {
  softmax_step<NJ, NO>(s, c, mr, lr, acc);
  rs_accumulate<NJ, DV>(acc, s, vs);
}

// Forward (the output and the row logsumexp) of the BMW = 64 NWG query rows of block
// (b h, y): warpgroup w owns rows 64 w .. 64 w + 63 (each of its warps 16); K/V tiles of BNW
// keys stream through two shared-memory stages. MINB blocks a multiprocessor bound the
// registers (several blocks keep the tensor cores busy while one is in its softmax).
#define BMW (64 * NWG)
extern "C" __global__ void __launch_bounds__(128 * NWG, MINB)
mx_wg_fwd(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
          T* __restrict__ o, float* __restrict__ lse, EXTRA_PARAMS, int Tq, int S, int H,
          float scale) {
  EXTRA_INIT;
  constexpr int NTH = 128 * NWG, NJ = BNW / 8, NO = DV / 8;
  T* Qs = reinterpret_cast<T*>(smem + ((1024u - (saddr(smem) & 1023u)) & 1023u));
  T* Kb = Qs + BMW * D;   // 2 stages of [BNW][D]
  T* Vb = Kb + 2 * BNW * D;  // 2 stages of [BNW][DV]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3;
  const int wg = NWG == 1 ? 0 : warp >> 2;  // (a constant where it can: uniform descriptors)
  const int b = blockIdx.x / H, h = blockIdx.x - b * H;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * BMW;  // causal: the longest rows first
  const int g0 = q0 + 64 * wg;                         // this warpgroup's first row
  const int r0 = g0 + 16 * (warp & 3);                 // this warp's first row
  const long long hb = (long long)b * H + h;
  const T* kbase = k + ((long long)b * S * H + h) * D;
  const T* vbase = v + ((long long)b * S * H + h) * DV;
  int lo, hi;
  key_range(e, q0, BMW, S, BNW, lo, hi);
  load_sw<BMW, D, NTH>(Qs, q + ((long long)b * Tq * H + h) * D, (long long)H * D, q0, Tq);
  cp_commit();
  const Stream<BNW, D, NTH> kst(Kb, kbase, (long long)H * D);
  const Stream<BNW, DV, NTH> vst(Vb, vbase, (long long)H * DV);
  if (lo < hi) {
    kst.load(0, lo, S);
    vst.load(0, lo, S);
  }
  cp_commit();
  float acc[NO][4];
  float mr[2] = {-INF, -INF}, lr[2] = {0.f, 0.f};
  zero<NO>(acc);
  // the tiles' descriptors: this warpgroup's Q rows, K (K-major) and V (MN-major) stage 0
  const unsigned qd = sw_desc(Qs + wg * 64 * 64, 16), kd = sw_desc(Kb, 16),
                 vd = sw_desc(Vb, BNW * 128);
  int stage = 0;
  for (int k0 = lo; k0 < hi; k0 += BNW, stage ^= 1) {
    if (k0 + BNW < hi) {  // the next tile into the other stage (free since the last barrier)
      kst.load(stage ^ 1, k0 + BNW, S);
      vst.load(stage ^ 1, k0 + BNW, S);
    }
    cp_commit();
    cp_wait<1>();  // this tile (and, the first time, Q)
    proxy_fence();
    __syncthreads();
    if (!((e.flags & 1) && k0 > g0 + 63)) {  // causal: keys after all the warpgroup's rows
      const unsigned ks = kd + stage * DESC(BNW * D), vs = vd + stage * DESC(BNW * DV);
      float s[NJ][4];
      wg_fence();
      WG<BNW>::ss0(s, qd, ks);  // S = Q K^T, k16 steps of 32 bytes in a block
#pragma unroll
      for (int kb = 1; kb < D / 16; kb++)
        WG<BNW>::ss(s, qd + DESC((kb >> 2) * BMW * 64 + (kb & 3) * 16),
                    ks + DESC((kb >> 2) * BNW * 64 + (kb & 3) * 16));
      wg_commit();
      wg_wait0();
      keep<NJ>(s);
      // two copies of the rest, so that a whole tile's P and O stay where its products
      // left them (one copy merging both paths moved the whole tile's scores into the
      // masked path's registers: 32 moves a thread a tile)
      if (whole_tile<NJ>(e, r0, k0, S)) {
        fwd_tile<NJ, NO>(s, scale * LOG2E, mr, lr, acc, vs);
      } else {
        mask_scores<NJ>(s, e, b, h, r0, k0, Tq, S, scale, lane);
        fwd_tile<NJ, NO>(s, 1.f, mr, lr, acc, vs);
      }
    }
    __syncthreads();  // all reads of this stage done: the next iteration refills it
  }
#pragma unroll
  for (int r = 0; r < 2; r++) {
    float l = lr[r];
    l += __shfl_xor_sync(FULL_MASK, l, 1);
    l += __shfl_xor_sync(FULL_MASK, l, 2);
    const int t = r0 + g + 8 * r;
    if (t >= Tq) continue;
    const float inv = l > 0.f ? 1.f / l : 0.f;
    T* orow = o + (((long long)b * Tq + t) * H + h) * DV;
#pragma unroll
    for (int j = 0; j < NO; j++)
      store2(orow, 8 * j + 2 * tq, acc[j][2 * r] * inv, acc[j][2 * r + 1] * inv);
    if (tq == 0) lse[hb * Tq + t] = l > 0.f ? mr[r] * LN2 + logf(l) : INF;
  }
}
// The backward's two score-shaped products of a warpgroup's 64 rows, as ss MMAs into
// N-wide accumulators: x = A1 B1^T over D and y = A2 B2^T over DV, from the descriptors
// (sw_desc) of A1/A2, swizzled tiles of NA rows at the warpgroup's first row, and B1/B2,
// of N rows; x and y are ready on return.
template <int N, int NA>
__device__ __forceinline__ void wg_two_products(float (*x)[4], float (*y)[4], unsigned da1,
                                                unsigned db1, unsigned da2, unsigned db2) {
  wg_fence();
  WG<N>::ss0(x, da1, db1);
#pragma unroll
  for (int kb = 1; kb < D / 16; kb++)
    WG<N>::ss(x, da1 + DESC((kb >> 2) * NA * 64 + (kb & 3) * 16),
              db1 + DESC((kb >> 2) * N * 64 + (kb & 3) * 16));
  WG<N>::ss0(y, da2, db2);
#pragma unroll
  for (int kb = 1; kb < DV / 16; kb++)
    WG<N>::ss(y, da2 + DESC((kb >> 2) * NA * 64 + (kb & 3) * 16),
              db2 + DESC((kb >> 2) * N * 64 + (kb & 3) * 16));
  wg_commit();
  wg_wait0();
  keep<N / 8>(x);
  keep<N / 8>(y);
}

// dq's work on one K/V tile once its scores s and dP dp are ready (s in log2 units once
// times c, as scores_log2 leaves it): dS, then dQ += dS K from the MN-major K tile's
// descriptor kd.
template <int NJ>
__device__ __forceinline__ void dq_tile(float (*s)[4], float (*dp)[4], float c,
                                        const float* l2, const float* dl, float (*acc)[4],
                                        unsigned kd) {
  dq_ds<NJ>(s, dp, c, l2, dl);
  rs_accumulate<NJ, D>(acc, s, kd);
}

// dk/dv's work on one Q/dO tile once S^T st and dP^T dpt are ready (st as scores_t_log2
// leaves it, times c): P^T and dS^T (dS^T into dbias when given), into A registers, dV +=
// P^T dO and dK += dS^T Q from the MN-major dO and Q tiles' descriptors od and qd.
template <int NQ>
__device__ __forceinline__ void dkdv_tile(float (*st)[4], float (*dpt)[4], float c,
                                          const float* Ls, const float* Dl, int lane,
                                          float (*dva)[4], float (*dka)[4], unsigned od,
                                          unsigned qd, float* __restrict__ dbias = nullptr,
                                          long long hb = 0, int n0 = 0, int t0 = 0,
                                          int Tq = 0, int S = 0) {
  dkdv_probs<NQ>(st, dpt, c, Ls, Dl, lane);
  if (dbias != nullptr) dbias_store<NQ>(dpt, dbias, hb, n0, t0, Tq, S, lane);
  unsigned pa[NQ / 2][4], sa[NQ / 2][4];
#pragma unroll
  for (int kb = 0; kb < NQ / 2; kb++) {
    pack_a(pa[kb], st, kb);
    pack_a(sa[kb], dpt, kb);
  }
  keep<DV / 8>(dva);
  keep<D / 8>(dka);
  wg_fence();
#pragma unroll
  for (int kb = 0; kb < NQ / 2; kb++)  // dV += P^T dO: 16 queries a step
    WG<DV>::rs(dva, pa[kb], od + DESC(kb * 16 * 64));
#pragma unroll
  for (int kb = 0; kb < NQ / 2; kb++)  // dK += dS^T Q
    WG<D>::rs(dka, sa[kb], qd + DESC(kb * 16 * 64));
  wg_commit();
  wg_wait0();
  keep<DV / 8>(dva);
  keep<D / 8>(dka);
  keep_a<NQ / 2>(pa);
  keep_a<NQ / 2>(sa);
}

// dq = scale dS K (dS = P (dP - delta), P = exp(scores - lse), dP = dO V^T) of the DQ_BM =
// 64 DQ_NWG query rows of block (b h, y), warpgroup w owning rows 64 w .. 64 w + 63; K/V
// tiles of DQ_BN keys stream through two stages. K is read K-major by the scores and
// MN-major by dS K.
#define DQ_BM (64 * DQ_NWG)
extern "C" __global__ void __launch_bounds__(128 * DQ_NWG, DQ_MINB)
mx_wg_dq(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
         const T* __restrict__ dout, const float* __restrict__ lse,
         const float* __restrict__ delta, T* __restrict__ dq, EXTRA_PARAMS, int Tq, int S,
         int H, float scale) {
  EXTRA_INIT;
  constexpr int NTH = 128 * DQ_NWG, NJ = DQ_BN / 8;
  T* Qs = reinterpret_cast<T*>(smem + ((1024u - (saddr(smem) & 1023u)) & 1023u));
  T* Os = Qs + DQ_BM * D;     // [DQ_BM][DV]: dO
  T* Kb = Os + DQ_BM * DV;    // 2 stages of [DQ_BN][D]
  T* Vb = Kb + 2 * DQ_BN * D; // 2 stages of [DQ_BN][DV]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wg = DQ_NWG == 1 ? 0 : warp >> 2;
  const int b = blockIdx.x / H, h = blockIdx.x - b * H;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * DQ_BM;  // causal: the longest rows first
  const int g0 = q0 + 64 * wg, r0 = g0 + 16 * (warp & 3);
  const long long hb = (long long)b * H + h;
  const T* kbase = k + ((long long)b * S * H + h) * D;
  const T* vbase = v + ((long long)b * S * H + h) * DV;
  int lo, hi;
  key_range(e, q0, DQ_BM, S, DQ_BN, lo, hi);
  load_sw<DQ_BM, D, NTH>(Qs, q + ((long long)b * Tq * H + h) * D, (long long)H * D, q0, Tq);
  load_sw<DQ_BM, DV, NTH>(Os, dout + ((long long)b * Tq * H + h) * DV, (long long)H * DV, q0,
                          Tq);
  cp_commit();
  const Stream<DQ_BN, D, NTH> kst(Kb, kbase, (long long)H * D);
  const Stream<DQ_BN, DV, NTH> vst(Vb, vbase, (long long)H * DV);
  if (lo < hi) {
    kst.load(0, lo, S);
    vst.load(0, lo, S);
  }
  cp_commit();
  float l2[2], dl[2];
  row_stats(l2, dl, lse, delta, hb, r0, Tq, lane);
  float acc[D / 8][4];
  zero<D / 8>(acc);
  // the tiles' descriptors: this warpgroup's Q and dO rows, K and V stage 0 (K also
  // MN-major)
  const unsigned qd = sw_desc(Qs + wg * 64 * 64, 16), od = sw_desc(Os + wg * 64 * 64, 16),
                 kd = sw_desc(Kb, 16), vd = sw_desc(Vb, 16), kmn = sw_desc(Kb, DQ_BN * 128);
  int stage = 0;
  for (int k0 = lo; k0 < hi; k0 += DQ_BN, stage ^= 1) {
    if (k0 + DQ_BN < hi) {
      kst.load(stage ^ 1, k0 + DQ_BN, S);
      vst.load(stage ^ 1, k0 + DQ_BN, S);
    }
    cp_commit();
    cp_wait<1>();  // this tile (and, the first time, Q and dO)
    proxy_fence();
    __syncthreads();
    if (!((e.flags & 1) && k0 > g0 + 63)) {
      const unsigned ks = stage * DESC(DQ_BN * D), vs = stage * DESC(DQ_BN * DV);
      float s[NJ][4], dp[NJ][4];
      wg_two_products<DQ_BN, DQ_BM>(s, dp, qd, kd + ks, od, vd + vs);  // Q K^T, dO V^T
      if (whole_tile<NJ>(e, r0, k0, S)) {  // (two copies of the rest: as the forward's)
        dq_tile<NJ>(s, dp, scale * LOG2E, l2, dl, acc, kmn + ks);
      } else {
        mask_scores<NJ>(s, e, b, h, r0, k0, Tq, S, scale, lane);
        dq_tile<NJ>(s, dp, 1.f, l2, dl, acc, kmn + ks);
      }
    }
    __syncthreads();
  }
  store_tile<D / 8>(dq + ((long long)b * Tq * H + h) * D, (long long)H * D, acc, r0, Tq, scale,
                   lane);
}

// The Q/dO tile of DK_BM queries from t0, with its lse and delta, into stage st.
template <int NTH>
__device__ __forceinline__ void wg_load_q_tile(const Stream<DK_BM, D, NTH>& qst,
                                               const Stream<DK_BM, DV, NTH>& ost, float* Lb,
                                               float* Db, int st, const float* lrow,
                                               const float* drow, int t0, int Tq) {
  qst.load(st, t0, Tq);
  ost.load(st, t0, Tq);
  load_vec<DK_BM, NTH>(Lb + st * DK_BM, lrow, t0, Tq);
  load_vec<DK_BM, NTH>(Db + st * DK_BM, drow, t0, Tq);
}

// dV = P^T dO and dK = scale dS^T Q (and dS into dbias when given) of the DK_BN = 64 DK_NWG
// keys of block (b h, y), warpgroup w owning keys 64 w .. 64 w + 63, the products transposed
// (rows = keys) as in mx_tc_dkdv; Q/dO tiles of DK_BM queries, with their lse and delta,
// stream through two stages. Q and dO are read K-major by S^T = K Q^T and dP^T = V dO^T,
// MN-major by the products into dK and dV.
#define DK_BN (64 * DK_NWG)
extern "C" __global__ void __launch_bounds__(128 * DK_NWG, DK_MINB)
mx_wg_dkdv(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
           const T* __restrict__ dout, const float* __restrict__ lse,
           const float* __restrict__ delta, T* __restrict__ dk, T* __restrict__ dv,
           float* __restrict__ dbias, EXTRA_PARAMS, int Tq, int S, int H, float scale) {
  EXTRA_INIT;
  constexpr int NTH = 128 * DK_NWG, NQ = DK_BM / 8;
  T* Ks = reinterpret_cast<T*>(smem + ((1024u - (saddr(smem) & 1023u)) & 1023u));
  T* Vs = Ks + DK_BN * D;       // [DK_BN][DV]
  T* Qb = Vs + DK_BN * DV;      // 2 stages of [DK_BM][D]
  T* Ob = Qb + 2 * DK_BM * D;   // 2 stages of [DK_BM][DV]: dO
  float* Lb = reinterpret_cast<float*>(Ob + 2 * DK_BM * DV);  // 2 stages of [DK_BM]: lse
  float* Db = Lb + 2 * DK_BM;                                 // 2 stages of [DK_BM]: delta
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wg = DK_NWG == 1 ? 0 : warp >> 2;
  const int b = blockIdx.x / H, h = blockIdx.x - b * H;
  const int s0 = blockIdx.y * DK_BN;  // causal: the first keys (the most queries) first
  const int g0 = s0 + 64 * wg, n0 = g0 + 16 * (warp & 3);
  const long long hb = (long long)b * H + h;
  const float* lrow = lse + hb * Tq;
  const float* drow = delta + hb * Tq;
  load_sw<DK_BN, D, NTH>(Ks, k + ((long long)b * S * H + h) * D, (long long)H * D, s0, S);
  load_sw<DK_BN, DV, NTH>(Vs, v + ((long long)b * S * H + h) * DV, (long long)H * DV, s0, S);
  cp_commit();
  int lo, hi;
  query_range(e, s0, DK_BN, Tq, DK_BM, lo, hi);
  const Stream<DK_BM, D, NTH> qst(Qb, q + ((long long)b * Tq * H + h) * D, (long long)H * D);
  const Stream<DK_BM, DV, NTH> ost(Ob, dout + ((long long)b * Tq * H + h) * DV,
                                   (long long)H * DV);
  if (lo < hi) wg_load_q_tile<NTH>(qst, ost, Lb, Db, 0, lrow, drow, lo, Tq);
  cp_commit();
  float dka[D / 8][4], dva[DV / 8][4];
  zero<D / 8>(dka);
  zero<DV / 8>(dva);
  // the tiles' descriptors: this warpgroup's K and V rows, Q and dO stage 0 (K-major and
  // MN-major)
  const unsigned kd = sw_desc(Ks + wg * 64 * 64, 16), vd = sw_desc(Vs + wg * 64 * 64, 16),
                 qd = sw_desc(Qb, 16), od = sw_desc(Ob, 16), qmn = sw_desc(Qb, DK_BM * 128),
                 omn = sw_desc(Ob, DK_BM * 128);
  int stage = 0;
  for (int t0 = lo; t0 < hi; t0 += DK_BM, stage ^= 1) {
    if (t0 + DK_BM < hi)  // the next tile into the other stage (free since the last barrier)
      wg_load_q_tile<NTH>(qst, ost, Lb, Db, stage ^ 1, lrow, drow, t0 + DK_BM, Tq);
    cp_commit();
    cp_wait<1>();  // this tile (and, the first time, K and V)
    proxy_fence();
    __syncthreads();
    if (!((e.flags & 1) && t0 + DK_BM - 1 < g0)) {  // causal: queries before all the keys
      const unsigned qs = stage * DESC(DK_BM * D), os = stage * DESC(DK_BM * DV);
      float st[NQ][4], dpt[NQ][4];
      wg_two_products<DK_BM, DK_BN>(st, dpt, kd, qd + qs, vd, od + os);  // K Q^T, V dO^T
      const float* Ls = Lb + stage * DK_BM;
      const float* Dl = Db + stage * DK_BM;
      if (whole_block<NQ>(e, n0, t0, Tq, S)) {  // (two copies of the rest: as the forward's)
        dkdv_tile<NQ>(st, dpt, scale * LOG2E, Ls, Dl, lane, dva, dka, omn + os, qmn + qs);
      } else {
        mask_scores_t<NQ>(st, e, b, h, n0, t0, Tq, S, scale, lane);
        dkdv_tile<NQ>(st, dpt, 1.f, Ls, Dl, lane, dva, dka, omn + os, qmn + qs, dbias, hb, n0,
                      t0, Tq, S);
      }
    }
    __syncthreads();
  }
  const long long k0 = (long long)b * S * H + h;  // key 0's row
  store_tile<D / 8>(dk + k0 * D, (long long)H * D, dka, n0, S, scale, lane);
  store_tile<DV / 8>(dv + k0 * DV, (long long)H * DV, dva, n0, S, 1.f, lane);
}
"""


def wgmma_ops(ns) -> str:
    """WG<N>::ss (A and B from shared memory, both K-major), its first step ss0 (d written,
    not added to: no zeroed accumulator first) and WG<N>::rs (A from registers, B MN-major):
    d (N / 8 fragments of 4 floats) += A B over one k16 step of a warpgroup's 64 rows. The
    shared operands come as their descriptors' low words (sw_desc), the high word SW_HI
    joined in the instruction's braces; whether d is added to is a predicate operand, set
    from a register."""
    out = []
    for n in ns:
        m = n // 2  # accumulator registers a thread
        d = ", ".join(f"%{i}" for i in range(m))
        op = f'"wgmma.mma_async.sync.aligned.m64n{n}k16.f32." WG_AB'
        fr = ", ".join(f'"{{c}}f"(d[{i // 4}][{i % 4}])' for i in range(m))
        # operand numbers after the accumulators: ss's a, b, SW_HI and flag; rs's a[0..3],
        # b, SW_HI and flag
        a, b, hi, flag = (f"%{m + i}" for i in range(4))
        ss = ("  static __device__ __forceinline__ void {name}(float (*d)[4], unsigned a,"
              " unsigned b) {{\n"
              f'    asm volatile("{{{{ .reg .pred p; .reg .b64 da, db; setp.ne.b32 p, {flag}, 0; '
              f'mov.b64 da, {{{{{a}, {hi}}}}}; mov.b64 db, {{{{{b}, {hi}}}}}; " {op} '
              f'" {{{{{d}}}}}, da, db, p, 1, 1, 0, 0; }}}}"\n'
              '                 : {outs}\n'
              '                 : "r"(a), "r"(b), "r"(SW_HI), "r"({add}));\n  }}\n')
        ra = ", ".join(f"%{m + i}" for i in range(4))
        rb, rhi, rflag = (f"%{m + i}" for i in range(4, 7))
        out.append(
            f"template <> struct WG<{n}> {{\n"
            + ss.format(name="ss", outs=fr.format(c="+"), add=1)
            + ss.format(name="ss0", outs=fr.format(c="="), add=0)
            + "  static __device__ __forceinline__ void rs(float (*d)[4], const unsigned* a,"
            " unsigned b) {\n"
            f'    asm volatile("{{ .reg .pred p; .reg .b64 db; setp.ne.b32 p, {rflag}, 0; '
            f'mov.b64 db, {{{rb}, {rhi}}}; " {op} " {{{d}}}, {{{ra}}}, db, p, 1, 1, 1; }}"\n'
            f'                 : {fr.format(c="+")}\n                 : "r"(a[0]), "r"(a[1]),'
            f' "r"(a[2]), "r"(a[3]), "r"(b), "r"(SW_HI), "r"(1));\n  }}\n}};')
    return "\n".join(out)
