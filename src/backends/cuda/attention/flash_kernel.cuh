// Flash-attention forward (FA2 style) on mma.sync m16n8k16 tensor cores, fp32 accumulation.
//
// One block = one (sequence, kv head, tile of `BM` query rows). GQA packs the group's query
// heads into rows, so a K/V tile loaded once serves every head that shares it (and decode's
// single query per head still fills a 16-row mma tile when the group is large). Per K/V tile
// of `BN` keys: S = Q K^T (Q fragments from registers or shared memory, K via ldmatrix),
// online softmax in registers (running max and sum per row, exp2 in log2 units), O += P V (P
// re-used from S's accumulator registers as the A operand, V via ldmatrix.trans). The score
// matrix never exists in memory; causal tiles wholly above a warp's diagonal are skipped and
// only tiles crossing the diagonal or the sequence end are masked.
//
// K/V tiles stream through a `STAGES`-deep cp.async ring (zero-filled past the sequence end,
// so masked keys multiply exact zeros, never stale or NaN memory). Shared rows are
// XOR-swizzled in 16-byte chunks so ldmatrix and the epilogue's stores are conflict-free.
//
// Split-KV (flash-decoding): with gridDim.z = splits > 1 each block takes a contiguous share
// of its key tiles and writes its normalised partial output (fp32) and log2-sum-exp; the
// combine kernel (flash_combine.cuh) weighs the shares.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "backends/cuda/attention/flash_launch.h"

namespace tunableop::cuda::flash_detail {

// ---- PTX wrappers ---------------------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared; src_bytes 0 writes zeros and reads nothing.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

template <class T>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));  // ex2(-inf) = +0
  return y;
}

// Logit softcapping of a scaled score s: cap * tanh(s / cap), as cap - 2 cap / (exp(2 s / cap) + 1)
// through ex2.approx (absolute error a few ulp of cap; tanh.approx's 2^-11 relative error would
// move Gemma-2's probabilities by up to 0.5% at its cap of 50). Saturates to +-cap.
__device__ __forceinline__ float softcap_score(float s, float cap) {
  const float e = fast_exp2(s * (2.8853900817779268f / cap));  // exp(2 s / cap)
  return cap - __fdividef(2.f * cap, e + 1.f);
}

// Two floats -> one register of two 16-bit values, the lower column in the low half.
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

template <class T>
__device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(x);
  } else {
    return __float2half_rn(x);
  }
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Programmatic dependent launch (sm_90): a kernel launched with it may start while the one before
// it in the stream finishes, and waits (griddepcontrol.wait) for that one's completion and
// memory before reading anything; the one before lets it launch (launch_dependents) once all
// its own blocks are running. The split kernel lets the combine kernel launch early, and the
// combine lets the next call's kernel launch early in turn.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dependents_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// ---- Tile geometry ----------------------------------------------------------------------------

template <int D, int BM, int BN, int WARPS, int STAGES>
struct Tiles {
  static_assert(D == 64 || D == 128 || D == 256, "head_dim 64, 128 or 256");
  static_assert(BM % (16 * WARPS) == 0, "each warp owns whole 16-row mma tiles");
  static_assert(BN % 16 == 0 && STAGES >= 2, "keys per tile a multiple of 16; at least two stages");
  static constexpr int kThreads = 32 * WARPS;
  static constexpr int kMt = BM / (16 * WARPS);  // 16-row mma tiles per warp
  static constexpr int kWarpRows = 16 * kMt;
  static constexpr int kChunks = D / 8;  // 16-byte chunks per row
  static constexpr int kRowBytes = D * 2;
  // Q fragments stay in registers when they are few; otherwise re-read from shared memory.
  static constexpr bool kQInRegs = kMt * D <= 128;
  static constexpr int kQBytes = BM * kRowBytes;
  static constexpr int kKvBytes = BN * kRowBytes;  // one K (or V) tile
  static constexpr int kSmemBytes = kQBytes + 2 * STAGES * kKvBytes;
  static_assert(kThreads % kChunks == 0, "a thread keeps one chunk column in tile loads");
  static constexpr int kRowsPerPass = kThreads / kChunks;

  // Byte offset of (row, chunk) in a swizzled tile: chunk ^ (row % 8) spreads the 8 rows an
  // ldmatrix phase reads over 8 different 16-byte bank groups.
  __device__ static __forceinline__ uint32_t swz(int row, int chunk) {
    return uint32_t(row * kRowBytes + ((chunk ^ (row & 7)) << 4));
  }
};

