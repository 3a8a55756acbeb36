#include "backends/cuda/common/cuda_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "cuda_common/cuda_memory.h"

namespace tunableop::cuda {

Status cublas_status(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::ok();
  // NOT_SUPPORTED / ARCH_MISMATCH / INVALID_VALUE mean "this configuration cannot run here":
  // a normal answer for a candidate, not a device fault.
  std::string msg = fmt::format("{}: {} ({})", what, cublasGetStatusString(st), cublasGetStatusName(st));
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_ARCH_MISMATCH || st == CUBLAS_STATUS_INVALID_VALUE) {
    return Status::unsupported(std::move(msg));
  }
  return Status::device_error(std::move(msg));
}

namespace {

// Destroyed at thread exit, which for the main thread happens before static destructors (and
// so before the CUDA runtime tears itself down).
struct ThreadHandles {
  std::map<int, Handles> by_device;
  ~ThreadHandles() {
    int saved = -1;
    if (cudaGetDevice(&saved) != cudaSuccess) return;  // runtime already gone: nothing safe to do
    for (auto& [dev, h] : by_device) {
      if (cudaSetDevice(dev) != cudaSuccess) continue;
      if (h.blas) cublasDestroy(h.blas);
      if (h.lt) cublasLtDestroy(h.lt);
    }
    cudaSetDevice(saved);
  }
};

}  // namespace

StatusOr<Handles> current_handles() {
  thread_local ThreadHandles cache;
  int dev = 0;
  TUNABLEOP_CUDA_TRY(cudaGetDevice(&dev));
  auto it = cache.by_device.find(dev);
  if (it != cache.by_device.end()) return it->second;
  Handles h;
  TUNABLEOP_CUBLAS_TRY(cublasCreate(&h.blas));
  cublasStatus_t st = cublasLtCreate(&h.lt);
  if (st != CUBLAS_STATUS_SUCCESS) {
    cublasDestroy(h.blas);
    return cublas_status(st, "cublasLtCreate");
  }
  cache.by_device.emplace(dev, h);
  return h;
}

RetainedBlocks::~RetainedBlocks() {
  int saved = -1;
  const bool alive = cudaGetDevice(&saved) == cudaSuccess;
  for (auto& [key, blocks] : by_stream_) {
    const bool here = alive && cudaSetDevice(key.first) == cudaSuccess;
    for (auto& b : blocks) here ? b.reset() : (void)b.release();
  }
  if (alive) cudaSetDevice(saved);
}

StatusOr<std::vector<DeviceBuffer>*> RetainedBlocks::blocks(void* stream) {
  int dev = 0;
  TUNABLEOP_CUDA_TRY(cudaGetDevice(&dev));
  return &by_stream_[{dev, stream}];
}

StatusOr<void*> RetainedBlocks::get(size_t bytes, void* stream) {
  auto list = blocks(stream);
  if (!list.is_ok()) return list.status();
  std::vector<DeviceBuffer>& bs = **list;
  if (!bs.empty() && bs.back().bytes() >= bytes) return bs.back().get();
  DeviceBuffer b;
  TUNABLEOP_RETURN_IF_ERROR(b.ensure(bs.empty() ? bytes : std::max(bytes, 2 * bs.back().bytes())));
  bs.push_back(std::move(b));
  return bs.back().get();
}

StatusOr<void*> scratch_workspace(size_t bytes, void* stream) {
  thread_local RetainedBlocks cache;
  if (bytes == 0) return static_cast<void*>(nullptr);
  return cache.get(bytes, stream);
}

StatusOr<void*> workspace_for(const GemmOperands& o, size_t bytes) {
  if (bytes == 0) return o.workspace;
  if (o.workspace && o.workspace_bytes >= bytes) return o.workspace;
  return scratch_workspace(bytes, o.stream);
}

CudaTypes cuda_types(const GemmParams& p) {
  CudaTypes t{CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
  switch (p.dtype) {
    case DType::kF32:
      t = {CUDA_R_32F, CUDA_R_32F, p.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
      break;
    case DType::kF64: t = {CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F}; break;
    case DType::kBF16: t = {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F}; break;
    case DType::kF16: t = {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F}; break;
    case DType::kF8E4M3:
    case DType::kF8E5M2: break;  // never a GEMM's dtype (validate refuses fp8; ScaledGemm has its own)
  }
  t.out = p.widens() ? CUDA_R_32F : t.data;  // validated: a wider C is fp32
  return t;
}

Scalars make_scalars(const GemmParams& p) {
  Scalars s{};
  if (p.dtype == DType::kF64) {
    s.alpha.d = p.alpha;
    s.beta.d = p.beta;
  } else {
    s.alpha.f = float(p.alpha);
    s.beta.f = float(p.beta);
  }
  return s;
}

StatusOr<DeviceInfo> current_device_info() {
  static std::mutex mu;
  static std::map<int, DeviceInfo> cache;
  int dev = 0;
  TUNABLEOP_CUDA_TRY(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(dev); it != cache.end()) return it->second;
  cudaDeviceProp prop{};
  TUNABLEOP_CUDA_TRY(cudaGetDeviceProperties(&prop, dev));
  int l2 = 0;
  TUNABLEOP_CUDA_TRY(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  DeviceInfo info;
  info.ordinal = dev;
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.l2_bytes = size_t(l2);
  cache.emplace(dev, info);
  return info;
}

}  // namespace tunableop::cuda
