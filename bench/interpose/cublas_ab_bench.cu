// In-process A/B of the interposer's host cost on the GPU path (ab_bench.h): for cublasGemmEx
// (bf16 "tn", PyTorch's F.linear without bias), cublasLtMatmul (bf16 "tn" + bias epilogue,
// F.linear with bias) and cublasSgemm_v2 (fp32, seed Example 1's entry point), the real entry
// point against the hooked one in one process, on a small GEMM. Only host time is on the clock:
// every round's blocks are enqueued behind a kernel that holds the stream (2 ms, far longer than
// the round's enqueues), so the GPU runs none of it while the clock runs, and no call waits for
// the GPU. Run it under `tunableop run --tune` (hooked = served or library default, as tuned),
// `--no-tune` without results (hooked = passed through the engine) and with the interposer
// disabled (hooked = the inert hook); scripts/gpu-interpose.sh's cost step does all three.
// Both arms' results are compared at the end of each entry point (exit 1 when they differ).
//   interpose_cublas_ab_bench [--mode LABEL] [--rounds R] [--block B]
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ab_bench.h"

namespace ab = tunableop::interpose::ab;
using tunableop::interpose::Api;
using tunableop::interpose::Library;

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

// cublas_api.h also declares C++ overloads of cublasGemmEx: the C entry point's type, spelled out.
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
using SgemmFn = decltype(&cublasSgemm_v2);
using LtMatmulFn = decltype(&cublasLtMatmul);

struct Bench {
  ab::Preload pre = ab::Preload::find();
  const char* mode = "no preload";
  int rounds = 301, block = 32;
  cudaStream_t stream = nullptr;
  bool ok = true;

  template <class Real, class Hooked>
  void run(const char* entry, Api api, Real&& real, Hooked&& hooked) {
    for (int i = 0; i < 200; ++i) {  // warm-up; under `tunableop run --tune` the problem is tuned here
      real();
      hooked();
    }
    if (cudaStreamSynchronize(stream) != cudaSuccess) {
      std::printf("%s: the warm-up failed: %s\n", entry, cudaGetErrorString(cudaGetLastError()));
      ok = false;
      return;
    }
    const auto before = pre.counts(api);
    ab::Result r = ab::interleave(
        rounds, block, real, hooked, [&] { hold_stream<<<1, 1, 0, stream>>>(2'000'000ull); },
        [&] { cudaStreamSynchronize(stream); });
    ab::print_row(entry, mode, r, ab::minus(pre.counts(api), before));
  }
};

// Small values with a pattern (not all zero: the two arms' results are compared).
template <class T>
void fill(T* dev, size_t count, float scale) {
  std::vector<T> h(count);
  for (size_t i = 0; i < count; ++i) h[i] = T(scale * float(int((i * 7919) % 17) - 8) / 8.0f);
  cudaMemcpy(dev, h.data(), count * sizeof(T), cudaMemcpyHostToDevice);
}

