// Streaming decode attention: bulk-copy (TMA) loads of large K/V chunks through a deep ring,
// for decode with few query rows per kv head against caches of megabytes (Llama-2-7B's MHA:
// one row per kv head, 32 kv heads, 4k-16k positions).
//
// Why: at 4k positions Llama's decode reads 67 MB, 17 us at the copy rate, and the split-KV
// flash kernel spends ~5 us more per call: the first loads, the drain, and a combine kernel
// (docs/results/attention/stage10-h200.md). Here each kv head's keys are spread over the C
// blocks of a thread-block cluster (C SMs) or over S such clusters, each block streams its
// contiguous share through a ring of chunks of Kc keys (K and V of a chunk: one bulk copy each
// on a contiguous cache, one per page piece on a paged one) issued by a producer warp, W consumer
// warps work on the landed chunks, and the blocks' partials are merged through distributed
// shared memory. One launch: with one cluster per kv head no workspace and no counters; with S
// clusters, each cluster's merged partial goes to the workspace and the last cluster to finish
// (a ticket per (kv head, rank), left at 0 for the next launch or graph replay) merges the S.
// Why several small clusters: a cluster's blocks must share a GPC, and on an H200 only 30
// clusters of 8 blocks fit at two blocks an SM, or 30 of 4 at one an SM (32 wanted for Llama's
// 32 kv heads; docs/results/attention/stage11-h200.md), while clusters of 2 fill all 132 SMs.
//
// Consumer warps: chunk i is warp i % W's (S a multiple of W: a slot is always the same warp's;
// the ring holds S / W of each warp's chunks in flight), 16 keys a step. Lane (kq, j) = (lane / 8,
// lane % 8) takes keys kq, kq + 4, kq + 8, kq + 12 of the step and the 16-byte pieces j, j + 8, ...
// of their rows: the 8 lanes of a key read 128 contiguous bytes per load (no bank conflicts), and
// four keys a lane are four independent chains, so a step costs about one key's latency. Per row:
// dot products over the lane's dims and 3 shuffles per key, a warp-wide running max (2 shuffles),
// exp2, and O += p V on the lane's dims; CUDA cores, not tensor cores: at 1-4 rows the work is
// bytes. Keys past the chunk's end (the tail chunk) are never read from shared memory.
//
// Then in a fixed order (the same bits run to run): the lanes' partials are summed over the
// warp's keys (shuffles), the block's warps merged through shared memory, the cluster
// synchronises, and block `rank` merges columns [rank * D / C, (rank + 1) * D / C) of every row
// over the C blocks (DSMEM) and writes them.
//
// Programmatic dependent launch (sm_90): an L2 prefetch of the block's first chunks, then the
// wait for the previous kernel (rope + cache write) before anything is read; the next kernel may
// launch at once. sm_90 only (clusters, bulk copies); the body is empty elsewhere and the
// candidates refuse other devices.
#pragma once

#include <cooperative_groups.h>

#include "backends/cuda/attention/flash_kernel.cuh"

