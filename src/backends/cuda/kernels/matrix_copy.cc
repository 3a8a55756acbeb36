#include "backends/cuda/kernels/matrix_copy.h"

#include "backends/cuda/common/cuda_util.h"

namespace tunableop::cuda {

Status copy_matrices(void* dst, int64_t ldd, int64_t sd, const void* src, int64_t lds, int64_t ss, int64_t rows,
                     int64_t cols, int64_t batch, size_t es, cudaStream_t stream) {
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  // Dense batches are one tall matrix: one copy call instead of `batch`.
  if (batch > 1 && sd == ldd * cols && ss == lds * cols) {
    cols *= batch;
    batch = 1;
  }
  for (int64_t bt = 0; bt < batch; ++bt) {
    TUNABLEOP_CUDA_TRY(cudaMemcpy2DAsync(d + size_t(bt * sd) * es, size_t(ldd) * es, s + size_t(bt * ss) * es,
                                         size_t(lds) * es, size_t(rows) * es, size_t(cols), cudaMemcpyDeviceToDevice,
                                         stream));
  }
  return Status::ok();
}

}  // namespace tunableop::cuda
