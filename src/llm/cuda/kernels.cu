// CUDA kernels of the forward pass (see kernels.h). Each is the plain one-block-per-row or
// grid-stride form. They are memory-bound next to the GEMMs: in a long prefill they move about a
// quarter of its bytes (issue 12), so the element-wise ones (norm, residual, gated activation,
// RoPE) load and store 8 or 16 bytes per access where the widths allow (a scalar form otherwise)
// and compute exactly what the scalar form does, element by element. Math in fp32, storage in E
// (fp32 or bf16).
#include <cstdint>

#include <cuda_bf16.h>

#include <algorithm>
#include <cfloat>

#include "cuda_common/elem.cuh"
#include "cuda_common/gated_act.cuh"
#include "cuda_common/pdl.cuh"
#include "cuda_common/rope.cuh"
#include "llm/cuda/kernel_common.cuh"
#include "llm/cuda/kernels.h"
#include "llm/random_hash.h"

namespace tunableop::llm::cuda {

namespace {

using ::tunableop::cuda::from_f;
using ::tunableop::cuda::launch;
using ::tunableop::cuda::rope_rotate;
using ::tunableop::cuda::to_f;

unsigned grid_for(int64_t n, int threads) {
  int64_t blocks = (n + threads - 1) / threads;
  return unsigned(blocks < 65535 * 16 ? (blocks > 0 ? blocks : 1) : 65535 * 16);
}

// N consecutive elements as one aligned load or store (8 or 16 bytes).
template <class E, int N>
struct alignas(sizeof(E) * N) Pack {
  E v[N];
};
template <class E, int N>
__device__ __forceinline__ Pack<E, N> load_pack(const E* p) {
  return *reinterpret_cast<const Pack<E, N>*>(p);
}
template <class E, int N>
__device__ __forceinline__ void store_pack(E* p, const Pack<E, N>& v) {
  *reinterpret_cast<Pack<E, N>*>(p) = v;
}
bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <class E>
__global__ void fill_random_kernel(E* dst, int64_t n, uint64_t seed, uint64_t stream_id, float scale, float offset) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    dst[i] = from_f<E>(offset + scale * random_uniform(seed, stream_id, uint64_t(i)));
  }
}

template <class E>
__global__ void convert_kernel(const float* src, E* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    dst[i] = from_f<E>(src[i]);
  }
}

template <class E>
__global__ void embedding_kernel(const int32_t* ids, const E* table, int64_t width, float scale, float* x) {
  pdl_enter();
  const int64_t r = blockIdx.x;
  const E* src = table + int64_t(ids[r]) * width;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) x[r * width + i] = to_f(from_f<E>(to_f(src[i]) * scale));
}

// One block per row: out = rmsnorm(x) (kAdd: x += y first, written back). Thread t owns the
// groups of V consecutive elements t, t + blockDim, ...: its partial sum of squares covers them in
// that order whatever kAdd is, so the fused and the plain form give the same bits (for the same
// V and block size, which depend on the width only).
template <class E, int V, bool kAdd>
__global__ void norm_row_kernel(float* x, const E* y, const E* w, int64_t width, float eps, bool add_one, E* out) {
  pdl_enter();
  __shared__ float scratch[32];
  float* xr = x + blockIdx.x * width;
  const int64_t groups = width / V;
  float ss = 0;
  for (int64_t g = threadIdx.x; g < groups; g += blockDim.x) {
    Pack<float, V> xv = load_pack<float, V>(xr + g * V);
    if (kAdd) {
      const Pack<E, V> yv = load_pack<E, V>(y + blockIdx.x * width + g * V);
#pragma unroll
      for (int j = 0; j < V; ++j) xv.v[j] += to_f(yv.v[j]);
      store_pack<float, V>(xr + g * V, xv);
    }
#pragma unroll
    for (int j = 0; j < V; ++j) ss += xv.v[j] * xv.v[j];
  }
  ss = block_reduce<false>(ss, scratch);
  const float inv = rsqrtf(ss / float(width) + eps);
  E* o = out + blockIdx.x * width;
  for (int64_t g = threadIdx.x; g < groups; g += blockDim.x) {
    const Pack<float, V> xv = load_pack<float, V>(xr + g * V);  // this thread's own values (cached)
    const Pack<E, V> wv = load_pack<E, V>(w + g * V);
    Pack<E, V> ov;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float wi = to_f(wv.v[j]);
      ov.v[j] = from_f<E>(xv.v[j] * inv * (add_one ? 1.0f + wi : wi));
    }
    store_pack<E, V>(o + g * V, ov);
  }
}

