// The cuBLAS GEMM hooks, plus the three handle setters whose values cuBLAS cannot report back
// (the workspace; setStream resets it; destroy forgets it). Only cuBLAS's headers are used: the
// preload library never links CUDA.
#include <cublas_api.h>

#include "interpose/handle_workspaces.h"
#include "interpose/preload_state.h"

using tunableop::interpose::Api;
using tunableop::interpose::CublasCall;
using tunableop::interpose::EngineApi;
using tunableop::interpose::Library;
using tunableop::interpose::preload::RealFunction;
using tunableop::interpose::preload::Route;
using tunableop::interpose::preload::run_hook;
namespace workspaces = tunableop::interpose::preload::handle_workspaces;

#define TUNABLEOP_HOOK extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kMissing = CUBLAS_STATUS_NOT_INITIALIZED;

// cublas_api.h also declares C++ overloads of these two (a cudaDataType compute type), so
// decltype(&name) is ambiguous: the C entry points' types, spelled out.
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using GemmStridedBatchedExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                  const void*, const void*, cudaDataType, int, long long int,
                                                  const void*, cudaDataType, int, long long int, const void*, void*,
                                                  cudaDataType, int, long long int, int, cublasComputeType_t,
                                                  cublasGemmAlgo_t);

CublasCall make_call(Api api, cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                     const void* alpha, const void* a, int a_type, int lda, long long sa, const void* b, int b_type,
                     int ldb, long long sb, const void* beta, void* c, int c_type, int ldc, long long sc, int batch,
                     bool strided, int compute, int algo = CUBLAS_GEMM_DEFAULT) {
  CublasCall call;
  call.api = api;
  call.handle = handle;
  call.transa = ta;
  call.transb = tb;
  call.m = m;
  call.n = n;
  call.k = k;
  call.alpha = alpha;
  call.beta = beta;
  call.a = a;
  call.a_type = a_type;
  call.lda = lda;
  call.stride_a = sa;
  call.b = b;
  call.b_type = b_type;
  call.ldb = ldb;
  call.stride_b = sb;
  call.c = c;
  call.c_type = c_type;
  call.ldc = ldc;
  call.stride_c = sc;
  call.batch = batch;
  call.strided = strided;
  call.compute_type = compute;
  call.algo = algo;
  workspaces::get(handle, &call.workspace, &call.workspace_bytes);
  return call;
}

}  // namespace

TUNABLEOP_HOOK cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                           int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype,
                                           int lda, const void* B, cudaDataType Btype, int ldb, const void* beta,
                                           void* C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                           cublasGemmAlgo_t algo) {
  static RealFunction<GemmExFn> real(Library::kCublas, "cublasGemmEx");
  auto ask = [&](const EngineApi& e) {
    return e.cublas(make_call(Api::kCublasGemmEx, handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype,
                              ldb, 0, beta, C, Ctype, ldc, 0, 1, false, computeType, algo));
  };
  return run_hook<kMissing>(real, Api::kCublasGemmEx, ask, handle, transa, transb, m, n, k, alpha, A, Atype, lda, B,
                            Btype, ldb, beta, C, Ctype, ldc, computeType, algo);
}

TUNABLEOP_HOOK cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                             int m, int n, int k, const float* alpha, const float* A, int lda,
                                             const float* B, int ldb, const float* beta, float* C, int ldc) {
  static RealFunction<decltype(&cublasSgemm_v2)> real(Library::kCublas, "cublasSgemm_v2");
  auto ask = [&](const EngineApi& e) {
    return e.cublas(make_call(Api::kCublasSgemm, handle, transa, transb, m, n, k, alpha, A, CUDA_R_32F, lda, 0, B,
                              CUDA_R_32F, ldb, 0, beta, C, CUDA_R_32F, ldc, 0, 1, false, CUBLAS_COMPUTE_32F));
  };
  return run_hook<kMissing>(real, Api::kCublasSgemm, ask, handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta,
                            C, ldc);
}

TUNABLEOP_HOOK cublasStatus_t cublasDgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                             int m, int n, int k, const double* alpha, const double* A, int lda,
                                             const double* B, int ldb, const double* beta, double* C, int ldc) {
  static RealFunction<decltype(&cublasDgemm_v2)> real(Library::kCublas, "cublasDgemm_v2");
  auto ask = [&](const EngineApi& e) {
    return e.cublas(make_call(Api::kCublasDgemm, handle, transa, transb, m, n, k, alpha, A, CUDA_R_64F, lda, 0, B,
                              CUDA_R_64F, ldb, 0, beta, C, CUDA_R_64F, ldc, 0, 1, false, CUBLAS_COMPUTE_64F));
  };
  return run_hook<kMissing>(real, Api::kCublasDgemm, ask, handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta,
                            C, ldc);
}

