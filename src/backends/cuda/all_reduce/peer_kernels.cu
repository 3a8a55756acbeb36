// One-shot, two-shot and one-shot LL all-reduce kernels over CUDA peer memory (peer_kernels.h
// explains the protocols). Data moves in 16-byte packs (LL: 8 bytes of data per 16-byte line);
// inputs and outputs of any alignment are read and written element by element where a pack
// cannot be.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "backends/cuda/all_reduce/peer_kernels.h"
#include "cuda_common/elem.cuh"
#include "cuda_common/pdl.cuh"

namespace tunableop::cuda {
namespace {

__device__ __forceinline__ void store_release_sys(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t load_acquire_sys(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Accumulation: fp32 for 16- and 32-bit types, fp64 for fp64.
template <class T>
struct AccOf {
  using type = float;
};
template <>
struct AccOf<double> {
  using type = double;
};
// fp32, bf16 and fp16 widen and narrow as everywhere else (cuda_common/elem.cuh); fp64 stays.
template <class T>
__device__ __forceinline__ typename AccOf<T>::type widen(T x) {
  return to_f<T>(x);
}
template <>
__device__ __forceinline__ double widen<double>(double x) {
  return x;
}
template <class T>
__device__ __forceinline__ T narrow(typename AccOf<T>::type v) {
  return from_f<T>(v);
}
template <>
__device__ __forceinline__ double narrow<double>(double v) {
  return v;
}

template <class T>
union Pack {
  static constexpr int kN = 16 / int(sizeof(T));
  uint4 bits;
  T v[kN];
};

// Pack j of `src` (count elements); elements past the end read as 0.
template <class T>
__device__ __forceinline__ uint4 load_input(const T* src, int64_t j, int64_t count, bool aligned) {
  constexpr int N = Pack<T>::kN;
  const int64_t base = j * N;
  Pack<T> p;
  if (aligned && base + N <= count) {
    p.bits = *reinterpret_cast<const uint4*>(src + base);
  } else {
    for (int i = 0; i < N; ++i) p.v[i] = base + i < count ? src[base + i] : narrow<T>(0);
  }
  return p.bits;
}

// v rounded to the dtype `t` (DType order) and widened back: the epilogue's one rounding.
__device__ __forceinline__ float round_as(int t, float v) {
  switch (t) {
    case 2: return __bfloat162float(__float2bfloat16_rn(v));
    case 3: return __half2float(__float2half_rn(v));
  }
  return v;
}

// The epilogue: residual[i] += float(round_to(v)).
__device__ __forceinline__ void add_residual(const PeerCall& a, int64_t i, float v) {
  a.residual[i] += round_as(a.round_to, v);
}

template <class T>
__device__ __forceinline__ void store_output(const PeerCall& a, T* dst, int64_t j, int64_t count, bool aligned,
                                             uint4 bits) {
  constexpr int N = Pack<T>::kN;
  const int64_t base = j * N;
  Pack<T> p;
  p.bits = bits;
  if constexpr (!std::is_same_v<T, double>) {
    if (a.residual) {
      for (int i = 0; i < N && base + i < count; ++i) add_residual(a, base + i, to_f<T>(p.v[i]));
      return;
    }
  }
  if (aligned && base + N <= count) {
    *reinterpret_cast<uint4*>(dst + base) = p.bits;
  } else {
    for (int i = 0; i < N && base + i < count; ++i) dst[base + i] = p.v[i];
  }
}

// Sum of pack j over every rank's buffer (rank order), rounded to T once. Peer data is read
// with ld.global.cg: it bypasses L1, which may hold this address from two calls ago.
template <class T>
__device__ __forceinline__ uint4 sum_pack(const PeerCall& a, size_t offset, int64_t j) {
  constexpr int N = Pack<T>::kN;
  typename AccOf<T>::type acc[N];
  for (int i = 0; i < N; ++i) acc[i] = 0;
  for (int q = 0; q < a.world; ++q) {
    Pack<T> x;
    x.bits = __ldcg(reinterpret_cast<const uint4*>(static_cast<const char*>(a.staging[q]) + offset) + j);
    for (int i = 0; i < N; ++i) acc[i] += widen(x.v[i]);
  }
  Pack<T> out;
  for (int i = 0; i < N; ++i) out.v[i] = narrow<T>(acc[i]);
  return out.bits;
}

// Block b of every rank reaches `epoch` before any of them goes on; what each wrote before is
// visible to the others after.
__device__ __forceinline__ void block_barrier(const PeerCall& a, uint32_t epoch) {
  __syncthreads();
  if (int(threadIdx.x) < a.world) {
    const int q = int(threadIdx.x);
    __threadfence_system();
    store_release_sys(a.flags[q] + size_t(blockIdx.x) * kPeerMaxRanks + size_t(a.rank), epoch);
    const uint32_t* mine = a.flags[a.rank] + size_t(blockIdx.x) * kPeerMaxRanks + size_t(q);
    while (int32_t(load_acquire_sys(mine) - epoch) < 0) {
    }
  }
  __syncthreads();
}

template <class T, bool kTwoShot>
__global__ void __launch_bounds__(kPeerThreads) peer_all_reduce_kernel(PeerCall a) {
  constexpr int N = Pack<T>::kN;
  uint32_t* counters = a.counters + 2 * size_t(blockIdx.x);
  const uint32_t epoch = counters[0], call = counters[1] + 1;
  const size_t parity = call & 1u;
  const size_t in_offset = parity * a.chunk_bytes, result_offset = (2 + parity) * a.chunk_bytes;
  const int64_t packs = (a.count + N - 1) / N;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const T* in = static_cast<const T*>(a.input);
  T* out = static_cast<T*>(a.output);
  const bool in_aligned = (reinterpret_cast<uintptr_t>(in) & 15u) == 0;
  const bool out_aligned = (reinterpret_cast<uintptr_t>(out) & 15u) == 0;
  uint4* my_in = reinterpret_cast<uint4*>(static_cast<char*>(a.staging[a.rank]) + in_offset);

  // This rank's input into its staging buffer (the same thread writes pack j of the output
  // later, so in place is safe).
  for (int64_t j = first; j < packs; j += stride) my_in[j] = load_input<T>(in, j, a.count, in_aligned);
  block_barrier(a, epoch + 1);

  if (!kTwoShot) {
    for (int64_t j = first; j < packs; j += stride)
      store_output<T>(a, out, j, a.count, out_aligned, sum_pack<T>(a, in_offset, j));
    if (threadIdx.x == 0) {
      counters[0] = epoch + 1;
      counters[1] = call;
    }
    return;
  }
  // Two-shot: this rank's slice, summed once and kept for the others...
  const int64_t slice = (packs + a.world - 1) / a.world;
  const int64_t lo = slice * a.rank, hi = min(packs, lo + slice);
  uint4* my_result = reinterpret_cast<uint4*>(static_cast<char*>(a.staging[a.rank]) + result_offset);
  for (int64_t j = first; j < hi; j += stride) {
    if (j < lo) continue;
    const uint4 s = sum_pack<T>(a, in_offset, j);
    my_result[j] = s;
    store_output<T>(a, out, j, a.count, out_aligned, s);
  }
  block_barrier(a, epoch + 2);
  // ... then every other slice from its owner.
  for (int64_t j = first; j < packs; j += stride) {
    const int owner = int(j / slice);
    if (owner == a.rank) continue;
    const uint4 s =
        __ldcg(reinterpret_cast<const uint4*>(static_cast<const char*>(a.staging[owner]) + result_offset) + j);
    store_output<T>(a, out, j, a.count, out_aligned, s);
  }
  if (threadIdx.x == 0) {
    counters[0] = epoch + 2;
    counters[1] = call;
  }
}

// --- One-shot LL. A line carries 8 bytes of data (E = 8 / sizeof(T) elements) as two 32-bit
// words, each beside a copy of the epoch.
template <class T>
union LLData {
  static constexpr int kE = 8 / int(sizeof(T));
  uint2 words;
  T v[kE];
};

__device__ __forceinline__ void store_line(void* p, uint32_t w0, uint32_t w1, uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w0), "r"(flag), "r"(w1), "r"(flag)
               : "memory");
}
__device__ __forceinline__ uint4 load_line(const void* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

// Line j of this rank's input (elements past the end read as 0).
template <class T>
__device__ __forceinline__ LLData<T> load_ll_input(const T* in, int64_t j, int64_t count, bool aligned) {
  constexpr int E = LLData<T>::kE;
  LLData<T> d;
  const int64_t base = j * E;
  if (aligned && base + E <= count) {
    d.words = *reinterpret_cast<const uint2*>(in + base);
  } else {
    for (int i = 0; i < E; ++i) d.v[i] = base + i < count ? in[base + i] : from_f<T>(0.f);
  }
  return d;
}

template <class T>
__global__ void __launch_bounds__(kPeerLLThreads) peer_ll_kernel(PeerCall a) {
  constexpr int E = LLData<T>::kE;
  // The next kernel (the next projection, PDL early) may launch at once: it issues its first
  // weight loads while this one waits for the peers, and runs past its own wait only after us.
  pdl_launch_dependents();
  // Everything below reads what earlier kernels of the stream wrote (the input, the epoch).
  pdl_wait();
  const uint32_t epoch = *reinterpret_cast<volatile uint32_t*>(a.ll_state);
  const size_t parity = epoch & 1u;
  const int64_t lines = (a.count + E - 1) / E;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const T* in = static_cast<const T*>(a.input);
  T* out = static_cast<T*>(a.output);
  const bool in_aligned = (reinterpret_cast<uintptr_t>(in) & 7u) == 0;
  auto slot = [&](int owner, int sender) {
    return static_cast<char*>(a.ll_recv[owner]) + (parity * size_t(a.world) + size_t(sender)) * kPeerLLSlotBytes;
  };
  // Push: this rank's lines into every peer's slot for it.
  for (int64_t j = first; j < lines; j += stride) {
    const LLData<T> d = load_ll_input<T>(in, j, a.count, in_aligned);
    for (int q = 0; q < a.world; ++q) {
      if (q != a.rank) store_line(slot(q, a.rank) + size_t(j) * 16, d.words.x, d.words.y, epoch);
    }
  }
  // While the peers' lines travel, this block's share of the next weights into the L2.
  const int64_t pf_bytes = a.prefetch ? a.prefetch_bytes / 16 * 16 : 0;
  if (pf_bytes > 0) {
    const int64_t share = ((pf_bytes + gridDim.x - 1) / gridDim.x + 127) / 128 * 128;
    const char* pf = static_cast<const char*>(a.prefetch);
    const int64_t end = min(pf_bytes, share * (int64_t(blockIdx.x) + 1));
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    constexpr int64_t kPiece = 4096;
    for (int64_t off = share * blockIdx.x + int64_t(threadIdx.x) * kPiece; off < end;
         off += int64_t(blockDim.x) * kPiece) {
      const uint32_t size = uint32_t(min(kPiece, end - off));
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(pf + off), "r"(size) : "memory");
    }
#else
    for (int64_t off = share * blockIdx.x + int64_t(threadIdx.x) * 32; off < end; off += int64_t(blockDim.x) * 32)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(pf + off));
#endif
  }
  // Receive and sum in rank order (the same order on every rank: the same bits everywhere).
  for (int64_t j = first; j < lines; j += stride) {
    float acc[E];
    for (int i = 0; i < E; ++i) acc[i] = 0.f;
    for (int q = 0; q < a.world; ++q) {
      LLData<T> d;
      if (q == a.rank) {
        d = load_ll_input<T>(in, j, a.count, in_aligned);
      } else {
        const char* line = slot(a.rank, q) + size_t(j) * 16;
        uint4 v = load_line(line);
        while (v.y != epoch || v.w != epoch) v = load_line(line);
        d.words = make_uint2(v.x, v.z);
      }
      for (int i = 0; i < E; ++i) acc[i] += to_f<T>(d.v[i]);
    }
    const int64_t base = j * E;
    for (int i = 0; i < E && base + i < a.count; ++i) {
      if (a.residual) {
        add_residual(a, base + i, to_f<T>(from_f<T>(acc[i])));
      } else {
        out[base + i] = from_f<T>(acc[i]);
      }
    }
  }
  // The last block to finish advances the epoch (never to 0) for the next call.
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(a.ll_state + 1, 1u) == gridDim.x - 1) {
      const uint32_t next = epoch + 1 == 0 ? 1 : epoch + 1;
      atomicExch(a.ll_state + 1, 0u);
      atomicExch(a.ll_state, next);
    }
  }
}

