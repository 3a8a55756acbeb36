// BLIS reached only through its own dlopen handle (RTLD_LOCAL | RTLD_DEEPBIND): BLIS exports
// cblas_sgemm and sgemm_ just like OpenBLAS, so the candidates call BLIS's native typed API
// (bli_sgemm_ex / bli_dgemm_ex) through pointers taken from this handle.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/shared/dynamic_library.h"
#include "tunableop/gemm.h"
#include "tunableop/status.h"

namespace tunableop {

class BlisLibrary : public cpu_shared::LoadedLibrary<BlisLibrary> {
 public:
  static constexpr const char* kName = "BLIS";
  // Where the provider looks, in order: the soname the headers were built for (whatever
  // threading variant the system's alternatives chose), then the path found at configure time.
  static std::vector<std::string> default_paths();
  // open(path), open_first(paths), path() and symbol_file(): see LoadedLibrary. The library is
  // never closed: BLIS keeps thread pools and memory pools alive for the life of the process.

  std::string version() const;    // bli_info_get_version_str(): "0.9.0"
  std::string threading() const;  // "openmp", "pthreads", "openmp+pthreads" or "none"
  // The kernel set BLIS chose for this CPU when it started ("haswell", "skx", ...). It can be
  // forced with BLIS_ARCH_TYPE before BLIS starts, and it changes every timing.
  std::string arch() const;
  // BLIS's global thread setting (bli_thread_get_num_threads; -1 = unset, which BLIS runs as 1).
  int num_threads() const;
  void set_num_threads(int n);  // for tests and callers that manage the global setting

  Status supports(const GemmParams& p) const;
  // C = alpha op(A) op(B) + beta C with `threads` threads. The count travels in a per-call
  // runtime object (rntm_t), so BLIS's global setting and OpenMP's are never touched and
  // concurrent calls need no lock.
  Status gemm(const GemmParams& p, const GemmOperands& ops, int threads) const;

  ~BlisLibrary();

 private:
  friend class cpu_shared::LoadedLibrary<BlisLibrary>;
  explicit BlisLibrary(cpu_shared::DynamicLibrary library);
  Status bind_symbols();

  // The entry points, typed with blis.h's own types; defined in blis_library.cc so that
  // blis.h (tens of thousands of lines of macros) stays out of every other file.
  struct Api;
  std::unique_ptr<Api> api_;
};

}  // namespace tunableop
