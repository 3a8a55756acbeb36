#include "backends/cuda/register.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "backends/cuda/all_reduce/cuda_communicator.h"
#include "backends/cuda/attention/candidates.h"
#include "backends/cuda/cublas/default_gemm.h"
#include "backends/cuda/cublaslt/lt_family.h"
#include "backends/cuda/fused_linear/candidates.h"
#include "backends/cuda/gemm_and_bias/candidates.h"
#include "backends/cuda/kernels/gemv.h"
#include "backends/cuda/kernels/pad_ld.h"
#include "backends/cuda/kernels/split_m.h"
#include "backends/cuda/runtime.h"
#include "backends/cuda/scaled_gemm/candidates.h"
#include "backends/cuda/validators.h"
#include "tunableop/gemm.h"

namespace tunableop {

void register_cuda(Registry& r) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    cudaGetLastError();  // leave no error behind for whoever calls CUDA next
    r.add_note(fmt::format("cuda: backend built but no usable GPU ({}); CUDA candidates not registered",
                           err != cudaSuccess ? cudaGetErrorString(err) : "0 devices"));
    return;
  }
  r.add_runtime(cuda::make_cuda_runtime());
  cuda::add_cuda_validators(r);

  // Default first: fallback and the numerics reference. Then our kernels, which either win
  // clearly (decode shapes, odd ld) or say "unsupported" at once; the cuBLASLt family expands
  // per problem.
  auto& list = r.list<GemmCandidate>();
  list.push_back(cuda::make_default_gemm());
  for (auto& c : cuda::make_gemv_candidates()) list.push_back(std::move(c));
  for (auto& c : cuda::make_split_m_candidates()) list.push_back(std::move(c));
  for (auto& c : cuda::make_pad_ld_candidates()) list.push_back(std::move(c));
  r.list<GemmCandidateFamily>().push_back(cuda::make_lt_family());
  cuda::register_cuda_gemm_and_bias(r);  // GemmAndBias: cuBLASLt epilogue Default, Split, Lt family
  cuda::register_cuda_scaled_gemm(r);    // ScaledGemm: cuBLASLt FP8 Default and families, our FP8 kernels
  cuda::register_cuda_all_reduce(r);     // AllReduce: NCCL, our peer-memory kernels (a communicator per GPU group)
  cuda::register_cuda_fused_linear(r);   // FusedLinear: the fused decode-projection kernel's shapes
  // Attention: Default (math path), flash and split-KV kernels, cuDNN SDPA where built.
  for (auto& c : cuda::cuda_attention_candidates()) r.list<AttentionCandidate>().push_back(std::move(c));
}

}  // namespace tunableop

extern "C" __attribute__((visibility("default"))) void tunableop_register_backend_cuda(void* registry) {
  tunableop::register_cuda(*static_cast<tunableop::Registry*>(registry));
}
