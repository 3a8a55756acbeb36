// Cluster decode attention on tensor cores, for decode against short caches with up to 8 query
// rows per kv head (Gemma-2B's MQA: the 8 heads of its one kv head; Llama's MHA: one row).
//
// Why: at 130-256 cached positions the keys are ~130-260 KB, nothing for the memory system;
// what costs is latency: a split kernel plus a combine kernel (split-KV), or one block walking
// the keys on CUDA cores with a serial online softmax per row (the one-launch kernel: 24 us for
// Gemma's 8 rows at d256). Here the keys are spread over every warp of a thread-block cluster
// (C blocks on C SMs, W warps each; 16-key tiles dealt round-robin, tile t to warp t / C of block
// t % C), each warp does its tile with a handful of mma.sync instructions, and the partials are
// merged through shared memory inside the block and through distributed shared memory (DSMEM)
// across the cluster: one launch, no workspace, no counters, nothing in global memory but the
// output, so graph replays need nothing reset.
//
// Per 16-key tile, with the query rows as the mma's n = 8 columns (no padding):
//   S^T [16 keys x 8 rows] = K [16 x D] Q^T [D x 8]: K's rows go straight from global memory into
//     the A fragments (16-byte loads: lane (g, t) takes dims 8t..8t+7 of each 32-dim chunk of
//     keys g and g + 8; the same permutation of the reduction index on Q's side, whose fragments
//     stay in registers), four independent accumulators to hide the mma latency;
//   online softmax per row in registers (exp2 units; a row's 16 scores sit in the 8 lanes that
//     share t: 3 shuffles), P rounded to the storage type and transposed through 256 bytes of
//     shared memory into the B fragment;
//   O^T [D x 8] += V^T [D x 16] P^T [16 x 8]: V comes in by cp.async (issued with K's loads,
//     zero-filled past the sequence's length, so masked keys multiply exact zeros) into a
//     swizzled per-warp tile and out through ldmatrix.trans.
// Then each warp's O (fp32, unnormalised, with its running max and sum per row) goes to shared
// memory, the block merges its warps, the cluster synchronises, and block `rank` of the cluster
// combines columns [rank * D / C, (rank + 1) * D / C) of every row from the C blocks' shared
// memory and writes them. Fixed orders everywhere: the same bits run to run.
//
// Split clusters (gridDim.x = C x S, S > 1; for long caches with few kv heads, Gemma-2B's one kv
// head at 4k-16k positions, where one cluster of at most 16 SMs cannot pull the keys fast enough):
// cluster s of a kv head takes the s-th contiguous share of its 16-key tiles; block `rank` writes
// its columns of the cluster's merged partial (unnormalised fp32, with the row's max and sum) to
// the workspace, fences and draws a ticket from counter (kv head, rank); the block with the last
// ticket of its rank merges that rank's columns over the S clusters (L2 reads, in split order)
// and writes the output, then puts the counter back to 0 (graph replays find it zeroed). So the
// final merge is spread over the C blocks of whichever clusters finish last, each reading
// S x rows x D / C floats, and there is no second kernel.
//
// Programmatic dependent launch on sm_90: the kernel waits for the previous one (rope + cache
// write) before reading anything and lets the next (the o projection) launch at once. sm_90 only
// (clusters); the body is empty elsewhere and the candidates refuse other devices.
#pragma once

#include <cooperative_groups.h>

#include "backends/cuda/attention/flash_kernel.cuh"

