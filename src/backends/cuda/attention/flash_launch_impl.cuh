// Launch templates shared by the per-(dtype, head dim) translation units.
#pragma once

#include <atomic>

#include "backends/cuda/attention/flash_combine.cuh"
#include "backends/cuda/attention/flash_configs.h"

namespace tunableop::cuda::flash_detail {

// A per-function, per-device attribute (opting in to more than 48 KB of dynamic shared memory,
// to clusters of more than 8 blocks) is a host call, made once per device (before any graph
// capture, on the first plain launch). The kernel is a template argument so that each kernel has
// its own flags: every kernel here has the same function type, so a template on that type would
// share one flag among all of them.
template <auto Kernel, cudaFuncAttribute Attr>
cudaError_t set_attribute_once(int value) {
  static std::atomic<uint64_t> done{0};
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  const uint64_t bit = dev < 64 ? uint64_t(1) << dev : 0;
  if (bit && (done.load(std::memory_order_acquire) & bit)) return cudaSuccess;
  err = cudaFuncSetAttribute(Kernel, Attr, value);
  if (err == cudaSuccess) done.fetch_or(bit, std::memory_order_release);
  return err;
}

template <auto Kernel>
cudaError_t allow_smem(int bytes) {
  return set_attribute_once<Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize>(bytes);
}

// Programmatic dependent launch needs sm_90; asked once per device.
inline bool device_has_pdl() {
  static std::atomic<int> cache[64] = {};  // 0 unknown, 1 no, 2 yes
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev >= 64) return false;
  int v = cache[dev].load(std::memory_order_relaxed);
  if (v == 0) {
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    v = major >= 9 ? 2 : 1;
    cache[dev].store(v, std::memory_order_relaxed);
  }
  return v == 2;
}

template <class T, int D>
cudaError_t launch_combine(const FlashArgs& a, int rows_total, cudaStream_t stream) {
  const int slabs = a.batch * a.kv_heads;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(int64_t(slabs) * rows_total), 1, 1);
  cfg.blockDim = dim3(kCombineThreads, 1, 1);
  cfg.stream = stream;
  const bool pdl = device_has_pdl();
  cfg.attrs = pdl ? attr : nullptr;
  cfg.numAttrs = pdl ? 1 : 0;
  cudaError_t err = cudaLaunchKernelEx(&cfg, flash_combine_kernel<T, D>, a, rows_total, slabs);
  return err != cudaSuccess ? err : cudaGetLastError();
}

template <class T, int D, int BM, int BN, int WARPS, int STAGES>
cudaError_t launch_flash(const FlashArgs& a, cudaStream_t stream) {
  using G = Tiles<D, BM, BN, WARPS, STAGES>;
  constexpr auto kernel = flash_fwd_kernel<T, D, BM, BN, WARPS, STAGES>;
  cudaError_t err = allow_smem<kernel>(G::kSmemBytes);
  if (err != cudaSuccess) return err;
  const int rows_total = a.q_len * (a.heads / a.kv_heads);
  // With programmatic dependent launch where the GPU has it: the kernel's launch overlaps the
  // previous kernel's last blocks (the kernel waits for that one's writes before reading).
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned((rows_total + BM - 1) / BM), unsigned(a.batch * a.kv_heads), unsigned(a.splits));
  cfg.blockDim = dim3(G::kThreads, 1, 1);
  cfg.dynamicSmemBytes = G::kSmemBytes;
  cfg.stream = stream;
  const bool pdl = device_has_pdl();
  cfg.attrs = pdl ? attr : nullptr;
  cfg.numAttrs = pdl ? 1 : 0;
  err = cudaLaunchKernelEx(&cfg, kernel, a);
  if (err == cudaSuccess) err = cudaGetLastError();
  if (err != cudaSuccess || a.splits <= 1) return err;
  return launch_combine<T, D>(a, rows_total, stream);
}

}  // namespace tunableop::cuda::flash_detail

// Defines tunableop::cuda::flash_launch_<NAME>_d<D>: the switch over the configurations of D.
#define TUNABLEOP_FLASH_CASE(T, D_, BM, BN, W, S)                              \
  if (cfg.rows == BM && cfg.keys == BN && cfg.warps == W && cfg.stages == S) { \
    return flash_detail::launch_flash<T, D_, BM, BN, W, S>(args, stream);      \
  }
