#include "backends/cpu/blis/register.h"

#include <memory>

#include "backends/cpu/blis/blis_library.h"
#include "backends/cpu/shared/provider_registration.h"
#include "tunableop/cpu_info.h"

namespace tunableop {

void register_blis(Registry& r) { register_blis_from(r, BlisLibrary::default_paths()); }

void register_blis_from(Registry& r, const std::vector<std::string>& paths) {
  std::shared_ptr<BlisLibrary> lib = cpu_shared::open_or_note<BlisLibrary>(r, paths, "BLIS", "Gemm_Blis");
  if (lib == nullptr) return;
  // Version and kernel set: BLIS_ARCH_TYPE can switch the latter, and with it every timing.
  r.add_validator({"BLIS_VERSION", [lib] { return lib->version() + " " + lib->arch(); }, DeviceKind::kCpu});
  // A BLIS built without threading runs every call on one thread: only t1 is honest.
  cpu_shared::add_thread_candidates(
      r, lib, "Gemm_Blis",
      lib->threading() == "none" ? std::vector<int>{1} : cpu_shared::thread_counts(cpu_core_count()));
}

}  // namespace tunableop