// The real and the hooked arm computed the same product (within the chosen candidate's
// precision: `tol` of the largest magnitude).
template <class T>
bool same(const char* entry, const T* x, const T* y, size_t count, double tol) {
  std::vector<T> hx(count), hy(count);
  cudaMemcpy(hx.data(), x, count * sizeof(T), cudaMemcpyDeviceToHost);
  cudaMemcpy(hy.data(), y, count * sizeof(T), cudaMemcpyDeviceToHost);
  double scale = 0, worst = 0;
  for (size_t i = 0; i < count; ++i) {
    double a = double(float(hx[i])), b = double(float(hy[i]));
    scale = std::max(scale, std::fabs(a));
    worst = std::max(worst, std::fabs(a - b));
    if (std::isnan(a) || std::isnan(b)) worst = INFINITY;
  }
  if (worst <= tol * std::max(scale, 1.0)) return true;
  std::printf("%s: the hooked call's result differs from the real one's (max |diff| %g, max |x| %g)\n", entry, worst,
              scale);
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  Bench bench;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--mode") && i + 1 < argc) {
      bench.mode = argv[++i];
    } else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) {
      bench.rounds = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--block") && i + 1 < argc) {
      bench.block = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--mode LABEL] [--rounds R] [--block B]\n", argv[0]);
      return 2;
    }
  }
  // The blocks of one round must fit in the launch queue (about a thousand entries) and in the
  // hold: 2 x 64 calls of a few microseconds each is far below both.
  if (bench.rounds < 2 || bench.block < 1 || bench.block > 64) {
    std::fprintf(stderr, "rounds must be >= 2, block 1..64\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no GPU: skipped\n");
    return 77;
  }
  ab::print_header(bench.pre.present() ? "under the preload library" : "no preload library");
  const int m = 256, n = 8, k = 256;
  __nv_bfloat16 *a, *b, *c, *c2, *bias;
  float *fa, *fb, *fc, *fc2;
  cudaMalloc(&a, size_t(m) * k * 2);
  cudaMalloc(&b, size_t(k) * n * 2);
  cudaMalloc(&c, size_t(m) * n * 2);
  cudaMalloc(&c2, size_t(m) * n * 2);
  cudaMalloc(&bias, size_t(m) * 2);
  fill(a, size_t(m) * k, 1.0f);
  fill(b, size_t(k) * n, 0.5f);
  fill(bias, size_t(m), 0.25f);
  const int fm = 64;  // fp32: 64 x 64 x 64
  cudaMalloc(&fa, size_t(fm) * fm * 4);
  cudaMalloc(&fb, size_t(fm) * fm * 4);
  cudaMalloc(&fc, size_t(fm) * fm * 4);
  cudaMalloc(&fc2, size_t(fm) * fm * 4);
  fill(fa, size_t(fm) * fm, 1.0f);
  fill(fb, size_t(fm) * fm, 0.5f);
  cudaStreamCreateWithFlags(&bench.stream, cudaStreamNonBlocking);
  cudaStream_t s = bench.stream;
  cublasHandle_t h;
  cublasCreate(&h);
  cublasSetStream(h, s);
  void* ws = nullptr;
  const size_t ws_bytes = size_t(32) << 20;
  cudaMalloc(&ws, ws_bytes);
  cublasSetWorkspace(h, ws, ws_bytes);  // as PyTorch does
  const float alpha = 1, beta = 0;

  GemmExFn gemm_ex_hooked = &cublasGemmEx;
  GemmExFn gemm_ex_real = bench.pre.real(Library::kCublas, "cublasGemmEx", gemm_ex_hooked);
  SgemmFn sgemm_hooked = &cublasSgemm_v2;
  SgemmFn sgemm_real = bench.pre.real(Library::kCublas, "cublasSgemm_v2", sgemm_hooked);
  LtMatmulFn lt_hooked = &cublasLtMatmul;
  LtMatmulFn lt_real = bench.pre.real(Library::kCublasLt, "cublasLtMatmul", lt_hooked);
  if (!gemm_ex_real || !sgemm_real || !lt_real) {
    std::printf("the preload library finds no real cuBLAS/cuBLASLt entry point: skipped\n");
    return 77;
  }

  auto gemm_ex = [&](GemmExFn fn, void* out) {
    return [=, &alpha, &beta] {
      fn(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, a, CUDA_R_16BF, k, b, CUDA_R_16BF, k, &beta, out, CUDA_R_16BF, m,
         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
  };
  bench.run("cublasGemmEx bf16 tn 256x8x256", Api::kCublasGemmEx, gemm_ex(gemm_ex_real, c),
            gemm_ex(gemm_ex_hooked, c2));
  bench.ok &= same("cublasGemmEx", c, c2, size_t(m) * n, 2e-2);

  auto sgemm = [&](SgemmFn fn, float* out) {
    return [=, &alpha, &beta] { fn(h, CUBLAS_OP_N, CUBLAS_OP_N, fm, fm, fm, &alpha, fa, fm, fb, fm, &beta, out, fm); };
  };
  bench.run("cublasSgemm_v2 fp32 nn 64x64x64", Api::kCublasSgemm, sgemm(sgemm_real, fc), sgemm(sgemm_hooked, fc2));
  bench.ok &= same("cublasSgemm_v2", fc, fc2, size_t(fm) * fm, 1e-4);

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
  } else {
    auto lt_call = [&](LtMatmulFn fn, void* out) {
      return [=, &alpha, &beta, &heur] {
        fn(lt, desc, &alpha, a, la, b, lb, &beta, out, lc, out, lc, &heur.algo, ws, ws_bytes, s);
      };
    };
    bench.run("cublasLtMatmul bf16 tn+bias 256x8x256", Api::kCublasLtMatmul, lt_call(lt_real, c),
              lt_call(lt_hooked, c2));
    bench.ok &= same("cublasLtMatmul", c, c2, size_t(m) * n, 2e-2);
  }
  cudaError_t e = cudaStreamSynchronize(s);
  std::printf("\nstream: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess && bench.ok ? 0 : 1;
}
