// tokenizer.json byte-level BPE: ids derived by hand on a tiny tokenizer (tokenizer_json_util.h)
// for the merge loop, the split regex, added tokens and their flags, normalisation, the
// post-processor and the decoder; every malformed file refused with the file and the field;
// which file load_tokenizer reads. The comparison with Hugging Face's own ids on the
// tokenizers-trained fixtures is tokenizer_json_reference_test.cc.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "llm/text/byte_level.h"
#include "llm/text/regex.h"
#include "llm/text/special_tokens.h"
#include "llm/text/text_stream.h"
#include "llm/text/tokenizer.h"
#include "llm/text/tokenizer_json.h"
#include "llm/text/utf8.h"
#include "text_test_util.h"
#include "tokenizer_json_util.h"

namespace tunableop::llm {
namespace {

using json = nlohmann::ordered_json;
using testing::ScratchDir;

#define SKIP_WITHOUT_PCRE2() \
  if (!regex_available()) GTEST_SKIP() << "this build has no PCRE2 (libpcre2-dev): no tokenizer.json"

std::unique_ptr<Tokenizer> tiny(const testing::TinyTokenizerOptions& o = {}) {
  auto t = make_tokenizer_json(nlohmann::json::parse(testing::tiny_tokenizer_json(o).dump()), "tiny/tokenizer.json");
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  return t.is_ok() ? std::move(*t) : nullptr;
}

std::vector<int32_t> encode(const Tokenizer& t, const std::string& text) {
  auto ids = t.encode(text);
  EXPECT_TRUE(ids.is_ok()) << ids.status().to_string();
  return ids.is_ok() ? *ids : std::vector<int32_t>{};
}

std::vector<int32_t> bytes_of(const std::string& s) {
  std::vector<int32_t> ids;
  for (char c : s) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

TEST(TokenizerJson, ByteLevelMapIsGpt2s) {
  EXPECT_EQ(byte_level::char_of(' '), "\xC4\xA0");   // Ġ
  EXPECT_EQ(byte_level::char_of('\n'), "\xC4\x8A");  // Ċ
  EXPECT_EQ(byte_level::char_of('A'), "A");
  EXPECT_EQ(byte_level::char_of(0xAD), "\xC5\x83");  // soft hyphen, the last remapped byte
  for (int b = 0; b < 256; ++b) {
    size_t n = 0;
    EXPECT_EQ(byte_level::byte_of(utf8::decode(byte_level::char_of(uint8_t(b)), 0, &n)), b);
  }
  EXPECT_EQ(byte_level::byte_of(0x20), -1);
  std::string out;
  EXPECT_FALSE(byte_level::decode("a b", out));
}

TEST(TokenizerJson, MergesByRankLeftmostFirst) {
  SKIP_WITHOUT_PCRE2();
  auto t = tiny();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->vocab_size(), 273);
  // h e (rank 0) before e l (rank 14): hello, never h + ello.
  EXPECT_EQ(encode(*t, "hello"), std::vector<int32_t>({testing::kTinyHello}));
  // " the": h e merges first, then " t", then " t" + "he".
  EXPECT_EQ(encode(*t, " the"), std::vector<int32_t>({testing::kTinyThe}));
  EXPECT_EQ(encode(*t, "hello world"), std::vector<int32_t>({testing::kTinyHello, testing::kTinyWorld}));
  // é is two bytes, each its own symbol; l l still merges.
  EXPECT_EQ(encode(*t, "h\u00e9llo"), std::vector<int32_t>({'h', 0xC3, 0xA9, testing::kTinyLl, 'o'}));
  EXPECT_EQ(encode(*t, "xyz"), bytes_of("xyz"));
  EXPECT_EQ(encode(*t, ""), std::vector<int32_t>{});
}

TEST(TokenizerJson, SplitsAsLlama3sRegex) {
  SKIP_WITHOUT_PCRE2();
  auto t = tiny();
  ASSERT_TRUE(t);
  // Digits in runs of at most three: 123 | 45 (and 12 3 would be wrong).
  std::vector<int32_t> want = {testing::kTiny123, '4', '5'};
  EXPECT_EQ(encode(*t, "12345"), want);
  // A contraction is its own piece: I | 'm.
  EXPECT_EQ(encode(*t, "I'm"), std::vector<int32_t>({'I', testing::kTinyApostropheM}));
  EXPECT_EQ(encode(*t, "I'M"), std::vector<int32_t>({'I', '\'', 'M'}));  // (?i:) matches, no merge for 'M
  // "hello" after a space is " hello" (no merge for it): the space stays with the word.
  EXPECT_EQ(encode(*t, " hello"),
            bytes_of(" hello").size() == 6 ? std::vector<int32_t>({' ', testing::kTinyHello}) : std::vector<int32_t>{});
  // White space before a word: all but the last space is its own piece (\s+(?!\S)).
  EXPECT_EQ(encode(*t, "a   the"), std::vector<int32_t>({'a', ' ', ' ', testing::kTinyThe}));
  // Newline runs stay together with the spaces before them.
  EXPECT_EQ(encode(*t, "a \n\nb"), std::vector<int32_t>({'a', ' ', '\n', '\n', 'b'}));
}

TEST(TokenizerJson, SpelledOutWhiteSpaceIsUnicodes) {
  auto p = spell_out_white_space(R"(\s+(?!\S)|[^\s\p{L}]|\\s|[\]\s])");
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->find("\\s+"), std::string::npos) << *p;
  EXPECT_NE(p->find("\\\\s"), std::string::npos) << *p;  // an escaped backslash then s: untouched
  EXPECT_NE(p->find("[^\\t-\\r"), std::string::npos) << *p;
  EXPECT_FALSE(spell_out_white_space("[\\S]").is_ok());
  SKIP_WITHOUT_PCRE2();
  auto re = Regex::compile(R"(\s+)", "test");
  ASSERT_TRUE(re.is_ok());
  // NEL and NBSP are White_Space (Oniguruma's \s, and so tokenizers'); U+180E and ZWSP are not.
  for (const char* s : {"\u0085", "\u00a0", "\u3000", "\u2028", "\t"}) {
    auto m = (*re)->find_all(s);
    ASSERT_TRUE(m.is_ok());
    EXPECT_EQ(m->size(), 1u) << s;
  }
  for (const char* s : {"\u180e", "\u200b", "\ufeff", "x"}) {
    auto m = (*re)->find_all(s);
    ASSERT_TRUE(m.is_ok());
    EXPECT_EQ(m->size(), 0u) << s;
  }
}

TEST(TokenizerJson, SpecialTokensInTextAreMatched) {
  SKIP_WITHOUT_PCRE2();
  auto t = tiny();
  ASSERT_TRUE(t);
  EXPECT_EQ(encode(*t, "a<|eot_id|>b"), std::vector<int32_t>({'a', testing::kTinyEot, 'b'}));
  EXPECT_EQ(encode(*t, "<|begin_of_text|><|eot_id|><|eot_id|>"),
            std::vector<int32_t>({testing::kTinyBos, testing::kTinyEot, testing::kTinyEot}));
  // Not quite a token: plain text.
  EXPECT_EQ(encode(*t, "<|eot_id"), bytes_of("<|eot_id"));
  // Text around a token is pre-tokenized on its own: " the" after the token keeps its space.
  EXPECT_EQ(encode(*t, "<|eot_id|> the"), std::vector<int32_t>({testing::kTinyEot, testing::kTinyThe}));
  EXPECT_EQ(t->piece_id("<|eot_id|>"), std::optional<int32_t>(testing::kTinyEot));
  EXPECT_EQ(t->piece_id(byte_level::encode(" the")), std::optional<int32_t>(testing::kTinyThe));
  EXPECT_EQ(t->piece_id("nope"), std::nullopt);
}

TEST(TokenizerJson, AddedTokenFlags) {
  SKIP_WITHOUT_PCRE2();
  testing::TinyTokenizerOptions o;
  auto add = [&](int32_t id, const char* content, bool lstrip, bool rstrip, bool single_word, bool special) {
    o.extra_added.push_back(json{{"id", id},
                                 {"content", content},
                                 {"single_word", single_word},
                                 {"lstrip", lstrip},
                                 {"rstrip", rstrip},
                                 {"normalized", false},
                                 {"special", special}});
  };
  add(273, "[MASK]", true, true, false, true);
  add(274, "<w>", false, false, true, false);
  auto t = tiny(o);
  ASSERT_TRUE(t);
  // lstrip/rstrip: the spaces around [MASK] belong to it.
  EXPECT_EQ(encode(*t, "a  [MASK]  b"), std::vector<int32_t>({'a', 273, 'b'}));
  // single_word: only where no word character touches it.
  EXPECT_EQ(encode(*t, "a <w> b"), std::vector<int32_t>({'a', ' ', 274, ' ', 'b'}));
  EXPECT_EQ(encode(*t, "x<w>y"), bytes_of("x<w>y"));
  EXPECT_EQ(encode(*t, "<w>."), std::vector<int32_t>({274, '.'}));
  // A non-special added token decodes to its text; a special one to nothing.
  auto text = t->decode({'a', 274, 273, testing::kTinyEot, 'b'});
  ASSERT_TRUE(text.is_ok());
  EXPECT_EQ(*text, "a<w>b");
}

TEST(TokenizerJson, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  SKIP_WITHOUT_PCRE2();
  // "ell" is in no merge path of "hell" + "o"; make a vocabulary entry that merges cannot reach.
  auto j = testing::tiny_tokenizer_json();
  j["model"]["vocab"]["ab"] = 273;
  j["added_tokens"][0]["id"] = 274;
  j["added_tokens"][1]["id"] = 275;
  j["post_processor"] = nullptr;
  auto without = make_tokenizer_json(nlohmann::json::parse(j.dump()), "t.json");
  ASSERT_TRUE(without.is_ok()) << without.status().to_string();
  EXPECT_EQ(encode(**without, "ab"), std::vector<int32_t>({'a', 'b'}));
  j["model"]["ignore_merges"] = true;
  auto with = make_tokenizer_json(nlohmann::json::parse(j.dump()), "t.json");
  ASSERT_TRUE(with.is_ok());
  EXPECT_EQ(encode(**with, "ab"), std::vector<int32_t>({273}));
}

TEST(TokenizerJson, LegacyStringMergesEqualTheListForm) {
  SKIP_WITHOUT_PCRE2();
  testing::TinyTokenizerOptions legacy;
  legacy.list_merges = false;
  auto a = tiny(), b = tiny(legacy);
  ASSERT_TRUE(a && b);
  for (const char* s : {"hello world", " the 12345", "I'm hell o"}) EXPECT_EQ(encode(*a, s), encode(*b, s)) << s;
}

TEST(TokenizerJson, NfcNormalizerComposes) {
  SKIP_WITHOUT_PCRE2();
  testing::TinyTokenizerOptions o;
  o.normalizer = json{{"type", "NFC"}};
  auto made = make_tokenizer_json(nlohmann::json::parse(testing::tiny_tokenizer_json(o).dump()), "t.json");
  if (!made.is_ok()) {
    EXPECT_NE(made.status().message().find("utf8proc"), std::string::npos) << made.status().to_string();
    GTEST_SKIP() << "this build has no utf8proc";
  }
  EXPECT_EQ(encode(**made, "e\u0301"), encode(**made, "\u00e9"));
  EXPECT_EQ(encode(**made, "\u212b"), bytes_of("\u00c5"));  // Angstrom sign -> A with ring
  EXPECT_NE(encode(*tiny(), "e\u0301"), encode(*tiny(), "\u00e9"));
}

TEST(TokenizerJson, DecodeRoundTripsAnyValidText) {
  SKIP_WITHOUT_PCRE2();
  auto t = tiny();
  ASSERT_TRUE(t);
  std::mt19937 rng(7);
  const std::vector<std::string> alphabet = {"a", " ", "\n",         "\t", "é", "中", "🚀", "👍🏽", "\u200d",
                                             "1", "'", "<|eot_id|>", "h",  "e", "l",  "o", "\r",       "\u00a0"};
  for (int round = 0; round < 200; ++round) {
    std::string s;
    const int n = int(rng() % 24);
    for (int i = 0; i < n; ++i) s += alphabet[rng() % alphabet.size()];
    auto ids = t->encode(s);
    ASSERT_TRUE(ids.is_ok());
    auto back = t->decode(*ids);
    ASSERT_TRUE(back.is_ok());
    // The special token decodes to nothing; everything else comes back byte for byte.
    std::string want = s;
    for (size_t at; (at = want.find("<|eot_id|>")) != std::string::npos;) want.erase(at, 10);
    EXPECT_EQ(*back, want);
  }
}

TEST(TokenizerJson, DecodeMarksIncompleteUtf8AndSkipsUnknownIds) {
  SKIP_WITHOUT_PCRE2();
  auto t = tiny();
  ASSERT_TRUE(t);
  auto half = t->decode({0xF0, 0x9F});  // two bytes of a four-byte emoji
  ASSERT_TRUE(half.is_ok());
  EXPECT_EQ(*half, "\xEF\xBF\xBD");  // one U+FFFD for the maximal subpart
  // Ids past the tokenizer (a model's padded vocabulary) decode to nothing, as in `tokenizers`.
  auto padded = t->decode({'a', 9999, 'b'});
  ASSERT_TRUE(padded.is_ok());
  EXPECT_EQ(*padded, "ab");
  auto invalid = t->encode("a\xFF");
  ASSERT_FALSE(invalid.is_ok());
  EXPECT_NE(invalid.status().message().find("UTF-8"), std::string::npos);
}

TEST(TokenizerJson, StreamingNeverSplitsACharacter) {
  SKIP_WITHOUT_PCRE2();
  auto t = tiny();
  ASSERT_TRUE(t);
  const std::string text = "a🚀 é中👍🏽 <|eot_id|>hello";
  auto ids = t->encode(text);
  ASSERT_TRUE(ids.is_ok());
  TextStream stream(*t);
  std::string out;
  for (int32_t id : *ids) {
    auto piece = stream.put(id);
    ASSERT_TRUE(piece.is_ok());
    EXPECT_EQ(utf8::first_invalid(*piece), std::string::npos);
    EXPECT_EQ(piece->find("\xEF\xBF\xBD"), std::string::npos) << "a replacement character was printed";
    out += *piece;
  }
  auto rest = stream.finish();
  ASSERT_TRUE(rest.is_ok());
  out += *rest;
  EXPECT_EQ(out, "a🚀 é中👍🏽 hello");
}

TEST(TokenizerJson, PostProcessorDecidesTheBos) {
  SKIP_WITHOUT_PCRE2();
  ScratchDir dir("tj_bos");
  testing::write_tiny_tokenizer(dir.path());
  auto t = load_tokenizer(dir.path());
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  auto s = load_special_tokens(dir.path(), t->get());
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_EQ(s->bos, std::optional<int32_t>(testing::kTinyBos));
  EXPECT_TRUE(s->add_bos);
  auto ids = encode_prompt(**t, *s, "hello");
  ASSERT_TRUE(ids.is_ok());
  EXPECT_EQ(*ids, std::vector<int32_t>({testing::kTinyBos, testing::kTinyHello}));

  // Qwen-style: no TemplateProcessing, so no BOS even where config.json names one.
  ScratchDir qwen("tj_nobos");
  testing::TinyTokenizerOptions o;
  o.bos = false;
  testing::write_tiny_tokenizer(qwen.path(), o);
  std::ofstream(qwen.path() + "/config.json") << R"({"bos_token_id": 271, "eos_token_id": 272})";
  auto tq = load_tokenizer(qwen.path());
  ASSERT_TRUE(tq.is_ok());
  auto sq = load_special_tokens(qwen.path(), tq->get());
  ASSERT_TRUE(sq.is_ok());
  EXPECT_FALSE(sq->add_bos);
  auto qids = encode_prompt(**tq, *sq, "hello");
  ASSERT_TRUE(qids.is_ok());
  EXPECT_EQ(*qids, std::vector<int32_t>({testing::kTinyHello}));
  EXPECT_EQ(sq->eos, std::vector<int32_t>({testing::kTinyEot}));
}

// What load_tokenizer reads: transformers reads tokenizer.json whenever there is one; ours
// reads it when it is a byte-level BPE and otherwise the tokenizer.model it was converted from.
TEST(TokenizerJson, LoadTokenizerPicksWhatTheDirectoryShips) {
  SKIP_WITHOUT_PCRE2();
  ScratchDir both("tj_both");
  testing::write_tiny_tokenizer(both.path());
  std::filesystem::copy_file(testing::tokenizer_fixture(), both.path() + "/tokenizer.model");
  auto t = load_tokenizer(both.path());
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_NE((*t)->description().find("byte-level BPE"), std::string::npos) << (*t)->description();

  ScratchDir metaspace("tj_metaspace");
  testing::write_json(metaspace.path() + "/tokenizer.json",
                      json{{"model", {{"type", "BPE"}, {"vocab", json::object()}, {"merges", json::array()}}},
                           {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", "\u2581"}}}});
  auto alone = load_tokenizer(metaspace.path());
  ASSERT_FALSE(alone.is_ok());
  EXPECT_NE(alone.status().message().find("Metaspace"), std::string::npos) << alone.status().message();
  EXPECT_NE(alone.status().message().find("no tokenizer.model"), std::string::npos) << alone.status().message();
  if (tokenizer_available()) {
    std::filesystem::copy_file(testing::tokenizer_fixture(), metaspace.path() + "/tokenizer.model");
    auto spm = load_tokenizer(metaspace.path());
    ASSERT_TRUE(spm.is_ok()) << spm.status().to_string();
    EXPECT_NE((*spm)->description().find("sentencepiece"), std::string::npos) << (*spm)->description();
  }
}

// One malformed field at a time: the error names the file and the field.
struct Broken {
  const char* what;
  std::function<void(json&)> edit;
  std::vector<std::string> expect;  // substrings of the message
};

TEST(TokenizerJson, MalformedFilesNameTheFileAndTheField) {
  SKIP_WITHOUT_PCRE2();
  const std::vector<Broken> cases = {
      {"model type", [](json& j) { j["model"]["type"] = "WordPiece"; }, {"model.type", "WordPiece"}},
      {"pre-tokenizer type",
       [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["type"] = "Punctuation"; },
       {"pre_tokenizer.pretokenizers[0]", "Punctuation"}},
      {"normalizer type",
       [](json& j) {
         j["normalizer"] = json{{"type", "Lowercase"}};
       },
       {"normalizer", "Lowercase"}},
      {"merge of an unknown token",
       [](json& j) {
         j["model"]["merges"][3] = json::array({"zz", "o"});
       },
       {"model.merges[3]", "\"zz\" is not in model.vocab"}},
      {"merged token missing",
       [](json& j) {
         j["model"]["merges"].push_back(json::array({"x", "y"}));
       },
       {"model.merges[15]", "\"xy\" is not in model.vocab"}},
      {"merge not a pair", [](json& j) { j["model"]["merges"][0] = "hello"; }, {"model.merges[0]", "two tokens"}},
      {"duplicated id", [](json& j) { j["model"]["vocab"]["dup"] = 5; }, {"model.vocab", "id 5"}},
      {"negative id", [](json& j) { j["model"]["vocab"]["neg"] = -3; }, {"model.vocab", "must be a token id"}},
      {"id far out of range", [](json& j) { j["model"]["vocab"]["far"] = 2000000000; }, {"model.vocab", "2000000000"}},
      {"added token clashes with the vocabulary",
       [](json& j) { j["added_tokens"][0]["id"] = 65; },
       {"added_tokens[0]", "id 65", "model.vocab"}},
      {"added token id twice",
       [](json& j) { j["added_tokens"][1]["id"] = testing::kTinyBos; },
       {"added_tokens[1]", "given to both"}},
      {"added token content twice",
       [](json& j) { j["added_tokens"][1]["content"] = "<|begin_of_text|>"; },
       {"added_tokens[1]", "added twice"}},
      {"added token without content",
       [](json& j) { j["added_tokens"][0].erase("content"); },
       {"added_tokens[0].content"}},
      {"regex PCRE2 rejects",
       [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(?i:abc|[x"; },
       {"pre_tokenizer.pretokenizers[0].pattern.Regex", "offset 10"}},
      {"unknown split behavior",
       [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways"; },
       {"pre_tokenizer.pretokenizers[0].behavior", "Sideways"}},
      {"decoder",
       [](json& j) {
         j["decoder"] = json{{"type", "WordPiece"}};
       },
       {"decoder", "WordPiece"}},
      {"template names an unknown token",
       [](json& j) { j["post_processor"]["processors"][1]["single"][0]["SpecialToken"]["id"] = "<bos>"; },
       {"post_processor.processors[1].single[0]", "<bos>"}},
      {"dropout", [](json& j) { j["model"]["dropout"] = 0.1; }, {"model.dropout"}},
      {"unk token not in vocab", [](json& j) { j["model"]["unk_token"] = "<unk>"; }, {"model.unk_token", "<unk>"}},
      {"vocab not an object", [](json& j) { j["model"]["vocab"] = json::array(); }, {"model.vocab"}},
      {"huge value quoted short",
       [](json& j) {
         j["model"]["merges"][0] = json::array({std::string(100000, 'q'), "o"});
       },
       {"model.merges[0]", "..."}},
  };
  for (const Broken& c : cases) {
    auto j = testing::tiny_tokenizer_json();
    c.edit(j);
    auto t = make_tokenizer_json(nlohmann::json::parse(j.dump()), "DIR/tokenizer.json");
    ASSERT_FALSE(t.is_ok()) << c.what;
    const std::string& m = t.status().message();
    EXPECT_EQ(m.rfind("DIR/tokenizer.json", 0), 0u) << c.what << ": " << m;
    for (const auto& e : c.expect) EXPECT_NE(m.find(e), std::string::npos) << c.what << ": " << m;
    EXPECT_LT(m.size(), 600u) << c.what << ": the message quotes too much";
  }
}

TEST(TokenizerJson, BrokenFilesAreErrorsNotCrashes) {
  SKIP_WITHOUT_PCRE2();
  ScratchDir dir("tj_broken");
  const std::string path = dir.path() + "/tokenizer.json";
  std::ofstream(path) << std::string(200000, '[') << std::string(200000, ']');
  auto deep = load_tokenizer_json(path);
  ASSERT_FALSE(deep.is_ok());
  EXPECT_NE(deep.status().message().find("nested deeper"), std::string::npos) << deep.status().message();

  const std::string good = testing::tiny_tokenizer_json().dump();
  std::ofstream(path, std::ios::trunc) << good.substr(0, good.size() / 2);
  auto truncated = load_tokenizer_json(path);
  ASSERT_FALSE(truncated.is_ok());
  EXPECT_NE(truncated.status().message().find(path), std::string::npos);
  EXPECT_NE(truncated.status().message().find("not valid JSON"), std::string::npos);

  std::filesystem::remove(path);
  std::filesystem::create_directory(path);
  EXPECT_FALSE(load_tokenizer_json(path).is_ok());
}

TEST(TokenizerJson, AddedTokensDecoderMustAgree) {
  SKIP_WITHOUT_PCRE2();
  ScratchDir dir("tj_decoder");
  testing::write_tiny_tokenizer(dir.path());
  std::ofstream(dir.path() + "/tokenizer_config.json")
      << R"({"added_tokens_decoder": {"271": {"content": "<|begin_of_text|>"}, "272": {"content": "<|end|>"}}})";
  auto t = load_tokenizer(dir.path());
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("tokenizer_config.json: added_tokens_decoder[\"272\"]"), std::string::npos)
      << t.status().message();
  std::ofstream(dir.path() + "/tokenizer_config.json", std::ios::trunc)
      << R"({"added_tokens_decoder": {"272": {"content": "<|eot_id|>", "special": true}}})";
  EXPECT_TRUE(load_tokenizer(dir.path()).is_ok());
}

// A vocabulary of Llama-3's size, for the merge loop and the loader at scale: 128k tokens and
// merges built from a deterministic alphabet; every word of a long text must encode to the
// id its spelling was given (each word is a vocabulary entry reachable through merges).
TEST(TokenizerJson, LargeVocabularyEncodesAsBuilt) {
  SKIP_WITHOUT_PCRE2();
  auto j = nlohmann::json::parse(testing::tiny_tokenizer_json().dump());
  j["added_tokens"] = nlohmann::json::array();
  j["post_processor"] = nullptr;
  nlohmann::json vocab = nlohmann::json::object(), merges = nlohmann::json::array();
  for (int b = 0; b < 256; ++b) vocab[byte_level::char_of(uint8_t(b))] = b;
  // Syllables lowercase + uppercase (aB: 676 of them), then words of two syllables (aBcD):
  // 676 + 676 * 189 > 128k tokens. "B c" is never a syllable, so each word merges one way.
  std::vector<std::string> syllables;
  int32_t next = 256;
  for (char a = 'a'; a <= 'z'; ++a) {
    for (char b = 'A'; b <= 'Z'; ++b) {
      syllables.push_back(std::string{a, b});
      vocab[syllables.back()] = next++;
      merges.push_back({std::string(1, a), std::string(1, b)});
    }
  }
  std::vector<std::pair<std::string, int32_t>> words;
  for (size_t i = 0; i < syllables.size(); ++i) {
    for (size_t k = 0; k < 189; ++k) {
      const std::string& second = syllables[(i + k) % syllables.size()];
      vocab[syllables[i] + second] = next;
      merges.push_back({syllables[i], second});
      words.emplace_back(syllables[i] + second, next++);
    }
  }
  j["model"]["vocab"] = std::move(vocab);
  j["model"]["merges"] = std::move(merges);
  auto t = make_tokenizer_json(j, "big/tokenizer.json");
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_GE((*t)->vocab_size(), 128000);
  std::string text;
  std::vector<int32_t> want;
  for (size_t i = 0; i < words.size(); i += 3) {
    text += (i ? " " : "") + words[i].first;
    if (i) want.push_back(' ');
    want.push_back(words[i].second);
  }
  auto ids = (*t)->encode(text);
  ASSERT_TRUE(ids.is_ok());
  EXPECT_EQ(*ids, want);
}

}  // namespace
}  // namespace tunableop::llm
