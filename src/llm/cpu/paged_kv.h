// The CPU's write into a paged KV cache (kv_cache.h): rope_kv's cache-write side when the
// engine runs with --kv-cache paged. The static cache's write is cpu::store_kv (kernels.h).
#pragma once

#include <cstdint>

#include "llm/kv_cache.h"

namespace tunableop::llm::cpu {

// Copies the k and v heads of each qkv row into this layer's pools at (seqs[r], positions[r]),
// through `table` ([sequence][pages_per_seq]: the cache's own, or a slot pass's); rows at or
// past their sequence's length (seq_lens, padding of a ragged prefill) are skipped, since no page
// holds them.
void store_kv_paged(const float* qkv, int64_t rows, int64_t row_stride, int64_t q_dim, const int32_t* seqs,
                    const int32_t* positions, const int32_t* seq_lens, const PagedKvCache& cache, int64_t layer,
                    const int32_t* table);

}  // namespace tunableop::llm::cpu