// Everything a block needs about its place in the problem, computed once.
struct BlockPlace {
  int b, g, m0, rows_total, len;
  int t_begin, t_end;  // key tiles this block (split) processes
  int tiles_all;       // key tiles the whole (unsplit) block would process
};

// ---- The kernel -----------------------------------------------------------------------------

template <class T, int D, int BM, int BN, int WARPS, int STAGES>
__global__ void __launch_bounds__(32 * WARPS) flash_fwd_kernel(FlashArgs a) {
  using G = Tiles<D, BM, BN, WARPS, STAGES>;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t q_smem = smem_addr(smem);
  const uint32_t k_smem = q_smem + G::kQBytes;
  const uint32_t v_smem = k_smem + STAGES * G::kKvBytes;

  // Launched with programmatic dependent launch (flash_launch_impl.cuh): q, this step's K/V rows
  // and the lengths come from the previous kernel, so nothing is read before it has finished.
  grid_dependency_wait();

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int group = a.heads / a.kv_heads;
  const int rows_total = a.q_len * group;
  const int bk = blockIdx.y;
  const int b = bk / a.kv_heads, g = bk % a.kv_heads;
  // Blocks with more causal work (later query rows) are scheduled first.
  const int m0 = (gridDim.x - 1 - blockIdx.x) * BM;
  const int len = a.kv_lens ? a.kv_lens[b] : a.kv_len;
  const int q_real = a.q_lens ? a.q_lens[b] : a.q_len;  // queries past it are padding (zeros)
  const int rows_real = q_real * group;
  const int pos0 = len - q_real;  // query i sits at key position pos0 + i (causal)

  // Key range of the block: causal blocks stop at their last row's position; a block of
  // padding rows only writes zeros. A sliding window starts it at its first row's window: the
  // keys before kv_lo are never read (zero-filled in a tile that straddles it, and masked).
  const int last_row = min(m0 + BM, rows_real) - 1;
  const int kv_hi = m0 >= rows_real ? 0 : a.causal ? max(0, min(len, pos0 + last_row / group + 1)) : max(0, len);
  const int kv_lo = a.window > 0 && m0 < rows_real ? max(0, pos0 + m0 / group - a.window + 1) : 0;
  const int tiles_all = (kv_hi + BN - 1) / BN;
  const int tile_lo = min(kv_lo / BN, tiles_all);
  int t_begin = tile_lo, t_end = tiles_all;
  if (gridDim.z > 1) {
    const int per = (tiles_all - tile_lo + gridDim.z - 1) / gridDim.z;
    t_begin = min(tiles_all, tile_lo + int(blockIdx.z) * per);
    t_end = min(tiles_all, t_begin + per);
  }

  const T* kbase = static_cast<const T*>(a.k);
  const T* vbase = static_cast<const T*>(a.v);
  const int64_t head_rows = a.page_size ? 0 : int64_t(bk) * a.max_seq;  // contiguous: (b, g) block

  // Q tile: rows past rows_total are zero-filled.
  {
    const int c = tid % G::kChunks;
    for (int r = tid / G::kChunks; r < BM; r += G::kRowsPerPass) {
      const int row = m0 + r;
      const bool valid = row < rows_real;
      const int i = valid ? row / group : 0, h = g * group + (valid ? row % group : 0);
      const T* src = static_cast<const T*>(a.q) + (int64_t(b) * a.q_len + i) * a.q_row_stride + int64_t(h) * D + c * 8;
      cp_async16(q_smem + G::swz(r, c), src, valid);
    }
  }
  // K and V of key tile t into ring slot s. A paged cache whose pages hold whole tiles needs one
  // block-table read per tile (the same for every thread); smaller pages one per row.
  const bool tile_in_page = a.page_size >= BN && a.page_size % BN == 0;
  auto load_kv = [&](int t, int s) {
    const int c = tid % G::kChunks;
    int64_t tile_base = 0;  // paged, tile_in_page: offset of the tile's first row
    if (a.page_size && tile_in_page && t * BN < len) {
      const int page = a.block_table[int64_t(b) * a.pages_per_seq + (t * BN) / a.page_size];
      tile_base = ((int64_t(page) * a.kv_heads + g) * a.page_size + (t * BN) % a.page_size) * D;
    }
    for (int r = tid / G::kChunks; r < BN; r += G::kRowsPerPass) {
      const int j = t * BN + r;
      const bool valid = j < len && j >= kv_lo;
      int64_t off = 0;
      if (valid) {
        if (!a.page_size) {
          off = (head_rows + j) * D;
        } else if (tile_in_page) {
          off = tile_base + int64_t(r) * D;
        } else {
          const int page = a.block_table[int64_t(b) * a.pages_per_seq + j / a.page_size];
          off = ((int64_t(page) * a.kv_heads + g) * a.page_size + j % a.page_size) * D;
        }
      }
      const uint32_t dst = G::swz(r, c) + uint32_t(s * G::kKvBytes);
      cp_async16(k_smem + dst, kbase + off + c * 8, valid);
      cp_async16(v_smem + dst, vbase + off + c * 8, valid);
    }
  };
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (t_begin + s < t_end) load_kv(t_begin + s, s);
    cp_async_commit();  // the Q tile rides in group 0
  }

  // This warp's rows and the positions they see.
  const int wrow0 = m0 + warp * G::kWarpRows;
  const bool warp_live = wrow0 < rows_real;
  const bool warp_padded = wrow0 + G::kWarpRows > rows_real;  // holds padding rows: mask every tile
  const int wrow_last = min(wrow0 + G::kWarpRows, rows_real) - 1;
  const int wpos_min = pos0 + wrow0 / group, wpos_max = pos0 + wrow_last / group;
  const int gq = lane >> 2, tq = lane & 3;  // fragment row group and column pair
  // Last key each of rows gq and gq + 8 of an mma tile sees: its position (causal) or the
  // sequence end; -1 for a padding row (sees nothing). Kept as a limit rather than as a position
  // with a padding sentinel: without causality a sequence may have fewer keys than queries, and
  // then pos0 + i is negative for real rows, which a negative sentinel would take for padding.
  int row_limit[G::kMt][2];
  int row_first[G::kMt][2];  // first key the row sees (its window's start; 0 without a window)
