// Loading model directories: round trips in every dtype and shard layout, and a clear error
// (naming the file and the tensor) for every kind of broken directory.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "llm/safetensors.h"
#include "llm/weights.h"
#include "llm_test_util.h"
#include "tunableop/half.h"

namespace tunableop::llm {
namespace {

using testing::ScratchDir;

void expect_message(const Status& s, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(s.is_ok());
  for (const std::string& p : parts) {
    EXPECT_NE(s.message().find(p), std::string::npos) << "missing \"" << p << "\" in: " << s.to_string();
  }
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

// Rewrites DIR/model.safetensors through `edit`, which may drop, reshape or retype tensors.
template <class Edit>
void rewrite_checkpoint(const std::string& dir, Edit edit) {
  std::vector<TensorToWrite> tensors;
  std::vector<std::vector<uint8_t>> keep;
  {
    auto f = SafetensorsFile::open(dir + "/model.safetensors");
    ASSERT_TRUE(f.is_ok()) << f.status().to_string();
    for (auto& [name, t] : f.value()->tensors()) {
      keep.emplace_back(t.data, t.data + t.bytes);
      tensors.push_back({name, t.dtype, t.shape, nullptr});
    }
  }
  for (size_t i = 0; i < tensors.size(); ++i) tensors[i].data = keep[i].data();
  edit(tensors);
  ASSERT_TRUE(write_safetensors(dir + "/model.safetensors", tensors).is_ok());
}

TEST(LlmSafetensors, RoundTripsEveryDtypeAndShardLayout) {
  const ModelWeights w = make_random_weights(testing::small_llama(), 7);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int shards : {1, 3}) {
      ScratchDir dir("roundtrip");
      ASSERT_TRUE(save_model(w, dir.path(), dtype, shards).is_ok());
      EXPECT_EQ(std::filesystem::exists(dir.path() + "/model.safetensors.index.json"), shards > 1);
      auto back = load_model(dir.path());
      ASSERT_TRUE(back.is_ok()) << back.status().to_string();
      EXPECT_EQ(back->storage_dtype, dtype);
      ASSERT_EQ(back->layers.size(), w.layers.size());
      auto rounded = [&](float v) {
        return dtype == DType::kF32 ? v : dtype == DType::kBF16 ? to_float(to_bf16(v)) : to_float(to_fp16(v));
      };
      // Exact after rounding: storage conversion happens once, widening is lossless.
      for (size_t i = 0; i < w.embed.size(); ++i) ASSERT_EQ(back->embed[i], rounded(w.embed[i])) << i;
      for (size_t l = 0; l < w.layers.size(); ++l) {
        const LayerWeights &a = w.layers[l], &b = back->layers[l];
        for (size_t i = 0; i < a.wqkv.size(); ++i) ASSERT_EQ(b.wqkv[i], rounded(a.wqkv[i]));
        for (size_t i = 0; i < a.w_gate_up.size(); ++i) ASSERT_EQ(b.w_gate_up[i], rounded(a.w_gate_up[i]));
        for (size_t i = 0; i < a.w_down.size(); ++i) ASSERT_EQ(b.w_down[i], rounded(a.w_down[i]));
        for (size_t i = 0; i < a.wo.size(); ++i) ASSERT_EQ(b.wo[i], rounded(a.wo[i]));
        for (size_t i = 0; i < a.attn_norm.size(); ++i) ASSERT_EQ(b.attn_norm[i], rounded(a.attn_norm[i]));
      }
      for (size_t i = 0; i < w.lm_head.size(); ++i) ASSERT_EQ(back->lm_head[i], rounded(w.lm_head[i]));
    }
  }
}

TEST(LlmSafetensors, TiedGemmaHasNoLmHeadTensor) {
  ScratchDir dir("tied");
  ASSERT_TRUE(save_model(make_random_weights(testing::small_gemma(), 3), dir.path()).is_ok());
  auto f = SafetensorsFile::open(dir.path() + "/model.safetensors");
  ASSERT_TRUE(f.is_ok());
  EXPECT_EQ(f.value()->find("lm_head.weight"), nullptr);
  auto w = load_model(dir.path());
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  EXPECT_TRUE(w->lm_head.empty());
  EXPECT_EQ(w->lm_head_data(), w->embed.data());
}

class BrokenModelDir : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(save_model(make_random_weights(testing::small_llama(), 5), dir_.path()).is_ok());
    file_ = dir_.path() + "/model.safetensors";
  }
  Status load() { return load_model(dir_.path()).status(); }
  ScratchDir dir_{"broken"};
  std::string file_;
};

TEST_F(BrokenModelDir, MissingTensorNamesFileAndTensor) {
  rewrite_checkpoint(dir_.path(), [](std::vector<TensorToWrite>& t) {
    std::erase_if(t, [](const TensorToWrite& x) { return x.name == "model.layers.1.mlp.up_proj.weight"; });
  });
  expect_message(load(), {file_, "missing tensor", "model.layers.1.mlp.up_proj.weight", "[45, 32]"});
}

