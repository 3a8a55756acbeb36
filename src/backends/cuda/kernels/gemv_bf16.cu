// gemv kernels for __nv_bfloat16 (see gemv_kernel.cuh).
#include "backends/cuda/kernels/gemv_kernel.cuh"
#include "backends/cuda/kernels/gemv_mma.cuh"

namespace tunableop::cuda {

cudaError_t gemv_launch_bf16(const GemvLaunch& args, cudaStream_t stream) {
  return gemv_detail::launch_rows<__nv_bfloat16>(args, stream);
}

}  // namespace tunableop::cuda
