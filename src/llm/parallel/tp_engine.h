// The tensor-parallel engine: one process, one host thread per rank, each rank an ordinary
// engine (model.cc over its own device) holding its shard of the model (tp_layout.h), joined by
// an all-reduce communicator (tunableop/all_reduce.h) after every row-parallel projection and
// for the lm_head's vocabulary shards. Every rank computes the same logits, so every rank picks
// the same next token; the engine checks that they do. docs/parallel.md has the whole design.
#pragma once

#include <memory>
#include <vector>

#include "llm/device_kernels.h"
#include "llm/engine.h"
#include "llm/parallel/tp_layout.h"
#include "llm/random_model.h"
#include "tunableop/all_reduce.h"
#include "tunableop/context.h"

namespace tunableop::llm {

// CPU ranks (fp32) as host threads: contexts.size() ranks, rank r's GEMMs through contexts[r]
// (entries may repeat: one CPU context can serve every rank). The all-reduce decisions are
// contexts[0]'s.
StatusOr<std::unique_ptr<Engine>> make_cpu_tp_engine(std::shared_ptr<const ModelWeights> weights, EngineOptions options,
                                                     const std::vector<Context*>& contexts);

// GPU ranks: rank r on contexts[r]'s GPU (distinct GPUs), decode captured as a CUDA graph per
// GPU, all-reduce through NCCL or our peer-memory kernels as tuned (contexts[0] decides and
// keeps those results). Unsupported in builds without CUDA or with fewer GPUs.
StatusOr<std::unique_ptr<Engine>> make_cuda_tp_engine(const ModelSpec& spec, uint64_t seed, int64_t layers,
                                                      EngineOptions options, const std::vector<Context*>& contexts);

// One rank's CUDA device (cuda/cuda_device.cc): the blocks of the model that `layout` gives
// rank `rank`, generated on its GPU (built-in models) or from `host` for a model directory: the
// full model's host weights, cut here, or the rank's shard alone (load_model_shard). `options`
// are prepared for the full model.
StatusOr<std::unique_ptr<DeviceKernels>> make_cuda_tp_device(const ModelSpec& spec, uint64_t seed,
                                                             const EngineOptions& options, Context& ctx,
                                                             std::shared_ptr<const TensorParallelLayout> layout,
                                                             int rank, std::shared_ptr<const ModelWeights> host);

// What rank r's device needs to take part in tensor parallelism over `comm`: its vocabulary
// rows and the all-reduce through the op (ctx: the rank's context; rank 0's decides).
TensorParallelRank rank_parallelism(const TensorParallelLayout& layout, int r, Communicator& comm, Context& ctx,
                                    DeviceKernels& dev);

}  // namespace tunableop::llm
