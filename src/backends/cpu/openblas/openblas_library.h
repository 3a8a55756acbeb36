// OpenBLAS reached only through its own dlopen handle. OpenBLAS and BLIS export the same
// symbols (cblas_sgemm, sgemm_); loading each with RTLD_LOCAL | RTLD_DEEPBIND and calling
// through dlsym'd pointers is what guarantees that a Gemm_Openblas_* candidate runs OpenBLAS.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/shared/dynamic_library.h"
#include "tunableop/gemm.h"
#include "tunableop/status.h"

namespace tunableop {

class OpenblasLibrary : public cpu_shared::LoadedLibrary<OpenblasLibrary> {
 public:
  static constexpr const char* kName = "OpenBLAS";
  // Where the provider looks, in order: $TUNABLEOP_OPENBLAS_LIBRARY when set, the file chosen
  // when the project was configured (the OpenMP variant when installed), then the soname
  // (whatever variant the system's alternatives chose).
  static std::vector<std::string> default_paths();
  // open(path), open_first(paths), path() and symbol_file(): see LoadedLibrary. The library is
  // never closed: OpenBLAS keeps worker threads that must not lose their code.

  std::string config() const;   // openblas_get_config(): "OpenBLAS 0.3.21 DYNAMIC_ARCH ..."
  std::string version() const;  // "0.3.21", parsed from config()
  std::string core_name() const;
  int parallel_mode() const;      // openblas_get_parallel(): 0 sequential, 1 pthreads, 2 OpenMP
  std::string threading() const;  // parallel_mode() as "serial", "pthreads" or "openmp"
  int num_threads() const;        // openblas_get_num_threads()
  // The most threads a call may use: the build's MAX_THREADS (from config()) or unlimited (0).
  int max_threads() const { return max_threads_; }
  // Sets OpenBLAS's own thread count (process-wide); for tests and callers that manage it. The
  // caller's OpenMP setting stays as it was (the OpenMP build's setter changes it too). That
  // build follows the caller's omp_get_max_threads() at its next call anyway, which is why
  // gemm() sets both for the call.
  void set_num_threads(int n);

  Status supports(const GemmParams& p) const;
  // C = alpha op(A) op(B) + beta C with `threads` threads; the previous thread setting (and
  // the caller's OpenMP setting, for the OpenMP build) is restored before returning.
  Status gemm(const GemmParams& p, const GemmOperands& ops, int threads);

 private:
  friend class cpu_shared::LoadedLibrary<OpenblasLibrary>;
  explicit OpenblasLibrary(cpu_shared::DynamicLibrary library) : LoadedLibrary(std::move(library)) {}
  Status bind_symbols();

  using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                           int);
  using DgemmFn = void (*)(int, int, int, int, int, int, double, const double*, int, const double*, int, double,
                           double*, int);

  SgemmFn sgemm_ = nullptr;
  DgemmFn dgemm_ = nullptr;
  char* (*get_config_)() = nullptr;
  char* (*get_corename_)() = nullptr;
  int (*get_parallel_)() = nullptr;
  int (*get_num_threads_)() = nullptr;
  void (*set_num_threads_)(int) = nullptr;
  // OpenMP build only: openblas_set_num_threads calls omp_set_num_threads, so the caller's
  // OpenMP setting is saved and restored through the same libgomp that OpenBLAS uses.
  int (*omp_get_max_threads_)() = nullptr;
  void (*omp_set_num_threads_)(int) = nullptr;
  int max_threads_ = 0;
  // Serialises set-threads / call / restore: the thread count is one process-wide value.
  mutable std::mutex mu_;
};

}  // namespace tunableop
