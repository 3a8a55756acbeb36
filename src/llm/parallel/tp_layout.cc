#include "llm/parallel/tp_layout.h"

#include <string>

#include "llm/random_model.h"

namespace tunableop::llm {

int64_t shard_rows(const std::vector<TensorBlock>& blocks) {
  int64_t n = 0;
  for (const TensorBlock& b : blocks) n += b.rows;
  return n;
}

int64_t shard_elements(const std::vector<TensorBlock>& blocks) {
  int64_t n = 0;
  for (const TensorBlock& b : blocks) n += b.rows * b.cols;
  return n;
}

StatusOr<TensorParallelLayout> TensorParallelLayout::make(const ModelConfig& c, int world) {
  auto bad = [&](const std::string& why) {
    return Status::invalid_argument("tensor parallelism over " + std::to_string(world) + " ranks: " + why);
  };
  if (world < 1) return bad("needs at least one rank");
  if (c.num_heads % world != 0)
    return bad("the model's " + std::to_string(c.num_heads) + " attention heads do not split evenly");
  if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0) return bad("heads must be a multiple of kv heads");
  const int64_t hq = c.num_heads / world, group = c.num_heads / c.num_kv_heads;
  if (hq % group != 0 && group % hq != 0)
    return bad("each rank's " + std::to_string(hq) + " query heads would straddle groups of " + std::to_string(group) +
               " sharing a kv head");
  if (c.intermediate_size < world) return bad("the MLP has only " + std::to_string(c.intermediate_size) + " columns");
  if (c.vocab_size < world) return bad("the vocabulary has only " + std::to_string(c.vocab_size) + " entries");
  // The families' per-layer tensors are not sharded yet (shard_weights); window, softcap, scale
  // and RoPE scaling are config only and carry over to every rank.
  if (world > 1 && (c.qkv_bias || c.qk_norm || c.post_norms))
    return bad(std::string(architecture_name(c.arch)) + "'s " +
               (c.qkv_bias  ? "q/k/v biases"
                : c.qk_norm ? "q/k head norms"
                            : "post-norms") +
               " are not split yet");
  TensorParallelLayout l;
  l.full_ = c;
  l.world_ = world;
  for (int r = 0; r < world; ++r) {
    TensorParallelShard s;
    s.rank = r;
    s.world = world;
    s.q_head0 = hq * r;
    s.q_heads = hq;
    if (hq % group == 0) {  // whole groups: the kv heads split too
      s.kv_heads = hq / group;
      s.kv_head0 = s.q_head0 / group;
    } else {  // part of one group: a copy of its kv head
      s.kv_heads = 1;
      s.kv_head0 = s.q_head0 / group;
    }
    s.inter0 = c.intermediate_size * r / world;
    s.inter = c.intermediate_size * (r + 1) / world - s.inter0;
    s.vocab0 = c.vocab_size * r / world;
    s.vocab = c.vocab_size * (r + 1) / world - s.vocab0;
    l.shards_.push_back(s);
  }
  return l;
}

ModelConfig TensorParallelLayout::local_config(int rank) const {
  const TensorParallelShard& s = shard(rank);
  ModelConfig c = full_;
  c.num_heads = s.q_heads;
  c.num_kv_heads = s.kv_heads;
  c.intermediate_size = s.inter;
  c.tie_word_embeddings = false;
  return c;
}

std::vector<TensorBlock> TensorParallelLayout::wqkv(int rank) const {
  const TensorParallelShard& s = shard(rank);
  const int64_t H = full_.hidden_size, hd = full_.head_dim, Q = full_.q_dim(), KV = full_.kv_dim();
  return {{s.q_head0 * hd, s.q_heads * hd, 0, H, H},
          {Q + s.kv_head0 * hd, s.kv_heads * hd, 0, H, H},
          {Q + KV + s.kv_head0 * hd, s.kv_heads * hd, 0, H, H}};
}

std::vector<TensorBlock> TensorParallelLayout::wo(int rank) const {
  const TensorParallelShard& s = shard(rank);
  const int64_t hd = full_.head_dim;
  return {{0, full_.hidden_size, s.q_head0 * hd, s.q_heads * hd, full_.q_dim()}};
}

std::vector<TensorBlock> TensorParallelLayout::gate_up(int rank) const {
  const TensorParallelShard& s = shard(rank);
  const int64_t H = full_.hidden_size, I = full_.intermediate_size;
  return {{s.inter0, s.inter, 0, H, H}, {I + s.inter0, s.inter, 0, H, H}};
}

std::vector<TensorBlock> TensorParallelLayout::down(int rank) const {
  const TensorParallelShard& s = shard(rank);
  return {{0, full_.hidden_size, s.inter0, s.inter, full_.intermediate_size}};
}

std::vector<TensorBlock> TensorParallelLayout::lm_head(int rank) const {
  const TensorParallelShard& s = shard(rank);
  return {{s.vocab0, s.vocab, 0, full_.hidden_size, full_.hidden_size}};
}

std::vector<float> take_blocks(const std::vector<float>& full, const std::vector<TensorBlock>& blocks) {
  std::vector<float> out;
  out.reserve(size_t(shard_elements(blocks)));
  for (const TensorBlock& b : blocks)
    for (int64_t i = 0; i < b.rows; ++i) {
      const float* row = full.data() + (b.row0 + i) * b.full_cols + b.col0;
      out.insert(out.end(), row, row + b.cols);
    }
  return out;
}

