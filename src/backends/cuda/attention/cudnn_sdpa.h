// cuDNN's fused SDPA forward as attention candidates, cuDNN 9 loaded at run time:
// $TUNABLEOP_CUDNN_LIBRARY, else libcudnn.so.9 on the loader's path. `Attn_Cudnn_Sdpa` runs the
// first engine configuration of cuDNN's heuristics (mode A) that finalises; for problems of 128
// queries or more (prefill), `Attn_Cudnn_Sdpa_a1`.._a3` run mode A's next configurations and
// `_f0`, `_f1` the fallback list's first ones that mode A does not offer, `_v0`.._v3` neighbours of
// mode A's first (one knob one stride off its value), each unsupported at run
// time where the problem has no such configuration or its plan does not build, so the tuner times
// cuDNN's alternatives (issue 12: Gemma-2B's prefill attention). TUNABLEOP_CUDNN_SDPA_LOG=1 prints
// each problem's configurations (tags "eng<index>_k<knob>v<value>...") and each plan built.
// Contiguous caches only (the engine's layout, read in place); paged and per-sequence lengths
// are not offered. Built only where the cuDNN headers were found (TUNABLEOP_HAVE_CUDNN_HEADERS).
#pragma once

#include <string>
#include <vector>

#include "ops/attention/candidate.h"

namespace tunableop::cuda {

// "cuDNN 91900 from libcudnn.so.9", or why cuDNN is not available.
std::string cudnn_sdpa_availability();

std::vector<AttentionCandidate> cudnn_sdpa_candidates();

// One SDPA call with cuDNN's own pick (Attn_Cudnn_Sdpa's configuration), for candidates built
// from several calls (cudnn_sdpa_split.h). `stats`, where not null, receives each query row's
// log-sum-exp of its scaled, masked scores (natural log, fp32, [b][heads][q_len]): what merging
// two partial attentions of the same rows needs. The workspace holds cudnn_sdpa_workspace's bytes.
struct CudnnSdpaCall {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  float* stats = nullptr;
  void* workspace = nullptr;
  void* stream = nullptr;  // cudaStream_t
};
Status cudnn_sdpa_supports(const AttentionParams& p);
StatusOr<size_t> cudnn_sdpa_workspace(const AttentionParams& p, bool stats);
Status cudnn_sdpa_run(const AttentionParams& p, const CudnnSdpaCall& call);

}  // namespace tunableop::cuda
