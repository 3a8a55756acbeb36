#include "backends/cpu/blis/register.h"

#include <algorithm>
#include <memory>

#include "backends/cpu/blis/blis_library.h"
#include "core/cpu_info.h"
#include "tunableop/gemm.h"

namespace tunableop {

namespace {

// All, half and one of the cores this process may use, deduplicated; largest first, since the
// tuner prunes against the best so far and all cores usually wins big problems.
std::vector<int> thread_counts(int cores) {
  cores = std::max(cores, 1);
  std::vector<int> counts = {cores, std::max(1, cores / 2), 1};
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

}  // namespace

void register_blis(Registry& r) { register_blis_from(r, BlisLibrary::default_paths()); }

void register_blis_from(Registry& r, const std::vector<std::string>& paths) {
  auto opened = BlisLibrary::open_first(paths);
  if (!opened.is_ok()) {
    r.add_note("BLIS provider off (Gemm_Blis_* not registered): " + opened.status().message());
    return;
  }
  std::shared_ptr<BlisLibrary> lib = *opened;
  // Version and kernel set: BLIS_ARCH_TYPE can switch the latter, and with it every timing.
  r.add_validator({"BLIS_VERSION", [lib] { return lib->version() + " " + lib->arch(); }, DeviceKind::kCpu});
  // A BLIS built without threading runs every call on one thread: only t1 is honest.
  const std::vector<int> counts = lib->threading() == "none" ? std::vector<int>{1} : thread_counts(cpu_core_count());
  for (int threads : counts) {
    GemmCandidate c;
    c.name = "Gemm_Blis_t" + std::to_string(threads);
    c.device = DeviceKind::kCpu;
    c.min_effort = threads == counts.front() ? 0 : 1;
    c.supports = [lib](const GemmParams& p) { return lib->supports(p); };
    c.run = [lib, threads](const GemmParams& p, const GemmOperands& ops) { return lib->gemm(p, ops, threads); };
    c.workspace_bytes = [](const GemmParams&) { return size_t(0); };
    r.list<GemmCandidate>().push_back(std::move(c));
  }
}

}  // namespace tunableop