// x += y over n elements, V at a time (n a multiple of V).
template <class E, int V>
__global__ void add_residual_kernel(float* x, const E* y, int64_t n) {
  pdl_enter();
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < n / V; g += int64_t(gridDim.x) * blockDim.x) {
    Pack<float, V> xv = load_pack<float, V>(x + g * V);
    const Pack<E, V> yv = load_pack<E, V>(y + g * V);
#pragma unroll
    for (int j = 0; j < V; ++j) xv.v[j] += to_f(yv.v[j]);
    store_pack<float, V>(x + g * V, xv);
  }
}

// Element offset of (seq, kv head, pos) in this layer's K (or V) cache; -1: not stored (a paged
// cache's padding row, past its sequence's length).
__device__ __forceinline__ int64_t kv_cache_offset(const RopeStoreArgs& a, int64_t seq, int64_t head, int64_t pos) {
  if (!a.block_table) return ((seq * a.n_kv_heads + head) * a.max_seq + pos) * a.head_dim;
  if (pos >= a.seq_lens[seq]) return -1;
  const int64_t page = a.block_table[seq * a.pages_per_seq + pos / a.page_size];
  return ((page * a.n_kv_heads + head) * a.page_size + pos % a.page_size) * a.head_dim;
}

// qkv row element j with the row's bias added when there is one (rounded to E, as add_bias does).
template <class E>
__device__ __forceinline__ float biased(const RopeStoreArgs& a, const E* row, int64_t j) {
  return a.qkv_bias ? to_f(from_f<E>(to_f(row[j]) + to_f(static_cast<const E*>(a.qkv_bias)[j]))) : to_f(row[j]);
}

// One block per (row, q or k head): decode has one row per sequence, so a block per row alone
// left one SM walking every head in a serial loop (15 us for Llama's 64 heads). A k-head block
// also stores that kv head's v.
template <class E>
__global__ void rope_store_kernel(RopeStoreArgs a) {
  pdl_enter();
  const int64_t r = blockIdx.x, h = blockIdx.y;
  const int64_t hd = a.head_dim, half = hd / 2;
  const int64_t pos = a.positions[r], seq = a.seqs[r];
  E* row = static_cast<E*>(a.qkv) + r * a.row_stride;
  const float* c = a.cos + pos * half;
  const float* s = a.sin + pos * half;
  E* kc = static_cast<E*>(a.k_cache);
  E* vc = static_cast<E*>(a.v_cache);
  const int64_t off = h < a.n_heads ? 0 : kv_cache_offset(a, seq, h - a.n_heads, pos);
  if (off < 0) return;  // a paged cache's padding row (past its sequence's length): no k or v stored
  E* dst = h < a.n_heads ? row + h * hd : kc + off;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    float y0, y1;
    rope_rotate(biased(a, row, h * hd + i), biased(a, row, h * hd + i + half), c[i], s[i], y0, y1);
    dst[i] = from_f<E>(y0);
    dst[i + half] = from_f<E>(y1);
  }
  if (h < a.n_heads) return;
  const int64_t v0 = (a.n_heads + a.n_kv_heads + (h - a.n_heads)) * hd;
  for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) vc[off + d] = from_f<E>(biased(a, row, v0 + d));
}

