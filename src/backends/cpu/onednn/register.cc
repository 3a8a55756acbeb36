#include "backends/cpu/onednn/register.h"

#include <memory>

#include "backends/cpu/onednn/onednn_library.h"
#include "backends/cpu/shared/provider_registration.h"
#include "tunableop/cpu_info.h"

namespace tunableop {

static_assert(cpu_shared::HasWorkspace<OnednnLibrary>, "Gemm_Onednn candidates ask for the fp32 copy of C (bf16)");

void register_onednn(Registry& r) { register_onednn_from(r, OnednnLibrary::default_paths()); }

void register_onednn_from(Registry& r, const std::vector<std::string>& paths) {
  std::shared_ptr<OnednnLibrary> lib = cpu_shared::open_or_note<OnednnLibrary>(r, paths, "oneDNN", "Gemm_Onednn");
  if (lib == nullptr) return;
  // Version and instruction set: ONEDNN_MAX_CPU_ISA can lower the latter, and every timing.
  r.add_validator({"ONEDNN_VERSION", [lib] { return lib->version() + " " + lib->isa(); }, DeviceKind::kCpu});
  if (!lib->controls_threads()) {
    // TBB / threadpool builds choose their own thread count; one honestly named candidate.
    r.add_note("oneDNN " + lib->version() + " uses the " + lib->cpu_runtime() +
               " runtime: one Gemm_Onednn candidate with the runtime's own thread count");
    r.list<GemmCandidate>().push_back(cpu_shared::make_candidate(lib, "Gemm_Onednn", 0, 0));
    return;
  }
  cpu_shared::add_thread_candidates(
      r, lib, "Gemm_Onednn", lib->sequential() ? std::vector<int>{1} : cpu_shared::thread_counts(cpu_core_count()));
}

}  // namespace tunableop
