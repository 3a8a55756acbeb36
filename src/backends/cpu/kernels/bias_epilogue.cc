// GemmAndBias on the CPU: "Default" is our CPU GEMM Default (beta 0) followed by one bias +
// activation pass over C. The GEMM's own tuning picks its kernels; a fused epilogue would save
// one pass over C, which matters little next to O(mnk).
#include "backends/cpu/kernels/register.h"
#include "ops/gemm_and_bias/reference.h"
#include "tunableop/gemm_and_bias.h"

namespace tunableop {

void register_cpu_gemm_and_bias(Registry& r) {
  const GemmCandidate* gemm_default = nullptr;
  for (const auto& c : r.list<GemmCandidate>())
    if (c.device == DeviceKind::kCpu && c.name == "Default") gemm_default = &c;
  if (!gemm_default) return;
  GemmAndBiasCandidate d;
  d.name = "Default";
  d.device = DeviceKind::kCpu;
  d.supports = [supports = gemm_default->supports](const GemmAndBiasParams& p) { return supports(p.gemm); };
  d.workspace_bytes = [](const GemmAndBiasParams&) { return size_t(0); };
  d.run = [run = gemm_default->run](const GemmAndBiasParams& p, const GemmAndBiasOperands& o) -> Status {
    TUNABLEOP_RETURN_IF_ERROR(run(p.gemm, GemmOperands{o.a, o.b, o.c, o.stream}));
    bias_activation_host(p, o.c, o.bias);
    return Status::ok();
  };
  d.info = {"tunableop", "default + bias pass", gemm_default->info.details};
  r.list<GemmAndBiasCandidate>().push_back(std::move(d));
}

}  // namespace tunableop
