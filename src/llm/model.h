// The one Llama/Gemma forward pass, device-neutral: an Engine over a DeviceKernels. The CPU and
// CUDA factories (cpu/cpu_device.cc, cuda/cuda_device.cc) build their device and hand it here.
#pragma once

#include <memory>

#include "llm/device_kernels.h"
#include "llm/engine.h"

namespace tunableop::llm {

// Fills the defaults of `o` (max_seq 0 -> the model's max_position_embeddings) and checks it
// and the config (`source` names the model in messages). Factories call it before building a
// device, which may size things by max_seq.
Status prepare_engine_options(const ModelConfig& c, const std::string& source, EngineOptions* o);

// The engine over `device`: allocates the activations and the KV cache through it.
StatusOr<std::unique_ptr<Engine>> make_engine(std::unique_ptr<DeviceKernels> device, const EngineOptions& options,
                                              LinearOp::Fn linear, LinearOp::GemmFn gemm,
                                              LinearOp::AttentionFn attention = {});

}  // namespace tunableop::llm