template <class T>
cudaError_t launch_ll(const PeerCall& call, cudaStream_t s) {
  if (call.count * int64_t(sizeof(T)) > int64_t(kPeerLLMaxBytes)) return cudaErrorInvalidValue;
  const int64_t lines = (call.count + LLData<T>::kE - 1) / LLData<T>::kE;
  int64_t blocks = (lines + kPeerLLThreads - 1) / kPeerLLThreads;
  blocks = blocks < 1 ? 1 : blocks > kPeerLLMaxBlocks ? kPeerLLMaxBlocks : blocks;
  return ::tunableop::cuda::launch(peer_ll_kernel<T>, dim3(unsigned(blocks)), dim3(kPeerLLThreads), 0, s, call.pdl,
                                   call);
}

template <class T>
__global__ void add_sum_kernel(const T* sum, int64_t count, int round_to, float* residual) {
  pdl_wait();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    residual[i] += round_as(round_to, to_f<T>(sum[i]));
}

template <class T>
cudaError_t launch_add(const void* sum, int64_t count, int round_to, float* residual, cudaStream_t s) {
  const int64_t blocks = (count + 255) / 256;
  add_sum_kernel<T>
      <<<unsigned(blocks < 1024 ? blocks : 1024), 256, 0, s>>>(static_cast<const T*>(sum), count, round_to, residual);
  return cudaGetLastError();
}

