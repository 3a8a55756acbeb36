// Experiment knobs of the cluster decode launches (decode_cluster_*, decode_stream_*), read once
// from the environment; unset, the launches are as the candidates name them. For the kernel lab
// (bench/attention/attention_lab) only: a kept setting becomes a candidate of its own.
//   TUNABLEOP_DECODE_CLUSTER_POLICY=spread|balance: cudaLaunchAttributeClusterSchedulingPolicyPreference
//     (spread: a cluster's blocks on distinct SMs).
//   TUNABLEOP_DECODE_SMEM_FLOOR_KB=<n>: at least n KB of dynamic shared memory a block, so at most
//     227 / n blocks share an SM.
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

namespace tunableop::cuda {

inline int decode_cluster_policy_knob() {  // 0: not set
  static const int v = [] {
    const char* s = std::getenv("TUNABLEOP_DECODE_CLUSTER_POLICY");
    if (!s) return 0;
    if (!std::strcmp(s, "spread")) return int(cudaClusterSchedulingPolicySpread);
    if (!std::strcmp(s, "balance")) return int(cudaClusterSchedulingPolicyLoadBalancing);
    return 0;
  }();
  return v;
}

inline int decode_smem_floor_knob() {  // bytes, 0: not set
  static const int v = [] {
    const char* s = std::getenv("TUNABLEOP_DECODE_SMEM_FLOOR_KB");
    const long kb = s ? std::strtol(s, nullptr, 10) : 0;
    return kb > 0 && kb <= 227 ? int(kb) * 1024 : 0;
  }();
  return v;
}

}  // namespace tunableop::cuda
