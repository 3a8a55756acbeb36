#include "llm/weights.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "llm/safetensors.h"
#include "tunableop/checked_size.h"
#include "tunableop/half.h"
#include "tunableop/safe_file.h"
#include "tunableop/status_boundary.h"

namespace tunableop::llm {

int64_t ModelWeights::bytes() const {
  int64_t n = int64_t(embed.size() + final_norm.size() + lm_head.size());
  for (const LayerWeights& l : layers) {
    n += int64_t(l.attn_norm.size() + l.wqkv.size() + l.wo.size() + l.mlp_norm.size() + l.w_gate_up.size() +
                 l.w_down.size() + l.qkv_bias.size() + l.q_norm.size() + l.k_norm.size() + l.post_attn_norm.size() +
                 l.post_mlp_norm.size());
  }
  return n * int64_t(sizeof(float));
}

void size_family_weights(const ModelConfig& c, LayerWeights& l) {
  l.qkv_bias.assign(c.qkv_bias ? size_t(c.qkv_dim()) : 0, 0.f);
  l.q_norm.assign(c.qk_norm ? size_t(c.head_dim) : 0, 0.f);
  l.k_norm.assign(c.qk_norm ? size_t(c.head_dim) : 0, 0.f);
  l.post_attn_norm.assign(c.post_norms ? size_t(c.hidden_size) : 0, 0.f);
  l.post_mlp_norm.assign(c.post_norms ? size_t(c.hidden_size) : 0, 0.f);
}

std::string layer_tensor_name(int64_t layer, const char* suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

namespace {

// One Hugging Face tensor and where its rows live in our (possibly fused) buffers.
struct TensorSlot {
  std::string name;
  std::vector<int64_t> shape;
  float* data;  // shape's numel floats
};

// Calls fn(slot) for every tensor of the model in checkpoint order, pointing into `w`'s
// buffers; stops early when fn returns false. With `w` not yet sized every data pointer is null:
// that is how load_model checks the checkpoint against config.json before allocating anything
// (one slot at a time, so a config claiming a million layers costs no memory either).
template <class Fn>
bool for_each_slot(ModelWeights& w, Fn&& fn) {
  const ModelConfig& c = w.config;
  const int64_t H = c.hidden_size, I = c.intermediate_size, Q = c.q_dim(), KV = c.kv_dim();
  auto at = [](std::vector<float>& v, int64_t offset) { return v.empty() ? nullptr : v.data() + offset; };
  static LayerWeights unsized;
  if (!fn(TensorSlot{"model.embed_tokens.weight", {c.vocab_size, H}, at(w.embed, 0)})) return false;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = size_t(i) < w.layers.size() ? w.layers[size_t(i)] : unsized;
    auto slot = [&](const char* suffix, std::vector<int64_t> shape, float* data) {
      return fn(TensorSlot{layer_tensor_name(i, suffix), std::move(shape), data});
    };
    // In the order transformers' modules list them. Gemma-2 names its pre-MLP norm
    // pre_feedforward_layernorm and uses post_attention_layernorm after attention.
    if (!slot("input_layernorm.weight", {H}, at(l.attn_norm, 0)) ||
        !slot("self_attn.q_proj.weight", {Q, H}, at(l.wqkv, 0)) ||
        (c.qkv_bias && !slot("self_attn.q_proj.bias", {Q}, at(l.qkv_bias, 0))) ||
        !slot("self_attn.k_proj.weight", {KV, H}, at(l.wqkv, Q * H)) ||
        (c.qkv_bias && !slot("self_attn.k_proj.bias", {KV}, at(l.qkv_bias, Q))) ||
        !slot("self_attn.v_proj.weight", {KV, H}, at(l.wqkv, (Q + KV) * H)) ||
        (c.qkv_bias && !slot("self_attn.v_proj.bias", {KV}, at(l.qkv_bias, Q + KV))) ||
        !slot("self_attn.o_proj.weight", {H, Q}, at(l.wo, 0)) ||
        (c.qk_norm && !slot("self_attn.q_norm.weight", {c.head_dim}, at(l.q_norm, 0))) ||
        (c.qk_norm && !slot("self_attn.k_norm.weight", {c.head_dim}, at(l.k_norm, 0))) ||
        (c.post_norms && !slot("post_attention_layernorm.weight", {H}, at(l.post_attn_norm, 0))) ||
        !slot(c.post_norms ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight", {H},
              at(l.mlp_norm, 0)) ||
        !slot("mlp.gate_proj.weight", {I, H}, at(l.w_gate_up, 0)) ||
        !slot("mlp.up_proj.weight", {I, H}, at(l.w_gate_up, I * H)) ||
        !slot("mlp.down_proj.weight", {H, I}, at(l.w_down, 0)) ||
        (c.post_norms && !slot("post_feedforward_layernorm.weight", {H}, at(l.post_mlp_norm, 0))))
      return false;
  }
  if (!fn(TensorSlot{"model.norm.weight", {H}, at(w.final_norm, 0)})) return false;
  if (!c.tie_word_embeddings && !fn(TensorSlot{"lm_head.weight", {c.vocab_size, H}, at(w.lm_head, 0)})) return false;
  return true;
}

// Every tensor of the model in checkpoint order, pointing into `w` (which must be sized).
std::vector<TensorSlot> tensor_slots(ModelWeights& w) {
  std::vector<TensorSlot> s;
  for_each_slot(w, [&](const TensorSlot& slot) {
    s.push_back(slot);
    return true;
  });
  return s;
}

// The checkpoint's tensor `slot.name` as config.json says it must be: present, a dtype we
// read, the expected shape.
Status check_tensor(const TensorSource& src, const TensorSlot& slot, const TensorView** out) {
  const TensorView* t = src.find(slot.name);
  if (!t) {
    return Status::not_found(src.where(slot.name) + ": missing tensor \"" + slot.name + "\" (expected shape " +
                             shape_string(slot.shape) + " from config.json)");
  }
  if (!t->dtype_supported) {
    return Status::unsupported(t->file + ": tensor \"" + slot.name + "\" has dtype " + t->dtype_name +
                               "; supported: F32, BF16, F16");
  }
  if (t->shape != slot.shape) {
    return Status::invalid_argument(t->file + ": tensor \"" + slot.name + "\" has shape " + shape_string(t->shape) +
                                    ", expected " + shape_string(slot.shape) + " from config.json");
  }
  *out = t;
  return Status::ok();
}

void size_layer(const ModelConfig& c, LayerWeights& l) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  l.attn_norm.assign(size_t(H), 0.f);
  l.wqkv.assign(size_t(c.qkv_dim() * H), 0.f);
  l.wo.assign(size_t(H * c.q_dim()), 0.f);
  l.mlp_norm.assign(size_t(H), 0.f);
  l.w_gate_up.assign(size_t(2 * I * H), 0.f);
  l.w_down.assign(size_t(H * I), 0.f);
  size_family_weights(c, l);
}

// The tensors outside the layers; the layers listed, unsized.
void size_head(ModelWeights& w) {
  const ModelConfig& c = w.config;
  const int64_t H = c.hidden_size;
  w.embed.assign(size_t(c.vocab_size * H), 0.f);
  w.final_norm.assign(size_t(H), 0.f);
  w.lm_head.assign(c.tie_word_embeddings ? 0 : size_t(c.vocab_size * H), 0.f);
  w.layers.assign(size_t(c.num_layers), LayerWeights{});
}

// Opens DIR with every tensor checked against config.json (before anything is allocated).
StatusOr<std::unique_ptr<TensorSource>> open_checked(const std::string& dir, ModelWeights& w) {
  auto cfg = load_model_config(dir);
  if (!cfg.is_ok()) return cfg.status();
  auto src = TensorSource::open_dir(dir);
  if (!src.is_ok()) return src.status();
  w.config = cfg.value();
  w.name = dir;
  Status st;
  for_each_slot(w, [&](const TensorSlot& slot) {
    const TensorView* t = nullptr;
    st = check_tensor(**src, slot, &t);
    return st.is_ok();
  });
  TUNABLEOP_RETURN_IF_ERROR(st);
  return std::move(src.value());
}

// Converts every slot of `w` that has a buffer and is not in `done` yet.
Status convert_sized(const TensorSource& src, ModelWeights& w, std::set<std::string>& done) {
  Status st;
  for_each_slot(w, [&](const TensorSlot& slot) {
    if (!slot.data || !done.insert(slot.name).second) return true;
    const TensorView* t = nullptr;
    st = check_tensor(src, slot, &t);
    if (!st.is_ok()) return false;
    if (done.size() == 1) w.storage_dtype = t->dtype;
    convert_to_f32(*t, slot.data);
    return true;
  });
  return st;
}

}  // namespace

