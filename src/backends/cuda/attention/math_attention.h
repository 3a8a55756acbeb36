// `Default`: the math path on CUDA (gather, S = Q K^T and O = P V through cuBLAS with fp32
// scores, a masked softmax between), every dtype, cache layout and length; the reference the
// fused candidates are held to on the GPU. See math_attention.cc.
#pragma once

#include "ops/attention/candidate.h"

namespace tunableop::cuda {

AttentionCandidate make_math_attention();

}  // namespace tunableop::cuda