template <class T>
cudaError_t launch(PeerAlgo algo, const PeerCall& call, cudaStream_t s) {
  if constexpr (!std::is_same_v<T, double>) {
    if (algo == PeerAlgo::kOneShotLL) return launch_ll<T>(call, s);
  } else {
    if (algo == PeerAlgo::kOneShotLL || call.residual) return cudaErrorInvalidValue;
  }
  if (algo == PeerAlgo::kTwoShot) {
    peer_all_reduce_kernel<T, true><<<kPeerBlocks, kPeerThreads, 0, s>>>(call);
  } else {
    peer_all_reduce_kernel<T, false><<<kPeerBlocks, kPeerThreads, 0, s>>>(call);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t add_sum_to_residual(int dtype, const void* sum, int64_t count, int round_to, float* residual,
                                cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  switch (dtype) {
    case 0: return launch_add<float>(sum, count, round_to, residual, stream);
    case 2: return launch_add<__nv_bfloat16>(sum, count, round_to, residual, stream);
    case 3: return launch_add<__half>(sum, count, round_to, residual, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t peer_all_reduce(PeerAlgo algo, const PeerCall& call, cudaStream_t stream) {
  if (call.count <= 0) return cudaSuccess;
  switch (call.dtype) {
    case 0: return launch<float>(algo, call, stream);
    case 1: return launch<double>(algo, call, stream);
    case 2: return launch<__nv_bfloat16>(algo, call, stream);
    case 3: return launch<__half>(algo, call, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tunableop::cuda
