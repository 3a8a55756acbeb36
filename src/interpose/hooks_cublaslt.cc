// The cuBLASLt hook. The descriptors are read by the engine (through the program's own
// cuBLASLt, which made them).
#include <cublasLt.h>

#include "interpose/preload_state.h"

using tunableop::interpose::Api;
using tunableop::interpose::EngineApi;
using tunableop::interpose::Library;
using tunableop::interpose::LtCall;
using tunableop::interpose::preload::RealFunction;
using tunableop::interpose::preload::run_hook;

extern "C" __attribute__((visibility("default"))) cublasStatus_t cublasLtMatmul(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha, const void* A,
    cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
    cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo,
    void* workspace, size_t workspaceSizeInBytes, cudaStream_t stream) {
  static RealFunction<decltype(&cublasLtMatmul)> real(Library::kCublasLt, "cublasLtMatmul");
  auto ask = [&](const EngineApi& e) {
    LtCall call;
    call.handle = lightHandle;
    call.desc = computeDesc;
    call.alpha = alpha;
    call.a = A;
    call.adesc = Adesc;
    call.b = B;
    call.bdesc = Bdesc;
    call.beta = beta;
    call.c = C;
    call.cdesc = Cdesc;
    call.d = D;
    call.ddesc = Ddesc;
    call.algo = algo;
    call.workspace = workspace;
    call.workspace_bytes = workspaceSizeInBytes;
    call.stream = stream;
    return e.cublaslt(call);
  };
  return run_hook<CUBLAS_STATUS_NOT_INITIALIZED>(real, Api::kCublasLtMatmul, ask, lightHandle, computeDesc, alpha, A,
                                                 Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace,
                                                 workspaceSizeInBytes, stream);
}
