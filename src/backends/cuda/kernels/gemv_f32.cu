// gemv kernels for float (see gemv_kernel.cuh).
#include "backends/cuda/kernels/gemv_kernel.cuh"
#include "backends/cuda/kernels/gemv_mma.cuh"

namespace tunableop::cuda {

cudaError_t gemv_launch_f32(const GemvLaunch& args, cudaStream_t stream) {
  return gemv_detail::launch_rows<float>(args, stream);
}

}  // namespace tunableop::cuda
