// One block per row; every step is a block-wide pass over the row (no scratch memory, so any
// vocabulary size works): max and argmax, the top-k floor by radix select on the logits' bits,
// the total weight, the top-p threshold by bisection (the same rounds and float midpoints as
// sample_row on the host), and the draw as a scan over contiguous per-thread segments in
// vocabulary order. Sums are in double, as on the host.
#include <cuda_bf16.h>

#include <cfloat>
#include <cstdint>

#include "llm/cuda/sampling.h"

namespace tunableop::llm::cuda {
namespace {

constexpr int kThreads = 512;

__device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }

// An order-preserving map of floats to unsigned ints (larger float, larger key).
__device__ __forceinline__ uint32_t key_of(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float float_of(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k);
}

template <class T>
__device__ T block_sum(T v, T* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  T total = 0;
  for (int w = 0; w < kThreads / 32; ++w) total += shared[w];
  return total;
}

template <class E>
__global__ void __launch_bounds__(kThreads)
    sample_kernel(const E* logits, int64_t vocab, const SamplingRow* params, int32_t* out) {
  const int64_t row = blockIdx.x;
  const E* l = logits + row * vocab;
  const SamplingRow p = params[row];
  __shared__ float s_max[kThreads / 32];
  __shared__ int64_t s_arg[kThreads / 32];
  __shared__ int s_bad;
  __shared__ double s_sum[kThreads / 32];
  __shared__ uint32_t s_hist[256];
  __shared__ uint32_t s_prefix, s_k;
  __shared__ double s_scan[kThreads];
  if (threadIdx.x == 0) s_bad = 0;
  __syncthreads();

  // 1. The largest logit and its first index.
  float best = -INFINITY;
  int64_t arg = vocab;  // "none yet": larger than any index, so the first maximum wins ties
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    const float v = load(l, i);
    if (isnan(v) || v == INFINITY) s_bad = 1;
    if (v > best || (v == best && i < arg)) best = v, arg = i;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ob = __shfl_xor_sync(0xFFFFFFFFu, best, o);
    const int64_t oa = __shfl_xor_sync(0xFFFFFFFFu, arg, o);
    if (ob > best || (ob == best && oa < arg)) best = ob, arg = oa;
  }
  if ((threadIdx.x & 31) == 0) s_max[threadIdx.x >> 5] = best, s_arg[threadIdx.x >> 5] = arg;
  __syncthreads();
  best = -INFINITY, arg = vocab;
  for (int w = 0; w < kThreads / 32; ++w) {
    if (s_max[w] > best || (s_max[w] == best && s_arg[w] < arg)) best = s_max[w], arg = s_arg[w];
  }
  if (s_bad) {
    if (threadIdx.x == 0) out[row] = -1;
    return;
  }
  if (arg >= vocab) arg = 0;  // every logit -inf
  if (p.temperature <= 0 || best == -INFINITY) {
    if (threadIdx.x == 0) out[row] = int32_t(arg);
    return;
  }

  // 2. top-k: the k-th largest logit by radix select over its key, 8 bits at a time.
  float floor = -INFINITY;
  if (p.top_k > 0 && int64_t(p.top_k) < vocab) {
    if (threadIdx.x == 0) s_prefix = 0, s_k = uint32_t(p.top_k);
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int b = threadIdx.x; b < 256; b += kThreads) s_hist[b] = 0;
      __syncthreads();
      const uint32_t prefix = s_prefix;
      const uint32_t high_mask = shift == 24 ? 0u : (0xFFFFFFFFu << (shift + 8));
      for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
        const uint32_t k = key_of(load(l, i));
        if ((k & high_mask) == prefix) atomicAdd(&s_hist[(k >> shift) & 0xFF], 1u);
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        uint32_t need = s_k;
        for (int b = 255; b >= 0; --b) {  // from the largest digit down
          if (s_hist[b] >= need) {
            s_prefix = prefix | (uint32_t(b) << shift);
            s_k = need;
            break;
          }
          need -= s_hist[b];
        }
      }
      __syncthreads();
    }
    floor = float_of(s_prefix);
  }

  // 3. Weights and their total.
  const float inv_t = 1.0f / p.temperature;
  auto weight = [&](int64_t i) -> float {
    const float v = load(l, i);
    return v >= floor ? expf((v - best) * inv_t) : 0.0f;
  };
  double part = 0;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) part += double(weight(i));
  const double total = block_sum(part, s_sum);

  // 4. top-p: the threshold by bisection.
  float tau = 0;
  if (p.top_p < 1) {
    const double want = double(p.top_p) * total;
    float lo = 0, hi = 2;
    for (int round = 0; round < kTopPRounds; ++round) {
      const float mid = 0.5f * (lo + hi);
      double mass = 0;
      for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
        const float w = weight(i);
        if (w >= mid) mass += double(w);
      }
      if (block_sum(mass, s_sum) >= want)
        lo = mid;
      else
        hi = mid;
    }
    tau = lo;
  }

  // 5. The draw: thread t owns the contiguous segment [t * seg, (t + 1) * seg).
  const int64_t seg = (vocab + kThreads - 1) / kThreads;
  const int64_t begin = int64_t(threadIdx.x) * seg, end = min(vocab, begin + seg);
  double mine = 0;
  for (int64_t i = begin; i < end; ++i) {
    const float w = weight(i);
    if (w > 0 && w >= tau) mine += double(w);
  }
  s_scan[threadIdx.x] = mine;
  __syncthreads();
  if (threadIdx.x == 0) {
    double run = 0;
    for (int t = 0; t < kThreads; ++t) {
      const double v = s_scan[t];
      s_scan[t] = run;  // exclusive prefix
      run += v;
    }
    s_sum[0] = run;  // the kept mass
  }
  __syncthreads();
  const double kept = s_sum[0];
  const double u = uniform01(p.seed, p.counter) * kept;
  const double before = s_scan[threadIdx.x];
  const bool last_thread = threadIdx.x == kThreads - 1;
  if (u >= before && (u < before + mine || last_thread) && (mine > 0 || last_thread)) {
    double run = before;
    int64_t pick = -1;
    for (int64_t i = begin; i < end; ++i) {
      const float w = weight(i);
      if (w > 0 && w >= tau) {
        run += double(w);
        pick = i;
        if (u < run) break;
      }
    }
    if (pick >= 0)
      out[row] = int32_t(pick);
    else if (last_thread)
      out[row] = int32_t(arg);  // u at the very top of the mass: the last kept token
  }
}

}  // namespace

cudaError_t sample_rows(Elem e, const void* logits, int64_t rows, int64_t vocab, const SamplingRow* params,
                        int32_t* out, cudaStream_t s) {
  if (rows <= 0) return cudaSuccess;
  if (rows > INT32_MAX || vocab <= 0) return cudaErrorInvalidValue;
  if (e == Elem::kBF16) {
    sample_kernel<__nv_bfloat16>
        <<<dim3(unsigned(rows)), kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(logits), vocab, params, out);
  } else {
    sample_kernel<float>
        <<<dim3(unsigned(rows)), kThreads, 0, s>>>(static_cast<const float*>(logits), vocab, params, out);
  }
  return cudaGetLastError();
}

}  // namespace tunableop::llm::cuda
