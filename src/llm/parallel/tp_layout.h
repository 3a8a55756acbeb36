// How a Llama/Gemma model splits over the ranks of a tensor-parallel group (Megatron's layout):
//   qkv      column-parallel: rank r holds the q heads [r * heads / W, ...) and the kv heads
//            they read (kv heads split when every rank gets whole groups; otherwise, as with
//            MQA, each rank keeps a copy of the one kv head its query heads share)
//   o        row-parallel: the input columns of the rank's q heads; partial sums all-reduced
//   gate_up  column-parallel: MLP columns [I * r / W, I * (r + 1) / W) of gate and of up
//   down     row-parallel: the same MLP columns as input; partial sums all-reduced
//   lm_head  the vocabulary rows [V * r / W, V * (r + 1) / W), gathered before argmax
//   embedding, norms: replicated (the residual stream is whole on every rank)
// A rank's model is the same forward pass over a "local" config (its heads, kv heads and MLP
// width), so the KV cache splits by kv head with no change to any device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "llm/config.h"
#include "llm/weights.h"
#include "tunableop/status.h"

namespace tunableop::llm {

// Rows [row0, row0 + rows) x columns [col0, col0 + cols) of a row-major tensor `full_cols`
// wide. A shard is a list of blocks stacked by rows.
struct TensorBlock {
  int64_t row0 = 0, rows = 0, col0 = 0, cols = 0, full_cols = 0;
};
int64_t shard_rows(const std::vector<TensorBlock>& blocks);  // rows of the stacked shard
int64_t shard_elements(const std::vector<TensorBlock>& blocks);

// One rank's part of the model.
struct TensorParallelShard {
  int rank = 0, world = 1;
  int64_t q_head0 = 0, q_heads = 0;    // query heads [q_head0, q_head0 + q_heads)
  int64_t kv_head0 = 0, kv_heads = 0;  // kv heads it holds
  int64_t inter0 = 0, inter = 0;       // MLP columns
  int64_t vocab0 = 0, vocab = 0;       // lm_head rows
};

class TensorParallelLayout {
 public:
  // Fails, naming the reason, when the model does not split over `world` ranks (heads not a
  // multiple of world, query groups that straddle ranks, fewer MLP columns than ranks).
  static StatusOr<TensorParallelLayout> make(const ModelConfig& full, int world);

  int world() const { return world_; }
  const ModelConfig& full() const { return full_; }
  const TensorParallelShard& shard(int rank) const { return shards_[size_t(rank)]; }
  // The rank's model: its heads, kv heads and MLP width; hidden size, head_dim, vocabulary and
  // everything else as the full model; lm_head untied (the rank holds its rows explicitly).
  ModelConfig local_config(int rank) const;

  // Blocks of each full tensor (weights.h layouts) that rank r holds, in the order the rank's
  // own fused tensor stacks them.
  std::vector<TensorBlock> wqkv(int rank) const;     // its q rows, then its k rows, then its v rows
  std::vector<TensorBlock> wo(int rank) const;       // every row, its heads' columns
  std::vector<TensorBlock> gate_up(int rank) const;  // its gate rows, then its up rows
  std::vector<TensorBlock> down(int rank) const;     // every row, its MLP columns
  std::vector<TensorBlock> lm_head(int rank) const;  // its vocabulary rows

 private:
  ModelConfig full_;
  int world_ = 1;
  std::vector<TensorParallelShard> shards_;
};

// The blocks of `full` (host, row-major), stacked.
std::vector<float> take_blocks(const std::vector<float>& full, const std::vector<TensorBlock>& blocks);

// Rank r's host weights (local_config(r), lm_head explicit) from the full model's.
ModelWeights shard_weights(const ModelWeights& full, const TensorParallelLayout& layout, int rank);
LayerWeights shard_layer(const LayerWeights& full_layer, const TensorParallelLayout& layout, int rank);

// The same shard with only the shard in memory (a process that holds one rank): from a model
// directory read a layer at a time (load_model_layerwise), or a built-in model's random weights
// generated block by block (the values make_random_weights gives the whole model there).
StatusOr<ModelWeights> load_model_shard(const std::string& dir, const TensorParallelLayout& layout, int rank);
ModelWeights random_model_shard(const TensorParallelLayout& layout, int rank, uint64_t seed, const std::string& name);

}  // namespace tunableop::llm
