"""CUDA C source of the "tc" attention kernels (flash attention on tensor cores for
f16/bf16: mma.sync m16n8k16 with float32 accumulation; fwd (with the row logsumexp), dq,
dk/dv; tiles streamed through two cp.async shared-memory stages). attention_kernels.py
prefixes it with its #defines and PRELUDE. TC_COMMON (fragments, cp.async tiles, the masked
scores, the online softmax, the backward's dS and the tile stores) is shared with the Hopper
kernels (attention_wg.py)."""

TC_COMMON = r"""
// Products go in k16 steps. 16-bit types: mma.sync m16n8k16, lane = 4 g + tq: A (16x16,
// row-major) a0 (g, 2tq..+1), a1 (g+8, 2tq..), a2 (g, 2tq+8..), a3 (g+8, 2tq+8..); B (16x8)
// b0 (k 2tq..+1, n g), b1 (k 2tq+8..+1, n g); C (16x8) c0 c1 (g, 2tq..+1), c2 c3 (g+8,
// 2tq..+1). The C fragments of two adjacent n8 tiles are, packed in pairs, the A fragment
// of a 16x16 block.
// float32 (DTYPE 0, TF32 tensor cores): two mma.sync m16n8k8 a k16 step, A (16x8) a0 (g,
// tq), a1 (g+8, tq), a2 (g, tq+4), a3 (g+8, tq+4); B (8x8) b0 (k tq, n g), b1 (k tq+4, n g);
// C as above. An accumulator tile becomes an A operand with its k order permuted within
// each k8 block (k tq <- column 2 tq, k tq+4 <- column 2 tq + 1), and the B operand it meets
// is read in that order (frag_b_kn): no lane exchanges. Operands are rounded to TF32.
// A_N, B_N: the registers of a k16 A fragment and of one n8 tile's k16 B fragment.
//
// Tiles: the forward's block holds BMF = 16 MTF NWF query rows (NWF warps of 16 MTF rows:
// each K/V fragment read from shared memory feeds MTF mma row tiles) and streams K/V tiles
// of BNF keys; dq's holds BMD = 16 NWD rows, K/V tiles of BND keys; dk/dv's holds
// BNK = 16 NWK keys and streams Q/dO tiles of BMQ queries. Streamed tiles go through two
// shared-memory stages filled by cp.async: tile i + 1 loads while tile i is used.
#if DTYPE == 0
#define A_N 8
#define B_N 4
#else
#define A_N 4
#define B_N 2
#endif
#define EPV (16 / (int)sizeof(T))  // elements in 16 bytes (one cp.async)
#define LDK (D + PAD)              // shared-memory row strides (PAD: attention.tc_tiles)
#define LDV (DV + PAD)
#define BMF (16 * MTF * NWF)
#define BMD (16 * NWD)
#define BNK (16 * NWK)
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f
extern __shared__ __align__(16) unsigned char smem[];  // dynamic: the tiles of one block

template <int N8>
__device__ __forceinline__ void zero(float (*x)[4]) {  // N8 accumulator tiles
#pragma unroll
  for (int j = 0; j < N8; j++) x[j][0] = x[j][1] = x[j][2] = x[j][3] = 0.f;
}

#if DTYPE == 0
__device__ __forceinline__ void mma8(float* c, const unsigned* a, unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// c += A B over one k16 step (a: A_N registers, b: B_N, one n8 tile).
__device__ __forceinline__ void mma(float* c, const unsigned* a, const unsigned* b) {
  mma8(c, a, b[0], b[1]);
  mma8(c, a + 4, b[2], b[3]);
}
__device__ __forceinline__ unsigned tf32(float x) {  // to nearest, ties away from zero
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
// Two values of an output row at column col (even).
__device__ __forceinline__ void store2(T* row, int col, float lo, float hi) {
  *reinterpret_cast<float2*>(row + col) = make_float2(lo, hi);
}
#else
#if DTYPE == 1
#define MMA_OP "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
#define CVT2 "cvt.rn.f16x2.f32"
#else
#define MMA_OP "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
#define CVT2 "cvt.rn.bf16x2.f32"
#endif
__device__ __forceinline__ void mma(float* c, const unsigned* a, const unsigned* b) {
  asm(MMA_OP " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ unsigned pack2(float lo, float hi) {  // lo in the low half
  unsigned r;
  asm(CVT2 " %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ void store2(T* row, int col, float lo, float hi) {
  *reinterpret_cast<unsigned*>(row + col) = pack2(lo, hi);
}
#endif
__device__ __forceinline__ float ex2(float x) {  // 2^x on the SFU; 2^-inf = 0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ unsigned saddr(const void* p) {
  unsigned r;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r;
}
// cp.async: global -> shared without registers, zeros where !ok (no bytes are read then);
// a thread's copies complete by commit groups (cp_wait<N>: all but the newest N groups).
__device__ __forceinline__ void cp16s(unsigned dst, const void* src, bool ok) {  // dst: saddr
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
               :: "r"(dst), "l"(src), "r"(ok ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp16(void* dst, const void* src, bool ok) {
  cp16s(saddr(dst), src, ok);
}
__device__ __forceinline__ void cp4(void* dst, const void* src, bool ok) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;"
               :: "r"(saddr(dst)), "l"(src), "r"(ok ? 4 : 0) : "memory");
}
__device__ __forceinline__ void cp_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");
}
#if DTYPE == 0
// A operand: the 16x16 block at (r0, c0) of a row-major shared tile.
__device__ __forceinline__ void frag_a(unsigned* a, const T* s, int ld, int r0, int c0,
                                       int lane) {
  const T* p = s + (r0 + (lane >> 2)) * ld + c0 + (lane & 3);
#pragma unroll
  for (int h = 0; h < 2; h++) {  // k8 block c0 + 8 h
    a[4 * h] = tf32(p[8 * h]);
    a[4 * h + 1] = tf32(p[8 * ld + 8 * h]);
    a[4 * h + 2] = tf32(p[8 * h + 4]);
    a[4 * h + 3] = tf32(p[8 * ld + 8 * h + 4]);
  }
}
// B operands of the n8 tiles n0 and n0 + 8 (b[0..3], b[4..7]) for k16 block k0, from a
// shared tile stored [n][k] ...
__device__ __forceinline__ void frag_b_nk(unsigned* b, const T* s, int ld, int n0, int k0,
                                          int lane) {
  const T* p = s + (n0 + (lane >> 2)) * ld + k0 + (lane & 3);
#pragma unroll
  for (int t = 0; t < 2; t++) {  // n8 tile n0 + 8 t: k tq, tq + 4, tq + 8, tq + 12
#pragma unroll
    for (int i = 0; i < 4; i++) b[4 * t + i] = tf32(p[8 * t * ld + 4 * i]);
  }
}
// ... or stored [k][n], in pack_a's permuted k order: k 2 tq, 2 tq + 1, 2 tq + 8, 2 tq + 9.
__device__ __forceinline__ void frag_b_kn(unsigned* b, const T* s, int ld, int k0, int n0,
                                          int lane) {
  const T* p = s + (k0 + 2 * (lane & 3)) * ld + n0 + (lane >> 2);
#pragma unroll
  for (int t = 0; t < 2; t++) {
#pragma unroll
    for (int i = 0; i < 4; i++) b[4 * t + i] = tf32(p[((i >> 1) * 8 + (i & 1)) * ld + 8 * t]);
  }
}
// The A fragment of k-block kb of a 16-row accumulator tile x (P or dS), k permuted.
__device__ __forceinline__ void pack_a(unsigned* a, float (*x)[4], int kb) {
#pragma unroll
  for (int h = 0; h < 2; h++) {
    a[4 * h] = tf32(x[2 * kb + h][0]);
    a[4 * h + 1] = tf32(x[2 * kb + h][2]);
    a[4 * h + 2] = tf32(x[2 * kb + h][1]);
    a[4 * h + 3] = tf32(x[2 * kb + h][3]);
  }
}
#else
// Four 8x8 b16 matrices; lane l gives the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void ldsm4(unsigned* r, const T* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(saddr(p)));
}
__device__ __forceinline__ void ldsm4t(unsigned* r, const T* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(saddr(p)));
}
// A operand: the 16x16 block at (r0, c0) of a row-major shared tile.
__device__ __forceinline__ void frag_a(unsigned* a, const T* s, int ld, int r0, int c0,
                                       int lane) {
  ldsm4(a, s + (r0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld + c0 + (lane >> 4) * 8);
}
// B operands of the n8 tiles n0 and n0 + 8 (b[0..1], b[2..3]) for k16 block k0, from a
// shared tile stored [n][k] ...
__device__ __forceinline__ void frag_b_nk(unsigned* b, const T* s, int ld, int n0, int k0,
                                          int lane) {
  ldsm4(b, s + (n0 + (lane & 7) + (lane >> 4) * 8) * ld + k0 + ((lane >> 3) & 1) * 8);
}
// ... or stored [k][n] (transposing load).
__device__ __forceinline__ void frag_b_kn(unsigned* b, const T* s, int ld, int k0, int n0,
                                          int lane) {
  ldsm4t(b, s + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld + n0 + (lane >> 4) * 8);
}
// The A fragment of k-block kb of a 16-row accumulator tile x (P or dS).
__device__ __forceinline__ void pack_a(unsigned* a, float (*x)[4], int kb) {
  a[0] = pack2(x[2 * kb][0], x[2 * kb][1]);
  a[1] = pack2(x[2 * kb][2], x[2 * kb][3]);
  a[2] = pack2(x[2 * kb + 1][0], x[2 * kb + 1][1]);
  a[3] = pack2(x[2 * kb + 1][2], x[2 * kb + 1][3]);
}
#endif
// acc[2 j..2 j + 1] += A (16 x 16 k-block kb of a row-major tile at row r0) times the
// [n][k] tile's k-block kb, over NB pairs of n8 tiles.
template <int NB>
__device__ __forceinline__ void mma_nk(float (*acc)[4], const unsigned* a, const T* s, int ld,
                                       int kb, int lane) {
#pragma unroll
  for (int nb = 0; nb < NB; nb++) {
    unsigned bf[2 * B_N];
    frag_b_nk(bf, s, ld, nb * 16, kb * 16, lane);
    mma(acc[2 * nb], a, bf);
    mma(acc[2 * nb + 1], a, bf + B_N);
  }
}
template <int NB>
__device__ __forceinline__ void mma_kn(float (*acc)[4], const unsigned* a, const T* s, int ld,
                                       int kb, int lane) {
#pragma unroll
  for (int nb = 0; nb < NB; nb++) {
    unsigned bf[2 * B_N];
    frag_b_kn(bf, s, ld, kb * 16, nb * 16, lane);
    mma(acc[2 * nb], a, bf);
    mma(acc[2 * nb + 1], a, bf + B_N);
  }
}
// The backward's two score-shaped products of a warp's 16 rows: x = A1 B1^T over D and
// y = A2 B2^T over DV, A1/A2 [rows][D or DV] and B1/B2 [NB * 16][D or DV] shared tiles.
template <int NB>
__device__ __forceinline__ void two_products(float (*x)[4], float (*y)[4], const T* a1,
                                             const T* b1, const T* a2, const T* b2, int warp,
                                             int lane) {
  zero<2 * NB>(x);
  zero<2 * NB>(y);
#pragma unroll
  for (int kb = 0; kb < D / 16; kb++) {
    unsigned a[A_N];
    frag_a(a, a1, LDK, warp * 16, kb * 16, lane);
    mma_nk<NB>(x, a, b1, LDK, kb, lane);
  }
#pragma unroll
  for (int kb = 0; kb < DV / 16; kb++) {
    unsigned a[A_N];
    frag_a(a, a2, LDV, warp * 16, kb * 16, lane);
    mma_nk<NB>(y, a, b2, LDV, kb, lane);
  }
}
// Rows [row0, row0 + NR) of a W-wide operand (global row r at src + r * gs) into the
// shared tile dst[NR][ld] by cp.async, 16 bytes a thread (NTH threads); rows at or past n
// are zeros.
template <int NR, int W, int NTH>
__device__ __forceinline__ void load_rows(T* dst, int ld, const T* __restrict__ src,
                                          long long gs, int row0, int n) {
  constexpr int PER_ROW = W / EPV, ALL = NR * PER_ROW;
#pragma unroll
  for (int j = 0; j < (ALL + NTH - 1) / NTH; j++) {
    const int i = threadIdx.x + j * NTH;
    if (ALL % NTH == 0 || i < ALL) {
      const int r = i / PER_ROW, c = (i - r * PER_ROW) * EPV;
      const bool ok = row0 + r < n;
      cp16(dst + r * ld + c, src + (ok ? row0 + r : 0) * gs + c, ok);
    }
  }
}
// src[row0 .. row0 + NR) into dst by cp.async (zeros at or past n).
template <int NR, int NTH>
__device__ __forceinline__ void load_vec(float* dst, const float* __restrict__ src, int row0,
                                         int n) {
  for (int i = threadIdx.x; i < NR; i += NTH) {
    const bool ok = row0 + i < n;
    cp4(dst + i, src + (ok ? row0 + i : 0), ok);
  }
}

// Scores of a warp's 16 rows x NJ*8 keys (row r0 + g + 8 (i >> 1), key k0 + 8 j + 2 tq +
// (i & 1)) -> scaled, biased, in log2 units, -INF where the query does not attend the key,
// once multiplied by the factor returned: a tile every row attends whole (whole_tile:
// causal at most, below the diagonal) is left as it came and its factor, scale * LOG2E,
// goes into the exponent's FFMA (no multiply of its own); any other tile is converted here
// (mask_scores; factor 1).
template <int NJ>
__device__ __forceinline__ bool whole_tile(const Extra& e, int r0, int k0, int S) {
  return !(e.flags & ~1) && k0 + NJ * 8 <= S && !((e.flags & 1) && k0 + NJ * 8 - 1 > r0);
}
template <int NJ>
__device__ __forceinline__ void mask_scores(float (*s)[4], const Extra& e, int b, int h,
                                            int r0, int k0, int Tq, int S, float scale,
                                            int lane) {
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int j = 0; j < NJ; j++) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
      float x = s[j][i] * scale;
      const int t = min(r0 + g + 8 * (i >> 1), Tq - 1), c = k0 + 8 * j + 2 * tq + (i & 1);
      s[j][i] = (c < S && attend(e, b, h, t, c, x)) ? x * LOG2E : -INF;
    }
  }
}
template <int NJ>
__device__ __forceinline__ float scores_log2(float (*s)[4], const Extra& e, int b, int h,
                                             int r0, int k0, int Tq, int S, float scale,
                                             int lane) {
  if (whole_tile<NJ>(e, r0, k0, S)) return scale * LOG2E;
  mask_scores<NJ>(s, e, b, h, r0, k0, Tq, S, scale, lane);
  return 1.f;
}

// Online softmax of one 16-row tile of scores s (log2 units once times c > 0, as
// scores_log2 returns them) into the running max m, sum l and accumulator acc (NO n8
// tiles); s becomes P. The running max moves only when some row of the warp has a maximum
// more than RESCALE (log2 units) above its own, and then every row of the warp takes its new
// maximum and rescales its sum and accumulator; otherwise it stays where it was, so that
// p = 2^(s - m) stays below 2^RESCALE, far inside float32's range and bf16's (the sum and
// the output are relative to the same m, so the result is the same up to rounding). Along a
// long row the maximum seldom grows by a factor 2^RESCALE: the accumulator is rarely
// rescaled (FlashAttention-4's conditional rescaling; with a threshold of 0 a warp rescaled
// whenever a row's maximum moved at all, at most tiles of a short row).
#define RESCALE 8.f
template <int NJ, int NO>
__device__ __forceinline__ void softmax_step(float (*s)[4], float c, float* m, float* l,
                                             float (*acc)[4]) {
  float mx[2] = {fmaxf(s[0][0], s[0][1]), fmaxf(s[0][2], s[0][3])};
#pragma unroll
  for (int j = 1; j < NJ; j++) {
    mx[0] = fmaxf(mx[0], fmaxf(s[j][0], s[j][1]));
    mx[1] = fmaxf(mx[1], fmaxf(s[j][2], s[j][3]));
  }
  bool grew = false;
#pragma unroll
  for (int r = 0; r < 2; r++) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(FULL_MASK, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(FULL_MASK, mx[r], 2)) * c;  // (c > 0)
    grew |= mx[r] > m[r] + RESCALE;  // (false for a row with no score yet: -INF > -INF)
  }
  if (__any_sync(FULL_MASK, grew)) {
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
      const float n = fmaxf(m[r], mx[r]);
      alpha[r] = ex2(m[r] - (n == -INF ? 0.f : n));  // (2^-inf = 0 for a row's first scores)
      m[r] = n;
      l[r] *= alpha[r];
    }
#pragma unroll
    for (int j = 0; j < NO; j++) {
#pragma unroll
      for (int i = 0; i < 4; i++) acc[j][i] *= alpha[i >> 1];
    }
  }
  // a row with no score so far: p = 2^(-inf - 0) = 0, no NaN
  const float mu[2] = {m[0] == -INF ? 0.f : m[0], m[1] == -INF ? 0.f : m[1]};
#pragma unroll
  for (int j = 0; j < NJ; j++) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const float p = ex2(fmaf(s[j][i], c, -mu[i >> 1]));
      s[j][i] = p;
      l[i >> 1] += p;
    }
  }
}

// The rows r0 + g and r0 + g + 8 below n of a warp's 16-row accumulator tile x (N8 n8
// tiles), times mul, into out (row r at out + r * rs).
template <int N8>
__device__ __forceinline__ void store_tile(T* out, long long rs, float (*x)[4], int r0, int n,
                                           float mul, int lane) {
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const int t = r0 + g + 8 * r;
    if (t >= n) continue;
#pragma unroll
    for (int j = 0; j < N8; j++)
      store2(out + t * rs, 8 * j + 2 * tq, x[j][2 * r] * mul, x[j][2 * r + 1] * mul);
  }
}

// dq's per-row statistics of a warp's rows r0 + g, r0 + g + 8: the logsumexp in log2 units
// (+inf for an empty row: P = 0) and delta.
__device__ __forceinline__ void row_stats(float* l2, float* dl, const float* __restrict__ lse,
                                          const float* __restrict__ delta, long long hb,
                                          int r0, int Tq, int lane) {
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const int t = min(r0 + (lane >> 2) + 8 * r, Tq - 1);
    l2[r] = lse[hb * Tq + t] * LOG2E;
    dl[r] = delta[hb * Tq + t];
  }
}

// dq's dS = P (dP - delta), P = 2^(scores - lse), of a warp's 16 query rows x NJ*8 keys
// from the scores s (as scores_log2 leaves them, to be multiplied by c) and dP = dO V^T dp;
// s becomes dS.
template <int NJ>
__device__ __forceinline__ void dq_ds(float (*s)[4], float (*dp)[4], float c, const float* l2,
                                      const float* dl) {
#pragma unroll
  for (int j = 0; j < NJ; j++) {
#pragma unroll
    for (int i = 0; i < 4; i++)
      s[j][i] = ex2(fmaf(s[j][i], c, -l2[i >> 1])) * (dp[j][i] - dl[i >> 1]);
  }
}

// dk/dv's transposed tiles of a warp's 16 keys x NQ*8 queries (key n0 + g + 8 (i >> 1),
// query t0 + 8 j + 2 tq + (i & 1)) from S^T = K Q^T st and dP^T = V dO^T dpt, in three
// steps: scores_t_log2 scales and masks st as scores_log2 does (a block every query attends
// whole, whole_block, is left for the exponent's FFMA); dkdv_probs makes st P^T and dpt dS^T
// with the queries' lse Ls and delta Dl (shared memory, from query t0); dbias_store writes
// dS^T into dbias [B, H, Tq, S] (0 where masked, as there). Masks, the exponentials and
// dbias go in separate loops, none with a branch inside: the compiler then overlaps the
// elements' exponentials (one branch an element had serialized them, and made these loops
// most of dk/dv's time).
template <int NQ>
__device__ __forceinline__ bool whole_block(const Extra& e, int n0, int t0, int Tq, int S) {
  return !(e.flags & ~1) && n0 + 16 <= S && t0 + NQ * 8 <= Tq &&
         !((e.flags & 1) && t0 < n0 + 15);
}
template <int NQ>
__device__ __forceinline__ void mask_scores_t(float (*st)[4], const Extra& e, int b, int h,
                                              int n0, int t0, int Tq, int S, float scale,
                                              int lane) {
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int j = 0; j < NQ; j++) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int t = t0 + 8 * j + 2 * tq + (i & 1), s = n0 + g + 8 * (i >> 1);
      float x = st[j][i] * scale;
      st[j][i] = (s < S && t < Tq && attend(e, b, h, t, s, x)) ? x * LOG2E : -INF;
    }
  }
}
template <int NQ>
__device__ __forceinline__ float scores_t_log2(float (*st)[4], const Extra& e, int b, int h,
                                               int n0, int t0, int Tq, int S, float scale,
                                               int lane) {
  if (whole_block<NQ>(e, n0, t0, Tq, S)) return scale * LOG2E;
  mask_scores_t<NQ>(st, e, b, h, n0, t0, Tq, S, scale, lane);
  return 1.f;
}
template <int NQ>
__device__ __forceinline__ void dkdv_probs(float (*st)[4], float (*dpt)[4], float c,
                                           const float* Ls, const float* Dl, int lane) {
  const int tq = lane & 3;
#pragma unroll
  for (int j = 0; j < NQ; j++) {
    const float2 lj = *reinterpret_cast<const float2*>(Ls + 8 * j + 2 * tq);
    const float2 dj = *reinterpret_cast<const float2*>(Dl + 8 * j + 2 * tq);
    const float l2[2] = {lj.x * LOG2E, lj.y * LOG2E}, dl[2] = {dj.x, dj.y};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      st[j][i] = ex2(fmaf(st[j][i], c, -l2[i & 1]));  // 0 where masked (and an empty row's +inf)
      dpt[j][i] = st[j][i] * (dpt[j][i] - dl[i & 1]);
    }
  }
}
template <int NQ>
__device__ __forceinline__ void dbias_store(float (*dpt)[4], float* __restrict__ dbias,
                                            long long hb, int n0, int t0, int Tq, int S,
                                            int lane) {
  const int g = lane >> 2, tq = lane & 3;
#pragma unroll
  for (int j = 0; j < NQ; j++) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int t = t0 + 8 * j + 2 * tq + (i & 1), s = n0 + g + 8 * (i >> 1);
      if (s < S && t < Tq) dbias[(hb * Tq + t) * S + s] = dpt[j][i];
    }
  }
}

"""

