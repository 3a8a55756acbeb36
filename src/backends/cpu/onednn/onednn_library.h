// oneDNN reached only through its own dlopen handle (RTLD_LOCAL | RTLD_DEEPBIND). Its BLAS-like
// entry points are row-major; the column-major problem C = op(A) op(B) is computed as the
// row-major C^T = op(B)^T op(A)^T, which is the same memory with A and B swapped.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/shared/dynamic_library.h"
#include "tunableop/gemm.h"
#include "tunableop/status.h"

namespace tunableop {

class OnednnLibrary : public cpu_shared::LoadedLibrary<OnednnLibrary> {
 public:
  static constexpr const char* kName = "oneDNN";
  // Where the provider looks, in order: the soname of the major version the headers describe,
  // then the path found when the project was configured.
  static std::vector<std::string> default_paths();
  // open(path), open_first(paths), path() and symbol_file(): see LoadedLibrary. The library is
  // never closed: oneDNN keeps JIT-compiled kernels and caches for the life of the process.

  std::string version() const;      // dnnl_version(): "2.6.3"
  std::string cpu_runtime() const;  // "omp", "seq", "tbb", "threadpool"
  // The instruction set oneDNN's kernels use ("avx512_core_amx", ...); ONEDNN_MAX_CPU_ISA can
  // lower it, and with it every timing.
  std::string isa() const;
  // True when the thread count can be chosen per call (OpenMP runtime) or is fixed at 1 (seq).
  bool controls_threads() const;
  bool sequential() const;
  // bf16 x bf16 -> fp32 GEMM exists and the CPU has native bf16 (avx512_bf16 or AMX); oneDNN
  // would otherwise emulate it slowly, which is not a candidate worth timing.
  bool has_bf16() const { return bf16_native_; }
  // omp_get_max_threads() of the OpenMP runtime oneDNN uses, for this calling thread.
  int num_threads() const;

  Status supports(const GemmParams& p) const;
  // fp32 (dnnl_sgemm) or bf16 (dnnl_gemm_bf16bf16f32 into an fp32 copy of C, rounded back).
  // `threads` > 0 sets this thread's OpenMP count for the call and restores it afterwards;
  // that setting is per calling thread, so concurrent calls need no lock.
  Status gemm(const GemmParams& p, const GemmOperands& ops, int threads) const;
  // Scratch needed by gemm(): the fp32 copy of one C matrix for bf16, else 0.
  static size_t workspace_bytes(const GemmParams& p);

  ~OnednnLibrary();

 private:
  friend class cpu_shared::LoadedLibrary<OnednnLibrary>;
  explicit OnednnLibrary(cpu_shared::DynamicLibrary library);
  Status bind_symbols();
  Status gemm_bf16(const GemmParams& p, const GemmOperands& ops) const;

  // Entry points typed with dnnl.h's types; defined in onednn_library.cc.
  struct Api;
  std::unique_ptr<Api> api_;
  bool bf16_native_ = false;
};

}  // namespace tunableop
