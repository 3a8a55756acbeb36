// The SentencePiece tokenizer against SentencePiece's own command-line tools: the committed test
// model's ids for a set of strings (spm_encode.tsv, and spm_encode itself when installed), round
// trips through byte fallback, and the errors for missing or broken files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "llm/text/tokenizer.h"
#include "text_test_util.h"

namespace tunableop::llm {
namespace {

using testing::ScratchDir;

struct EncodeCase {
  std::string text;
  std::vector<int32_t> ids;
};

// spm_encode.tsv: text <TAB> space-separated ids.
std::vector<EncodeCase> spm_cases() {
  std::ifstream in(testing::tokenizer_fixture_dir() + "/spm_encode.tsv");
  std::vector<EncodeCase> cases;
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    EncodeCase c{line.substr(0, tab), {}};
    std::istringstream ids(line.substr(tab + 1));
    for (int32_t id; ids >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  return cases;
}

bool is_byte_piece(int32_t id) { return id >= 3 && id < 3 + 256; }

TEST(Tokenizer, ReadsTheTestModel) {
  LOAD_TEST_TOKENIZER(tok);
  EXPECT_EQ(tok.vocab_size(), testing::kTestVocab);
  EXPECT_EQ(tok.bos_id(), std::optional<int32_t>(1));
  EXPECT_EQ(tok.eos_id(), std::optional<int32_t>(2));
  EXPECT_EQ(tok.piece_id("<s>"), std::optional<int32_t>(1));
  EXPECT_EQ(tok.piece_id("</s>"), std::optional<int32_t>(2));
  EXPECT_EQ(tok.piece_id("<unk>"), std::optional<int32_t>(0));
  EXPECT_EQ(tok.piece_id("<no such piece>"), std::nullopt);
  EXPECT_NE(tok.description().find("512 pieces, byte fallback"), std::string::npos) << tok.description();
}

TEST(Tokenizer, IdsEqualSpmEncodeRecordedWithTheModel) {
  LOAD_TEST_TOKENIZER(tok);
  const auto cases = spm_cases();
  ASSERT_GE(cases.size(), 10u) << "tests/fixtures/tokenizer/spm_encode.tsv is missing or short";
  for (const auto& c : cases) {
    auto ids = tok.encode(c.text);
    ASSERT_TRUE(ids.is_ok()) << ids.status().to_string();
    EXPECT_EQ(*ids, c.ids) << "\"" << c.text << "\"";
  }
}

// The recorded ids stay honest: when SentencePiece's tool is installed, ask it again.
TEST(Tokenizer, IdsEqualSpmEncodeRunNow) {
  LOAD_TEST_TOKENIZER(tok);
  if (std::system("command -v spm_encode >/dev/null 2>&1") != 0) GTEST_SKIP() << "spm_encode is not installed";
  ScratchDir dir("spm");
  const auto cases = spm_cases();
  {
    std::ofstream out(dir.path() + "/in.txt");
    for (const auto& c : cases) out << c.text << "\n";
  }
  const std::string cmd = "spm_encode --model=" + testing::tokenizer_fixture() + " --output_format=id <" + dir.path() +
                          "/in.txt >" + dir.path() + "/out.txt";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(dir.path() + "/out.txt");
  std::string line;
  for (const auto& c : cases) {
    ASSERT_TRUE(std::getline(in, line));
    std::istringstream ids(line);
    std::vector<int32_t> want;
    for (int32_t id; ids >> id;) want.push_back(id);
    auto got = tok.encode(c.text);
    ASSERT_TRUE(got.is_ok());
    EXPECT_EQ(*got, want) << "\"" << c.text << "\"";
  }
}

TEST(Tokenizer, RoundTripsAsciiSpacesAccentsCjkAndEmoji) {
  LOAD_TEST_TOKENIZER(tok);
  const std::vector<std::string> texts = {
      "Hello Earthlings!",
      "  leading, double  spaces and a trailing one ",
      "Le café est très bon à côté. Über große Züge.",
      "今天天气很好",               // seen in training: pieces
      "猫が好きです",               // mostly unseen: byte fallback
      "Rocket 🚀 to the 🌕 and 🏠",    // 4-byte UTF-8, byte fallback
      "e\u0342 \uFB01 9876543210",  // combining mark, ligature (identity normalisation), digits
      "x",
  };
  for (const auto& t : texts) {
    auto ids = tok.encode(t);
    ASSERT_TRUE(ids.is_ok()) << ids.status().to_string();
    auto back = tok.decode(*ids);
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_EQ(*back, t);
  }
  // The emoji really went through byte pieces (4 per emoji), the seen CJK did not.
  auto rocket = tok.encode("🚀");
  ASSERT_TRUE(rocket.is_ok());
  EXPECT_EQ(std::count_if(rocket->begin(), rocket->end(), is_byte_piece), 4);
  auto seen = tok.encode("今天");
  ASSERT_TRUE(seen.is_ok());
  EXPECT_EQ(std::count_if(seen->begin(), seen->end(), is_byte_piece), 0);
}

TEST(Tokenizer, DecodeDropsControlTokensAndTheDummyPrefix) {
  LOAD_TEST_TOKENIZER(tok);
  auto ids = tok.encode("Hello world");
  ASSERT_TRUE(ids.is_ok());
  std::vector<int32_t> with_special = {1};
  with_special.insert(with_special.end(), ids->begin(), ids->end());
  with_special.push_back(2);
  auto text = tok.decode(with_special);
  ASSERT_TRUE(text.is_ok());
  EXPECT_EQ(*text, "Hello world");
  auto empty = tok.decode({});
  ASSERT_TRUE(empty.is_ok());
  EXPECT_EQ(*empty, "");
}

TEST(Tokenizer, RejectsIdsOutsideTheVocabulary) {
  LOAD_TEST_TOKENIZER(tok);
  for (int32_t bad : {-1, 512, 1 << 30}) {
    auto text = tok.decode({5, bad});
    ASSERT_FALSE(text.is_ok());
    EXPECT_NE(text.status().message().find(std::to_string(bad)), std::string::npos) << text.status().message();
  }
}

TEST(Tokenizer, MissingTokenizerNamesTheFileAndTheWayOut) {
  ScratchDir dir("no_tokenizer");
  auto t = load_tokenizer(dir.path());
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find(dir.path()), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("neither tokenizer.json nor tokenizer.model"), std::string::npos)
      << t.status().message();
  EXPECT_NE(t.status().message().find("--prompt-ids"), std::string::npos);
  std::ofstream(dir.path() + "/tokenizer.json") << "{}";
  t = load_tokenizer(dir.path());
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("tokenizer.json"), std::string::npos) << t.status().message();
}

TEST(Tokenizer, BrokenModelFileIsAParseError) {
  ScratchDir dir("bad_tokenizer");
  std::ofstream(dir.path() + "/tokenizer.model") << "this is not a protobuf";
  auto t = load_tokenizer(dir.path());
  ASSERT_FALSE(t.is_ok());
  if (!tokenizer_available()) {
    // Without SentencePiece the message says what is missing instead.
    EXPECT_EQ(t.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(t.status().message().find("SentencePiece"), std::string::npos) << t.status().message();
    return;
  }
  EXPECT_EQ(t.status().code(), StatusCode::kParseError) << t.status().to_string();
  EXPECT_NE(t.status().message().find("tokenizer.model"), std::string::npos);
  // Truncated real model: also refused, not crashed on.
  std::ifstream in(testing::tokenizer_fixture(), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(dir.path() + "/tokenizer.model", std::ios::binary | std::ios::trunc)
      << bytes.substr(0, bytes.size() / 2);
  EXPECT_FALSE(load_tokenizer(dir.path()).is_ok());
}

// A SentencePiece directory that lists added tokens (tokenizer_config.json's added_tokens_decoder)
// matches them in text as transformers' tokenizer.json does: a chat's <s> is BOS, not "<", "s", ">".
TEST(Tokenizer, SentencePieceMatchesTheDirectorysAddedTokens) {
  LOAD_TEST_TOKENIZER(tok);
  ScratchDir dir("spm_added");
  std::filesystem::copy_file(testing::tokenizer_fixture(), dir.path() + "/tokenizer.model");
  std::ofstream(dir.path() + "/tokenizer_config.json")
      << R"({"added_tokens_decoder": {"1": {"content": "<s>", "special": true}, "2": {"content": "</s>", "special": true}}})";
  auto t = load_tokenizer(dir.path());
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_NE((*t)->description().find("2 added tokens matched in text"), std::string::npos) << (*t)->description();
  auto hello = tok.encode("Hello"), world = tok.encode(" world");
  ASSERT_TRUE(hello.is_ok() && world.is_ok());
  std::vector<int32_t> want = {1};
  want.insert(want.end(), hello->begin(), hello->end());
  want.push_back(2);
  want.insert(want.end(), world->begin(), world->end());
  auto ids = (*t)->encode("<s>Hello</s> world");
  ASSERT_TRUE(ids.is_ok()) << ids.status().to_string();
  EXPECT_EQ(*ids, want);
  auto plain = (*t)->encode("Hello");
  ASSERT_TRUE(plain.is_ok());
  EXPECT_EQ(*plain, *hello);

  // Where transformers' tokenizer prefixes only the start (legacy false, Metaspace "first"),
  // text after an added token is refused, not given other ids.
  std::ofstream(dir.path() + "/tokenizer_config.json", std::ios::trunc)
      << R"({"legacy": false, "added_tokens_decoder": {"1": {"content": "<s>", "special": true}}})";
  t = load_tokenizer(dir.path());
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_TRUE((*t)->encode("Hello<s>").is_ok());
  auto refused = (*t)->encode("<s>Hello");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(refused.status().message().find("prepend_scheme \"first\""), std::string::npos)
      << refused.status().message();

  // An entry naming a piece the model does not have under that id.
  std::ofstream(dir.path() + "/tokenizer_config.json", std::ios::trunc)
      << R"({"added_tokens_decoder": {"7": {"content": "<s>"}}})";
  auto bad = load_tokenizer(dir.path());
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("added_tokens_decoder[\"7\"]"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace tunableop::llm