TC_KERNELS = r"""
// Forward (the output and the row logsumexp) of the BMF query rows of block (b h, y).
__device__ __forceinline__ void tc_fwd(const T* __restrict__ q, const T* __restrict__ k,
                                       const T* __restrict__ v, T* __restrict__ o,
                                       float* __restrict__ lse, const Extra& e, int Tq, int S,
                                       int H, float scale) {
  constexpr int NTH = 32 * NWF, NJ = BNF / 8, NO = DV / 8;
  T* Qs = reinterpret_cast<T*>(smem);  // [BMF][LDK]
  T* Kb = Qs + BMF * LDK;              // 2 stages of [BNF][LDK]
  T* Vb = Kb + 2 * BNF * LDK;          // 2 stages of [BNF][LDV]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3;
  const int b = blockIdx.x / H, h = blockIdx.x - b * H;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * BMF;  // causal: the longest rows first
  const int w0 = q0 + warp * 16 * MTF;                // this warp's first row
  const long long hb = (long long)b * H + h;
  const T* kbase = k + ((long long)b * S * H + h) * D;
  const T* vbase = v + ((long long)b * S * H + h) * DV;
  int lo, hi;
  key_range(e, q0, BMF, S, BNF, lo, hi);
  load_rows<BMF, D, NTH>(Qs, LDK, q + ((long long)b * Tq * H + h) * D, (long long)H * D, q0,
                         Tq);
  cp_commit();
  if (lo < hi) {
    load_rows<BNF, D, NTH>(Kb, LDK, kbase, (long long)H * D, lo, S);
    load_rows<BNF, DV, NTH>(Vb, LDV, vbase, (long long)H * DV, lo, S);
  }
  cp_commit();
  cp_wait<1>();  // the Q tile
  __syncthreads();
  unsigned qf[MTF][D / 16][A_N];
#pragma unroll
  for (int mt = 0; mt < MTF; mt++) {
#pragma unroll
    for (int kb = 0; kb < D / 16; kb++)
      frag_a(qf[mt][kb], Qs, LDK, (warp * MTF + mt) * 16, kb * 16, lane);
  }
  float acc[MTF][NO][4];
  float mr[MTF][2], lr[MTF][2];
#pragma unroll
  for (int mt = 0; mt < MTF; mt++) {
    mr[mt][0] = mr[mt][1] = -INF;
    lr[mt][0] = lr[mt][1] = 0.f;
    zero<NO>(acc[mt]);
  }
  int stage = 0;
  for (int k0 = lo; k0 < hi; k0 += BNF, stage ^= 1) {
    if (k0 + BNF < hi) {  // the next tile into the other stage (free since the last barrier)
      load_rows<BNF, D, NTH>(Kb + (stage ^ 1) * BNF * LDK, LDK, kbase, (long long)H * D,
                             k0 + BNF, S);
      load_rows<BNF, DV, NTH>(Vb + (stage ^ 1) * BNF * LDV, LDV, vbase, (long long)H * DV,
                              k0 + BNF, S);
    }
    cp_commit();
    cp_wait<1>();  // this tile
    __syncthreads();
    if (!((e.flags & 1) && k0 > w0 + 16 * MTF - 1)) {  // causal: keys after all warp rows
      const T* Ks = Kb + stage * BNF * LDK;
      const T* Vs = Vb + stage * BNF * LDV;
      float s[MTF][NJ][4];
#pragma unroll
      for (int mt = 0; mt < MTF; mt++) zero<NJ>(s[mt]);
#pragma unroll
      for (int kb = 0; kb < D / 16; kb++) {
#pragma unroll
        for (int nb = 0; nb < NJ / 2; nb++) {
          unsigned bf[2 * B_N];
          frag_b_nk(bf, Ks, LDK, nb * 16, kb * 16, lane);
#pragma unroll
          for (int mt = 0; mt < MTF; mt++) {
            mma(s[mt][2 * nb], qf[mt][kb], bf);
            mma(s[mt][2 * nb + 1], qf[mt][kb], bf + B_N);
          }
        }
      }
#pragma unroll
      for (int mt = 0; mt < MTF; mt++) {
        const float c = scores_log2<NJ>(s[mt], e, b, h, w0 + 16 * mt, k0, Tq, S, scale, lane);
        softmax_step<NJ, NO>(s[mt], c, mr[mt], lr[mt], acc[mt]);
      }
#pragma unroll
      for (int kb = 0; kb < BNF / 16; kb++) {
        unsigned pa[MTF][A_N];
#pragma unroll
        for (int mt = 0; mt < MTF; mt++) pack_a(pa[mt], s[mt], kb);
#pragma unroll
        for (int nb = 0; nb < DV / 16; nb++) {
          unsigned bf[2 * B_N];
          frag_b_kn(bf, Vs, LDV, kb * 16, nb * 16, lane);
#pragma unroll
          for (int mt = 0; mt < MTF; mt++) {
            mma(acc[mt][2 * nb], pa[mt], bf);
            mma(acc[mt][2 * nb + 1], pa[mt], bf + B_N);
          }
        }
      }
    }
    __syncthreads();  // all reads of this stage done: the next iteration refills it
  }
#pragma unroll
  for (int mt = 0; mt < MTF; mt++) {
#pragma unroll
    for (int r = 0; r < 2; r++) {
      float l = lr[mt][r];
      l += __shfl_xor_sync(FULL_MASK, l, 1);
      l += __shfl_xor_sync(FULL_MASK, l, 2);
      const int t = w0 + 16 * mt + g + 8 * r;
      if (t >= Tq) continue;
      const float inv = l > 0.f ? 1.f / l : 0.f;
      T* orow = o + (((long long)b * Tq + t) * H + h) * DV;
#pragma unroll
      for (int j = 0; j < NO; j++)
        store2(orow, 8 * j + 2 * tq, acc[mt][j][2 * r] * inv, acc[mt][j][2 * r + 1] * inv);
      if (tq == 0)
        lse[hb * Tq + t] = l > 0.f ? mr[mt][r] * LN2 + logf(l) : INF;
    }
  }
}

extern "C" __global__ void __launch_bounds__(32 * NWF)
mx_tc_fwd(const T* q, const T* k, const T* v, T* o, float* lse, EXTRA_PARAMS, int Tq, int S,
          int H, float scale) {
  EXTRA_INIT;
  tc_fwd(q, k, v, o, lse, e, Tq, S, H, scale);
}

// dq = scale * dS K with dS = P * (dP - delta), P = exp(scores - lse), dP = dO V^T:
// a block owns BMD query rows (16 a warp), streams K/V tiles of BND keys.
extern "C" __global__ void __launch_bounds__(32 * NWD)
mx_tc_dq(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
         const T* __restrict__ dout, const float* __restrict__ lse,
         const float* __restrict__ delta, T* __restrict__ dq, EXTRA_PARAMS, int Tq, int S,
         int H, float scale) {
  EXTRA_INIT;
  constexpr int NTH = 32 * NWD, NJ = BND / 8;
  T* Qs = reinterpret_cast<T*>(smem);  // [BMD][LDK]
  T* Os = Qs + BMD * LDK;              // [BMD][LDV]: dO
  T* Kb = Os + BMD * LDV;              // 2 stages of [BND][LDK]
  T* Vb = Kb + 2 * BND * LDK;          // 2 stages of [BND][LDV]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int b = blockIdx.x / H, h = blockIdx.x - b * H;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * BMD;
  const int r0 = q0 + warp * 16;
  const long long hb = (long long)b * H + h;
  const T* kbase = k + ((long long)b * S * H + h) * D;
  const T* vbase = v + ((long long)b * S * H + h) * DV;
  int lo, hi;
  key_range(e, q0, BMD, S, BND, lo, hi);
  load_rows<BMD, D, NTH>(Qs, LDK, q + ((long long)b * Tq * H + h) * D, (long long)H * D, q0,
                         Tq);
  load_rows<BMD, DV, NTH>(Os, LDV, dout + ((long long)b * Tq * H + h) * DV,
                          (long long)H * DV, q0, Tq);
  cp_commit();
  if (lo < hi) {
    load_rows<BND, D, NTH>(Kb, LDK, kbase, (long long)H * D, lo, S);
    load_rows<BND, DV, NTH>(Vb, LDV, vbase, (long long)H * DV, lo, S);
  }
  cp_commit();
  float l2[2], dl[2];
  row_stats(l2, dl, lse, delta, hb, r0, Tq, lane);
  float acc[D / 8][4];
  zero<D / 8>(acc);
  int stage = 0;
  for (int k0 = lo; k0 < hi; k0 += BND, stage ^= 1) {
    if (k0 + BND < hi) {
      load_rows<BND, D, NTH>(Kb + (stage ^ 1) * BND * LDK, LDK, kbase, (long long)H * D,
                             k0 + BND, S);
      load_rows<BND, DV, NTH>(Vb + (stage ^ 1) * BND * LDV, LDV, vbase, (long long)H * DV,
                              k0 + BND, S);
    }
    cp_commit();
    cp_wait<1>();  // this tile (and, the first time, Q and dO)
    __syncthreads();
    if (!((e.flags & 1) && k0 > r0 + 15)) {
      const T* Ks = Kb + stage * BND * LDK;
      const T* Vs = Vb + stage * BND * LDV;
      float s[NJ][4], dp[NJ][4];
      two_products<NJ / 2>(s, dp, Qs, Ks, Os, Vs, warp, lane);  // s = Q K^T, dp = dO V^T
      const float c = scores_log2<NJ>(s, e, b, h, r0, k0, Tq, S, scale, lane);
      dq_ds<NJ>(s, dp, c, l2, dl);
#pragma unroll
      for (int kb = 0; kb < BND / 16; kb++) {
        unsigned a[A_N];
        pack_a(a, s, kb);
        mma_kn<D / 16>(acc, a, Ks, LDK, kb, lane);
      }
    }
    __syncthreads();
  }
  store_tile<D / 8>(dq + ((long long)b * Tq * H + h) * D, (long long)H * D, acc, r0, Tq, scale,
                   lane);
}

// The Q/dO tile of BMQ queries from t0, with its lse and delta, into stage `st`.
template <int NTH>
__device__ __forceinline__ void load_q_tile(T* Qb, T* Ob, float* Lb, float* Db, int st,
                                            const T* qbase, const T* obase, const float* lrow,
                                            const float* drow, int t0, int Tq, int H) {
  load_rows<BMQ, D, NTH>(Qb + st * BMQ * LDK, LDK, qbase, (long long)H * D, t0, Tq);
  load_rows<BMQ, DV, NTH>(Ob + st * BMQ * LDV, LDV, obase, (long long)H * DV, t0, Tq);
  load_vec<BMQ, NTH>(Lb + st * BMQ, lrow, t0, Tq);
  load_vec<BMQ, NTH>(Db + st * BMQ, drow, t0, Tq);
}

// dV = P^T dO, dK = scale * dS^T Q, optionally dS itself (dbias): a block owns BNK keys
// (16 a warp), streams Q/dO tiles of BMQ queries; the warp's products are transposed
// (rows = keys).
extern "C" __global__ void __launch_bounds__(32 * NWK)
mx_tc_dkdv(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
           const T* __restrict__ dout, const float* __restrict__ lse,
           const float* __restrict__ delta, T* __restrict__ dk, T* __restrict__ dv,
           float* __restrict__ dbias, EXTRA_PARAMS, int Tq, int S, int H, float scale) {
  EXTRA_INIT;
  constexpr int NTH = 32 * NWK;
  T* Ks = reinterpret_cast<T*>(smem);  // [BNK][LDK]
  T* Vs = Ks + BNK * LDK;              // [BNK][LDV]
  T* Qb = Vs + BNK * LDV;              // 2 stages of [BMQ][LDK]
  T* Ob = Qb + 2 * BMQ * LDK;          // 2 stages of [BMQ][LDV]: dO
  float* Lb = reinterpret_cast<float*>(Ob + 2 * BMQ * LDV);  // 2 stages of [BMQ]: lse
  float* Db = Lb + 2 * BMQ;                                  // 2 stages of [BMQ]: delta
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int b = blockIdx.x / H, h = blockIdx.x - b * H;
  const int s0 = blockIdx.y * BNK;  // causal: the first keys (the most queries) first
  const int n0 = s0 + warp * 16;    // this warp's first key
  const long long hb = (long long)b * H + h;
  const T* qbase = q + ((long long)b * Tq * H + h) * D;
  const T* obase = dout + ((long long)b * Tq * H + h) * DV;
  const float* lrow = lse + hb * Tq;
  const float* drow = delta + hb * Tq;
  load_rows<BNK, D, NTH>(Ks, LDK, k + ((long long)b * S * H + h) * D, (long long)H * D, s0, S);
  load_rows<BNK, DV, NTH>(Vs, LDV, v + ((long long)b * S * H + h) * DV, (long long)H * DV, s0,
                          S);
  cp_commit();
  int lo, hi;
  query_range(e, s0, BNK, Tq, BMQ, lo, hi);
  if (lo < hi) load_q_tile<NTH>(Qb, Ob, Lb, Db, 0, qbase, obase, lrow, drow, lo, Tq, H);
  cp_commit();
  float dka[D / 8][4], dva[DV / 8][4];
  zero<D / 8>(dka);
  zero<DV / 8>(dva);
  int stage = 0;
  for (int t0 = lo; t0 < hi; t0 += BMQ, stage ^= 1) {
    if (t0 + BMQ < hi)
      load_q_tile<NTH>(Qb, Ob, Lb, Db, stage ^ 1, qbase, obase, lrow, drow, t0 + BMQ, Tq, H);
    cp_commit();
    cp_wait<1>();  // this tile (and, the first time, K and V)
    __syncthreads();
    if (!((e.flags & 1) && t0 + BMQ - 1 < n0)) {  // causal: all queries before the keys
      const T* Qs = Qb + stage * BMQ * LDK;
      const T* Os = Ob + stage * BMQ * LDV;
      const float* Ls = Lb + stage * BMQ;
      const float* Dl = Db + stage * BMQ;
      // S^T = K Q^T, dP^T = V dO^T: key n0 + g + 8 (i >> 1), query t0 + 8 j + 2 tq + (i & 1)
      float st[BMQ / 8][4], dpt[BMQ / 8][4];
      two_products<BMQ / 16>(st, dpt, Ks, Qs, Vs, Os, warp, lane);
      const float c = scores_t_log2<BMQ / 8>(st, e, b, h, n0, t0, Tq, S, scale, lane);
      dkdv_probs<BMQ / 8>(st, dpt, c, Ls, Dl, lane);
      if (dbias != nullptr) dbias_store<BMQ / 8>(dpt, dbias, hb, n0, t0, Tq, S, lane);
#pragma unroll
      for (int kb = 0; kb < BMQ / 16; kb++) {
        unsigned a[A_N];
        pack_a(a, st, kb);
        mma_kn<DV / 16>(dva, a, Os, LDV, kb, lane);
        pack_a(a, dpt, kb);
        mma_kn<D / 16>(dka, a, Qs, LDK, kb, lane);
      }
    }
    __syncthreads();
  }
  const long long k0 = (long long)b * S * H + h;  // key 0's row
  store_tile<D / 8>(dk + k0 * D, (long long)H * D, dka, n0, S, scale, lane);
  store_tile<DV / 8>(dv + k0 * DV, (long long)H * DV, dva, n0, S, 1.f, lane);
}
"""

TC = TC_COMMON + TC_KERNELS