namespace tunableop::cuda::decode_stream_detail {

using flash_detail::fast_exp2;
using flash_detail::grid_dependency_wait;
using flash_detail::grid_dependents_launch;
using flash_detail::pack2;
using flash_detail::smem_addr;

constexpr int kMaxWarps = 8;    // consumer warps per block (plus one producer warp)
constexpr int kMaxStages = 16;  // chunks in the ring
constexpr int kMaxCluster = 8;  // blocks per cluster (the portable maximum)
constexpr int kMaxSmem = 227 * 1024;
constexpr int kKeysPerLane = 4;  // a consumer warp takes 16 keys a step

// Floats of the split workspace: per (split, sequence x kv head) the cluster's merged partial
// [kRows][D], then per (split, sequence x kv head, rank) the rows' max and sum [kRows][2].
__host__ __device__ constexpr int64_t split_o_floats(int splits, int slabs, int rows, int head_dim) {
  return int64_t(splits) * slabs * rows * head_dim;
}
__host__ __device__ constexpr int64_t split_workspace_floats(int splits, int slabs, int cluster, int rows,
                                                             int head_dim) {
  return split_o_floats(splits, slabs, rows, head_dim) + int64_t(splits) * slabs * cluster * rows * 2;
}

// Shared memory of one block, in bytes from the start of the dynamic buffer: the ring's
// mbarriers, the ring (after the stream, the warps' partials in its place), the block's merged
// partial (read by the cluster, so not aliased).
struct Layout {
  int d, rows, keys, stages, warps, elem;
  __host__ __device__ int stage_bytes() const { return 2 * keys * d * elem; }  // K then V
  // full[kMaxStages] and empty[kMaxStages] (8 bytes each), then the last-ticket flag (no static
  // shared memory: the dynamic buffer may take the whole 227 KB); the ring at a 128-byte boundary.
  __host__ __device__ int flag() const { return 2 * kMaxStages * 8; }
  __host__ __device__ int ring() const { return (flag() + 16 + 127) / 128 * 128; }
  // o[rows][d], m[rows], l[rows], padded to whole float4s: the partials are read and written as such.
  __host__ __device__ int partial_floats() const { return rows * d + (2 * rows + 3) / 4 * 4; }
  __host__ __device__ int block_part() const {
    const int a = stages * stage_bytes(), b = warps * partial_floats() * 4;
    return ring() + (a > b ? a : b);
  }
  __host__ __device__ int bytes() const { return block_part() + partial_floats() * 4; }
};

// ---- mbarrier and bulk-copy PTX ------------------------------------------------------------

__device__ __forceinline__ void mbar_init(uint32_t bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Waits until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// `bytes` (a multiple of 16) global -> shared, completing on `bar`'s transaction count.
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void prefetch_l2(const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
}

template <class T>
__device__ __forceinline__ void widen8(const uint4& v, float (&f)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[i]));
      f[2 * i] = x.x, f[2 * i + 1] = x.y;
    } else {
      const float2 x = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      f[2 * i] = x.x, f[2 * i + 1] = x.y;
    }
  }
}

// Merges `count` partials of one row's 4 columns in index order, 4 at a time with their loads in
// flight together and a running max (the earlier ones rescaled when it grows): load(c, v, m, l)
// gives partial c's columns, max and sum. Weight 0 for a partial that saw no key (m = -inf).
// Few registers, unlike one pass over all 16 of a cluster: they decide how many blocks share an SM.
template <class Load>
__device__ __forceinline__ float4 merge_running(int count, Load load, float* mx, float* sum) {
  float run = -INFINITY, s = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int c0 = 0; c0 < count; c0 += 4) {
    float4 v[4];
    float mm[4], ll[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      if (c0 + u < count) {
        load(c0 + u, &v[u], &mm[u], &ll[u]);
      } else {
        v[u] = make_float4(0.f, 0.f, 0.f, 0.f), mm[u] = -INFINITY, ll[u] = 0.f;
      }
    }
    float top = run;
#pragma unroll
    for (int u = 0; u < 4; ++u) top = fmaxf(top, mm[u]);
    const float m_use = top == -INFINITY ? 0.f : top;
    const float corr = fast_exp2(run - m_use);  // 0 while nothing was seen (acc, s still 0)
    acc.x *= corr, acc.y *= corr, acc.z *= corr, acc.w *= corr;
    s *= corr;
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const float w = fast_exp2(mm[u] - m_use);
      acc.x = fmaf(w, v[u].x, acc.x), acc.y = fmaf(w, v[u].y, acc.y);
      acc.z = fmaf(w, v[u].z, acc.z), acc.w = fmaf(w, v[u].w, acc.w);
      s = fmaf(w, ll[u], s);
    }
    run = top;
  }
  *mx = run;
  *sum = s;
  return acc;
}