TEST_F(BrokenModelDir, MissingUntiedLmHead) {
  rewrite_checkpoint(dir_.path(), [](std::vector<TensorToWrite>& t) {
    std::erase_if(t, [](const TensorToWrite& x) { return x.name == "lm_head.weight"; });
  });
  expect_message(load(), {file_, "lm_head.weight"});
}

TEST_F(BrokenModelDir, MisshapenTensor) {
  rewrite_checkpoint(dir_.path(), [](std::vector<TensorToWrite>& t) {
    for (auto& x : t) {
      if (x.name == "model.layers.0.self_attn.k_proj.weight") x.shape = {32, 16};  // same bytes, transposed
    }
  });
  expect_message(load(), {file_, "model.layers.0.self_attn.k_proj.weight", "[32, 16]", "expected [16, 32]"});
}

TEST_F(BrokenModelDir, UnsupportedDtype) {
  // Patch "F32" -> "I32" for one tensor in the header: same length and same bytes per element,
  // so only the dtype check can object.
  std::vector<uint8_t> bytes = read_file(file_);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[size_t(i)];
  std::string header(bytes.begin() + 8, bytes.begin() + 8 + std::ptrdiff_t(header_len));
  size_t at = header.find("\"model.norm.weight\":{");
  ASSERT_NE(at, std::string::npos);
  size_t dt = header.find("\"dtype\":\"F32\"", at);
  ASSERT_NE(dt, std::string::npos);
  bytes[8 + dt + std::strlen("\"dtype\":\"")] = 'I';
  write_file(file_, bytes);
  expect_message(load(), {file_, "model.norm.weight", "dtype I32", "F32, BF16, F16"});
}

TEST_F(BrokenModelDir, TruncatedDataNamesTheTensor) {
  std::vector<uint8_t> bytes = read_file(file_);
  bytes.resize(bytes.size() - 100);
  write_file(file_, bytes);
  // The last tensor written is lm_head.weight: its bytes now run past the end.
  expect_message(load(), {file_, "lm_head.weight", "truncated"});
}

TEST_F(BrokenModelDir, TruncatedHeader) {
  std::vector<uint8_t> bytes = read_file(file_);
  bytes.resize(60);
  write_file(file_, bytes);
  expect_message(load(), {file_, "truncated"});
  bytes.resize(5);
  write_file(file_, bytes);
  expect_message(load(), {file_, "truncated", "8-byte"});
  write_file(file_, {});
  expect_message(load(), {file_, "truncated"});
}

TEST_F(BrokenModelDir, BadHeaderJson) {
  std::vector<uint8_t> bytes = read_file(file_);
  bytes[8] = '[';  // header no longer parses
  bytes[9] = ']';
  write_file(file_, bytes);
  expect_message(load(), {file_, "JSON"});
}

TEST_F(BrokenModelDir, BadConfigJson) {
  write_text(dir_.path() + "/config.json", "{\"model_type\": \"llama\", ");
  expect_message(load(), {dir_.path() + "/config.json", "not valid JSON"});
}

TEST_F(BrokenModelDir, UnsupportedArchitecture) {
  write_text(dir_.path() + "/config.json", R"({"model_type": "phi3", "architectures": ["Phi3ForCausalLM"]})");
  Status s = load();
  expect_message(s, {dir_.path() + "/config.json", "unsupported architecture", "phi3"});
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
}

TEST_F(BrokenModelDir, NoWeightsFile) {
  std::filesystem::remove(file_);
  expect_message(load(), {dir_.path(), "no model.safetensors"});
}

TEST(LlmSafetensors, ShardedIndexErrors) {
  ScratchDir dir("shards");
  ASSERT_TRUE(save_model(make_random_weights(testing::small_llama(), 9), dir.path(), DType::kBF16, 2).is_ok());
  const std::string shard2 = dir.path() + "/model-00002-of-00002.safetensors";
  std::vector<uint8_t> saved = read_file(shard2);

  std::filesystem::remove(shard2);
  expect_message(load_model(dir.path()).status(), {shard2, "cannot open", "model.safetensors.index.json"});

  // The index names a tensor the shard does not hold.
  write_file(shard2, saved);
  std::string index_path = dir.path() + "/model.safetensors.index.json";
  std::ifstream in(index_path);
  std::string index((std::istreambuf_iterator<char>(in)), {});
  in.close();
  size_t at = index.find("\"model.norm.weight\": \"model-00002-of-00002.safetensors\"");
  ASSERT_NE(at, std::string::npos);
  index.replace(at, std::strlen("\"model.norm.weight\": \"model-00002-of-00002.safetensors\""),
                "\"model.norm.weight\": \"model-00001-of-00002.safetensors\"");
  write_text(index_path, index);
  expect_message(load_model(dir.path()).status(),
                 {"model-00001-of-00002.safetensors", "model.norm.weight", "not in this shard"});

  write_text(index_path, "{\"weight_map\": 3}");
  expect_message(load_model(dir.path()).status(), {index_path, "weight_map"});
}

}  // namespace
}  // namespace tunableop::llm
