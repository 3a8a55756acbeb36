// cuDNN's fused SDPA forward as an attention candidate (`Attn_Cudnn_Sdpa`), cuDNN 9 loaded at
// run time: $TUNABLEOP_CUDNN_LIBRARY, else libcudnn.so.9 on the loader's path. Contiguous
// caches only (the engine's layout, read in place); paged and per-sequence lengths are not
// offered. Built only where the cuDNN headers were found (TUNABLEOP_HAVE_CUDNN_HEADERS).
#pragma once

#include <string>
#include <vector>

#include "ops/attention/candidate.h"

namespace tunableop::cuda {

// "cuDNN 91900 from libcudnn.so.9", or why cuDNN is not available.
std::string cudnn_sdpa_availability();

std::vector<AttentionCandidate> cudnn_sdpa_candidates();

}  // namespace tunableop::cuda
