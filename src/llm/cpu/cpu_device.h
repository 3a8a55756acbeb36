// The CPU device of the forward pass (fp32; weights used in place, kept alive by the
// shared_ptr). make_cpu_engine builds the model over it; tests wrap it.
#pragma once

#include <cstdint>
#include <memory>

#include "llm/device_kernels.h"
#include "llm/weights.h"

namespace tunableop::llm {

// `max_seq`: positions the RoPE table covers (the engine's max_seq).
std::unique_ptr<DeviceKernels> make_cpu_device(std::shared_ptr<const ModelWeights> weights, int64_t max_seq);

}  // namespace tunableop::llm
