#include "backends/cpu/openblas/register.h"

#include <memory>

#include "backends/cpu/openblas/openblas_library.h"
#include "backends/cpu/shared/provider_registration.h"
#include "tunableop/cpu_info.h"

namespace tunableop {

void register_openblas(Registry& r) { register_openblas_from(r, OpenblasLibrary::default_paths()); }

void register_openblas_from(Registry& r, const std::vector<std::string>& paths) {
  std::shared_ptr<OpenblasLibrary> lib =
      cpu_shared::open_or_note<OpenblasLibrary>(r, paths, "OpenBLAS", "Gemm_Openblas");
  if (lib == nullptr) return;
  // Version and kernel set: OPENBLAS_CORETYPE can switch the latter, and with it every timing.
  r.add_validator({"OPENBLAS_VERSION", [lib] { return lib->version() + " " + lib->core_name(); }, DeviceKind::kCpu});
  // Capped by the build's MAX_THREADS, so that a name never promises more than OpenBLAS runs.
  cpu_shared::add_thread_candidates(r, lib, "Gemm_Openblas",
                                    cpu_shared::thread_counts(cpu_core_count(), lib->max_threads()));
}

}  // namespace tunableop