namespace tunableop::cuda::decode_cluster_detail {

using flash_detail::cp_async16;
using flash_detail::cp_async_commit;
using flash_detail::cp_async_wait;
using flash_detail::fast_exp2;
using flash_detail::grid_dependency_wait;
using flash_detail::grid_dependents_launch;
using flash_detail::ldmatrix_x4_trans;
using flash_detail::mma16816;
using flash_detail::pack2;
using flash_detail::smem_addr;

constexpr int kRows = 8;               // query rows per kv head (the mma's n)
constexpr int kTileKeys = 16;          // keys per warp tile (the mma's m)
constexpr int kMaxWarps = 8;           // per block
constexpr int kMaxWarpsTwoStages = 4;  // per block with two stages (d256: 32 KB of tiles a warp)
constexpr int kMaxCluster = 16;        // blocks per cluster (above 8: non-portable cluster size)
constexpr int kMaxSplits = 256;        // clusters per (sequence, kv head)

// Shared memory of one block, in bytes from the start of the dynamic buffer.
template <int D, int kStages = 1>
struct Layout {
  // Per warp: its V tile (16 keys x D, swizzled; two stages: two K and V tiles), later its O
  // partial (8 rows x (D + 4) fp32; the padding makes the fragment stores conflict-free).
  static constexpr int kTileBytes = kTileKeys * D * 2;
  static constexpr int kTilesBytes = kStages == 1 ? kTileBytes : 2 * kStages * kTileBytes;
  static constexpr int kWarpBytes = (kRows * (D + 4) * 4 > kTilesBytes) ? kRows * (D + 4) * 4 : kTilesBytes;
  static constexpr int kPtBytes = kRows * kTileKeys * 2;  // per warp: P^T as [row][key]
  static __host__ __device__ constexpr int pt(int warps) { return warps * kWarpBytes; }
  static __host__ __device__ constexpr int ml(int warps) { return pt(warps) + warps * kPtBytes; }  // [warp][row] m, l
  static __host__ __device__ constexpr int block_o(int warps) { return ml(warps) + warps * kRows * 2 * 4; }
  static __host__ __device__ constexpr int block_ml(int warps) { return block_o(warps) + kRows * D * 4; }  // m[8], l[8]
  static __host__ __device__ constexpr int bytes(int warps) { return block_ml(warps) + 2 * kRows * 4; }
};

__device__ __forceinline__ float max_over_g(float x) {  // the 8 lanes that share lane % 4
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 4));
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 8));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 16));
}
__device__ __forceinline__ float sum_over_g(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 4);
  x += __shfl_xor_sync(0xffffffffu, x, 8);
  return x + __shfl_xor_sync(0xffffffffu, x, 16);
}

// Merges the first `count` of N partials of one row (each: its max m, its sum l and 4 of its
// unnormalised output columns v) in index order: weights exp2(m_i - max), 0 for a partial that saw
// no key of the row. Returns the merged columns; *mx and *sum the merged max and sum. Used for the
// block's warps and then the cluster's blocks (N: the compile-time maximum, count predicates).
template <int N>
__device__ __forceinline__ float4 merge_partials(const float4 (&v)[N], const float (&m)[N], const float (&l)[N],
                                                 int count, float* mx, float* sum) {
  float top = -INFINITY;
#pragma unroll
  for (int i = 0; i < N; ++i)
    if (i < count) top = fmaxf(top, m[i]);
  const float m_use = top == -INFINITY ? 0.f : top;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if (i < count) {
      const float w = fast_exp2(m[i] - m_use);
      acc.x = fmaf(w, v[i].x, acc.x), acc.y = fmaf(w, v[i].y, acc.y);
      acc.z = fmaf(w, v[i].z, acc.z), acc.w = fmaf(w, v[i].w, acc.w);
      s = fmaf(w, l[i], s);
    }
  }
  *mx = top;
  *sum = s;
  return acc;
}

// Floats of the split workspace: per (split, sequence x kv head) the merged partial [kRows][D],
// then per (split, sequence x kv head, rank) the rows' max and sum [kRows][2].
__host__ __device__ constexpr int64_t split_o_floats(int splits, int slabs, int head_dim) {
  return int64_t(splits) * slabs * kRows * head_dim;
}
__host__ __device__ constexpr int64_t split_workspace_floats(int splits, int slabs, int cluster, int head_dim) {
  return split_o_floats(splits, slabs, head_dim) + int64_t(splits) * slabs * cluster * kRows * 2;
}

