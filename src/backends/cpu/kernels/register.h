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

// ScaledGemm on the CPU: appends "Default" (fp8 A and B widened to fp32, the CPU GEMM Default
// in fp32, then scales, bias and rounding in one pass) to r.list<ScaledGemmCandidate>(). Does
// nothing when no CPU GEMM Default is registered yet.
void register_cpu_scaled_gemm(Registry& r);

}  // namespace tunableop
