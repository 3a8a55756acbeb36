// A byte-level BPE tokenizer.json small enough to reason about by hand: the 256 byte characters
// are ids 0..255 (id = byte), each merge's result takes the next id in merge order, the added
// tokens come after. Llama-3's pre-tokenizer and BOS post-processor. Tests derive their expected
// ids from this layout; the tokenizers-trained fixtures (scripts/make_tokenizer_fixtures.py)
// check the same code against Hugging Face's own ids.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "llm/text/byte_level.h"

namespace tunableop::llm::testing {

inline const char* llama3_pattern() {
  return R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
}

// Merges in text form (spaces as spaces), highest priority first.
inline std::vector<std::pair<std::string, std::string>> tiny_merges() {
  return {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "t"},     {" t", "he"}, {"1", "2"}, {"12", "3"},
          {" ", "w"}, {"o", "r"}, {" w", "or"}, {" wor", "l"}, {" worl", "d"}, {"'", "m"},   {"e", "l"}};
}
constexpr int32_t kTinyHello = 259, kTinyLl = 257, kTinyThe = 261, kTiny123 = 263, kTinyWorld = 268,
                  kTinyApostropheM = 269;
constexpr int32_t kTinyBos = 271, kTinyEot = 272;  // 256 + 15 merges, then the added tokens

struct TinyTokenizerOptions {
  bool bos = true;             // TemplateProcessing with <|begin_of_text|>
  bool list_merges = true;     // [a, b] (tokenizers 0.20+) or "a b"
  bool ignore_merges = false;  //
  nlohmann::ordered_json normalizer = nullptr;
  nlohmann::ordered_json extra_added = nlohmann::ordered_json::array();  // appended to added_tokens
};

inline nlohmann::ordered_json tiny_tokenizer_json(const TinyTokenizerOptions& o = {}) {
  using json = nlohmann::ordered_json;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level::char_of(uint8_t(b))] = b;
  json merges = json::array();
  int32_t next = 256;
  for (const auto& [a, b] : tiny_merges()) {
    const std::string x = byte_level::encode(a), y = byte_level::encode(b);
    vocab[x + y] = next++;
    merges.push_back(o.list_merges ? json::array({x, y}) : json(x + " " + y));
  }
  auto added = [](int32_t id, const char* content) {
    return json{{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", false}, {"special", true}};
  };
  json added_tokens = json::array({added(kTinyBos, "<|begin_of_text|>"), added(kTinyEot, "<|eot_id|>")});
  for (const auto& e : o.extra_added) added_tokens.push_back(e);
  json post = json{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}};
  if (o.bos) {
    post = json{
        {"type", "Sequence"},
        {"processors",
         json::array(
             {post,
              json{{"type", "TemplateProcessing"},
                   {"single", json::array({json{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
                                           json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                   {"pair", json::array()},
                   {"special_tokens",
                    {{"<|begin_of_text|>",
                      {{"id", "<|begin_of_text|>"}, {"ids", {kTinyBos}}, {"tokens", {"<|begin_of_text|>"}}}}}}}})}};
  }
  return json{
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added_tokens},
      {"normalizer", o.normalizer},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers", json::array({json{{"type", "Split"},
                                            {"pattern", {{"Regex", llama3_pattern()}}},
                                            {"behavior", "Isolated"},
                                            {"invert", false}},
                                       json{{"type", "ByteLevel"},
                                            {"add_prefix_space", false},
                                            {"trim_offsets", true},
                                            {"use_regex", false}}})}}},
      {"post_processor", post},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", o.ignore_merges},
        {"vocab", vocab},
        {"merges", merges}}}};
}

inline void write_json(const std::string& path, const nlohmann::ordered_json& j) { std::ofstream(path) << j.dump(1); }

// DIR/tokenizer.json (+ tokenizer_config.json with Llama-3.1's chat template when `chat`).
inline void write_tiny_tokenizer(const std::string& dir, const TinyTokenizerOptions& o = {}) {
  write_json(dir + "/tokenizer.json", tiny_tokenizer_json(o));
}

}  // namespace tunableop::llm::testing