// kStages 1: a warp loads a tile's K into registers and its V into shared memory, then works on
// it; 2: the K and V of a warp's next tile are in flight (cp.async into a second stage of its
// buffer) while it works on the current one, K read back from shared memory into the same
// fragments (rows swizzled so the fragment reads are conflict-free).
template <class T, int D, int kStages>
__global__ void __launch_bounds__(32 * kMaxWarps) decode_cluster_kernel(FlashArgs a, unsigned* tickets) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  static_assert(D == 64 || D == 128 || D == 256, "head_dim 64, 128 or 256");
  static_assert(kStages == 1 || kStages == 2, "one or two stages");
  using L = Layout<D, kStages>;
  constexpr int kChunks = D / 8;  // 16-byte chunks per K/V row
  constexpr int kC32 = D / 32;    // 32-dim chunks (two mma k-steps) of S^T = K Q^T
  constexpr int kMt = D / 16;     // 16-dim m-tiles of O^T
  extern __shared__ __align__(128) unsigned char smem[];
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, warps = blockDim.x >> 5;
  const int gq = lane >> 2, tq = lane & 3;  // mma fragment coordinates
  const int csize = int(cluster.num_blocks()), rank = int(cluster.block_rank());
  const int splits = int(gridDim.x) / csize, split = int(blockIdx.x) / csize;  // 1-D clusters along x
  const int bk = blockIdx.y, b = bk / a.kv_heads, kvh = bk % a.kv_heads;
  // This cluster's share of the 16-key tiles of keys [lo, n): [first, end) (lo > 0: a sliding
  // window's start; the tile holding it is the first).
  auto share = [&](int lo, int n, int* first, int* end) {
    const int tiles = (n + kTileKeys - 1) / kTileKeys, t0 = min(lo / kTileKeys, tiles);
    const int per = (tiles - t0 + splits - 1) / splits;
    *first = min(tiles, t0 + split * per);
    *end = min(tiles, *first + per);
  };

  // While the previous kernel may still run: an L2 prefetch of this warp's K/V tiles (contiguous
  // cache only: 16 rows of a head are one block of memory). Only a hint: the length read here
  // may be stale (clamped to the cache, so every address is inside it), and a prefetch changes
  // no value, so whatever the previous kernel writes is what the loads below see.
  if (!a.page_size && lane < 2) {
    const int hint = int(min(int64_t(min(max(a.kv_lens ? a.kv_lens[b] : a.kv_len, 0), a.kv_len)), a.max_seq));
    const char* base = static_cast<const char*>(lane == 0 ? a.k : a.v) + int64_t(bk) * a.max_seq * D * 2;
    int first, end;
    share(a.window > 0 ? max(0, hint - a.q_len - a.window + 1) : 0, hint, &first, &end);
    for (int tile = first + warp * csize + rank; tile < end; tile += warps * csize) {
      const uint32_t bytes = uint32_t(min(kTileKeys, hint - tile * kTileKeys) * D * 2);
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(base + int64_t(tile) * kTileKeys * D * 2),
                   "r"(bytes)
                   : "memory");
    }
  }

  grid_dependency_wait();  // q and this step's K/V rows come from the previous kernel
  grid_dependents_launch();

  const int group = a.heads / a.kv_heads;
  const int rows_total = a.q_len * group;  // <= kRows (the candidates check)
  const int len = a.kv_lens ? a.kv_lens[b] : a.kv_len;
  const int q_real = a.q_lens ? a.q_lens[b] : a.q_len;
  const int rows_real = q_real * group;
  const int pos0 = len - q_real;                                  // causal: query i sits at key position pos0 + i
  const int lo = a.window > 0 ? max(0, pos0 - a.window + 1) : 0;  // keys before it are never read
  const float scale_log2 = a.scale * 1.4426950408889634f;

  const T* kbase = static_cast<const T*>(a.k);
  const T* vbase = static_cast<const T*>(a.v);
  auto row_offset = [&](int j) -> int64_t {  // element offset of key j's row
    if (!a.page_size) return (int64_t(bk) * a.max_seq + j) * D;
    const int page = a.block_table[int64_t(b) * a.pages_per_seq + j / a.page_size];
    return ((int64_t(page) * a.kv_heads + kvh) * a.page_size + j % a.page_size) * D;
  };

  // Q^T's B fragments: row gq, dims 8 tq..8 tq + 7 of every 32-dim chunk (zeros for padding rows).
  uint4 qf[kC32];
  {
    const int r = gq;
    const bool real = r < rows_real;
    const int i = real ? r / group : 0, h = kvh * group + (real ? r % group : 0);
    const T* src = static_cast<const T*>(a.q) + (int64_t(b) * a.q_len + i) * a.q_row_stride + int64_t(h) * D + 8 * tq;
#pragma unroll
    for (int c = 0; c < kC32; ++c)
      qf[c] = real ? *reinterpret_cast<const uint4*>(src + 32 * c) : make_uint4(0, 0, 0, 0);
  }

  float o[kMt][4];  // O^T fragments: (dim 16 mt + gq (+8), rows 2 tq, 2 tq + 1)
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // rows 2 tq, 2 tq + 1; l is this lane's share

  unsigned char* wbuf = smem + warp * L::kWarpBytes;
  const uint32_t v_smem = smem_addr(wbuf);
  T* pt = reinterpret_cast<T*>(smem + L::pt(warps) + warp * L::kPtBytes);  // [row][key]

  int tile_first, tile_end;
  share(lo, len, &tile_first, &tile_end);
  // Paged caches (pages of whole 16-key tiles): the same L2 prefetch of the warp's later tiles,
  // now that the length and the block table can be read (the first tile is loaded at once).
  if (a.page_size && a.page_size % kTileKeys == 0 && lane < 2) {
    const T* base = lane == 0 ? kbase : vbase;
    for (int tile = tile_first + (warp + warps) * csize + rank; tile < tile_end; tile += warps * csize) {
      const uint32_t bytes = uint32_t(min(kTileKeys, len - tile * kTileKeys) * D * 2);
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(base + row_offset(tile * kTileKeys)), "r"(bytes)
                   : "memory");
    }
  }
  // A tile's rows into a stage by cp.async, 32 lanes over consecutive 16-byte chunks (whole rows per
  // instruction), zero-filled past the length: V always (swizzled for ldmatrix.trans), K with two
  // stages (swizzled for the fragment reads: chunk ^ 4 on odd rows).
  auto issue_tile = [&](int tile, uint32_t k_dst, uint32_t v_dst) {
    const int j0 = tile * kTileKeys;
#pragma unroll
    for (int f0 = 0; f0 < kTileKeys * kChunks; f0 += 32) {
      const int f = f0 + lane, kk = f / kChunks, ch = f % kChunks;
      const bool valid = j0 + kk < len && j0 + kk >= lo;
      const int64_t off = valid ? row_offset(j0 + kk) + ch * 8 : 0;
      if constexpr (kStages == 2)
        cp_async16(k_dst + uint32_t((kk * kChunks + (ch ^ ((kk & 1) << 2))) * 16), kbase + off, valid);
      cp_async16(v_dst + uint32_t((kk * kChunks + (ch ^ (kk & 7))) * 16), vbase + off, valid);
    }
    cp_async_commit();
  };
  const int tile_step = warps * csize;
  int tile = tile_first + warp * csize + rank;
  if constexpr (kStages == 2) {  // stage s: K at v_smem + 2 s kTileBytes, V right after it
    if (tile < tile_end) {
      issue_tile(tile, v_smem, v_smem + L::kTileBytes);
    } else {
      cp_async_commit();
    }
    if (tile + tile_step < tile_end) {
      issue_tile(tile + tile_step, v_smem + 2 * L::kTileBytes, v_smem + 3 * L::kTileBytes);
    } else {
      cp_async_commit();
    }
  }
  for (int it = 0; tile < tile_end; tile += tile_step, ++it) {
    const int j0 = tile * kTileKeys;
    uint4 ka[kC32], kb[kC32];
    uint32_t vs = v_smem;  // this tile's V
    if constexpr (kStages == 2) {
      const uint32_t ks = v_smem + uint32_t((it & 1) * 2 * L::kTileBytes);
      vs = ks + L::kTileBytes;
      cp_async_wait<1>();  // this tile's group (the next tile's may still be in flight)
      __syncwarp();        // and the other lanes' copies of it
      // K rows gq and gq + 8 (same parity: one swizzle) from shared memory.
      const int sw = (gq & 1) << 2;
#pragma unroll
      for (int c = 0; c < kC32; ++c) {
        const int ch = (4 * c + tq) ^ sw;
        asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(ka[c].x), "=r"(ka[c].y), "=r"(ka[c].z), "=r"(ka[c].w)
                     : "r"(ks + uint32_t((gq * kChunks + ch) * 16))
                     : "memory");
        asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(kb[c].x), "=r"(kb[c].y), "=r"(kb[c].z), "=r"(kb[c].w)
                     : "r"(ks + uint32_t(((gq + 8) * kChunks + ch) * 16))
                     : "memory");
      }
    } else {
      issue_tile(tile, 0, v_smem);
      // K rows gq and gq + 8 into registers (zeros past the length: masked below anyway).
      const bool va = j0 + gq < len && j0 + gq >= lo, vb = j0 + gq + 8 < len && j0 + gq + 8 >= lo;
      const T* pa = kbase + (va ? row_offset(j0 + gq) : 0) + 8 * tq;
      const T* pb = kbase + (vb ? row_offset(j0 + gq + 8) : 0) + 8 * tq;
#pragma unroll
      for (int c = 0; c < kC32; ++c) {
        ka[c] = va ? *reinterpret_cast<const uint4*>(pa + 32 * c) : make_uint4(0, 0, 0, 0);
        kb[c] = vb ? *reinterpret_cast<const uint4*>(pb + 32 * c) : make_uint4(0, 0, 0, 0);
      }
    }
    // S^T = K Q^T, four independent accumulator chains.
    float sacc[4][4] = {};
