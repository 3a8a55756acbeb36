// gemv kernels for __half (see gemv_kernel.cuh).
#include "backends/cuda/kernels/gemv_kernel.cuh"
#include "backends/cuda/kernels/gemv_mma.cuh"

namespace tunableop::cuda {

cudaError_t gemv_launch_f16(const GemvLaunch& args, cudaStream_t stream) {
  return gemv_detail::launch_rows<__half>(args, stream);
}

}  // namespace tunableop::cuda
