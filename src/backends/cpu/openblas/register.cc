#include "backends/cpu/openblas/register.h"

#include <algorithm>
#include <memory>

#include "backends/cpu/openblas/openblas_library.h"
#include "core/cpu_info.h"
#include "tunableop/gemm.h"

namespace tunableop {

namespace {

// 1, half and all of the cores this process may use, capped by the build's MAX_THREADS so
// that a name never promises more threads than the library will run; largest first, since
// the tuner prunes against the best so far and all cores usually wins big problems.
std::vector<int> thread_counts(int cores, int library_max) {
  if (library_max > 0) cores = std::min(cores, library_max);
  cores = std::max(cores, 1);
  std::vector<int> counts = {cores, std::max(1, cores / 2), 1};
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

}  // namespace

void register_openblas(Registry& r) { register_openblas_from(r, OpenblasLibrary::default_paths()); }

void register_openblas_from(Registry& r, const std::vector<std::string>& paths) {
  auto opened = OpenblasLibrary::open_first(paths);
  if (!opened.is_ok()) {
    r.add_note("OpenBLAS provider off (Gemm_Openblas_* not registered): " + opened.status().message());
    return;
  }
  std::shared_ptr<OpenblasLibrary> lib = *opened;
  // Version and kernel set: OPENBLAS_CORETYPE can switch the latter, and with it every timing.
  r.add_validator({"OPENBLAS_VERSION", [lib] { return lib->version() + " " + lib->core_name(); }, DeviceKind::kCpu});
  const std::vector<int> counts = thread_counts(cpu_core_count(), lib->max_threads());
  for (int threads : counts) {
    GemmCandidate c;
    c.name = "Gemm_Openblas_t" + std::to_string(threads);
    c.device = DeviceKind::kCpu;
    // All cores is the library's usual default: offered even at the lowest search effort.
    c.min_effort = threads == counts.front() ? 0 : 1;
    c.supports = [lib](const GemmParams& p) { return lib->supports(p); };
    c.run = [lib, threads](const GemmParams& p, const GemmOperands& ops) { return lib->gemm(p, ops, threads); };
    c.workspace_bytes = [](const GemmParams&) { return size_t(0); };
    r.list<GemmCandidate>().push_back(std::move(c));
  }
}

}  // namespace tunableop