#pragma unroll
    for (int c = 0; c < kC32; ++c) {
      const uint32_t a0[4] = {ka[c].x, kb[c].x, ka[c].y, kb[c].y};
      const uint32_t a1[4] = {ka[c].z, kb[c].z, ka[c].w, kb[c].w};
      mma16816<T>(sacc[(2 * c) & 3], a0, qf[c].x, qf[c].y);
      mma16816<T>(sacc[(2 * c + 1) & 3], a1, qf[c].z, qf[c].w);
    }
    float s[4];  // (key gq, row 2 tq), (key gq, row 2 tq + 1), (key gq + 8, row 2 tq), (key gq + 8, row 2 tq + 1)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float dot = sacc[0][e] + sacc[1][e] + sacc[2][e] + sacc[3][e];
      s[e] = a.softcap > 0.f ? flash_detail::softcap_score(dot * a.scale, a.softcap) * 1.4426950408889634f
                             : dot * scale_log2;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int j = j0 + gq + (e >= 2 ? 8 : 0), r = 2 * tq + (e & 1);
      const bool vis = j < len && r < rows_real && (!a.causal || j <= pos0 + r / group) &&
                       (a.window == 0 || j > pos0 + r / group - a.window);
      s[e] = vis ? s[e] : -INFINITY;
    }
    // Online softmax per row (2 tq + x).
    float p[4];
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      const float mx = fmaxf(m[x], max_over_g(fmaxf(s[x], s[x + 2])));
      const float m_use = mx == -INFINITY ? 0.f : mx;  // a row with no key yet stays at 0
      const float corr = fast_exp2(m[x] - m_use);      // 0 while m = -inf
      p[x] = fast_exp2(s[x] - m_use), p[x + 2] = fast_exp2(s[x + 2] - m_use);
      l[x] = fmaf(l[x], corr, p[x] + p[x + 2]);
      m[x] = mx;
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) o[mt][x] *= corr, o[mt][x + 2] *= corr;
    }
    // P^T's B fragment: (keys 2 tq, 2 tq + 1 | 2 tq + 8, 2 tq + 9; row gq), through shared memory.
    pt[(2 * tq) * kTileKeys + gq] = flash_detail::from_float<T>(p[0]);
    pt[(2 * tq + 1) * kTileKeys + gq] = flash_detail::from_float<T>(p[1]);
    pt[(2 * tq) * kTileKeys + gq + 8] = flash_detail::from_float<T>(p[2]);
    pt[(2 * tq + 1) * kTileKeys + gq + 8] = flash_detail::from_float<T>(p[3]);
    if constexpr (kStages == 1) cp_async_wait<0>();  // two stages: waited for above
    __syncwarp();
    const uint32_t pb0 = *reinterpret_cast<const uint32_t*>(pt + gq * kTileKeys + 2 * tq);
    const uint32_t pb1 = *reinterpret_cast<const uint32_t*>(pt + gq * kTileKeys + 2 * tq + 8);
    // O^T += V^T P^T: ldmatrix.trans of (keys 0-7 | 8-15) x (dims 16 mt + 0-7 | 8-15), eight
    // loads issued before their mmas (the asm statements keep their order: one load, one mma
    // would stall the warp on every load).
    {
      constexpr int kBatch = kMt < 8 ? kMt : 8;
      const int mat = lane >> 3, kk = (mat >= 2 ? 8 : 0) + (lane & 7);
#pragma unroll
      for (int mt0 = 0; mt0 < kMt; mt0 += kBatch) {
        uint32_t va[kBatch][4];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const int ch = 2 * (mt0 + u) + (mat & 1);
          ldmatrix_x4_trans(va[u], vs + uint32_t((kk * kChunks + (ch ^ (kk & 7))) * 16));
        }
#pragma unroll
        for (int u = 0; u < kBatch; ++u) mma16816<T>(o[mt0 + u], va[u], pb0, pb1);
      }
    }
    __syncwarp();                  // the tile and P^T are read before the next tile overwrites them
    if constexpr (kStages == 2) {  // the tile after next into the stage just read
      if (tile + 2 * tile_step < tile_end) {
        const uint32_t ks = v_smem + uint32_t((it & 1) * 2 * L::kTileBytes);
        issue_tile(tile + 2 * tile_step, ks, ks + L::kTileBytes);
      } else {
        cp_async_commit();
      }
    }
  }
  if constexpr (kStages == 2) cp_async_wait<0>();  // (empty groups) nothing lands after this point

  // The warp's partial: total l per row, O (unnormalised) to shared memory.
  l[0] = sum_over_g(l[0]), l[1] = sum_over_g(l[1]);
  {
    float* ow = reinterpret_cast<float*>(wbuf);  // [row][D + 4]
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) {
      const int d = 16 * mt + gq;
      ow[(2 * tq) * (D + 4) + d] = o[mt][0];
      ow[(2 * tq + 1) * (D + 4) + d] = o[mt][1];
      ow[(2 * tq) * (D + 4) + d + 8] = o[mt][2];
      ow[(2 * tq + 1) * (D + 4) + d + 8] = o[mt][3];
    }
    float* ml = reinterpret_cast<float*>(smem + L::ml(warps)) + warp * 2 * kRows;
    if (gq == 0) ml[2 * tq] = m[0], ml[2 * tq + 1] = m[1], ml[kRows + 2 * tq] = l[0], ml[kRows + 2 * tq + 1] = l[1];
  }
  __syncthreads();

  // Merge the block's warps (in warp order), 4 columns of a row per thread: every warp's max, sum
  // and values of the row are loaded at once (one shared-memory round trip), the weights
  // computed in registers. The same merge then runs over the cluster's blocks through DSMEM.
  float* bo = reinterpret_cast<float*>(smem + L::block_o(warps));
  float* bml = reinterpret_cast<float*>(smem + L::block_ml(warps));  // block max [8], sum [8]
  {
    const float* ml = reinterpret_cast<const float*>(smem + L::ml(warps));
    for (int x = 4 * tid; x < kRows * D; x += 4 * blockDim.x) {
      const int r = x / D, d = x % D;
      float4 v[kMaxWarps];
      float mw[kMaxWarps], lw[kMaxWarps];
#pragma unroll
      for (int w = 0; w < kMaxWarps; ++w) {
        if (w < warps) {
          v[w] = *reinterpret_cast<const float4*>(smem + w * L::kWarpBytes + (r * (D + 4) + d) * 4);
          mw[w] = ml[w * 2 * kRows + r], lw[w] = ml[w * 2 * kRows + kRows + r];
        }
      }
      float mx, sum;
      const float4 acc = merge_partials<kMaxWarps>(v, mw, lw, warps, &mx, &sum);
      *reinterpret_cast<float4*>(bo + x) = acc;
      if (d == 0) bml[r] = mx, bml[kRows + r] = sum;
    }
  }
  cluster.sync();  // every block's merged partial is visible to the cluster

  // Combine the cluster's blocks for this block's columns [rank * cols, (rank + 1) * cols) and
  // write them (one split) or put them in the workspace (several); remote reads cost a round trip
  // each, so all of a thread's are issued first (loops over the compile-time maximum, predicated
  // by the cluster size).
  const int cols = D / csize;  // csize divides D (the candidates' cluster sizes are powers of two <= 16)
  const int slabs = int(gridDim.y);
  float* ws_o = static_cast<float*>(a.workspace);  // splits > 1 only
  float* ws_ml = ws_o + split_o_floats(splits, slabs, D);
  const int64_t ml_stride = int64_t(slabs) * csize * kRows * 2;  // from one split to the next
  const int64_t ml_mine = (int64_t(bk) * csize + rank) * kRows * 2;
  const int64_t o_stride = int64_t(slabs) * kRows * D;
  const int64_t out_row0 = int64_t(b) * a.q_len;
  auto store_out = [&](int r, int d, float4 acc, float sum) {
    const float inv = sum > 0.f ? 1.f / sum : 0.f;  // rows that saw no key: zeros
    const int i = r / group, h = kvh * group + r % group;
    T* dst = static_cast<T*>(a.out) + (out_row0 + i) * a.o_row_stride + int64_t(h) * D + d;
    *reinterpret_cast<uint2*>(dst) = make_uint2(pack2<T>(acc.x * inv, acc.y * inv), pack2<T>(acc.z * inv, acc.w * inv));
  };
  for (int x = 4 * tid; x < rows_total * cols; x += 4 * blockDim.x) {  // cols: a multiple of 4
    const int r = x / cols, d = rank * cols + x % cols;
    float4 v[kMaxCluster];
    float mc[kMaxCluster], lc[kMaxCluster];
#pragma unroll
    for (int c = 0; c < kMaxCluster; ++c) {
      if (c < csize) {
        v[c] = *reinterpret_cast<const float4*>(cluster.map_shared_rank(bo, c) + r * D + d);
        const float* rb = cluster.map_shared_rank(static_cast<const float*>(bml), c);
        mc[c] = rb[r], lc[c] = rb[kRows + r];
      }
    }
    float mx, sum;
    const float4 acc = merge_partials<kMaxCluster>(v, mc, lc, csize, &mx, &sum);
    if (splits == 1) {
      store_out(r, d, acc, sum);
    } else {
      *reinterpret_cast<float4*>(ws_o + split * o_stride + (int64_t(bk) * kRows + r) * D + d) = acc;
      if (x % cols == 0) *reinterpret_cast<float2*>(ws_ml + split * ml_stride + ml_mine + 2 * r) = make_float2(mx, sum);
    }
  }
  cluster.sync();  // no block leaves while another still reads its shared memory; our partial is written
  if (splits == 1) return;

  // Several splits: a ticket per (kv head, rank); the block with the last one merges this rank's
  // columns over the splits, in split order. The barrier above orders every thread's partial
  // before thread 0's fence and ticket (cumulativity); the last block's thread 0 fences again
  // before the barrier that releases its threads to read.
  __shared__ unsigned last_s;
  if (tid == 0) {
    __threadfence();
    last_s = atomicAdd(&tickets[int64_t(bk) * csize + rank], 1u) == unsigned(splits - 1);
    if (last_s) __threadfence();
  }
  __syncthreads();
  if (!last_s) return;
  // One pass over the splits, kBatch at a time with every load of a batch in flight together
  // (a running max, the earlier batches rescaled when it grows).
  constexpr int kBatch = 16;
  for (int x = 4 * tid; x < rows_total * cols; x += 4 * blockDim.x) {
    const int r = x / cols, d = rank * cols + x % cols;
    const float* mlr = ws_ml + ml_mine + 2 * r;
    float run_max = -INFINITY, sum = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s0 = 0; s0 < splits; s0 += kBatch) {
      float4 v[kBatch];
      float2 ml[kBatch];  // the split's max and sum of the row
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        if (s0 + u < splits) {
          v[u] =
              __ldcg(reinterpret_cast<const float4*>(ws_o + (s0 + u) * o_stride + (int64_t(bk) * kRows + r) * D + d));
          ml[u] = __ldcg(reinterpret_cast<const float2*>(mlr + (s0 + u) * ml_stride));
        }
      }
      float top = run_max;
#pragma unroll
      for (int u = 0; u < kBatch; ++u)
        if (s0 + u < splits) top = fmaxf(top, ml[u].x);
      const float m_use = top == -INFINITY ? 0.f : top;
      const float corr = fast_exp2(run_max - m_use);  // 0 while nothing was seen (acc, sum still 0)
      acc.x *= corr, acc.y *= corr, acc.z *= corr, acc.w *= corr;
      sum *= corr;
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        if (s0 + u < splits) {
          const float wt = fast_exp2(ml[u].x - m_use);  // 0 for a split that saw no key of the row
          acc.x = fmaf(wt, v[u].x, acc.x), acc.y = fmaf(wt, v[u].y, acc.y);
          acc.z = fmaf(wt, v[u].z, acc.z), acc.w = fmaf(wt, v[u].w, acc.w);
          sum = fmaf(wt, ml[u].y, sum);
        }
      }
      run_max = top;
    }
    store_out(r, d, acc, sum);
  }
  if (tid == 0) tickets[int64_t(bk) * csize + rank] = 0;  // for the next launch (or graph replay)
#endif
}

}  // namespace tunableop::cuda::decode_cluster_detail