LayerWeights shard_layer(const LayerWeights& l, const TensorParallelLayout& layout, int rank) {
  LayerWeights s;
  s.attn_norm = l.attn_norm;
  s.mlp_norm = l.mlp_norm;
  s.wqkv = take_blocks(l.wqkv, layout.wqkv(rank));
  s.wo = take_blocks(l.wo, layout.wo(rank));
  s.w_gate_up = take_blocks(l.w_gate_up, layout.gate_up(rank));
  s.w_down = take_blocks(l.w_down, layout.down(rank));
  return s;
}

namespace {

std::string rank_name(const std::string& model, const TensorParallelLayout& layout, int rank) {
  return model + " (tensor-parallel rank " + std::to_string(rank) + " of " + std::to_string(layout.world()) + ")";
}

}  // namespace

ModelWeights shard_weights(const ModelWeights& full, const TensorParallelLayout& layout, int rank) {
  ModelWeights w;
  w.config = layout.local_config(rank);
  w.name = rank_name(full.name, layout, rank);
  w.storage_dtype = full.storage_dtype;
  w.embed = full.embed;
  w.final_norm = full.final_norm;
  const std::vector<float>& head = full.lm_head.empty() ? full.embed : full.lm_head;
  w.lm_head = take_blocks(head, layout.lm_head(rank));
  for (const LayerWeights& l : full.layers) w.layers.push_back(shard_layer(l, layout, rank));
  return w;
}

StatusOr<ModelWeights> load_model_shard(const std::string& dir, const TensorParallelLayout& layout, int rank) {
  auto w = load_model_layerwise(dir, [&](int64_t, LayerWeights whole) { return shard_layer(whole, layout, rank); });
  if (!w.is_ok()) return w.status();
  const ModelConfig& c = w->config;
  const ModelConfig& f = layout.full();
  if (c.hidden_size != f.hidden_size || c.num_heads != f.num_heads || c.num_kv_heads != f.num_kv_heads ||
      c.intermediate_size != f.intermediate_size || c.vocab_size != f.vocab_size || c.num_layers != f.num_layers)
    return Status::invalid_argument(dir + "/config.json changed while it was read: not the model the ranks split");
  const std::vector<float>& head = w->lm_head.empty() ? w->embed : w->lm_head;
  w->lm_head = take_blocks(head, layout.lm_head(rank));
  w->config = layout.local_config(rank);
  w->name = rank_name(dir, layout, rank);
  return w;
}

namespace {

// The blocks of tensor t of `layer` (-1: outside the layers) as the whole model's random
// weights hold them (make_random_weights: each value a function of its index in the whole tensor).
std::vector<float> random_blocks(const ModelConfig& full, uint64_t seed, RandomTensor t, int64_t layer,
                                 const std::vector<TensorBlock>& blocks) {
  const RandomInit init = random_init(full, t);
  const uint64_t stream = random_stream(t, layer);
  std::vector<float> out(size_t(shard_elements(blocks)));
  size_t at = 0;
  for (const TensorBlock& b : blocks) {
    float* p = out.data() + at;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < b.rows; ++i)
      for (int64_t j = 0; j < b.cols; ++j)
        p[i * b.cols + j] =
            init.offset + init.scale * random_uniform(seed, stream, uint64_t((b.row0 + i) * b.full_cols + b.col0 + j));
    at += size_t(b.rows * b.cols);
  }
  return out;
}

}  // namespace

ModelWeights random_model_shard(const TensorParallelLayout& layout, int rank, uint64_t seed, const std::string& name) {
  const ModelConfig& f = layout.full();
  const int64_t H = f.hidden_size, V = f.vocab_size;
  auto whole = [](int64_t rows, int64_t cols) { return std::vector<TensorBlock>{{0, rows, 0, cols, cols}}; };
  ModelWeights w;
  w.config = layout.local_config(rank);
  w.name = rank_name(name, layout, rank);
  w.embed = random_blocks(f, seed, RandomTensor::kEmbed, -1, whole(V, H));
  w.final_norm = random_blocks(f, seed, RandomTensor::kFinalNorm, -1, whole(1, H));
  w.lm_head = random_blocks(f, seed, f.tie_word_embeddings ? RandomTensor::kEmbed : RandomTensor::kLmHead, -1,
                            layout.lm_head(rank));
  for (int64_t l = 0; l < f.num_layers; ++l) {
    LayerWeights s;
    s.attn_norm = random_blocks(f, seed, RandomTensor::kAttnNorm, l, whole(1, H));
    s.wqkv = random_blocks(f, seed, RandomTensor::kWqkv, l, layout.wqkv(rank));
    s.wo = random_blocks(f, seed, RandomTensor::kWo, l, layout.wo(rank));
    s.mlp_norm = random_blocks(f, seed, RandomTensor::kMlpNorm, l, whole(1, H));
    s.w_gate_up = random_blocks(f, seed, RandomTensor::kGateUp, l, layout.gate_up(rank));
    s.w_down = random_blocks(f, seed, RandomTensor::kDown, l, layout.down(rank));
    w.layers.push_back(std::move(s));
  }
  return w;
}

}  // namespace tunableop::llm
