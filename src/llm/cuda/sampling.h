// Sampling on the GPU (issue 26): llm/sampling.h's algorithm, one block per row of logits, so
// that a sampled decode step copies one token per sequence to the host instead of the logits
// (Llama-3's 128k vocabulary: 256 KB a row in bf16). Plain C++17 launcher, like kernels.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "llm/cuda/kernels.h"
#include "llm/sampling_row.h"

namespace tunableop::llm::cuda {

// out[r] = the token row r of `logits` ([rows][vocab], E) gives under params[r] (device
// memory), or -1 where the row holds a NaN or +inf (the engine reports it).
cudaError_t sample_rows(Elem e, const void* logits, int64_t rows, int64_t vocab, const SamplingRow* params,
                        int32_t* out, cudaStream_t s);

}  // namespace tunableop::llm::cuda
