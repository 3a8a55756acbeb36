// `Default`: the math path on CUDA (gather, S = Q K^T and O = P V through cuBLAS with fp32
// scores, a masked softmax between), every dtype, cache layout and length; the reference the
// fused candidates are held to on the GPU. See math_attention.cc.
#pragma once

#include <cstddef>

#include "ops/attention/candidate.h"

namespace tunableop::cuda {

// The chunks' budgets: the bytes of one chunk's scores and probabilities, and of its gathered keys
// and values (each chunk takes at least one slab). Tests pass small ones to run many chunks.
struct MathBudgets {
  size_t scores = size_t(512) << 20;
  size_t kv = size_t(512) << 20;
};

AttentionCandidate make_math_attention(MathBudgets budgets = {});

}  // namespace tunableop::cuda
