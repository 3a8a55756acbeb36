// Shared pieces of the CUDA interposer test program: a GEMM problem with device buffers, its
// fp64 reference on the host, and the output file run_interposed.py compares between runs.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace interpose_test {

enum class Type { kF32, kF64, kBF16, kF16 };
cudaDataType cuda_type(Type t);
size_t type_size(Type t);

// Column-major C = alpha op(A) op(B) + beta C (batched); bias (m) and act (0 none, 1 relu, 2 gelu)
// for the epilogue cases (beta must be 0 then).
struct Problem {
  Type type = Type::kF32;
  char ta = 'N', tb = 'N';
  int m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0, batch = 1;
  long long sa = 0, sb = 0, sc = 0;
  double alpha = 1, beta = 0;
  bool with_bias = false;
  int act = 0;
  bool tf32 = false;        // tolerance of tf32 inputs
  bool fp16_accum = false;  // tolerance of fp16 accumulation (Hgemm)

  // Host values (as stored in `type`) and device buffers.
  std::vector<double> a, b, c, bias;
  void *da = nullptr, *db = nullptr, *dc = nullptr, *dbias = nullptr;

  // Fills lds/strides left at 0 densely, makes random data and uploads it.
  void init(uint64_t seed);
  void upload_c();  // resets C on the device to its initial values
  std::vector<double> reference() const;
  double tolerance() const;
  ~Problem();
};

// Checks the device C against the reference, appends it to `out`; false (with a message) when
// wrong. `label` names the case in messages.
bool check(Problem& p, std::ofstream& out, const std::string& label);
// The same for values already on the host: max |got - want| relative to max |want| <= tol.
bool check_values(const std::vector<double>& got, const std::vector<double>& want, double tol, std::ofstream& out,
                  const std::string& label);

struct Context {
  cublasHandle_t handle = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = size_t(32) << 20;
  std::ofstream* out = nullptr;
  bool ok = true;
  // Points the handle at `s` and gives it the workspace again (cublasSetStream drops it), as
  // PyTorch does before each call.
  void use_stream(cudaStream_t s);
};

// The cases (cublas_program_cases.cc). Each returns false when a result was wrong.
int run_all_cases(Context& ctx);  // returns the number of servable problems
// FP8 cublasLtMatmul as torch._scaled_mm makes it (cublas_program_fp8.cc): the servable ones'
// count; *passes receives how many must pass through as "descriptor attribute not reproduced".
// Nothing on a GPU without FP8 (compute capability below 8.9).
int run_fp8_cases(Context& ctx, int* passes);

// Calls through cuBLAS's C entry points, one per intercepted function.
cublasStatus_t gemm_ex(Context& ctx, Problem& p);
cublasStatus_t typed_gemm(Context& ctx, Problem& p);     // S/D/Hgemm
cublasStatus_t strided_ex(Context& ctx, Problem& p);     // GemmStridedBatchedEx
cublasStatus_t typed_strided(Context& ctx, Problem& p);  // S/D/HgemmStridedBatched
cublasStatus_t lt_matmul(Context& ctx, Problem& p, bool row_major);

#define TEST_CUDA(expr)                                                                           \
  do {                                                                                            \
    cudaError_t e_ = (expr);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

}  // namespace interpose_test