// The same rotation, V pairs (i, i + half) per thread with packed loads (half a multiple of V):
// block (row, group of heads), head_threads = half / V threads per head. Prefill's form: a block
// per (row, head) left most of its 64 threads' loads 2 bytes wide.
template <class E, int V>
__global__ void rope_store_packed_kernel(RopeStoreArgs a, int head_threads) {
  pdl_enter();
  const int64_t r = blockIdx.x;
  const int64_t h = int64_t(blockIdx.y) * (blockDim.x / head_threads) + threadIdx.x / head_threads;
  if (h >= a.n_heads + a.n_kv_heads) return;
  const int64_t hd = a.head_dim, half = hd / 2, i = int64_t(threadIdx.x % head_threads) * V;
  const int64_t pos = a.positions[r], seq = a.seqs[r];
  E* row = static_cast<E*>(a.qkv) + r * a.row_stride;
  const int64_t off = h < a.n_heads ? 0 : kv_cache_offset(a, seq, h - a.n_heads, pos);
  if (off < 0) return;  // a paged cache's padding row
  E* dst = h < a.n_heads ? row + h * hd : static_cast<E*>(a.k_cache) + off;
  Pack<E, V> x0 = load_pack<E, V>(row + h * hd + i), x1 = load_pack<E, V>(row + h * hd + i + half);
  const E* bias = static_cast<const E*>(a.qkv_bias);
  auto add_bias = [&](Pack<E, V>& x, int64_t at) {  // the bits of add_bias (family_kernels.h)
    const Pack<E, V> b = load_pack<E, V>(bias + at);
#pragma unroll
    for (int j = 0; j < V; ++j) x.v[j] = from_f<E>(to_f(x.v[j]) + to_f(b.v[j]));
  };
  if (bias) add_bias(x0, h * hd + i), add_bias(x1, h * hd + i + half);
  const Pack<float, V> c = load_pack<float, V>(a.cos + pos * half + i),
                       sn = load_pack<float, V>(a.sin + pos * half + i);
  Pack<E, V> y0, y1;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    float f0, f1;
    rope_rotate(to_f(x0.v[j]), to_f(x1.v[j]), c.v[j], sn.v[j], f0, f1);
    y0.v[j] = from_f<E>(f0);
    y1.v[j] = from_f<E>(f1);
  }
  store_pack<E, V>(dst + i, y0);
  store_pack<E, V>(dst + i + half, y1);
  if (h < a.n_heads) return;
  const int64_t v0 = (a.n_heads + a.n_kv_heads + (h - a.n_heads)) * hd;
  E* vc = static_cast<E*>(a.v_cache) + off;
  Pack<E, V> va = load_pack<E, V>(row + v0 + i), vb = load_pack<E, V>(row + v0 + i + half);
  if (bias) add_bias(va, v0 + i), add_bias(vb, v0 + i + half);
  store_pack<E, V>(vc + i, va);
  store_pack<E, V>(vc + i + half, vb);
}

template <class E>
__global__ void gated_kernel(const E* gate_up, int64_t rows, int64_t inter, Act act, E* out) {
  pdl_enter();
  const int64_t n = rows * inter;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = k / inter, i = k % inter;
    const E* row = gate_up + r * 2 * inter;
    out[k] = from_f<E>(::tunableop::cuda::gated_act(act, to_f(row[i])) * to_f(row[inter + i]));
  }
}

// Rows along y (grid-stride past 65535), V columns per thread along x (inter a multiple of V):
// no 64-bit division per element.
template <class E, int V>
__global__ void gated_packed_kernel(const E* gate_up, int64_t rows, int64_t inter, Act act, E* out) {
  pdl_enter();
  const int64_t i = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) * V;
  if (i >= inter) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const E* row = gate_up + r * 2 * inter;
    const Pack<E, V> g = load_pack<E, V>(row + i), u = load_pack<E, V>(row + inter + i);
    Pack<E, V> o;
#pragma unroll
    for (int j = 0; j < V; ++j) o.v[j] = from_f<E>(::tunableop::cuda::gated_act(act, to_f(g.v[j])) * to_f(u.v[j]));
    store_pack<E, V>(out + r * inter + i, o);
  }
}

// One block per gathered row, `width` words of W (uint32_t, or uint4 where the rows allow).
template <class W>
__global__ void gather_kernel(const W* x, int64_t width, const int64_t* rows, W* out) {
  pdl_enter();
  const W* src = x + rows[blockIdx.x] * width;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) out[blockIdx.x * width + i] = src[i];
}

