#include "backends/cpu/openblas/openblas_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <sstream>

namespace tunableop {

namespace {

// RTLD_DEEPBIND makes the library resolve its own symbols (sgemm_, cblas_sgemm, ...) inside
// itself first, even when the process already exports identically named ones (BLIS, a
// program linked against -lblas). Sanitizer runtimes refuse DEEPBIND, so those builds go
// without it and rely on RTLD_LOCAL alone.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kOpenFlags = RTLD_NOW | RTLD_LOCAL;
#else
constexpr int kOpenFlags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#endif

// CBLAS enum values (fixed by the CBLAS standard); declared here so that no cblas.h from a
// different BLAS can sneak in.
constexpr int kCblasColMajor = 102;
constexpr int kCblasNoTrans = 111;
constexpr int kCblasTrans = 112;

template <class Fn>
Status bind_symbol(void* handle, const std::string& path, const char* name, Fn& fn) {
  dlerror();
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (fn == nullptr) return Status::not_found(fmt::format("{} has no symbol {} (is it OpenBLAS?)", path, name));
  return Status::ok();
}

// One object per loaded file, keyed by the dlopen handle (the same file opened under two
// names gives the same handle). Never destroyed: see OpenblasLibrary::open.
std::mutex& cache_mutex() {
  static std::mutex mu;
  return mu;
}
std::map<void*, std::shared_ptr<OpenblasLibrary>>& cache() {
  static auto* c = new std::map<void*, std::shared_ptr<OpenblasLibrary>>();
  return *c;
}

// Element `offset` of a typed buffer; a null buffer (k == 0 leaves A and B empty) stays null.
template <class T>
T* at(void* base, int64_t offset) {
  return base ? static_cast<T*>(base) + offset : nullptr;
}
template <class T>
const T* at(const void* base, int64_t offset) {
  return base ? static_cast<const T*>(base) + offset : nullptr;
}

int parse_max_threads(const std::string& config) {
  auto pos = config.find("MAX_THREADS=");
  if (pos == std::string::npos) return 0;
  return std::atoi(config.c_str() + pos + 12);
}

}  // namespace

std::vector<std::string> OpenblasLibrary::default_paths() {
  std::vector<std::string> paths = {"libopenblas.so.0"};
#ifdef TUNABLEOP_OPENBLAS_CONFIGURED_PATH
  paths.push_back(TUNABLEOP_OPENBLAS_CONFIGURED_PATH);
#endif
  return paths;
}

StatusOr<std::shared_ptr<OpenblasLibrary>> OpenblasLibrary::open(const std::string& path) {
  std::lock_guard lock(cache_mutex());
  dlerror();
  void* handle = dlopen(path.c_str(), kOpenFlags);
  if (handle == nullptr) {
    const char* err = dlerror();
    return Status::not_found(fmt::format("cannot load {}: {}", path, err ? err : "unknown dlopen error"));
  }
  auto it = cache().find(handle);
  if (it != cache().end()) return it->second;
  std::shared_ptr<OpenblasLibrary> lib(new OpenblasLibrary());
  lib->path_ = path;
  lib->handle_ = handle;
  Status st = lib->bind_symbols();
  if (!st.is_ok()) {
    dlclose(handle);  // not OpenBLAS: nothing of it ever ran, so closing is safe
    return st;
  }
  lib->max_threads_ = parse_max_threads(lib->config());
  cache().emplace(handle, lib);
  return lib;
}

StatusOr<std::shared_ptr<OpenblasLibrary>> OpenblasLibrary::open_first(const std::vector<std::string>& paths) {
  std::string tried;
  for (const auto& path : paths) {
    auto lib = open(path);
    if (lib.is_ok()) return lib;
    tried += (tried.empty() ? "" : "; ") + lib.status().message();
  }
  return Status::not_found(tried.empty() ? std::string("no OpenBLAS path to try") : tried);
}

Status OpenblasLibrary::bind_symbols() {
  TUNABLEOP_RETURN_IF_ERROR(bind_symbol(handle_, path_, "cblas_sgemm", sgemm_));
  TUNABLEOP_RETURN_IF_ERROR(bind_symbol(handle_, path_, "cblas_dgemm", dgemm_));
  TUNABLEOP_RETURN_IF_ERROR(bind_symbol(handle_, path_, "openblas_get_config", get_config_));
  TUNABLEOP_RETURN_IF_ERROR(bind_symbol(handle_, path_, "openblas_get_corename", get_corename_));
  TUNABLEOP_RETURN_IF_ERROR(bind_symbol(handle_, path_, "openblas_get_parallel", get_parallel_));
  TUNABLEOP_RETURN_IF_ERROR(bind_symbol(handle_, path_, "openblas_get_num_threads", get_num_threads_));
  TUNABLEOP_RETURN_IF_ERROR(bind_symbol(handle_, path_, "openblas_set_num_threads", set_num_threads_));
  if (get_parallel_() == 2) {
    // Found in OpenBLAS's own dependency scope (DEEPBIND): the libgomp it really uses.
    TUNABLEOP_RETURN_IF_ERROR(bind_symbol(handle_, path_, "omp_get_max_threads", omp_get_max_threads_));
    TUNABLEOP_RETURN_IF_ERROR(bind_symbol(handle_, path_, "omp_set_num_threads", omp_set_num_threads_));
  }
  return Status::ok();
}

std::string OpenblasLibrary::symbol_file(const char* symbol) const {
  void* addr = dlsym(handle_, symbol);
  Dl_info info{};
  if (addr == nullptr || dladdr(addr, &info) == 0 || info.dli_fname == nullptr) return "";
  // Resolve the alternatives symlinks so the answer names the variant (openblas-pthread/...).
  char resolved[PATH_MAX];
  return realpath(info.dli_fname, resolved) ? std::string(resolved) : std::string(info.dli_fname);
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

int OpenblasLibrary::num_threads() const {
  std::lock_guard lock(mu_);
  return get_num_threads_();
}

void OpenblasLibrary::set_num_threads(int n) {
  std::lock_guard lock(mu_);
  set_num_threads_(n);
}

Status OpenblasLibrary::supports(const GemmParams& in) const {
  if (in.dtype != DType::kF32 && in.dtype != DType::kF64)
    return Status::unsupported(fmt::format("OpenBLAS: dtype {} (fp32 and fp64 only)", dtype_name(in.dtype)));
  GemmParams p = in.with_defaults();
  TUNABLEOP_RETURN_IF_ERROR(p.validate());
  // The Debian build uses 32-bit BLAS integers (not ILP64).
  for (int64_t v : {p.m, p.n, p.k, p.lda, p.ldb, p.ldc})
    if (v > INT_MAX) return Status::unsupported(fmt::format("OpenBLAS: dimension {} exceeds 32-bit BLAS int", v));
  return Status::ok();
}

Status OpenblasLibrary::gemm(const GemmParams& in, const GemmOperands& ops, int threads) {
  TUNABLEOP_RETURN_IF_ERROR(supports(in));
  const GemmParams p = in.with_defaults();
  if (p.m == 0 || p.n == 0) return Status::ok();
  if (ops.c == nullptr || (p.k > 0 && (ops.a == nullptr || ops.b == nullptr)))
    return Status::invalid_argument("OpenBLAS gemm: null operand pointer");
  const int ta = p.transa == 'N' ? kCblasNoTrans : kCblasTrans;
  const int tb = p.transb == 'N' ? kCblasNoTrans : kCblasTrans;
  const int m = int(p.m), n = int(p.n), k = int(p.k);
  const int lda = int(p.lda), ldb = int(p.ldb), ldc = int(p.ldc);

  std::lock_guard lock(mu_);
  const int previous = get_num_threads_();
  const int previous_omp = omp_get_max_threads_ ? omp_get_max_threads_() : 0;
  const bool change = threads > 0 && threads != previous;
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
