// Host time per enqueued GEMM call as a program sees it: cublasGemmEx (bf16, "tn", like
// PyTorch's F.linear without bias) and cublasLtMatmul with a bias epilogue (F.linear with bias).
// Only host time is measured: each timed batch is enqueued behind a kernel that holds the stream
// for a few milliseconds, so the GPU runs none of it while the clock runs (otherwise a small GEMM
// whose kernel is slower than its launch measures the GPU, and a faster candidate looks like a
// cheaper call). Run it plain and under `tunableop run`: the difference is the interposer's cost
// per call (scripts/gpu-interpose.sh does both).
//   interpose_cublas_bench [calls]     prints one line per entry point: median_ns_per_call=<x>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

namespace {

// Keeps the stream busy for `ns` nanoseconds of GPU time.
__global__ void hold_stream(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

double median_ns(int calls, cudaStream_t s, const std::function<void()>& call) {
  for (int i = 0; i < 200; ++i) call();  // warm-up; tuning happens here under `tunableop run --tune`
  cudaStreamSynchronize(s);
  std::vector<double> per_call;
  // Small batches: the launch queue (about a thousand entries) must never fill while held, or
  // the host would wait for the GPU after all.
  const int batch = 128;
  const int rounds = std::max(31, calls / batch);
  for (int r = 0; r < rounds; ++r) {
    hold_stream<<<1, 1, 0, s>>>(4'000'000ull);  // 4 ms: far longer than 128 enqueues take
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < batch; ++i) call();
    auto t1 = std::chrono::steady_clock::now();
    per_call.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / batch);
    cudaStreamSynchronize(s);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int calls = argc > 1 ? std::atoi(argv[1]) : 20000;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no GPU: skipped\n");
    return 0;
  }
  const int m = 256, n = 8, k = 256;
  __nv_bfloat16 *a, *b, *c, *bias;
  cudaMalloc(&a, size_t(m) * k * 2);
  cudaMalloc(&b, size_t(k) * n * 2);
  cudaMalloc(&c, size_t(m) * n * 2);
  cudaMalloc(&bias, size_t(m) * 2);
  cudaMemset(a, 0, size_t(m) * k * 2);
  cudaMemset(b, 0, size_t(k) * n * 2);
  cudaMemset(bias, 0, size_t(m) * 2);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cublasHandle_t h;
  cublasCreate(&h);
  cublasSetStream(h, s);
  void* ws = nullptr;
  const size_t ws_bytes = size_t(32) << 20;
  cudaMalloc(&ws, ws_bytes);
  cublasSetWorkspace(h, ws, ws_bytes);  // as PyTorch does
  const float alpha = 1, beta = 0;
  double gemm_ex = median_ns(calls, s, [&] {
    cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, a, CUDA_R_16BF, k, b, CUDA_R_16BF, k, &beta, c,
                 CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  });
  std::printf("cublasGemmEx bf16 tn %dx%dx%d: median_ns_per_call=%.1f\n", m, n, k, gemm_ex);

  cublasLtHandle_t lt;
  cublasLtCreate(&lt);
  cublasLtMatmulDesc_t desc;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  int32_t ta = CUBLAS_OP_T;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep));
  const void* bias_ptr = bias;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr));
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, m, k);
  cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, k);
  cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, m, n, m);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  uint64_t max_ws = ws_bytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof(max_ws));
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &heur, &found);
  if (found == 0) {
    std::printf("cublasLtMatmul: no algorithm from the heuristic; skipped\n");
    return 0;
  }
  double lt_ns = median_ns(calls, s, [&] {
    cublasLtMatmul(lt, desc, &alpha, a, la, b, lb, &beta, c, lc, c, lc, &heur.algo, ws, ws_bytes, s);
  });
  std::printf("cublasLtMatmul bf16 tn+bias %dx%dx%d: median_ns_per_call=%.1f\n", m, n, k, lt_ns);
  cudaError_t e = cudaStreamSynchronize(s);
  std::printf("stream: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