StatusOr<ModelWeights> load_model_layerwise(const std::string& dir,
                                            const std::function<LayerWeights(int64_t, LayerWeights)>& keep) {
  return status_boundary(
      [&] { return "loading the model in " + dir; },
      [&]() -> StatusOr<ModelWeights> {
        ModelWeights w;
        auto src = open_checked(dir, w);
        if (!src.is_ok()) return src.status();
        const ModelConfig& c = w.config;
        // What is held at once: the tensors outside the layers and one whole layer.
        const CheckedInt peak = (CheckedInt(c.vocab_size) * c.hidden_size * (c.tie_word_embeddings ? 1 : 2) +
                                 CheckedInt(c.qkv_dim() + c.q_dim() + 3 * c.intermediate_size) * c.hidden_size) *
                                int64_t(sizeof(float));
        TUNABLEOP_RETURN_IF_ERROR(check_host_allocation(peak, dir + ": the model's embeddings and one layer in fp32"));
        size_head(w);
        std::set<std::string> done;
        std::vector<LayerWeights> kept;
        for (int64_t i = 0; i < c.num_layers; ++i) {
          size_layer(c, w.layers[size_t(i)]);
          TUNABLEOP_RETURN_IF_ERROR(convert_sized(**src, w, done));
          kept.push_back(keep(i, std::move(w.layers[size_t(i)])));
          w.layers[size_t(i)] = LayerWeights{};  // no buffer: later passes skip its slots
        }
        if (c.num_layers == 0) TUNABLEOP_RETURN_IF_ERROR(convert_sized(**src, w, done));
        w.layers = std::move(kept);
        return w;
      });
}

