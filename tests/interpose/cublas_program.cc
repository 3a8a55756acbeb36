// An ordinary CUDA program calling every cuBLAS / cuBLASLt entry point the interposer hooks, run
// by run_interposed.py plain, under `tunableop run` and disabled (GPU-labelled; exit 77 without
// a GPU). Each result is checked against an fp64 reference and written for the driver.
//   interpose_cublas_program OUT   prints servable_problems=N engine_loaded=0|1
#include "cublas_program.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "engine_loaded.h"
#include "tunableop/half.h"

namespace interpose_test {

cudaDataType cuda_type(Type t) {
  switch (t) {
    case Type::kF32: return CUDA_R_32F;
    case Type::kF64: return CUDA_R_64F;
    case Type::kBF16: return CUDA_R_16BF;
    case Type::kF16: return CUDA_R_16F;
  }
  return CUDA_R_32F;
}

size_t type_size(Type t) { return t == Type::kF64 ? 8 : t == Type::kF32 ? 4 : 2; }

namespace {

// Rounds v to `t` and returns the bytes of the stored value.
double round_to(Type t, double v, unsigned char* bytes) {
  switch (t) {
    case Type::kF64: std::memcpy(bytes, &v, 8); return v;
    case Type::kF32: {
      float f = float(v);
      std::memcpy(bytes, &f, 4);
      return f;
    }
    case Type::kBF16: {
      tunableop::bf16 h = tunableop::to_bf16(float(v));
      std::memcpy(bytes, &h.bits, 2);
      return tunableop::to_float(h);
    }
    case Type::kF16: {
      tunableop::fp16 h = tunableop::to_fp16(float(v));
      std::memcpy(bytes, &h.bits, 2);
      return tunableop::to_float(h);
    }
  }
  return v;
}

double read_from(Type t, const unsigned char* bytes) {
  switch (t) {
    case Type::kF64: {
      double d;
      std::memcpy(&d, bytes, 8);
      return d;
    }
    case Type::kF32: {
      float f;
      std::memcpy(&f, bytes, 4);
      return f;
    }
    case Type::kBF16: {
      tunableop::bf16 h;
      std::memcpy(&h.bits, bytes, 2);
      return tunableop::to_float(h);
    }
    case Type::kF16: {
      tunableop::fp16 h;
      std::memcpy(&h.bits, bytes, 2);
      return tunableop::to_float(h);
    }
  }
  return 0;
}

// Random values rounded to the type, uploaded; returns the device pointer.
void* upload(Type t, std::vector<double>& values, std::mt19937_64& rng, bool fill) {
  std::uniform_real_distribution<double> v(-1, 1);
  std::vector<unsigned char> bytes(values.size() * type_size(t) + 1);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = round_to(t, fill ? v(rng) : values[i], bytes.data() + i * type_size(t));
  void* d = nullptr;
  TEST_CUDA(cudaMalloc(&d, std::max<size_t>(bytes.size(), 256)));
  TEST_CUDA(cudaMemcpy(d, bytes.data(), values.size() * type_size(t), cudaMemcpyHostToDevice));
  return d;
}

long long span(int batch, long long stride, int ld, int cols) { return (batch - 1) * stride + (long long)ld * cols; }

}  // namespace

void Problem::init(uint64_t seed) {
  const int a_rows = ta == 'N' ? m : k, a_cols = ta == 'N' ? k : m;
  const int b_rows = tb == 'N' ? k : n, b_cols = tb == 'N' ? n : k;
  if (lda == 0) lda = a_rows;
  if (ldb == 0) ldb = b_rows;
  if (ldc == 0) ldc = m;
  if (batch > 1) {
    if (sa == 0) sa = (long long)lda * a_cols;
    if (sb == 0) sb = (long long)ldb * b_cols;
    if (sc == 0) sc = (long long)ldc * n;
  }
  std::mt19937_64 rng(seed);
  a.assign(size_t(span(batch, sa, lda, a_cols)), 0);
  b.assign(size_t(span(batch, sb, ldb, b_cols)), 0);
  c.assign(size_t(span(batch, sc, ldc, n)), 0);
  da = upload(type, a, rng, true);
  db = upload(type, b, rng, true);
  dc = upload(type, c, rng, true);
  if (with_bias) {
    bias.assign(size_t(m), 0);
    dbias = upload(type, bias, rng, true);
  }
}

void Problem::upload_c() {
  std::vector<unsigned char> bytes(c.size() * type_size(type));
  for (size_t i = 0; i < c.size(); ++i) round_to(type, c[i], bytes.data() + i * type_size(type));
  TEST_CUDA(cudaMemcpy(dc, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
}

Problem::~Problem() {
  for (void* p : {da, db, dc, dbias})
    if (p) cudaFree(p);
}

std::vector<double> Problem::reference() const {
  std::vector<double> out = c;
  for (int bt = 0; bt < batch; ++bt)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double s = 0;
        for (int l = 0; l < k; ++l) {
          double x = a[size_t(bt * sa + (ta == 'N' ? i + (long long)l * lda : l + (long long)i * lda))];
          double y = b[size_t(bt * sb + (tb == 'N' ? l + (long long)j * ldb : j + (long long)l * ldb))];
          s += x * y;
        }
        double& o = out[size_t(bt * sc + i + (long long)j * ldc)];
        double v = alpha * s + (beta != 0 ? beta * o : 0.0);
        if (with_bias) {
          v += bias[size_t(i)];
          if (act == 1) v = std::max(v, 0.0);
          if (act == 2) v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
        }
        o = v;
      }
  return out;
}

double Problem::tolerance() const {
  const double sk = std::sqrt(double(std::max(k, 1)));
  if (fp16_accum) return 2e-2;
  switch (type) {
    case Type::kF64: return 1e-12 * sk;
    case Type::kF32: return tf32 ? 5e-3 : 2e-6 * sk;
    case Type::kBF16: return 1.6e-2;
    case Type::kF16: return 4e-3;
  }
  return 1e-2;
}

bool check(Problem& p, std::ofstream& out, const std::string& label) {
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::fprintf(stderr, "cublas_program: %s: %s\n", label.c_str(), cudaGetErrorString(e));
    return false;
  }
  std::vector<unsigned char> bytes(p.c.size() * type_size(p.type));
  TEST_CUDA(cudaMemcpy(bytes.data(), p.dc, bytes.size(), cudaMemcpyDeviceToHost));
  std::vector<double> got(p.c.size());
  for (size_t i = 0; i < got.size(); ++i) got[i] = read_from(p.type, bytes.data() + i * type_size(p.type));
  return check_values(got, p.reference(), p.tolerance(), out, label);
}

bool check_values(const std::vector<double>& got, const std::vector<double>& want, double tol, std::ofstream& out,
                  const std::string& label) {
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  uint64_t count = got.size();
  out.write(reinterpret_cast<const char*>(&count), sizeof(count));
  out.write(reinterpret_cast<const char*>(&tol), sizeof(tol));
  out.write(reinterpret_cast<const char*>(got.data()), std::streamsize(got.size() * sizeof(double)));
  const bool ok = std::isfinite(err) && err / scale <= tol;
  std::printf("%-44s relative error %.3g (tolerance %.3g) %s\n", label.c_str(), err / scale, tol, ok ? "ok" : "WRONG");
  return ok;
}

void Context::use_stream(cudaStream_t s) {
  stream = s;
  cublasSetStream(handle, s);
  cublasSetWorkspace(handle, workspace, workspace_bytes);
}

namespace {

cublasOperation_t op(char t) { return t == 'N' ? CUBLAS_OP_N : CUBLAS_OP_T; }

struct Scalars {
  float af, bf;
  double ad, bd;
  __half ah, bh;
  explicit Scalars(const Problem& p) : af(float(p.alpha)), bf(float(p.beta)), ad(p.alpha), bd(p.beta) {
    __half_raw x, y;
    x.x = tunableop::to_fp16(float(p.alpha)).bits;
    y.x = tunableop::to_fp16(float(p.beta)).bits;
    ah = x;
    bh = y;
  }
  const void* alpha(const Problem& p) const { return p.type == Type::kF64 ? (const void*)&ad : &af; }
  const void* beta(const Problem& p) const { return p.type == Type::kF64 ? (const void*)&bd : &bf; }
};

cublasComputeType_t compute_of(const Problem& p) {
  return p.type == Type::kF64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
}

}  // namespace

cublasStatus_t gemm_ex(Context& ctx, Problem& p) {
  Scalars s(p);
  return cublasGemmEx(ctx.handle, op(p.ta), op(p.tb), p.m, p.n, p.k, s.alpha(p), p.da, cuda_type(p.type), p.lda, p.db,
                      cuda_type(p.type), p.ldb, s.beta(p), p.dc, cuda_type(p.type), p.ldc, compute_of(p),
                      CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t typed_gemm(Context& ctx, Problem& p) {
  Scalars s(p);
  auto ta = op(p.ta), tb = op(p.tb);
  switch (p.type) {
    case Type::kF32:
      return cublasSgemm(ctx.handle, ta, tb, p.m, p.n, p.k, &s.af, static_cast<float*>(p.da), p.lda,
                         static_cast<float*>(p.db), p.ldb, &s.bf, static_cast<float*>(p.dc), p.ldc);
    case Type::kF64:
      return cublasDgemm(ctx.handle, ta, tb, p.m, p.n, p.k, &s.ad, static_cast<double*>(p.da), p.lda,
                         static_cast<double*>(p.db), p.ldb, &s.bd, static_cast<double*>(p.dc), p.ldc);
    case Type::kF16:
      return cublasHgemm(ctx.handle, ta, tb, p.m, p.n, p.k, &s.ah, static_cast<__half*>(p.da), p.lda,
                         static_cast<__half*>(p.db), p.ldb, &s.bh, static_cast<__half*>(p.dc), p.ldc);
    case Type::kBF16: break;
  }
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t strided_ex(Context& ctx, Problem& p) {
  Scalars s(p);
  return cublasGemmStridedBatchedEx(ctx.handle, op(p.ta), op(p.tb), p.m, p.n, p.k, s.alpha(p), p.da, cuda_type(p.type),
                                    p.lda, p.sa, p.db, cuda_type(p.type), p.ldb, p.sb, s.beta(p), p.dc,
                                    cuda_type(p.type), p.ldc, p.sc, p.batch, compute_of(p), CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t typed_strided(Context& ctx, Problem& p) {
  Scalars s(p);
  auto ta = op(p.ta), tb = op(p.tb);
  switch (p.type) {
    case Type::kF32:
      return cublasSgemmStridedBatched(ctx.handle, ta, tb, p.m, p.n, p.k, &s.af, static_cast<float*>(p.da), p.lda, p.sa,
                                       static_cast<float*>(p.db), p.ldb, p.sb, &s.bf, static_cast<float*>(p.dc), p.ldc,
                                       p.sc, p.batch);
    case Type::kF64:
      return cublasDgemmStridedBatched(ctx.handle, ta, tb, p.m, p.n, p.k, &s.ad, static_cast<double*>(p.da), p.lda,
                                       p.sa, static_cast<double*>(p.db), p.ldb, p.sb, &s.bd, static_cast<double*>(p.dc),
                                       p.ldc, p.sc, p.batch);
    case Type::kF16:
      return cublasHgemmStridedBatched(ctx.handle, ta, tb, p.m, p.n, p.k, &s.ah, static_cast<__half*>(p.da), p.lda,
                                       p.sa, static_cast<__half*>(p.db), p.ldb, p.sb, &s.bh, static_cast<__half*>(p.dc),
                                       p.ldc, p.sc, p.batch);
    case Type::kBF16: break;
  }
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

// As PyTorch's addmm / F.linear: descriptors made per call, the heuristic's first algorithm,
// the caller's workspace. row_major: the same product given as row-major layouts (D = C^T).
cublasStatus_t lt_matmul(Context& ctx, Problem& p, bool row_major) {
  Scalars s(p);
  cudaDataType t = cuda_type(p.type);
  cudaDataType scale = p.type == Type::kF64 ? CUDA_R_64F : CUDA_R_32F;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasStatus_t st = cublasLtMatmulDescCreate(&desc, compute_of(p), scale);
  int32_t ta = op(p.ta), tb = op(p.tb);
  const int a_rows = p.ta == 'N' ? p.m : p.k, a_cols = p.ta == 'N' ? p.k : p.m;
  const int b_rows = p.tb == 'N' ? p.k : p.n, b_cols = p.tb == 'N' ? p.n : p.k;
  const void* a = p.da;
  const void* b = p.db;
  if (!row_major) {
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
    cublasLtMatrixLayoutCreate(&la, t, a_rows, a_cols, p.lda);
    cublasLtMatrixLayoutCreate(&lb, t, b_rows, b_cols, p.ldb);
    cublasLtMatrixLayoutCreate(&lc, t, p.m, p.n, p.ldc);
  } else {
    // D (n x m, row-major) = C^T = op(B)^T op(A)^T: B's memory is op(B)^T stored row-major.
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &tb, sizeof(tb));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &ta, sizeof(ta));
    int32_t row = CUBLASLT_ORDER_ROW;
    cublasLtMatrixLayoutCreate(&la, t, b_cols, b_rows, p.ldb);
    cublasLtMatrixLayoutCreate(&lb, t, a_cols, a_rows, p.lda);
    cublasLtMatrixLayoutCreate(&lc, t, p.n, p.m, p.ldc);
    for (auto l : {la, lb, lc}) cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, sizeof(row));
    std::swap(a, b);
  }
  if (p.with_bias) {
    cublasLtEpilogue_t ep = p.act == 1   ? CUBLASLT_EPILOGUE_RELU_BIAS
                            : p.act == 2 ? CUBLASLT_EPILOGUE_GELU_BIAS
                                         : CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.dbias, sizeof(p.dbias));
  }
  cublasLtMatmulPreferenceCreate(&pref);
  uint64_t ws = ctx.workspace_bytes;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(ctx.lt, desc, la, lb, lc, lc, pref, 1, &heur, &found);
  if (st == CUBLAS_STATUS_SUCCESS && found == 0) st = CUBLAS_STATUS_NOT_SUPPORTED;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmul(ctx.lt, desc, s.alpha(p), a, la, b, lb, s.beta(p), p.dc, lc, p.dc, lc, &heur.algo,
                        ctx.workspace, ctx.workspace_bytes, ctx.stream);
  cublasLtMatmulPreferenceDestroy(pref);
  for (auto l : {la, lb, lc})
    if (l) cublasLtMatrixLayoutDestroy(l);
  cublasLtMatmulDescDestroy(desc);
  return st;
}

}  // namespace interpose_test

int main(int argc, char** argv) {
  using namespace interpose_test;
  if (argc != 2) {
    std::fprintf(stderr, "usage: interpose_cublas_program OUT\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no usable GPU\n");
    return 77;
  }
  std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
  Context ctx;
  ctx.out = &out;
  if (cublasCreate(&ctx.handle) != CUBLAS_STATUS_SUCCESS || cublasLtCreate(&ctx.lt) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublas_program: cannot create cuBLAS handles\n");
    return 1;
  }
  TEST_CUDA(cudaMalloc(&ctx.workspace, ctx.workspace_bytes));
  cudaStream_t s;
  TEST_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  ctx.use_stream(s);
  int fp8_passes = 0;
  int problems = run_all_cases(ctx);
  problems += run_fp8_cases(ctx, &fp8_passes);
  std::printf("servable_problems=%d engine_loaded=%d\n", problems, int(interpose_test::engine_loaded()));
  std::printf("expect pass: compute type not reproduced: 2\nexpect pass: alpha/beta in device memory: 1\n");
  if (fp8_passes) std::printf("expect pass: descriptor attribute not reproduced: %d\n", fp8_passes);
  std::printf("%s\n", ctx.ok ? "all results correct" : "WRONG RESULTS");
  return ctx.ok ? 0 : 1;
}
