#include "backends/cpu/blis/blis_library.h"

#include <blis.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <climits>
#include <cstdlib>
#include <map>
#include <mutex>

namespace tunableop {

namespace {

// RTLD_DEEPBIND makes BLIS resolve its own symbols inside itself first, even when the process
// already exports identically named ones (OpenBLAS's sgemm_, a program linked with -lblas).
// Sanitizer runtimes refuse DEEPBIND, so those builds rely on RTLD_LOCAL alone.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kOpenFlags = RTLD_NOW | RTLD_LOCAL;
#else
constexpr int kOpenFlags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#endif

template <class Fn>
Status bind_symbol(void* handle, const std::string& path, const char* name, Fn& fn) {
  dlerror();
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (fn == nullptr) return Status::not_found(fmt::format("{} has no symbol {} (is it BLIS?)", path, name));
  return Status::ok();
}

std::mutex& cache_mutex() {
  static std::mutex mu;
  return mu;
}
// One object per loaded file, keyed by the dlopen handle; never destroyed (see open()).
std::map<void*, std::shared_ptr<BlisLibrary>>& cache() {
  static auto* c = new std::map<void*, std::shared_ptr<BlisLibrary>>();
  return *c;
}

template <class T>
T* at(const void* base, int64_t offset) {
  return base ? const_cast<T*>(static_cast<const T*>(base)) + offset : nullptr;
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

BlisLibrary::BlisLibrary() : api_(std::make_unique<Api>()) {}
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

StatusOr<std::shared_ptr<BlisLibrary>> BlisLibrary::open(const std::string& path) {
  std::lock_guard lock(cache_mutex());
  dlerror();
  void* handle = dlopen(path.c_str(), kOpenFlags);
  if (handle == nullptr) {
    const char* err = dlerror();
    return Status::not_found(fmt::format("cannot load {}: {}", path, err ? err : "unknown dlopen error"));
  }
  auto it = cache().find(handle);
  if (it != cache().end()) return it->second;
  std::shared_ptr<BlisLibrary> lib(new BlisLibrary());
  lib->path_ = path;
  lib->handle_ = handle;
  Status st = lib->bind_symbols();
  if (!st.is_ok()) {
    dlclose(handle);  // not BLIS: nothing of it ran, so closing is safe
    return st;
  }
  cache().emplace(handle, lib);
  return lib;
}

StatusOr<std::shared_ptr<BlisLibrary>> BlisLibrary::open_first(const std::vector<std::string>& paths) {
  std::string tried;
  for (const auto& path : paths) {
    auto lib = open(path);
    if (lib.is_ok()) return lib;
    tried += (tried.empty() ? "" : "; ") + lib.status().message();
  }
  return Status::not_found(tried.empty() ? std::string("no BLIS path to try") : tried);
}

Status BlisLibrary::bind_symbols() {
  TUNABLEOP_RETURN_IF_ERROR(bind_symbol(handle_, path_, "bli_sgemm_ex", api_->sgemm_ex));
  TUNABLEOP_RETURN_IF_ERROR(bind_symbol(handle_, path_, "bli_dgemm_ex", api_->dgemm_ex));
  TUNABLEOP_RETURN_IF_ERROR(bind_symbol(handle_, path_, "bli_info_get_version_str", api_->version_str));
  TUNABLEOP_RETURN_IF_ERROR(bind_symbol(handle_, path_, "bli_info_get_enable_openmp", api_->enable_openmp));
  TUNABLEOP_RETURN_IF_ERROR(bind_symbol(handle_, path_, "bli_info_get_enable_pthreads", api_->enable_pthreads));
  TUNABLEOP_RETURN_IF_ERROR(bind_symbol(handle_, path_, "bli_thread_get_num_threads", api_->get_num_threads));
  TUNABLEOP_RETURN_IF_ERROR(bind_symbol(handle_, path_, "bli_thread_set_num_threads", api_->set_num_threads));
  TUNABLEOP_RETURN_IF_ERROR(bind_symbol(handle_, path_, "bli_init", api_->init));
  TUNABLEOP_RETURN_IF_ERROR(bind_symbol(handle_, path_, "bli_arch_query_id", api_->arch_query_id));
  TUNABLEOP_RETURN_IF_ERROR(bind_symbol(handle_, path_, "bli_arch_string", api_->arch_string));
  return Status::ok();
}

std::string BlisLibrary::symbol_file(const char* symbol) const {
  void* addr = dlsym(handle_, symbol);
  Dl_info info{};
  if (addr == nullptr || dladdr(addr, &info) == 0 || info.dli_fname == nullptr) return "";
  char resolved[PATH_MAX];
  return realpath(info.dli_fname, resolved) ? std::string(resolved) : std::string(info.dli_fname);
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
  const GemmParams p = in.with_defaults();
  if (p.m == 0 || p.n == 0) return Status::ok();
  if (ops.c == nullptr || (p.k > 0 && (ops.a == nullptr || ops.b == nullptr)))
    return Status::invalid_argument("BLIS gemm: null operand pointer");
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
      api_->sgemm_ex(ta, tb, p.m, p.n, p.k, &alpha, at<float>(ops.a, b * p.stride_a), 1, p.lda,
                     at<float>(ops.b, b * p.stride_b), 1, p.ldb, &beta, at<float>(ops.c, b * p.stride_c), 1, p.ldc,
                     nullptr, &rntm);
    } else {
      double alpha = p.alpha, beta = p.beta;
      api_->dgemm_ex(ta, tb, p.m, p.n, p.k, &alpha, at<double>(ops.a, b * p.stride_a), 1, p.lda,
                     at<double>(ops.b, b * p.stride_b), 1, p.ldb, &beta, at<double>(ops.c, b * p.stride_c), 1, p.ldc,
                     nullptr, &rntm);
    }
  }
  return Status::ok();
}

}  // namespace tunableop