// (value, index) of a block's elements to thread 0: the larger value wins, equal values keep
// the smaller index (each thread brings the first maximum of its own elements).
__device__ void block_argmax(float v, int64_t idx, int64_t width, int32_t* out) {
  __shared__ float best_v[1024 / 32];
  __shared__ int64_t best_i[1024 / 32];
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (ov > v || (ov == v && oi < idx)) v = ov, idx = oi;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  if (lane == 0) best_v[warp] = v, best_i[warp] = idx;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < warps; ++w) {
      if (best_v[w] > best_v[0] || (best_v[w] == best_v[0] && best_i[w] < best_i[0])) {
        best_v[0] = best_v[w], best_i[0] = best_i[w];
      }
    }
    *out = int32_t(best_i[0] < width ? best_i[0] : 0);
  }
}

template <class E>
__global__ void argmax_kernel(const E* x, int64_t width, int32_t* out) {
  pdl_enter();
  const E* row = x + blockIdx.x * width;
  float v = -FLT_MAX;
  int64_t idx = width;  // larger than any real index: loses ties
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
    const float f = to_f(row[i]);
    if (f > v) v = f, idx = i;  // strided scan: the first max of this thread's subsequence
  }
  block_argmax(v, idx, width, out + blockIdx.x);
}

// The same with V elements (16 bytes) per load and several loads in flight per thread: one
// block per row reads a 256k-entry vocabulary (Gemma's 512 KB of bf16 logits) at several times
// the scalar form's rate (H100: 62 -> 18 us), which the prefill's last kernel waits on.
template <class E, int V>
__global__ void argmax_packed_kernel(const E* x, int64_t width, int32_t* out) {
  pdl_enter();
  const E* row = x + blockIdx.x * width;
  float v = -FLT_MAX;
  int64_t idx = width;
  const int64_t packs = width / V;
#pragma unroll 4
  for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const Pack<E, V> pk = load_pack<E, V>(row + p * V);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float f = to_f(pk.v[j]);
      if (f > v) v = f, idx = p * V + j;  // a thread's elements in increasing index order
    }
  }
  block_argmax(v, idx, width, out + blockIdx.x);
}

__global__ void spin_kernel(int64_t ns) {
  uint64_t t0 = 0, t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (int64_t(t - t0) < ns);
}

// Reads every 16 bytes of buf; the sum goes to *sink only if it is exactly 1.0 (never, in
// practice), so the loads cannot be optimised away and nothing is written.
__global__ void touch_kernel(const uint4* buf, int64_t n, float* sink) {
  uint32_t acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(buf + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x3f800000u) *sink = 1.0f;
}

int threads_for_width(int64_t width) { return width >= 1024 ? 1024 : width >= 256 ? 256 : 128; }

}  // namespace

cudaError_t fill_random(Elem e, void* dst, int64_t n, uint64_t seed, uint64_t stream_id, float scale, float offset,
                        cudaStream_t s) {
  return dispatch(e, [&](auto tag) {
    using E = decltype(tag);
    fill_random_kernel<E><<<grid_for(n, 256), 256, 0, s>>>(static_cast<E*>(dst), n, seed, stream_id, scale, offset);
    return cudaGetLastError();
  });
}

cudaError_t convert_f32(Elem e, const float* src, void* dst, int64_t n, cudaStream_t s) {
  return dispatch(e, [&](auto tag) {
    using E = decltype(tag);
    convert_kernel<E><<<grid_for(n, 256), 256, 0, s>>>(src, static_cast<E*>(dst), n);
    return cudaGetLastError();
  });
}

cudaError_t embedding(Elem e, const int32_t* ids, int64_t rows, const void* table, int64_t width, float scale, float* x,
                      cudaStream_t s, bool pdl) {
  return dispatch(e, [&](auto tag) {
    using E = decltype(tag);
    return launch(embedding_kernel<E>, dim3(unsigned(rows)), dim3(256), 0, s, pdl, ids, static_cast<const E*>(table),
                  width, scale, x);
  });
}