// kRows: query rows per kv head the instance holds (rows past q_len * group are padding).
template <class T, int D, int kRows>
__global__ void __launch_bounds__(32 * (kMaxWarps + 1))
    decode_stream_kernel(FlashArgs a, int keys, int stages, unsigned* tickets) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  static_assert(D == 64 || D == 128 || D == 256, "head_dim 64, 128 or 256");
  constexpr int kU = D / 64;  // 16-byte pieces of a row per lane
  constexpr int kE = 8 * kU;  // elements of a row per lane
  extern __shared__ __align__(128) unsigned char smem[];
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warps = int(blockDim.x >> 5) - 1;  // consumers; warp `warps` is the producer
  const Layout L{D, kRows, keys, stages, warps, int(sizeof(T))};
  const int csize = int(cluster.num_blocks()), rank = int(cluster.block_rank());
  const int splits = int(gridDim.x) / csize, split = int(blockIdx.x) / csize;  // 1-D clusters along x
  const int bk = blockIdx.y, b = bk / a.kv_heads, kvh = bk % a.kv_heads;
  const int64_t row_bytes = int64_t(D) * sizeof(T);
  const char* kbase = static_cast<const char*>(a.k);
  const char* vbase = static_cast<const char*>(a.v);
  // This block's share of the chunks of a sequence of n keys: [first, end); block `rank` of cluster
  // `split` takes part split * C + rank.
  auto share = [&](int n, int* first, int* end) {
    const int chunks = (n + keys - 1) / keys, per = (chunks + splits * csize - 1) / (splits * csize);
    *first = min(chunks, (split * csize + rank) * per);
    *end = min(chunks, *first + per);
  };

  const uint32_t bars = smem_addr(smem);  // full[kMaxStages], then empty[kMaxStages]
  auto full = [&](int s) { return bars + 8u * uint32_t(s); };
  auto empty = [&](int s) { return bars + 8u * uint32_t(kMaxStages + s); };
  const uint32_t ring = smem_addr(smem + L.ring());
  if (tid == 0) {
    for (int s = 0; s < stages; ++s) mbar_init(full(s), 1), mbar_init(empty(s), 1);  // empty: the chunk's warp
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  // While the previous kernel may still run: an L2 prefetch of the first chunks (contiguous
  // cache; a hint only: the length read here may be stale, clamped so every address is inside
  // the cache, and a prefetch changes no value).
  if (!a.page_size && warp == warps && lane < 2 * stages) {
    const int hint = int(min(int64_t(min(max(a.kv_lens ? a.kv_lens[b] : a.kv_len, 0), a.kv_len)), a.max_seq));
    int first, end;
    share(hint, &first, &end);
    const int c = first + lane / 2;
    if (c < end) {
      const int n = min(keys, hint - c * keys);
      prefetch_l2((lane & 1 ? vbase : kbase) + (int64_t(bk) * a.max_seq + int64_t(c) * keys) * row_bytes,
                  uint32_t(n * row_bytes));
    }
  }
  __syncthreads();

  grid_dependency_wait();  // q and this step's K/V rows come from the previous kernel
  grid_dependents_launch();

  const int group = a.heads / a.kv_heads;
  const int rows_total = a.q_len * group;  // <= kRows (the launch checks)
  const int len = a.kv_lens ? a.kv_lens[b] : a.kv_len;
  const int q_real = a.q_lens ? a.q_lens[b] : a.q_len;
  const int rows_real = q_real * group;
  const int pos0 = len - q_real;  // causal: query i sits at key position pos0 + i
  int first, end;
  share(len, &first, &end);
  const int count = end - first;

  // The consumers' running state (the producer warp leaves it untouched).
  const int kq = lane >> 3, j = lane & 7;
  float o[kRows][kE], m[kRows], l[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m[r] = -INFINITY, l[r] = 0.f;
#pragma unroll
    for (int e = 0; e < kE; ++e) o[r][e] = 0.f;
  }
  if (warp == warps) {
    // Producer: chunk i into stage i % S once the consumers have released it.
    for (int i = 0; i < count; ++i) {
      const int s = i % stages;
      mbar_wait(empty(s), uint32_t(((i / stages) & 1) ^ 1));
      const int j0 = (first + i) * keys, n = min(keys, len - j0);
      const uint32_t dst = ring + uint32_t(s * L.stage_bytes());
      if (lane == 0) mbar_expect_tx(full(s), uint32_t(2 * n * row_bytes));
      __syncwarp();
      if (!a.page_size) {
        if (lane < 2) {
          const int64_t off = (int64_t(bk) * a.max_seq + j0) * row_bytes;
          bulk_copy(dst + uint32_t(lane * keys * row_bytes), (lane ? vbase : kbase) + off, uint32_t(n * row_bytes),
                    full(s));
        }
      } else {  // one copy of K and one of V per page the chunk touches, a lane each
        const int ps = a.page_size, pg0 = j0 / ps, pages = (j0 + n - 1) / ps - pg0 + 1;
        for (int t = lane; t < pages; t += 32) {
          const int pg = pg0 + t, from = max(j0, pg * ps), to = min(j0 + n, (pg + 1) * ps);
          const int page = a.block_table[int64_t(b) * a.pages_per_seq + pg];
          const int64_t off = ((int64_t(page) * a.kv_heads + kvh) * ps + from % ps) * row_bytes;
          const uint32_t at = uint32_t((from - j0) * row_bytes), bytes = uint32_t((to - from) * row_bytes);
          bulk_copy(dst + at, kbase + off, bytes, full(s));
          bulk_copy(dst + uint32_t(keys * row_bytes) + at, vbase + off, bytes, full(s));
        }
      }
    }
  } else {
    // Consumers: the query rows, pre-scaled to log2 units (softcapping: scaled only, the capped
    // score taken to log2 units), this lane's dims of them.
    const bool capped = a.softcap > 0.f;
    const float scale_log2 = a.scale * (capped ? 1.f : 1.4426950408889634f);
    float q[kRows][kE];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const bool real = r < rows_real;
      const int i = real ? r / group : 0, h = kvh * group + (real ? r % group : 0);
      const T* src = static_cast<const T*>(a.q) + (int64_t(b) * a.q_len + i) * a.q_row_stride + int64_t(h) * D;
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        float f[8];
        widen8<T>(real ? *reinterpret_cast<const uint4*>(src + 8 * (j + 8 * u)) : make_uint4(0, 0, 0, 0), f);
#pragma unroll
        for (int e = 0; e < 8; ++e) q[r][8 * u + e] = f[e] * scale_log2;
      }
    }
    // Chunk i is warp i % W's, 16 keys a step: lane (kq, j) takes keys kq, kq + 4, kq + 8, kq + 12
    // of the step (independent chains: the step's latency is one key's, not four).
    for (int i = warp; i < count; i += warps) {
      const int s = i % stages;
      mbar_wait(full(s), uint32_t((i / stages) & 1));
      const int j0 = (first + i) * keys, n = min(keys, len - j0);
      const unsigned char* ks = smem + L.ring() + s * L.stage_bytes();
      const unsigned char* vs = ks + keys * row_bytes;
      for (int k0 = 0; k0 < n; k0 += 4 * kKeysPerLane) {  // warp-uniform: the shuffles see every lane
        float sc[kKeysPerLane][kRows];
#pragma unroll
        for (int t = 0; t < kKeysPerLane; ++t) {
          const int kk = k0 + kq + 4 * t;
#pragma unroll
          for (int r = 0; r < kRows; ++r) sc[t][r] = 0.f;
          if (kk < n) {  // the tail chunk's rows past n were never written
#pragma unroll
            for (int u = 0; u < kU; ++u) {
              float f[8];
              widen8<T>(*reinterpret_cast<const uint4*>(ks + kk * row_bytes + 16 * (j + 8 * u)), f);
#pragma unroll
              for (int r = 0; r < kRows; ++r)
#pragma unroll
                for (int e = 0; e < 8; ++e) sc[t][r] = fmaf(q[r][8 * u + e], f[e], sc[t][r]);
            }
          }
        }
        float p[kKeysPerLane][kRows];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float top = -INFINITY;
#pragma unroll
          for (int t = 0; t < kKeysPerLane; ++t) {
            float x = sc[t][r];
            x += __shfl_xor_sync(0xffffffffu, x, 1);
            x += __shfl_xor_sync(0xffffffffu, x, 2);
            x += __shfl_xor_sync(0xffffffffu, x, 4);
            const int kk = k0 + kq + 4 * t;
            const bool vis = kk < n && r < rows_real && (!a.causal || j0 + kk <= pos0 + r / group);
            if (capped) x = flash_detail::softcap_score(x, a.softcap) * 1.4426950408889634f;
            sc[t][r] = vis ? x : -INFINITY;
            top = fmaxf(top, sc[t][r]);
          }
          top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 8));
          const float mx = fmaxf(m[r], fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 16)));
          const float m_use = mx == -INFINITY ? 0.f : mx;  // a row with no key yet stays at 0
          const float corr = fast_exp2(m[r] - m_use);      // 0 while m = -inf
          float sum = 0.f;
