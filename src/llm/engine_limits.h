// What an engine will allocate for a model and its options, checked before it allocates: every
// size computed with overflow checks (max_seq, batch and the model's sizes are user input), and on
// the host against this machine's memory. Shared by the CPU and CUDA engines' factories.
#pragma once

#include <cstddef>

#include "llm/config.h"
#include "llm/engine.h"
#include "tunableop/status.h"

namespace tunableop::llm {

// Ok when the buffers of a full prefill (max_batch sequences of max_seq tokens: KV cache, RoPE
// table, logits, per-token activations, attention scores) can be counted in 64 bits, when
// pad_multiple <= max_seq (a larger one can never fit a prompt), and, with `host_memory`, when
// what is allocated up front (KV cache, RoPE table, logits) fits this machine's memory.
// `elem_bytes`: bytes per activation and cache element. `options.max_seq` must be set already.
Status check_engine_fits(const ModelConfig& c, const EngineOptions& options, size_t elem_bytes, bool host_memory);

// A run on the host, before the engine allocates: check_engine_fits, then the whole first
// prefill (max_batch prompts of `prompt_tokens` tokens: the KV cache, RoPE table, logits, every
// prompt token's activations and attention's scores) plus `resident_bytes` still to allocate
// besides (0 when the weights are loaded already) against the memory available now
// (MemAvailable, the cgroup's room). Without it
// `llm --batch 1048576` passed every check and was OOM-killed after 38 s (issue 33).
// ResourceExhausted names the sizes. `ranks_here` > 1: c is one tensor-parallel rank's model
// (TensorParallelLayout::local_config) and that many ranks of the same size share this host's
// memory (`mpirun -np N ... --tp N` on one machine), so the need is theirs together.
Status check_run_fits(const ModelConfig& c, const EngineOptions& options, int64_t prompt_tokens, size_t elem_bytes,
                      uint64_t resident_bytes, int ranks_here = 1);

}  // namespace tunableop::llm