#pragma unroll
  for (int mt = 0; mt < G::kMt; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = wrow0 + mt * 16 + h * 8 + gq;
      row_limit[mt][h] = row >= rows_real ? -1 : a.causal ? min(len - 1, pos0 + row / group) : len - 1;
      row_first[mt][h] = a.window > 0 ? pos0 + row / group - a.window + 1 : 0;
    }
  // The warp's oldest visible key (its first row's window start): tiles wholly before it are skipped.
  const int wkey_min = a.window > 0 ? wpos_min - a.window + 1 : 0;

  // Softcapped scores are capped in natural units, then taken to log2 units.
  const float scale_log2 = (a.softcap > 0.f ? 1.f : a.scale) * 1.4426950408889634f;
  float o_acc[G::kMt][D / 8][4];
  float row_max[G::kMt][2], row_sum[G::kMt][2];
#pragma unroll
  for (int mt = 0; mt < G::kMt; ++mt) {
#pragma unroll
    for (int n = 0; n < D / 8; ++n) o_acc[mt][n][0] = o_acc[mt][n][1] = o_acc[mt][n][2] = o_acc[mt][n][3] = 0.f;
    row_max[mt][0] = row_max[mt][1] = -INFINITY;
    row_sum[mt][0] = row_sum[mt][1] = 0.f;
  }
  uint32_t q_frag[G::kQInRegs ? G::kMt : 1][G::kQInRegs ? D / 16 : 1][4];

  // ldmatrix lane addressing (see the fragment layouts of mma.m16n8k16).
  const int a_row = lane & 15, a_chunk = lane >> 4;                              // A (Q): rows x k
  const int k_row = (lane & 7) + ((lane >> 4) << 3), k_chunk = (lane >> 3) & 1;  // B from K rows
  const int v_row = (lane & 7) + (((lane >> 3) & 1) << 3), v_chunk = lane >> 4;  // B from V rows (trans)

  for (int t = t_begin; t < t_end; ++t) {
    const int it = t - t_begin;
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // tile t visible to all; every warp is done with the slot refilled below
    if constexpr (G::kQInRegs) {
      if (it == 0 && warp_live) {
#pragma unroll
        for (int mt = 0; mt < G::kMt; ++mt)
#pragma unroll
          for (int kk = 0; kk < D / 16; ++kk)
            ldmatrix_x4(q_frag[mt][kk], q_smem + G::swz(warp * G::kWarpRows + mt * 16 + a_row, kk * 2 + a_chunk));
      }
    }
    if (t + STAGES - 1 < t_end) load_kv(t + STAGES - 1, (it + STAGES - 1) % STAGES);
    cp_async_commit();

    const int key0 = t * BN;
    // Skip the tile when every row of the warp is above it (causal), its keys are all before the
    // warp's windows, or the warp has no rows.
    if (!warp_live || (a.causal && key0 > wpos_max) || key0 + BN <= wkey_min) continue;
    const uint32_t ks = k_smem + uint32_t((it % STAGES) * G::kKvBytes);
    const uint32_t vs = v_smem + uint32_t((it % STAGES) * G::kKvBytes);

    float s_acc[G::kMt][BN / 8][4];
#pragma unroll
    for (int mt = 0; mt < G::kMt; ++mt)
#pragma unroll
      for (int n = 0; n < BN / 8; ++n) s_acc[mt][n][0] = s_acc[mt][n][1] = s_acc[mt][n][2] = s_acc[mt][n][3] = 0.f;

#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[G::kMt][4];
#pragma unroll
      for (int mt = 0; mt < G::kMt; ++mt) {
        if constexpr (G::kQInRegs) {
#pragma unroll
          for (int x = 0; x < 4; ++x) qa[mt][x] = q_frag[mt][kk][x];
        } else {
          ldmatrix_x4(qa[mt], q_smem + G::swz(warp * G::kWarpRows + mt * 16 + a_row, kk * 2 + a_chunk));
        }
      }
#pragma unroll
      for (int nn = 0; nn < BN / 16; ++nn) {
        uint32_t kb[4];
        ldmatrix_x4(kb, ks + G::swz(nn * 16 + k_row, kk * 2 + k_chunk));
#pragma unroll
        for (int mt = 0; mt < G::kMt; ++mt) {
          mma16816<T>(s_acc[mt][2 * nn], qa[mt], kb[0], kb[1]);
          mma16816<T>(s_acc[mt][2 * nn + 1], qa[mt], kb[2], kb[3]);
        }
      }
    }

    if (a.softcap > 0.f) {
#pragma unroll
      for (int mt = 0; mt < G::kMt; ++mt)
#pragma unroll
        for (int n = 0; n < BN / 8; ++n)
#pragma unroll
          for (int x = 0; x < 4; ++x) s_acc[mt][n][x] = softcap_score(s_acc[mt][n][x] * a.scale, a.softcap);
    }

    // Mask keys past the sequence end and, on tiles crossing the diagonal, above it; keys before
    // a row's window; padding rows see no key.
    if (key0 + BN > len || (a.causal && key0 + BN - 1 > wpos_min) || warp_padded ||
        (a.window > 0 && key0 < wpos_max - a.window + 1)) {
#pragma unroll
      for (int mt = 0; mt < G::kMt; ++mt)
#pragma unroll
        for (int n = 0; n < BN / 8; ++n)
#pragma unroll
          for (int x = 0; x < 4; ++x) {
            const int key = key0 + n * 8 + 2 * tq + (x & 1);
            if (key > row_limit[mt][x >> 1] || key < row_first[mt][x >> 1]) s_acc[mt][n][x] = -INFINITY;
          }
    }

    // Online softmax: new running max per row, rescale what was accumulated, exponentiate.