static StatusOr<ModelWeights> load_model_unguarded(const std::string& dir) {
  // Every tensor checked against config.json first, and the total against this machine's
  // memory: a tiny checkpoint whose config claims a huge model fails here, before any buffer.
  ModelWeights w;
  auto src = open_checked(dir, w);
  if (!src.is_ok()) return src.status();
  TUNABLEOP_RETURN_IF_ERROR(check_weights_fit(w.config, dir));
  size_head(w);
  for (LayerWeights& l : w.layers) size_layer(w.config, l);
  std::set<std::string> done;
  TUNABLEOP_RETURN_IF_ERROR(convert_sized(**src, w, done));
  return w;
}

StatusOr<ModelWeights> load_model(const std::string& dir) {
  return status_boundary([&] { return "loading the model in " + dir; }, [&] { return load_model_unguarded(dir); });
}

Status check_weights_fit(const ModelConfig& c, const std::string& source) {
  const CheckedInt bytes = CheckedInt(c.parameter_count()) * int64_t(sizeof(float));
  return check_host_allocation(bytes,
                               source + ": the model's " + std::to_string(c.parameter_count()) + " fp32 weights");
}

Status save_model(const ModelWeights& w_in, const std::string& dir, DType dtype, int shards) {
  namespace fs = std::filesystem;
  if (dtype == DType::kF64) return Status::invalid_argument("save_model: dtype must be fp32, bf16 or fp16");
  if (shards < 1) return Status::invalid_argument("save_model: shards must be >= 1");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::io_error(dir + ": cannot create directory: " + ec.message());
  {
    ModelConfig c = w_in.config;
    c.dtype = dtype == DType::kF32 ? "float32" : dtype == DType::kBF16 ? "bfloat16" : "float16";
    TUNABLEOP_RETURN_IF_ERROR(replace_regular_file(dir + "/config.json", model_config_to_json(c)));
  }
  // tensor_slots wants mutable pointers; nothing is written through them here.
  std::vector<TensorSlot> slots = tensor_slots(const_cast<ModelWeights&>(w_in));
  std::vector<std::vector<uint8_t>> converted(slots.size());
  std::vector<TensorToWrite> all;
  for (size_t i = 0; i < slots.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : slots[i].shape) n *= d;
    const void* data = slots[i].data;
    if (dtype != DType::kF32) {
      converted[i].resize(size_t(n) * 2);
      for (int64_t e = 0; e < n; ++e) {
        uint16_t bits = dtype == DType::kBF16 ? to_bf16(slots[i].data[e]).bits : to_fp16(slots[i].data[e]).bits;
        std::memcpy(converted[i].data() + 2 * e, &bits, 2);
      }
      data = converted[i].data();
    }
    all.push_back({slots[i].name, dtype, slots[i].shape, data});
  }
  // The loader prefers model.safetensors over an index: remove whichever form is not written.
  fs::remove(dir + (shards == 1 ? "/model.safetensors.index.json" : "/model.safetensors"), ec);
  if (shards == 1) return write_safetensors(dir + "/model.safetensors", all);

  nlohmann::json index;
  index["metadata"] = {{"total_size", w_in.bytes() / 4 * int64_t(dtype == DType::kF32 ? 4 : 2)}};
  index["weight_map"] = nlohmann::json::object();
  size_t per = (all.size() + size_t(shards) - 1) / size_t(shards);
  for (int s = 0; s < shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", s + 1, shards);
    std::vector<TensorToWrite> part;
    for (size_t i = size_t(s) * per; i < std::min(all.size(), size_t(s + 1) * per); ++i) {
      part.push_back(all[i]);
      index["weight_map"][all[i].name] = name;
    }
    TUNABLEOP_RETURN_IF_ERROR(write_safetensors(dir + "/" + name, part));
  }
  return replace_regular_file(dir + "/model.safetensors.index.json", index.dump(2) + "\n");
}

}  // namespace tunableop::llm
