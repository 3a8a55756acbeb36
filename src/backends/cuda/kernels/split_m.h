// Split-M: cuBLAS(Lt) runs an odd m (50257, 32001: vocabulary sizes) on a slow path even when
// ldc is padded (measured on H200: m = 50257 x 2048 x 4096 takes 8.8 ms with ldc = m and 8.9 ms
// with ldc padded to 50304, against 1.23 ms for m = 50304). These candidates run the rows up to
// the last multiple of 64 as one aligned GEMM (a sub-matrix of A: no copy) and the few
// remaining rows as a second small GEMM; the PadC variant also writes through a padded C.
#pragma once

#include <string>
#include <vector>

#include "tunableop/gemm.h"

namespace tunableop::cuda {

struct SplitMVariant {
  bool pad_c = false;  // compute into C with ldc rounded up to `granule`, then copy out
  int granule = 64;
};

// "Gemm_SplitM_g64", "Gemm_SplitM_PadC_g64"
std::string split_m_name(const SplitMVariant& v);
std::vector<GemmCandidate> make_split_m_candidates();

}  // namespace tunableop::cuda