#pragma unroll
    for (int mt = 0; mt < G::kMt; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -INFINITY;
#pragma unroll
        for (int n = 0; n < BN / 8; ++n) mx = fmaxf(mx, fmaxf(s_acc[mt][n][2 * h], s_acc[mt][n][2 * h + 1]));
        mx = quad_max(mx) * scale_log2;
        const float m_new = fmaxf(row_max[mt][h], mx);
        const float m_use = m_new == -INFINITY ? 0.f : m_new;  // a row that saw no key yet stays at 0
        const float corr = fast_exp2(row_max[mt][h] - m_use);
        row_max[mt][h] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < BN / 8; ++n) {
#pragma unroll
          for (int x = 2 * h; x < 2 * h + 2; ++x) {
            const float p = fast_exp2(fmaf(s_acc[mt][n][x], scale_log2, -m_use));
            s_acc[mt][n][x] = p;
            sum += p;
          }
        }
        row_sum[mt][h] = row_sum[mt][h] * corr + sum;  // quad-partial; reduced at the end
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
          o_acc[mt][n][2 * h] *= corr;
          o_acc[mt][n][2 * h + 1] *= corr;
        }
      }
    }

    // O += P V: two adjacent S n-tiles form one A fragment (16 keys).
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t pa[G::kMt][4];
#pragma unroll
      for (int mt = 0; mt < G::kMt; ++mt) {
        pa[mt][0] = pack2<T>(s_acc[mt][2 * kk][0], s_acc[mt][2 * kk][1]);
        pa[mt][1] = pack2<T>(s_acc[mt][2 * kk][2], s_acc[mt][2 * kk][3]);
        pa[mt][2] = pack2<T>(s_acc[mt][2 * kk + 1][0], s_acc[mt][2 * kk + 1][1]);
        pa[mt][3] = pack2<T>(s_acc[mt][2 * kk + 1][2], s_acc[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dd = 0; dd < D / 16; ++dd) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, vs + G::swz(kk * 16 + v_row, dd * 2 + v_chunk));
#pragma unroll
        for (int mt = 0; mt < G::kMt; ++mt) {
          mma16816<T>(o_acc[mt][2 * dd], pa[mt], vb[0], vb[1]);
          mma16816<T>(o_acc[mt][2 * dd + 1], pa[mt], vb[2], vb[3]);
        }
      }
    }
  }
  cp_async_wait<0>();  // nothing may land in shared memory after this point (empty splits too)
  __syncthreads();
  // Past the key loop: the combine kernel may start launching (it still waits for our writes).
  // Not earlier, so that its waiting blocks never take slots from our later waves.
  if (gridDim.z > 1) grid_dependents_launch();

  // Epilogue. Row sums are quad-partial until here.
  float inv[G::kMt][2];
