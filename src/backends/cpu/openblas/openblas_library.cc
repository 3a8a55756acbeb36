#include "backends/cpu/openblas/openblas_library.h"

#include <fmt/format.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <sstream>

#include "backends/cpu/shared/strided_operands.h"

namespace tunableop {

namespace {

using cpu_shared::at;

// CBLAS enum values (fixed by the CBLAS standard); declared here so that no cblas.h from a
// different BLAS can sneak in.
constexpr int kCblasColMajor = 102;
constexpr int kCblasNoTrans = 111;
constexpr int kCblasTrans = 112;

int parse_max_threads(const std::string& config) {
  auto pos = config.find("MAX_THREADS=");
  if (pos == std::string::npos) return 0;
  return std::atoi(config.c_str() + pos + 12);
}

}  // namespace

std::vector<std::string> OpenblasLibrary::default_paths() {
  std::vector<std::string> paths;
  // A variant named on purpose (measuring pthreads against OpenMP in one build).
  if (const char* env = std::getenv("TUNABLEOP_OPENBLAS_LIBRARY"); env && *env) paths.push_back(env);
#ifdef TUNABLEOP_OPENBLAS_CONFIGURED_PATH
  // The build's choice (the OpenMP variant when installed: one thread world) before the soname,
  // which Debian's alternatives point at the pthreads variant by default.
  paths.push_back(TUNABLEOP_OPENBLAS_CONFIGURED_PATH);
#endif
  paths.push_back("libopenblas.so.0");
  return paths;
}

Status OpenblasLibrary::bind_symbols() {
  TUNABLEOP_RETURN_IF_ERROR(library().bind("cblas_sgemm", sgemm_));
  TUNABLEOP_RETURN_IF_ERROR(library().bind("cblas_dgemm", dgemm_));
  TUNABLEOP_RETURN_IF_ERROR(library().bind("openblas_get_config", get_config_));
  TUNABLEOP_RETURN_IF_ERROR(library().bind("openblas_get_corename", get_corename_));
  TUNABLEOP_RETURN_IF_ERROR(library().bind("openblas_get_parallel", get_parallel_));
  TUNABLEOP_RETURN_IF_ERROR(library().bind("openblas_get_num_threads", get_num_threads_));
  TUNABLEOP_RETURN_IF_ERROR(library().bind("openblas_set_num_threads", set_num_threads_));
  if (get_parallel_() == 2) {
    // Found in OpenBLAS's own dependency scope (DEEPBIND): the libgomp it really uses.
    TUNABLEOP_RETURN_IF_ERROR(library().bind("omp_get_max_threads", omp_get_max_threads_));
    TUNABLEOP_RETURN_IF_ERROR(library().bind("omp_set_num_threads", omp_set_num_threads_));
  }
  max_threads_ = parse_max_threads(config());
  return Status::ok();
}

std::string OpenblasLibrary::config() const {
  const char* c = get_config_();
  return c ? c : "";
}

std::string OpenblasLibrary::version() const {
  std::istringstream words(config());
  std::string first, second;
  words >> first >> second;
  return first == "OpenBLAS" && !second.empty() ? second : "unknown";
}

std::string OpenblasLibrary::core_name() const {
  const char* c = get_corename_();
  return c ? c : "";
}

int OpenblasLibrary::parallel_mode() const { return get_parallel_(); }

std::string OpenblasLibrary::threading() const {
  switch (parallel_mode()) {
    case 0: return "serial";
    case 1: return "pthreads";
    case 2: return "openmp";
    default: return "unknown";
  }
}

int OpenblasLibrary::num_threads() const {
  std::lock_guard lock(mu_);
  return get_num_threads_();
}

void OpenblasLibrary::set_num_threads(int n) {
  std::lock_guard lock(mu_);
  // The OpenMP build's openblas_set_num_threads also sets the calling thread's OpenMP count:
  // put that back, so that this call changes OpenBLAS's setting alone.
  const int previous_omp = omp_get_max_threads_ ? omp_get_max_threads_() : 0;
  set_num_threads_(n);
  if (omp_set_num_threads_ && omp_get_max_threads_() != previous_omp) omp_set_num_threads_(previous_omp);
}

Status OpenblasLibrary::supports(const GemmParams& in) const {
  if (in.dtype != DType::kF32 && in.dtype != DType::kF64)
    return Status::unsupported(fmt::format("OpenBLAS: dtype {} (fp32 and fp64 only)", dtype_name(in.dtype)));
  const GemmParams d = in.with_defaults();
  TUNABLEOP_RETURN_IF_ERROR(d.validate());
  const GemmParams p = cpu_shared::with_unused_lds_tightened(d);
  // The Debian build uses 32-bit BLAS integers (not ILP64).
  for (int64_t v : {p.m, p.n, p.k, p.lda, p.ldb, p.ldc})
    if (v > INT_MAX) return Status::unsupported(fmt::format("OpenBLAS: dimension {} exceeds 32-bit BLAS int", v));
  return Status::ok();
}

Status OpenblasLibrary::gemm(const GemmParams& in, const GemmOperands& ops, int threads) {
  TUNABLEOP_RETURN_IF_ERROR(supports(in));
  const GemmParams p = cpu_shared::with_unused_lds_tightened(in.with_defaults());
  const StatusOr<bool> call = cpu_shared::needs_call(p, ops, kName);
  if (!call.is_ok() || !*call) return call.status();
  const int ta = p.transa == 'N' ? kCblasNoTrans : kCblasTrans;
  const int tb = p.transb == 'N' ? kCblasNoTrans : kCblasTrans;
  const int m = int(p.m), n = int(p.n), k = int(p.k);
  const int lda = int(p.lda), ldb = int(p.ldb), ldc = int(p.ldc);

  std::lock_guard lock(mu_);
  const int previous = get_num_threads_();
  const int previous_omp = omp_get_max_threads_ ? omp_get_max_threads_() : 0;
  // The OpenMP build follows the caller's omp_get_max_threads() at every call (and adopts it
  // as its own count), so there the count is set for every call, not only when it differs.
  const bool change = threads > 0 && (threads != previous || (omp_set_num_threads_ && previous_omp != threads));
  if (change) set_num_threads_(threads);
  for (int64_t b = 0; b < p.batch; ++b) {
    if (p.dtype == DType::kF32) {
      sgemm_(kCblasColMajor, ta, tb, m, n, k, float(p.alpha), at<float>(ops.a, b * p.stride_a), lda,
             at<float>(ops.b, b * p.stride_b), ldb, float(p.beta), at<float>(ops.c, b * p.stride_c), ldc);
    } else {
      dgemm_(kCblasColMajor, ta, tb, m, n, k, p.alpha, at<double>(ops.a, b * p.stride_a), lda,
             at<double>(ops.b, b * p.stride_b), ldb, p.beta, at<double>(ops.c, b * p.stride_c), ldc);
    }
  }
  if (change) set_num_threads_(previous);
  if (omp_set_num_threads_ && omp_get_max_threads_() != previous_omp) omp_set_num_threads_(previous_omp);
  return Status::ok();
}

}  // namespace tunableop
