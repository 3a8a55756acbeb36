#include "backends/cuda/attention/candidates.h"

#include "backends/cuda/attention/decode_candidates.h"
#include "backends/cuda/attention/decode_cluster_candidates.h"
#include "backends/cuda/attention/decode_stream_candidates.h"
#include "backends/cuda/attention/flash_candidates.h"
#include "backends/cuda/attention/math_attention.h"
#ifdef TUNABLEOP_HAVE_CUDNN_HEADERS
#include "backends/cuda/attention/cudnn_sdpa.h"
#include "backends/cuda/attention/cudnn_sdpa_split.h"
#endif

namespace tunableop::cuda {

std::vector<AttentionCandidate> cuda_attention_candidates() {
  // Default (the math path) first: the fallback and the numerics reference.
  std::vector<AttentionCandidate> out{make_math_attention()};
  for (auto& c : flash_attention_candidates()) out.push_back(std::move(c));
  for (auto& c : decode_attention_candidates()) out.push_back(std::move(c));
  for (auto& c : decode_cluster_candidates()) out.push_back(std::move(c));
  for (auto& c : decode_stream_candidates()) out.push_back(std::move(c));
#ifdef TUNABLEOP_HAVE_CUDNN_HEADERS
  for (auto& c : cudnn_sdpa_candidates()) out.push_back(std::move(c));
  for (auto& c : cudnn_sdpa_split_candidates()) out.push_back(std::move(c));
#endif
  return out;
}

std::vector<std::string> cuda_attention_notes() {
#ifdef TUNABLEOP_HAVE_CUDNN_HEADERS
  return {"cuDNN SDPA: " + cudnn_sdpa_availability()};
#else
  return {"cuDNN SDPA: not built (cudnn_graph.h not found at configure time)"};
#endif
}

}  // namespace tunableop::cuda