#pragma unroll
  for (int mt = 0; mt < G::kMt; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row_sum[mt][h] = quad_sum(row_sum[mt][h]);
      inv[mt][h] = row_sum[mt][h] > 0.f ? 1.f / row_sum[mt][h] : 0.f;
    }

  if (gridDim.z > 1) {
    // Partial output (normalised, fp32) and log2-sum-exp per row, straight from registers.
    const int64_t slab = int64_t(blockIdx.z) * gridDim.y + bk;
    float* o_part = static_cast<float*>(a.workspace) + slab * int64_t(rows_total) * D;
    float* lse = static_cast<float*>(a.workspace) + int64_t(gridDim.z) * gridDim.y * rows_total * D + slab * rows_total;
#pragma unroll
    for (int mt = 0; mt < G::kMt; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = wrow0 + mt * 16 + h * 8 + gq;
        if (row >= rows_total) continue;
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
          float2 v = make_float2(o_acc[mt][n][2 * h] * inv[mt][h], o_acc[mt][n][2 * h + 1] * inv[mt][h]);
          *reinterpret_cast<float2*>(o_part + int64_t(row) * D + n * 8 + 2 * tq) = v;
        }
        if (tq == 0) lse[row] = row_sum[mt][h] > 0.f ? row_max[mt][h] + __log2f(row_sum[mt][h]) : -INFINITY;
      }
    return;
  }

  // Final output: through shared memory (the Q tile's space; each warp rewrites only its own
  // rows) so global stores are whole 16-byte chunks of each row.
#pragma unroll
  for (int mt = 0; mt < G::kMt; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = warp * G::kWarpRows + mt * 16 + h * 8 + gq;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        const uint32_t v = pack2<T>(o_acc[mt][n][2 * h] * inv[mt][h], o_acc[mt][n][2 * h + 1] * inv[mt][h]);
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(q_smem + G::swz(r, n) + 4 * tq), "r"(v));
      }
    }
  __syncthreads();
  const int c = tid % G::kChunks;
  for (int r = tid / G::kChunks; r < BM; r += G::kRowsPerPass) {
    const int row = m0 + r;
    if (row >= rows_total) break;
    const int i = row / group, h = g * group + row % group;
    uint4 v;
    asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(q_smem + G::swz(r, c)));
    T* dst = static_cast<T*>(a.out) + (int64_t(b) * a.q_len + i) * a.o_row_stride + int64_t(h) * D + c * 8;
    *reinterpret_cast<uint4*>(dst) = v;
  }
}

}  // namespace tunableop::cuda::flash_detail