TUNABLEOP_HOOK cublasStatus_t cublasHgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const __half* alpha, const __half* A, int lda,
                                          const __half* B, int ldb, const __half* beta, __half* C, int ldc) {
  static RealFunction<decltype(&cublasHgemm)> real(Library::kCublas, "cublasHgemm");
  auto ask = [&](const EngineApi& e) {
    return e.cublas(make_call(Api::kCublasHgemm, handle, transa, transb, m, n, k, alpha, A, CUDA_R_16F, lda, 0, B,
                              CUDA_R_16F, ldb, 0, beta, C, CUDA_R_16F, ldc, 0, 1, false, CUBLAS_COMPUTE_16F));
  };
  return run_hook<kMissing>(real, Api::kCublasHgemm, ask, handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta,
                            C, ldc);
}

TUNABLEOP_HOOK cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const void* alpha,
    const void* A, cudaDataType Atype, int lda, long long int strideA, const void* B, cudaDataType Btype, int ldb,
    long long int strideB, const void* beta, void* C, cudaDataType Ctype, int ldc, long long int strideC,
    int batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  static RealFunction<GemmStridedBatchedExFn> real(Library::kCublas, "cublasGemmStridedBatchedEx");
  auto ask = [&](const EngineApi& e) {
    return e.cublas(make_call(Api::kCublasGemmStridedBatchedEx, handle, transa, transb, m, n, k, alpha, A, Atype, lda,
                              strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount, true,
                              computeType, algo));
  };
  return run_hook<kMissing>(real, Api::kCublasGemmStridedBatchedEx, ask, handle, transa, transb, m, n, k, alpha, A,
                            Atype, lda, strideA, B, Btype, ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount,
                            computeType, algo);
}

#define TUNABLEOP_TYPED_STRIDED_HOOK(NAME, API, T, DATA, COMPUTE)                                                      \
  TUNABLEOP_HOOK cublasStatus_t NAME(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, \
                                     int n, int k, const T* alpha, const T* A, int lda, long long int strideA,         \
                                     const T* B, int ldb, long long int strideB, const T* beta, T* C, int ldc,         \
                                     long long int strideC, int batchCount) {                                          \
    static RealFunction<decltype(&NAME)> real(Library::kCublas, #NAME);                                                \
    auto ask = [&](const EngineApi& e) {                                                                               \
      return e.cublas(make_call(API, handle, transa, transb, m, n, k, alpha, A, DATA, lda, strideA, B, DATA, ldb,      \
                                strideB, beta, C, DATA, ldc, strideC, batchCount, true, COMPUTE));                     \
    };                                                                                                                 \
    return run_hook<kMissing>(real, API, ask, handle, transa, transb, m, n, k, alpha, A, lda, strideA, B, ldb,         \
                              strideB, beta, C, ldc, strideC, batchCount);                                             \
  }

TUNABLEOP_TYPED_STRIDED_HOOK(cublasSgemmStridedBatched, Api::kCublasSgemmStridedBatched, float, CUDA_R_32F,
                             CUBLAS_COMPUTE_32F)
TUNABLEOP_TYPED_STRIDED_HOOK(cublasDgemmStridedBatched, Api::kCublasDgemmStridedBatched, double, CUDA_R_64F,
                             CUBLAS_COMPUTE_64F)
TUNABLEOP_TYPED_STRIDED_HOOK(cublasHgemmStridedBatched, Api::kCublasHgemmStridedBatched, __half, CUDA_R_16F,
                             CUBLAS_COMPUTE_16F)

// The handle setters: always forwarded; recorded while we intercept.
namespace {

template <class Fn, class... Args>
cublasStatus_t forward(RealFunction<Fn>& real, Args... args) {
  using tunableop::interpose::preload::Guard;
  using tunableop::interpose::preload::ScopedGuard;
  Route r = tunableop::interpose::preload::route();
  Fn fn = r == Route::kEngineOwn ? real.engine_own() : real.program();
  if (fn == nullptr) {
    real.report_missing();
    return static_cast<cublasStatus_t>(kMissing);
  }
  if (r == Route::kEngineOwn) return fn(args...);
  ScopedGuard g(Guard::kForwarding);
  return fn(args...);
}

bool tracking() { return tunableop::interpose::preload::route() == Route::kIntercept; }

}  // namespace

TUNABLEOP_HOOK cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t bytes) {
  static RealFunction<decltype(&cublasSetWorkspace_v2)> real(Library::kCublas, "cublasSetWorkspace_v2");
  const bool track = tracking();
  cublasStatus_t st = forward(real, handle, workspace, bytes);
  if (track && st == CUBLAS_STATUS_SUCCESS) workspaces::set(handle, workspace, bytes);
  return st;
}

TUNABLEOP_HOOK cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  static RealFunction<decltype(&cublasSetStream_v2)> real(Library::kCublas, "cublasSetStream_v2");
  const bool track = tracking();
  cublasStatus_t st = forward(real, handle, stream);
  if (track && st == CUBLAS_STATUS_SUCCESS) workspaces::reset(handle);
  return st;
}

TUNABLEOP_HOOK cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  static RealFunction<decltype(&cublasDestroy_v2)> real(Library::kCublas, "cublasDestroy_v2");
  if (tracking()) workspaces::forget(handle);
  return forward(real, handle);
}
