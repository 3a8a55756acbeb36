// FusedLinear on CUDA: the fused decode-projection kernel (fused_gemv.h) in each of its shapes as
// a candidate, "FusedLinear_r<R>_sk<SK>"; Default is the r2_sk1 shape (offered for every kind).
#pragma once

#include "tunableop/registry.h"

namespace tunableop::cuda {

void register_cuda_fused_linear(Registry& r);

}  // namespace tunableop::cuda
