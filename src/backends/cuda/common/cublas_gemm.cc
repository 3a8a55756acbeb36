// The plain cuBLAS GEMM call and the shape checks every cuBLAS/cuBLASLt candidate shares.
#include "backends/cuda/common/cublas_gemm.h"

#include <fmt/format.h>

#include <climits>

#include "backends/cuda/common/cuda_util.h"

namespace tunableop::cuda {

Status check_blas_shape(const GemmParams& p) {
  for (char t : {p.transa, p.transb}) {
    if (t != 'N' && t != 'T') return Status::unsupported(fmt::format("transpose '{}'", t));
  }
  for (int64_t v : {p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.batch}) {
    if (v > INT_MAX) return Status::unsupported(fmt::format("dimension {} exceeds the 32-bit cuBLAS API", v));
  }
  return Status::ok();
}

Status cublas_gemm(const GemmParams& p, const void* a, const void* b, void* c, void* stream) {
  if (p.m == 0 || p.n == 0) return Status::ok();
  auto h = current_handles();
  if (!h.is_ok()) return h.status();
  TUNABLEOP_CUBLAS_TRY(cublasSetStream(h->blas, static_cast<cudaStream_t>(stream)));
  CudaTypes t = cuda_types(p);
  Scalars s = make_scalars(p);
  cublasOperation_t ta = p.transa == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T;
  cublasOperation_t tb = p.transb == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T;
  if (p.batch == 1) {
    TUNABLEOP_CUBLAS_TRY(cublasGemmEx(h->blas, ta, tb, int(p.m), int(p.n), int(p.k), &s.alpha, a, t.data, int(p.lda), b,
                                      t.data, int(p.ldb), &s.beta, c, t.out, int(p.ldc), t.compute,
                                      CUBLAS_GEMM_DEFAULT));
  } else {
    TUNABLEOP_CUBLAS_TRY(cublasGemmStridedBatchedEx(h->blas, ta, tb, int(p.m), int(p.n), int(p.k), &s.alpha, a, t.data,
                                                    int(p.lda), p.stride_a, b, t.data, int(p.ldb), p.stride_b, &s.beta,
                                                    c, t.out, int(p.ldc), p.stride_c, int(p.batch), t.compute,
                                                    CUBLAS_GEMM_DEFAULT));
  }
  return Status::ok();
}

}  // namespace tunableop::cuda
