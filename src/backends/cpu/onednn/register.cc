#include "backends/cpu/onednn/register.h"

#include <algorithm>
#include <memory>

#include "backends/cpu/onednn/onednn_library.h"
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

GemmCandidate make_candidate(std::shared_ptr<OnednnLibrary> lib, std::string name, int threads, int min_effort) {
  GemmCandidate c;
  c.name = std::move(name);
  c.device = DeviceKind::kCpu;
  c.min_effort = min_effort;
  c.supports = [lib](const GemmParams& p) { return lib->supports(p); };
  c.run = [lib, threads](const GemmParams& p, const GemmOperands& ops) { return lib->gemm(p, ops, threads); };
  c.workspace_bytes = [](const GemmParams& p) { return OnednnLibrary::workspace_bytes(p.with_defaults()); };
  return c;
}

}  // namespace

void register_onednn(Registry& r) { register_onednn_from(r, OnednnLibrary::default_paths()); }

void register_onednn_from(Registry& r, const std::vector<std::string>& paths) {
  auto opened = OnednnLibrary::open_first(paths);
  if (!opened.is_ok()) {
    r.add_note("oneDNN provider off (Gemm_Onednn_* not registered): " + opened.status().message());
    return;
  }
  std::shared_ptr<OnednnLibrary> lib = *opened;
  // Version and instruction set: ONEDNN_MAX_CPU_ISA can lower the latter, and every timing.
  r.add_validator({"ONEDNN_VERSION", [lib] { return lib->version() + " " + lib->isa(); }, DeviceKind::kCpu});
  auto& list = r.list<GemmCandidate>();
  if (!lib->controls_threads()) {
    // TBB / threadpool builds choose their own thread count; one honestly named candidate.
    r.add_note("oneDNN " + lib->version() + " uses the " + lib->cpu_runtime() +
               " runtime: one Gemm_Onednn candidate with the runtime's own thread count");
    list.push_back(make_candidate(lib, "Gemm_Onednn", 0, 0));
    return;
  }
  const std::vector<int> counts = lib->sequential() ? std::vector<int>{1} : thread_counts(cpu_core_count());
  for (int threads : counts)
    list.push_back(
        make_candidate(lib, "Gemm_Onednn_t" + std::to_string(threads), threads, threads == counts.front() ? 0 : 1));
}

}  // namespace tunableop
