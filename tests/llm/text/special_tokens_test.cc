// BOS/EOS from a model directory's JSON files and tokenizer, in the documented order, and the
// prompt encoding that uses them. A fake tokenizer stands in for SentencePiece (these rules do
// not depend on it), so the tests run in every build.
#include "llm/text/special_tokens.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "llm_test_util.h"

namespace tunableop::llm {
namespace {

using testing::ScratchDir;

// Pieces by name; encode gives one id per character ('a' -> 100 + 0, ...).
class FakeTokenizer final : public Tokenizer {
 public:
  std::map<std::string, int32_t> pieces = {{"<s>", 1}, {"</s>", 2}, {"<eot>", 7}};
  std::optional<int32_t> bos = 1, eos = 2;
  int64_t vocab_size() const override { return 200; }
  StatusOr<std::vector<int32_t>> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    for (char ch : text) ids.push_back(100 + (ch - 'a'));
    return ids;
  }
  StatusOr<std::string> decode(const std::vector<int32_t>&) const override { return std::string(); }
  std::optional<int32_t> piece_id(std::string_view p) const override {
    auto it = pieces.find(std::string(p));
    return it == pieces.end() ? std::nullopt : std::optional<int32_t>(it->second);
  }
  std::optional<int32_t> bos_id() const override { return bos; }
  std::optional<int32_t> eos_id() const override { return eos; }
  std::string description() const override { return "fake"; }
};

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(SpecialTokens, GenerationConfigWinsForEosAndTokenizerConfigForBos) {
  ScratchDir d("special");
  write(d.path() + "/config.json", R"({"bos_token_id": 11, "eos_token_id": 12})");
  write(d.path() + "/generation_config.json", R"({"bos_token_id": 21, "eos_token_id": [2, 7]})");
  write(d.path() + "/tokenizer_config.json", R"({"bos_token": "<s>", "eos_token": "</s>"})");
  FakeTokenizer tok;
  auto s = load_special_tokens(d.path(), &tok);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_EQ(s->bos, std::optional<int32_t>(1));
  EXPECT_EQ(s->bos_source, "tokenizer_config.json");
  EXPECT_EQ(s->eos, (std::vector<int32_t>{2, 7}));
  EXPECT_EQ(s->eos_source, "generation_config.json");
  EXPECT_TRUE(s->add_bos);
  EXPECT_TRUE(s->is_eos(7));
  EXPECT_FALSE(s->is_eos(12));
  EXPECT_EQ(s->describe(), "BOS 1 (tokenizer_config.json), EOS 2/7 (generation_config.json)");
}

TEST(SpecialTokens, FallsBackFileByFile) {
  ScratchDir d("special_fallback");
  FakeTokenizer tok;
  // Nothing but the tokenizer.
  auto s = load_special_tokens(d.path(), &tok);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->bos, std::optional<int32_t>(1));
  EXPECT_EQ(s->eos, std::vector<int32_t>{2});
  EXPECT_EQ(s->eos_source, "tokenizer.model");
  // config.json beats the tokenizer; null values are "absent".
  write(d.path() + "/config.json", R"({"bos_token_id": 5, "eos_token_id": 6})");
  write(d.path() + "/generation_config.json", R"({"bos_token_id": null, "eos_token_id": null})");
  s = load_special_tokens(d.path(), &tok);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->bos, std::optional<int32_t>(5));
  EXPECT_EQ(s->eos, std::vector<int32_t>{6});
  EXPECT_EQ(s->eos_source, "config.json");
  // tokenizer_config.json's eos_token is used when no file gives an id; an AddedToken object too.
  write(d.path() + "/config.json", R"({})");
  write(d.path() + "/tokenizer_config.json", R"({"eos_token": {"content": "<eot>", "special": true}})");
  s = load_special_tokens(d.path(), &tok);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->eos, std::vector<int32_t>{7});
  EXPECT_EQ(s->eos_source, "tokenizer_config.json");
  // No tokenizer at all (prompts as ids): the JSON ids still count, pieces are skipped.
  s = load_special_tokens(d.path(), nullptr);
  ASSERT_TRUE(s.is_ok());
  EXPECT_TRUE(s->eos.empty());
  EXPECT_EQ(s->describe(), "no BOS, no EOS");
}

TEST(SpecialTokens, PiecesResolveThroughAddedTokensDecoder) {
  ScratchDir d("special_added");
  write(d.path() + "/tokenizer_config.json",
        R"({"bos_token": "<bos>", "added_tokens_decoder": {"0": {"content": "<pad>"}, "2": {"content": "<bos>"}}})");
  auto s = load_special_tokens(d.path(), nullptr);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_EQ(s->bos, std::optional<int32_t>(2));
}

TEST(SpecialTokens, AddBosTokenFalseIsHonoured) {
  ScratchDir d("special_nobos");
  write(d.path() + "/tokenizer_config.json", R"({"add_bos_token": false})");
  FakeTokenizer tok;
  auto s = load_special_tokens(d.path(), &tok);
  ASSERT_TRUE(s.is_ok());
  EXPECT_FALSE(s->add_bos);
  auto ids = encode_prompt(tok, *s, "ab");
  ASSERT_TRUE(ids.is_ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{100, 101}));
  auto empty = encode_prompt(tok, *s, "");
  ASSERT_FALSE(empty.is_ok());
  EXPECT_NE(empty.status().message().find("empty"), std::string::npos);
}