namespace {
// rmsnorm and add_rmsnorm: groups of 4 elements when the width allows (16-byte loads of x),
// else 1; a thread per group up to 1024. Both forms choose alike, so they give the same bits.
template <bool kAdd>
cudaError_t norm_rows(Elem e, float* x, const void* y, const void* w, int64_t rows, int64_t width, float eps,
                      bool add_one, void* out, cudaStream_t s, bool pdl) {
  if (rows == 0) return cudaSuccess;
  return dispatch(e, [&](auto tag) {
    using E = decltype(tag);
    const bool packed = width % 4 == 0 && aligned(x, 16) && aligned(w, 4 * sizeof(E)) && aligned(out, 4 * sizeof(E)) &&
                        (!kAdd || aligned(y, 4 * sizeof(E)));
    const int64_t groups = packed ? width / 4 : width;
    const unsigned threads = unsigned(std::min<int64_t>(1024, std::max<int64_t>(32, (groups + 31) / 32 * 32)));
    auto* kernel = packed ? norm_row_kernel<E, 4, kAdd> : norm_row_kernel<E, 1, kAdd>;
    return launch(kernel, dim3(unsigned(rows)), dim3(threads), 0, s, pdl, x, static_cast<const E*>(y),
                  static_cast<const E*>(w), width, eps, add_one, static_cast<E*>(out));
  });
}
}  // namespace

cudaError_t rmsnorm(Elem e, const float* x, const void* w, int64_t rows, int64_t width, float eps, bool add_one,
                    void* out, cudaStream_t s, bool pdl) {
  // The plain form never writes x (kAdd false).
  return norm_rows<false>(e, const_cast<float*>(x), nullptr, w, rows, width, eps, add_one, out, s, pdl);
}

cudaError_t add_rmsnorm(Elem e, float* x, const void* y, const void* w, int64_t rows, int64_t width, float eps,
                        bool add_one, void* out, cudaStream_t s, bool pdl) {
  return norm_rows<true>(e, x, y, w, rows, width, eps, add_one, out, s, pdl);
}

cudaError_t add_residual(Elem e, float* x, const void* y, int64_t n, cudaStream_t s, bool pdl) {
  return dispatch(e, [&](auto tag) {
    using E = decltype(tag);
    const bool packed = n % 4 == 0 && aligned(x, 16) && aligned(y, 4 * sizeof(E));
    const int v = packed ? 4 : 1;
    return launch(packed ? add_residual_kernel<E, 4> : add_residual_kernel<E, 1>, dim3(grid_for(n / v, 256)), dim3(256),
                  0, s, pdl, x, static_cast<const E*>(y), n);
  });
}

cudaError_t rope_store(Elem e, const RopeStoreArgs& a, cudaStream_t s, bool pdl) {
  return dispatch(e, [&](auto tag) {
    using E = decltype(tag);
    const int64_t half = a.head_dim / 2, heads = a.n_heads + a.n_kv_heads;
    // Packed: 4 pairs per thread, 8-byte (bf16) or 16-byte (fp32) accesses, when every offset is
    // a multiple of 4 elements.
    const bool packed = half % 4 == 0 && a.row_stride % 4 == 0 && aligned(a.qkv, 4 * sizeof(E)) &&
                        aligned(a.k_cache, 4 * sizeof(E)) && aligned(a.v_cache, 4 * sizeof(E)) && aligned(a.cos, 16) &&
                        aligned(a.sin, 16) && half / 4 <= 128 && aligned(a.qkv_bias, 4 * sizeof(E));
    if (packed && a.rows > 0) {
      const int head_threads = int(half / 4);
      const int64_t per_block = std::max<int64_t>(1, 128 / head_threads);
      return launch(rope_store_packed_kernel<E, 4>,
                    dim3(unsigned(a.rows), unsigned((heads + per_block - 1) / per_block)),
                    dim3(unsigned(per_block * head_threads)), 0, s, pdl, a, head_threads);
    }
    const unsigned threads = unsigned(a.head_dim / 2 >= 128 ? 128 : ((a.head_dim / 2 + 31) / 32) * 32);
    return launch(rope_store_kernel<E>, dim3(unsigned(a.rows), unsigned(a.n_heads + a.n_kv_heads)), dim3(threads), 0, s,
                  pdl, a);
  });
}

