// Every CUDA attention candidate: Default (the math path, math_attention.h), our flash kernels
// (flash_candidates.h) and, where cuDNN's headers were found at build time, cuDNN's fused SDPA
// (cudnn_sdpa.h).
#pragma once

#include <string>
#include <vector>

#include "ops/attention/candidate.h"

namespace tunableop::cuda {

std::vector<AttentionCandidate> cuda_attention_candidates();

// One line per optional source that is missing ("cuDNN SDPA: not built (no cudnn_graph.h)").
std::vector<std::string> cuda_attention_notes();

}  // namespace tunableop::cuda