#pragma unroll
          for (int t = 0; t < kKeysPerLane; ++t) p[t][r] = fast_exp2(sc[t][r] - m_use), sum += p[t][r];
          l[r] = fmaf(l[r], corr, sum);
          m[r] = mx;
#pragma unroll
          for (int e = 0; e < kE; ++e) o[r][e] *= corr;
        }
#pragma unroll
        for (int t = 0; t < kKeysPerLane; ++t) {
          const int kk = k0 + kq + 4 * t;
          if (kk < n) {
#pragma unroll
            for (int u = 0; u < kU; ++u) {
              float f[8];
              widen8<T>(*reinterpret_cast<const uint4*>(vs + kk * row_bytes + 16 * (j + 8 * u)), f);
#pragma unroll
              for (int r = 0; r < kRows; ++r)
#pragma unroll
                for (int e = 0; e < 8; ++e) o[r][8 * u + e] = fmaf(p[t][r], f[e], o[r][8 * u + e]);
            }
          }
        }
      }
      __syncwarp();  // every lane is done with the stage
      if (lane == 0) mbar_arrive(empty(s));
    }
    // The warp's partial: sums over the lanes of its keys (lanes j, j + 8, j + 16, j + 24).
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 8);
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 16);
#pragma unroll
      for (int e = 0; e < kE; ++e) {
        o[r][e] += __shfl_xor_sync(0xffffffffu, o[r][e], 8);
        o[r][e] += __shfl_xor_sync(0xffffffffu, o[r][e], 16);
      }
    }
  }
  __syncthreads();  // every warp is done with the ring: the partials go in its place
  if (warp < warps) {
    float* wp = reinterpret_cast<float*>(smem + L.ring()) + warp * L.partial_floats();
    if (kq == 0) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          float* at = wp + r * D + 8 * (j + 8 * u);
          *reinterpret_cast<float4*>(at) = make_float4(o[r][8 * u], o[r][8 * u + 1], o[r][8 * u + 2], o[r][8 * u + 3]);
          *reinterpret_cast<float4*>(at + 4) =
              make_float4(o[r][8 * u + 4], o[r][8 * u + 5], o[r][8 * u + 6], o[r][8 * u + 7]);
        }
      }
    }
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) wp[kRows * D + r] = m[r], wp[kRows * D + kRows + r] = l[r];
    }
  }
  __syncthreads();  // the warps' partials are in shared memory

  // Merge the block's warps (in warp order), 4 columns of a row per thread.
  float* bp = reinterpret_cast<float*>(smem + L.block_part());  // o[kRows][D], m[kRows], l[kRows]
  {
    const float* parts = reinterpret_cast<const float*>(smem + L.ring());
    for (int x = 4 * tid; x < kRows * D; x += 4 * int(blockDim.x)) {
      const int r = x / D, d = x % D;
      float mx, sum;
      const float4 acc = merge_running(
          warps,
          [&](int w, float4* v, float* mw, float* lw) {
            const float* wp = parts + w * L.partial_floats();
            *v = *reinterpret_cast<const float4*>(wp + r * D + d);
            *mw = wp[kRows * D + r], *lw = wp[kRows * D + kRows + r];
          },
          &mx, &sum);
      *reinterpret_cast<float4*>(bp + x) = acc;
      if (d == 0) bp[kRows * D + r] = mx, bp[kRows * D + kRows + r] = sum;
    }
  }
  cluster.sync();  // every block's merged partial is visible to the cluster

  // Merge the cluster's blocks for this block's columns and write them (one split) or put them in
  // the workspace (several); every remote read of a thread is issued before its merge.
  const int cols = D / csize;  // csize divides D (cluster sizes are powers of two <= 8)
  const int slabs = int(gridDim.y);
  float* ws_o = static_cast<float*>(a.workspace);  // splits > 1 only
  float* ws_ml = ws_o + split_o_floats(splits, slabs, kRows, D);
  const int64_t o_stride = int64_t(slabs) * kRows * D;               // from one split to the next
  const int64_t ml_stride = int64_t(slabs) * csize * kRows * 2;      // from one split to the next
  const int64_t ml_mine = (int64_t(bk) * csize + rank) * kRows * 2;  // this (slab, rank)
  auto store_out = [&](int r, int d, float4 acc, float sum) {
    const float inv = sum > 0.f ? 1.f / sum : 0.f;  // rows that saw no key: zeros
    const int i = r / group, h = kvh * group + r % group;
    T* dst = static_cast<T*>(a.out) + (int64_t(b) * a.q_len + i) * a.o_row_stride + int64_t(h) * D + d;
    *reinterpret_cast<uint2*>(dst) = make_uint2(pack2<T>(acc.x * inv, acc.y * inv), pack2<T>(acc.z * inv, acc.w * inv));
  };
  for (int x = 4 * tid; x < rows_total * cols; x += 4 * int(blockDim.x)) {  // cols: a multiple of 4
    const int r = x / cols, d = rank * cols + x % cols;
    float mx, sum;
    const float4 acc = merge_running(
        csize,
        [&](int c, float4* v, float* mc, float* lc) {
          const float* rb = cluster.map_shared_rank(static_cast<const float*>(bp), c);
          *v = *reinterpret_cast<const float4*>(rb + r * D + d);
          *mc = rb[kRows * D + r], *lc = rb[kRows * D + kRows + r];
        },
        &mx, &sum);
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
  // columns over the splits, in split order, and writes them. The barrier above orders every
  // thread's partial before thread 0's fence and ticket; the last block's thread 0 fences again
  // before the barrier that releases its threads to read. It puts the counter back to 0 for the
  // next launch (or graph replay).
  unsigned& last = *reinterpret_cast<unsigned*>(smem + L.flag());
  if (tid == 0) {
    __threadfence();
    last = atomicAdd(&tickets[int64_t(bk) * csize + rank], 1u) == unsigned(splits - 1);
    if (last) __threadfence();
  }
  __syncthreads();
  if (!last) return;
  for (int x = 4 * tid; x < rows_total * cols; x += 4 * int(blockDim.x)) {
    const int r = x / cols, d = rank * cols + x % cols;
    float mx, sum;
    const float4 acc = merge_running(
        splits,
        [&](int sp, float4* v, float* ms, float* ls) {
          *v = __ldcg(reinterpret_cast<const float4*>(ws_o + sp * o_stride + (int64_t(bk) * kRows + r) * D + d));
          const float2 ml = __ldcg(reinterpret_cast<const float2*>(ws_ml + sp * ml_stride + ml_mine + 2 * r));
          *ms = ml.x, *ls = ml.y;
        },
        &mx, &sum);
    store_out(r, d, acc, sum);
  }
  if (tid == 0) tickets[int64_t(bk) * csize + rank] = 0;
#endif
}

}  // namespace tunableop::cuda::decode_stream_detail
