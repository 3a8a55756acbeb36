// Our own CPU GEMM kernels as tunable candidates: "Default" first (the fallback for every
// problem), then blocked variants per ISA / block sizes / thread count and a skinny path.
#pragma once

#include "tunableop/registry.h"

namespace tunableop {

// Appends this family's GemmCandidates (DeviceKind::kCpu) to r.list<GemmCandidate>(). Only
// instruction sets this CPU supports are offered.
void register_cpu_kernels(Registry& r);

}  // namespace tunableop

namespace tunableop {

// GemmAndBias on the CPU: appends "Default" (the CPU GEMM Default found in
// r.list<GemmCandidate>(), then a bias + activation pass) to r.list<GemmAndBiasCandidate>().
// Does nothing when no CPU GEMM Default is registered yet.
void register_cpu_gemm_and_bias(Registry& r);

}  // namespace tunableop
