#include "backends/cpu/blis/blis_library.h"

#include <blis.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "backends/cpu/shared/strided_operands.h"

namespace tunableop {

namespace {

using cpu_shared::mutable_at;

// BLIS 0.9.0's sgemm (Debian 12, zen3 kernels) reads up to two floats past the end of C when
// beta != 0 (measured with C against a PROT_NONE page: m=2 n=1 k=1 already faults; dgemm and
// A/B never overread). The bytes are not written, so the result is right, but a C that ends at
// the end of a mapped page crashes the program: a user's array under the interposer, or a
// tuning buffer under ASan. Reads within C's last page are harmless; kOverread is the margin.
constexpr uintptr_t kOverreadBytes = 16, kPageBytes = 4096;

bool overread_may_fault(const float* c_end) {
  const auto end = reinterpret_cast<uintptr_t>(c_end);
  return (end - 1) / kPageBytes != (end + kOverreadBytes - 1) / kPageBytes;
}

}  // namespace

struct BlisLibrary::Api {
  using SgemmEx = void (*)(trans_t, trans_t, dim_t, dim_t, dim_t, float*, float*, inc_t, inc_t, float*, inc_t, inc_t,
                           float*, float*, inc_t, inc_t, cntx_t*, rntm_t*);
  using DgemmEx = void (*)(trans_t, trans_t, dim_t, dim_t, dim_t, double*, double*, inc_t, inc_t, double*, inc_t, inc_t,
                           double*, double*, inc_t, inc_t, cntx_t*, rntm_t*);
  SgemmEx sgemm_ex = nullptr;
  DgemmEx dgemm_ex = nullptr;
  char* (*version_str)() = nullptr;
  gint_t (*enable_openmp)() = nullptr;
  gint_t (*enable_pthreads)() = nullptr;
  dim_t (*get_num_threads)() = nullptr;
  void (*set_num_threads)(dim_t) = nullptr;
  void (*init)() = nullptr;
  arch_t (*arch_query_id)() = nullptr;
  const char* (*arch_string)(arch_t) = nullptr;
};

BlisLibrary::BlisLibrary(cpu_shared::DynamicLibrary library)
    : LoadedLibrary(std::move(library)), api_(std::make_unique<Api>()) {}
BlisLibrary::~BlisLibrary() = default;

std::vector<std::string> BlisLibrary::default_paths() {
  std::vector<std::string> paths;
#ifdef TUNABLEOP_BLIS_SONAME
  paths.push_back(TUNABLEOP_BLIS_SONAME);
#else
  paths.push_back("libblis.so.4");
#endif
#ifdef TUNABLEOP_BLIS_CONFIGURED_PATH
  paths.push_back(TUNABLEOP_BLIS_CONFIGURED_PATH);
#endif
  return paths;
}

Status BlisLibrary::bind_symbols() {
  TUNABLEOP_RETURN_IF_ERROR(library().bind("bli_sgemm_ex", api_->sgemm_ex));
  TUNABLEOP_RETURN_IF_ERROR(library().bind("bli_dgemm_ex", api_->dgemm_ex));
  TUNABLEOP_RETURN_IF_ERROR(library().bind("bli_info_get_version_str", api_->version_str));
  TUNABLEOP_RETURN_IF_ERROR(library().bind("bli_info_get_enable_openmp", api_->enable_openmp));
  TUNABLEOP_RETURN_IF_ERROR(library().bind("bli_info_get_enable_pthreads", api_->enable_pthreads));
  TUNABLEOP_RETURN_IF_ERROR(library().bind("bli_thread_get_num_threads", api_->get_num_threads));
  TUNABLEOP_RETURN_IF_ERROR(library().bind("bli_thread_set_num_threads", api_->set_num_threads));
  TUNABLEOP_RETURN_IF_ERROR(library().bind("bli_init", api_->init));
  TUNABLEOP_RETURN_IF_ERROR(library().bind("bli_arch_query_id", api_->arch_query_id));
  TUNABLEOP_RETURN_IF_ERROR(library().bind("bli_arch_string", api_->arch_string));
  return Status::ok();
}

std::string BlisLibrary::version() const {
  const char* v = api_->version_str();
  return v ? v : "unknown";
}

std::string BlisLibrary::arch() const {
  // Querying the architecture before BLIS's kernel registry exists aborts when BLIS_ARCH_TYPE
  // is set; bli_init is idempotent and thread-safe.
  api_->init();
  const char* s = api_->arch_string(api_->arch_query_id());
  return s ? s : "unknown";
}

std::string BlisLibrary::threading() const {
  const bool omp = api_->enable_openmp() != 0, pth = api_->enable_pthreads() != 0;
  return omp && pth ? "openmp+pthreads" : omp ? "openmp" : pth ? "pthreads" : "none";
}

int BlisLibrary::num_threads() const { return int(api_->get_num_threads()); }
void BlisLibrary::set_num_threads(int n) { api_->set_num_threads(dim_t(n)); }

Status BlisLibrary::supports(const GemmParams& in) const {
  if (in.dtype != DType::kF32 && in.dtype != DType::kF64)
    return Status::unsupported(fmt::format("BLIS: dtype {} (fp32 and fp64 only)", dtype_name(in.dtype)));
  // BLIS aborts the process on arguments it rejects, so everything is checked here first.
  return in.with_defaults().validate();
}

Status BlisLibrary::gemm(const GemmParams& in, const GemmOperands& ops, int threads) const {
  TUNABLEOP_RETURN_IF_ERROR(supports(in));
  const GemmParams p = cpu_shared::with_unused_lds_tightened(in.with_defaults());
  const StatusOr<bool> call = cpu_shared::needs_call(p, ops, kName);
  if (!call.is_ok() || !*call) return call.status();
  const trans_t ta = p.transa == 'N' ? BLIS_NO_TRANSPOSE : BLIS_TRANSPOSE;
  const trans_t tb = p.transb == 'N' ? BLIS_NO_TRANSPOSE : BLIS_TRANSPOSE;
  // Column-major: row stride 1, column stride ld. BLIS's typed API takes non-const pointers
  // but only writes C.
  for (int64_t b = 0; b < p.batch; ++b) {
    // A fresh runtime object per call: BLIS records its thread decomposition in it.
    rntm_t rntm;
    bli_rntm_init(&rntm);
    if (threads > 0) bli_rntm_set_num_threads(dim_t(threads), &rntm);
    if (p.dtype == DType::kF32) {
      float alpha = float(p.alpha), beta = float(p.beta);
      float* a = mutable_at<float>(ops.a, b * p.stride_a);
      float* bm = mutable_at<float>(ops.b, b * p.stride_b);
      float* c = mutable_at<float>(ops.c, b * p.stride_c);
      float* last = c + (p.n - 1) * p.ldc;  // C's last column
      if (beta == 0.0f || !overread_may_fault(last + p.m)) {
        api_->sgemm_ex(ta, tb, p.m, p.n, p.k, &alpha, a, 1, p.lda, bm, 1, p.ldb, &beta, c, 1, p.ldc, nullptr, &rntm);
        continue;
      }
      // The overread of every column but the last lands in C's next column: those go as they are,
      // the last through a copy with room after it.
      if (p.n > 1)
        api_->sgemm_ex(ta, tb, p.m, p.n - 1, p.k, &alpha, a, 1, p.lda, bm, 1, p.ldb, &beta, c, 1, p.ldc, nullptr,
                       &rntm);
      std::vector<float> tail(last, last + p.m);
      tail.resize(size_t(p.m) + kOverreadBytes / sizeof(float));
      float* b_last = bm + (p.transb == 'N' ? (p.n - 1) * p.ldb : p.n - 1);
      const inc_t b_rs = p.transb == 'N' ? 1 : p.ldb;  // column n-1 of op(B) as a k x 1 matrix
      bli_rntm_init(&rntm);
      if (threads > 0) bli_rntm_set_num_threads(dim_t(threads), &rntm);
      api_->sgemm_ex(ta, BLIS_NO_TRANSPOSE, p.m, 1, p.k, &alpha, a, 1, p.lda, b_last, b_rs, p.k * b_rs, &beta,
                     tail.data(), 1, p.m, nullptr, &rntm);
      std::copy(tail.begin(), tail.begin() + p.m, last);
    } else {
      double alpha = p.alpha, beta = p.beta;
      api_->dgemm_ex(ta, tb, p.m, p.n, p.k, &alpha, mutable_at<double>(ops.a, b * p.stride_a), 1, p.lda,
                     mutable_at<double>(ops.b, b * p.stride_b), 1, p.ldb, &beta,
                     mutable_at<double>(ops.c, b * p.stride_c), 1, p.ldc, nullptr, &rntm);
    }
  }
  return Status::ok();
}

}  // namespace tunableop
