// Model weights on the host in fp32, in the layout the forward pass wants: the q/k/v
// projections fused into one matrix and gate/up into another, so that a layer needs 4 GEMMs
// (qkv, o, gate_up, down) instead of 7 and the run has fewer distinct GEMM problems to tune.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "llm/config.h"
#include "tunableop/gemm.h"
#include "tunableop/status.h"

namespace tunableop::llm {

struct LayerWeights {
  std::vector<float> attn_norm;  // [H]
  std::vector<float> wqkv;       // [q_dim + 2 kv_dim, H]: q_proj rows, then k_proj, then v_proj
  std::vector<float> wo;         // [H, q_dim]
  std::vector<float> mlp_norm;   // [H] (Gemma-2: pre_feedforward_layernorm)
  std::vector<float> w_gate_up;  // [2 I, H]: gate_proj rows, then up_proj
  std::vector<float> w_down;     // [H, I]
  // Family features; empty when the model has none (config.h).
  std::vector<float> qkv_bias;        // [q_dim + 2 kv_dim]: q_proj, k_proj, v_proj biases (Qwen2)
  std::vector<float> q_norm, k_norm;  // [head_dim] each (Qwen3)
  std::vector<float> post_attn_norm;  // [H] (Gemma-2: post_attention_layernorm)
  std::vector<float> post_mlp_norm;   // [H] (Gemma-2: post_feedforward_layernorm)
};

struct ModelWeights {
  ModelConfig config;
  std::string name;                   // directory or "builtin:<preset>", for messages
  DType storage_dtype = DType::kF32;  // how the checkpoint stored them (informational)
  std::vector<float> embed;           // [V, H]
  std::vector<float> final_norm;      // [H]
  std::vector<float> lm_head;         // [V, H]; empty when tied to `embed`
  std::vector<LayerWeights> layers;

  const float* lm_head_data() const { return lm_head.empty() ? embed.data() : lm_head.data(); }
  // Bytes of fp32 weights (what one decode step reads at least once).
  int64_t bytes() const;
};

// Sizes (zero-filled) the family tensors of one layer that `c` has, empties the others.
void size_family_weights(const ModelConfig& c, LayerWeights& l);

// Hugging Face tensor names.
std::string layer_tensor_name(int64_t layer, const char* suffix);  // "model.layers.3.mlp.up_proj.weight"

// Loads DIR/config.json and DIR/model.safetensors (or its sharded index). Every tensor is
// checked against the shape config.json implies; errors name the file and the tensor.
StatusOr<ModelWeights> load_model(const std::string& dir);

// load_model a layer at a time, for a caller that keeps only part of each (a tensor-parallel
// rank's shard): keep(i, layer i) returns what stays of it and the whole layer is freed before
// the next is read. Everything outside the layers is loaded whole. Peak memory: the embeddings,
// one whole layer and what was kept.
StatusOr<ModelWeights> load_model_layerwise(const std::string& dir,
                                            const std::function<LayerWeights(int64_t layer, LayerWeights whole)>& keep);

// Ok when the fp32 weights `c` describes fit in this machine's memory (checked before they are
// allocated, by load_model and for built-in models); the error names `source`.
Status check_weights_fit(const ModelConfig& c, const std::string& source);

// Writes DIR/config.json and DIR/model.safetensors with Hugging Face names, weights stored in
// `dtype` (F32, BF16 or F16). `shards` > 1 splits the tensors over that many files plus
// model.safetensors.index.json.
Status save_model(const ModelWeights& w, const std::string& dir, DType dtype = DType::kF32, int shards = 1);

}  // namespace tunableop::llm
