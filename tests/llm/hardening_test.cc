// The model loader and the engine factory against hostile inputs (issue 9): sizes in
// config.json whose products overflow, a config describing far more than the checkpoint holds
// (checked before any buffer is allocated), overlapping tensors in a safetensors file, FIFOs
// where files should be, and engine options whose buffers cannot exist.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "llm/engine_limits.h"
#include "llm/safetensors.h"
#include "llm/weights.h"
#include "llm_test_util.h"
#include "support/file_faults.h"
#include "tunableop/checked_size.h"

namespace tunableop::llm {
namespace {

using json = nlohmann::json;
using testing::ScratchDir;

void expect_message(const Status& s, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(s.is_ok());
  for (const std::string& p : parts)
    EXPECT_NE(s.message().find(p), std::string::npos) << "missing \"" << p << "\" in: " << s.to_string();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// A safetensors file from a header (as JSON) and a data section of `data_bytes` zero bytes.
void write_safetensors_raw(const std::string& path, const json& header, size_t data_bytes) {
  std::string h = header.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((uint64_t(h.size()) >> (8 * i)) & 0xff);
  write_bytes(path, out + h + std::string(data_bytes, '\0'));
}

json small_config_json(const ModelConfig& c) { return json::parse(model_config_to_json(c)); }

long max_rss_kib() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

TEST(LlmHardening, OverlappingTensorRangesAreRefused) {
  ScratchDir dir("overlap");
  json h = {{"a", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}},
            {"b", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {8, 24}}}}};
  write_safetensors_raw(dir.path() + "/model.safetensors", h, 24);
  auto f = SafetensorsFile::open(dir.path() + "/model.safetensors");
  expect_message(f.status(), {"tensors \"a\" [0, 16) and \"b\" [8, 24) overlap", "malformed"});
  // Touching ranges and empty tensors are fine.
  json ok = {{"a", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}},
             {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {16, 24}}}},
             {"e", {{"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {4, 4}}}}};
  write_safetensors_raw(dir.path() + "/model.safetensors", ok, 24);
  EXPECT_TRUE(SafetensorsFile::open(dir.path() + "/model.safetensors").is_ok());
}

TEST(LlmHardening, ShapesWhoseProductOverflowsAreRefused) {
  ScratchDir dir("shape");
  // 2^32 * 2^32 elements wrapped to 0 in the old check and matched an empty data range.
  json h = {{"w", {{"dtype", "F32"}, {"shape", {uint64_t(1) << 32, uint64_t(1) << 32}}, {"data_offsets", {0, 0}}}}};
  write_safetensors_raw(dir.path() + "/model.safetensors", h, 0);
  expect_message(SafetensorsFile::open(dir.path() + "/model.safetensors").status(),
                 {"\"w\"", "more elements than a 64-bit byte count can hold"});
  json big = {{"w", {{"dtype", "F32"}, {"shape", {uint64_t(1) << 63}}, {"data_offsets", {0, 0}}}}};
  write_safetensors_raw(dir.path() + "/model.safetensors", big, 0);
  expect_message(SafetensorsFile::open(dir.path() + "/model.safetensors").status(), {"below 2^63"});
}

TEST(LlmHardening, ConfigSizesThatOverflowAreRefused) {
  json j = small_config_json(testing::small_llama());
  j["vocab_size"] = int64_t(1) << 40;
  j["hidden_size"] = int64_t(1) << 30;
  j["head_dim"] = 8;
  expect_message(parse_model_config(j.dump(), "cfg.json").status(), {"cfg.json", "the sizes overflow"});
  j = small_config_json(testing::small_llama());
  j["num_hidden_layers"] = uint64_t(1) << 63;  // above INT64_MAX: was read as a negative number
  expect_message(parse_model_config(j.dump(), "cfg.json").status(), {"num_hidden_layers", "too large"});
  ModelConfig c = testing::small_llama();
  c.num_layers = INT64_MAX / 2;
  expect_message(c.validate("api"), {"the sizes overflow"});
  EXPECT_EQ(c.parameter_count(), INT64_MAX) << "saturated, not wrapped";
}

// The "tiny checkpoint claiming a million layers": the missing tensor is reported before
// any weight buffer is allocated (it used to take 9+ GB first).
TEST(LlmHardening, ConfigClaimingHugeModelFailsBeforeAllocating) {
  ScratchDir dir("million");
  const ModelWeights w = make_random_weights(testing::small_llama(), 3);
  ASSERT_TRUE(save_model(w, dir.path()).is_ok());
  json j = small_config_json(testing::small_llama());
  j["num_hidden_layers"] = 1000000;
  j["intermediate_size"] = 4096;
  write_bytes(dir.path() + "/config.json", j.dump());
  const long rss0 = max_rss_kib();
  auto loaded = load_model(dir.path());
  expect_message(loaded.status(), {"model.layers.0.mlp.gate_proj.weight", "has shape"});
  EXPECT_LT(max_rss_kib() - rss0, 256 * 1024) << "no buffer for a million layers";

  j = small_config_json(testing::small_llama());
  j["num_hidden_layers"] = 1000000;
  write_bytes(dir.path() + "/config.json", j.dump());
  expect_message(load_model(dir.path()).status(), {"missing tensor \"model.layers.2.input_layernorm.weight\""});
  EXPECT_LT(max_rss_kib() - rss0, 256 * 1024);
}

TEST(LlmHardening, ModelLargerThanMemoryIsRefusedBeforeAllocating) {
  // The config.json with vocab_size 1e9: the checkpoint matches (shapes are only
  // metadata here), but the weights cannot fit: refused by size, not by std::bad_alloc.
  ModelConfig c = testing::small_llama();
  c.vocab_size = 1000000000;
  c.hidden_size = 4096;
  c.head_dim = 1024;
  c.intermediate_size = 8;
  ASSERT_TRUE(c.validate("cfg").is_ok());
  expect_message(check_weights_fit(c, "dir"), {"dir: the model's", "more than this machine's memory"});
  ModelSpec spec;
  spec.builtin = true;
  spec.preset = "llama-2-7b";
  auto w = load_or_generate(spec, 1, 100000);  // --layers 100000: 20 TB of weights
  expect_message(w.status(), {"more than this machine's memory"});
  expect_message(load_or_generate(spec, 1, -1).status(), {"--layers must be >= 1"});
}

TEST(LlmHardening, FifosAndDirectoriesInTheModelDirectoryNeverBlock) {
  ScratchDir dir("fifo");
  const ModelWeights w = make_random_weights(testing::small_llama(), 3);
  ASSERT_TRUE(save_model(w, dir.path()).is_ok());
  std::filesystem::remove(dir.path() + "/config.json");
  ASSERT_TRUE(tunableop::testing::make_fifo(dir.path() + "/config.json"));
  expect_message(load_model(dir.path()).status(), {"config.json: is a FIFO"});
  std::filesystem::remove(dir.path() + "/config.json");
  ASSERT_TRUE(save_model(w, dir.path()).is_ok());
  std::filesystem::remove(dir.path() + "/model.safetensors");
  ASSERT_TRUE(tunableop::testing::make_fifo(dir.path() + "/model.safetensors"));
  expect_message(load_model(dir.path()).status(), {"model.safetensors: is a FIFO"});
  // save_model refuses to replace the FIFO rather than renaming over it.
  expect_message(save_model(w, dir.path()), {"is a FIFO", "not replaced"});
}

TEST(LlmHardening, EngineBuffersAreCheckedBeforeAllocation) {
  const ModelConfig c = testing::small_llama();
  EXPECT_TRUE(check_engine_fits(c, testing::options(2, 64, 8), 4, true).is_ok());
  // `--max-new-tokens 1e12` sizes the KV cache at 1e12 positions.
  expect_message(check_engine_fits(c, testing::options(1, 1000000000000, 8), 4, true), {"positions"});
  expect_message(check_engine_fits(c, testing::options(1, int64_t(1) << 40, 8), 4, false),
                 {"64-bit count", "lower max_seq"});
  expect_message(check_engine_fits(c, testing::options(1, 16, INT64_MAX), 4, true), {"pad_multiple"});
  expect_message(check_engine_fits(c, testing::options(0, 16, 8), 4, true), {"max_batch"});
  // A paged cache: `--kv-pages` sizes the pool (its byte count must not wrap, page numbers are
  // int32), `--page-size` is checked before anything is counted.
  EngineOptions paged = testing::options(2, 64, 8);
  paged.kv_cache.kind = KvCacheKind::kPaged;
  paged.kv_cache.page_size = 16;
  EXPECT_TRUE(check_engine_fits(c, paged, 4, true).is_ok());
  paged.kv_cache.pages = int64_t(1) << 40;
  expect_message(check_engine_fits(c, paged, 4, false), {"paged KV cache of 1099511627776 pages", "at most"});
  paged.kv_cache.pages = int64_t(1) << 30;
  expect_message(check_engine_fits(c, paged, 4, true), {"paged cache", "more than this machine's memory"});
  paged.kv_cache.pages = 0;
  paged.kv_cache.page_size = 0;
  expect_message(check_engine_fits(c, paged, 4, true), {"page size 0"});
  auto weights = std::make_shared<const ModelWeights>(make_random_weights(c, 1));
  auto naive = [](DType, int64_t, int64_t, int64_t, const void*, const void*, void*, void*) { return Status::ok(); };
  auto e = make_cpu_engine(weights, testing::options(1, 1000000000000, 8), naive);
  expect_message(e.status(), {"KV cache"});
}

}  // namespace
}  // namespace tunableop::llm
