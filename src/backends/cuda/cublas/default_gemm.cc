#include "backends/cuda/cublas/default_gemm.h"

#include "backends/cuda/common/cublas_gemm.h"

namespace tunableop::cuda {

GemmCandidate make_default_gemm() {
  GemmCandidate c;
  c.name = "Default";
  c.device = DeviceKind::kCuda;
  c.min_effort = 0;
  c.supports = [](const GemmParams& p) { return check_blas_shape(p); };
  c.run = [](const GemmParams& p, const GemmOperands& o) { return cublas_gemm(p, o.a, o.b, o.c, o.stream); };
  c.info = {"cuBLAS", "default", {{"algo", "CUBLAS_GEMM_DEFAULT"}}};
  return c;
}

}  // namespace tunableop::cuda