cudaError_t gated_activation(Elem e, const void* gate_up, int64_t rows, int64_t inter, Act act, void* out,
                             cudaStream_t s, bool pdl) {
  return dispatch(e, [&](auto tag) {
    using E = decltype(tag);
    constexpr int V = 16 / sizeof(E);  // 16-byte accesses
    if (inter % V == 0 && aligned(gate_up, 16) && aligned(out, 16) && rows > 0) {
      const int64_t threads = 256, cols = (inter / V + threads - 1) / threads;
      return launch(gated_packed_kernel<E, V>, dim3(unsigned(cols), unsigned(std::min<int64_t>(rows, 65535))),
                    dim3(unsigned(threads)), 0, s, pdl, static_cast<const E*>(gate_up), rows, inter, act,
                    static_cast<E*>(out));
    }
    return launch(gated_kernel<E>, dim3(grid_for(rows * inter, 256)), dim3(256), 0, s, pdl,
                  static_cast<const E*>(gate_up), rows, inter, act, static_cast<E*>(out));
  });
}

cudaError_t gather_rows(const void* x, int64_t row_bytes, const int64_t* rows, int64_t count, void* out, cudaStream_t s,
                        bool pdl) {
  if (row_bytes <= 0 || row_bytes % 4 != 0 || count < 0) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  if (row_bytes % 16 == 0 && aligned(x, 16) && aligned(out, 16)) {
    return launch(gather_kernel<uint4>, dim3(unsigned(count)), dim3(256), 0, s, pdl, static_cast<const uint4*>(x),
                  row_bytes / 16, rows, static_cast<uint4*>(out));
  }
  return launch(gather_kernel<uint32_t>, dim3(unsigned(count)), dim3(256), 0, s, pdl, static_cast<const uint32_t*>(x),
                row_bytes / 4, rows, static_cast<uint32_t*>(out));
}

cudaError_t argmax_rows(Elem e, const void* x, int64_t rows, int64_t width, int32_t* out, cudaStream_t s, bool pdl) {
  return dispatch(e, [&](auto tag) {
    using E = decltype(tag);
    constexpr int V = 16 / sizeof(E);
    if (width % V == 0 && aligned(x, 16)) {
      return launch(argmax_packed_kernel<E, V>, dim3(unsigned(rows)), dim3(1024), 0, s, pdl, static_cast<const E*>(x),
                    width, out);
    }
    return launch(argmax_kernel<E>, dim3(unsigned(rows)), dim3(1024), 0, s, pdl, static_cast<const E*>(x), width, out);
  });
}

__global__ void advance_decode_kernel(const int32_t* next, int32_t* ids, int32_t* positions, int32_t* lens,
                                      int64_t batch, int32_t* host_next) {
  pdl_enter();
  for (int64_t b = threadIdx.x; b < batch; b += blockDim.x) {
    ids[b] = next[b];
    if (host_next) host_next[b] = next[b];
    positions[b] += 1;
    lens[b] += 1;
  }
}

cudaError_t advance_decode(const int32_t* next, int32_t* ids, int32_t* positions, int32_t* lens, int64_t batch,
                           int32_t* host_next, cudaStream_t s, bool pdl) {
  return launch(advance_decode_kernel, dim3(1), dim3(128), 0, s, pdl, next, ids, positions, lens, batch, host_next);
}

cudaError_t spin(int64_t ns, cudaStream_t s) {
  spin_kernel<<<1, 1, 0, s>>>(ns);
  return cudaGetLastError();
}

cudaError_t touch(const void* buf, int64_t bytes, float* sink, cudaStream_t s) {
  touch_kernel<<<1024, 256, 0, s>>>(static_cast<const uint4*>(buf), bytes / 16, sink);
  return cudaGetLastError();
}

}  // namespace tunableop::llm::cuda