TEST(SpecialTokens, EncodePromptPrependsBos) {
  FakeTokenizer tok;
  SpecialTokens s;
  s.bos = 1;
  auto ids = encode_prompt(tok, s, "abc");
  ASSERT_TRUE(ids.is_ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{1, 100, 101, 102}));
  auto only_bos = encode_prompt(tok, s, "");
  ASSERT_TRUE(only_bos.is_ok());
  EXPECT_EQ(*only_bos, std::vector<int32_t>{1});
  s.bos.reset();
  auto missing = encode_prompt(tok, s, "abc");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("no BOS id"), std::string::npos);
}

TEST(SpecialTokens, BrokenFilesAreErrorsNamingTheFile) {
  FakeTokenizer tok;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"generation_config.json", "{not json"},
      {"generation_config.json", R"({"eos_token_id": "two"})"},
      {"config.json", R"({"eos_token_id": [1, -4]})"},
      {"config.json", R"([1, 2])"},
      {"tokenizer_config.json", R"({"bos_token": 5})"},
      {"tokenizer_config.json", R"({"add_bos_token": "yes"})"},
      {"tokenizer_config.json", R"({"bos_token": "<nope>"})"},
  };
  for (const auto& [file, text] : cases) {
    ScratchDir d("special_bad");
    write(d.path() + "/" + file, text);
    auto s = load_special_tokens(d.path(), &tok);
    ASSERT_FALSE(s.is_ok()) << file << ": " << text;
    EXPECT_NE(s.status().message().find(file), std::string::npos) << s.status().message();
  }
}

TEST(SpecialTokens, AddedTokenKeysAreWholeIdsInRange) {
  // std::stol read "3abc" as 3, and an int32 cast made "4294967297" the id 1 (issue 33).
  for (const char* key : {"4294967297", "3abc", "-1", "2147483648", " 2", "0x10", ""}) {
    ScratchDir d("special_wrap");
    write(d.path() + "/tokenizer_config.json",
          std::string(R"({"bos_token": "<s>", "added_tokens_decoder": {")") + key + R"(": {"content": "<s>"}}})");
    auto s = load_special_tokens(d.path(), nullptr);
    ASSERT_FALSE(s.is_ok()) << key << " became id " << (s.is_ok() && s->bos ? *s->bos : -1);
    EXPECT_NE(s.status().message().find("is not a token id"), std::string::npos) << s.status().message();
  }
  ScratchDir d("special_max");
  write(d.path() + "/tokenizer_config.json",
        R"({"bos_token": "<s>", "added_tokens_decoder": {"2147483647": {"content": "<s>"}}})");
  auto s = load_special_tokens(d.path(), nullptr);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_EQ(s->bos, std::optional<int32_t>(INT32_MAX));
  // Ids given as numbers: an unsigned one beyond int32 is refused too, never wrapped.
  write(d.path() + "/generation_config.json", R"({"eos_token_id": 4294967298})");
  EXPECT_FALSE(load_special_tokens(d.path(), nullptr).is_ok());
}

TEST(SpecialTokens, DeeplyNestedFieldsAreErrorsNotCrashes) {
  // 100,000 levels in a typed field crashed (SIGSEGV) while the message was being built: dump()
  // and a copy of the value recursed once per level (issue 33). These files are refused past 64
  // levels while parsing (json_file.h); within that, the message describes a value by its size.
  for (const int levels : {100000, 60}) {
    const std::string deep = std::string(size_t(levels), '[') + "1" + std::string(size_t(levels), ']');
    const std::pair<std::string, std::string> cases[] = {
        {"generation_config.json", R"({"eos_token_id": )" + deep + "}"},
        {"tokenizer_config.json", R"({"bos_token": )" + deep + "}"},
        {"config.json", R"({"bos_token_id": )" + deep + "}"},
    };
    FakeTokenizer tok;
    for (const auto& [file, text] : cases) {
      ScratchDir d("special_deep");
      write(d.path() + "/" + file, text);
      auto s = load_special_tokens(d.path(), &tok);
      ASSERT_FALSE(s.is_ok()) << file;
      EXPECT_NE(s.status().message().find(levels > 64 ? "nested deeper than 64 levels" : "an array of 1 elements"),
                std::string::npos)
          << s.status().message();
      EXPECT_LT(s.status().message().size(), 400u);
    }
  }
}

TEST(SpecialTokens, CheckRefusesIdsOutsideTheModel) {
  SpecialTokens s;
  s.bos = 1;
  s.eos = {2, 600};
  s.eos_source = "generation_config.json";
  Status st = s.check(512);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("generation_config.json"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("600"), std::string::npos);
  s.eos = {2};
  EXPECT_TRUE(s.check(512).is_ok());
}

}  // namespace
}  // namespace tunableop::llm
