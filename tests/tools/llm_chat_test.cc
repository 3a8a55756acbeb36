// `tunableop llm` with a byte-level BPE tokenizer.json and a chat template, end to end: the built
// binary on a tiny Llama whose directory ships the hand-made tokenizer of tokenizer_json_util.h
// and Llama-3's template. The prompt ids it prints (--print-prompt-ids) must be the library's
// render + encode; the answer the library's greedy continuation; --interactive --chat must carry
// the conversation into the next turn's prompt; misuse and template refusals must say what is
// wrong.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "llm/generate.h"
#include "llm/text/chat_template.h"
#include "llm/text/regex.h"
#include "llm/text/text_stream.h"
#include "llm/text/tokenizer.h"
#include "text_test_util.h"
#include "tokenizer_json_util.h"

namespace tunableop::llm {
namespace {

using testing::ScratchDir;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

struct CliRun {
  int rc = -1;
  std::string out, err;
};

CliRun llm(const ScratchDir& scratch, const std::string& args, const std::string& input = "") {
  const std::string in = scratch.path() + "/stdin.txt", out = scratch.path() + "/stdout.txt",
                    err = scratch.path() + "/stderr.txt";
  std::ofstream(in, std::ios::binary) << input;
  const int status =
      std::system((std::string(TUNABLEOP_CLI) + " llm " + args + " <" + in + " >" + out + " 2>" + err).c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, slurp(out), slurp(err)};
}

std::string ids_line(const std::vector<int32_t>& ids) { return fmt::format("prompt ids: {}\n", fmt::join(ids, ",")); }

class LlmChat : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!regex_available()) GTEST_SKIP() << "this build has no PCRE2 (libpcre2-dev): no tokenizer.json";
    scratch_ = std::make_unique<ScratchDir>("cli_chat");
    dir_ = scratch_->path() + "/model";
    std::filesystem::create_directories(dir_);
    testing::write_text_model(dir_, /*with_tokenizer=*/false);  // vocab 512 >= the tokenizer's 273
    testing::write_tiny_tokenizer(dir_);
    std::ofstream(dir_ + "/tokenizer_config.json")
        << nlohmann::json{{"bos_token", "<|begin_of_text|>"},
                          {"eos_token", "<|eot_id|>"},
                          {"chat_template",
                           slurp(testing::source_dir() + "/tests/fixtures/chat_templates/llama3.jinja")}}
               .dump();
    std::ofstream(dir_ + "/generation_config.json", std::ios::trunc) << R"({"eos_token_id": [272]})";
    auto tok = load_tokenizer(dir_);
    ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
    tok_ = std::move(*tok);
    auto t = load_chat_template(dir_);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    template_ = std::make_unique<ChatTemplate>(std::move(*t));
  }
  std::vector<int32_t> chat_ids(const std::vector<ChatMessage>& messages) {
    auto text = render_chat(*template_, messages, true);
    EXPECT_TRUE(text.is_ok()) << text.status().to_string();
    auto ids = tok_->encode(*text);
    EXPECT_TRUE(ids.is_ok());
    return *ids;
  }
  // The library's greedy answer to `prompt`, cut at EOS 272, as text.
  std::string answer(const std::vector<int32_t>& prompt, int64_t n) {
    auto e = testing::text_engine(1, 256);
    auto g = generate(*e.engine, {prompt}, n);
    EXPECT_TRUE(g.is_ok()) << g.status().to_string();
    if (!g.is_ok()) return "";
    std::vector<int32_t> ids;
    for (int32_t t : g->tokens[0]) {
      if (t == testing::kTinyEot) break;
      ids.push_back(t);
    }
    auto text = decode_continuation(*tok_, prompt, ids);
    EXPECT_TRUE(text.is_ok());
    return *text;
  }
  std::unique_ptr<ScratchDir> scratch_;
  std::string dir_;
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<ChatTemplate> template_;
};

TEST_F(LlmChat, PlainPromptTokenizesWithTheDirectorysTokenizerJson) {
  CliRun r = llm(*scratch_, "--model " + dir_ + " --prompt 'hello the world' --max-new-tokens 4 --print-prompt-ids");
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::vector<int32_t> want = {testing::kTinyBos, testing::kTinyHello, testing::kTinyThe, testing::kTinyWorld};
  EXPECT_EQ(r.out.substr(0, r.out.find('\n') + 1), ids_line(want));
  EXPECT_NE(r.err.find("Tokenizer: byte-level BPE, 273 ids"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("BOS 271 (tokenizer.json)"), std::string::npos) << r.err;
}

TEST_F(LlmChat, ChatRendersTheUserMessageThroughTheTemplate) {
  CliRun r = llm(*scratch_, "--model " + dir_ + " --chat --prompt hello --max-new-tokens 8 --print-prompt-ids");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto ids = chat_ids({{"user", "hello"}});
  // <|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|><|start_header_id|>assistant...
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids[0], testing::kTinyBos);  // once: the template's, nothing added
  EXPECT_NE(ids[1], testing::kTinyBos);
  EXPECT_EQ(r.out, ids_line(ids) + answer(ids, 8) + "\n");
  EXPECT_NE(r.err.find("Chat template: " + dir_ + "/tokenizer_config.json: chat_template"), std::string::npos) << r.err;

  CliRun sys = llm(*scratch_, "--model " + dir_ +
                                  " --chat --system 'Be brief.' --prompt hello --max-new-tokens 8 --print-prompt-ids");
  ASSERT_EQ(sys.rc, 0) << sys.err;
  const auto with_system = chat_ids({{"system", "Be brief."}, {"user", "hello"}});
  EXPECT_EQ(sys.out, ids_line(with_system) + answer(with_system, 8) + "\n");
}

TEST_F(LlmChat, InteractiveChatKeepsTheConversation) {
  CliRun r = llm(*scratch_, "--model " + dir_ + " --chat --interactive --max-new-tokens 6 --print-prompt-ids",
                 "hello\nthe world\n");
  ASSERT_EQ(r.rc, 0) << r.err;
  std::vector<ChatMessage> conversation = {{"user", "hello"}};
  const auto first = chat_ids(conversation);
  const std::string a1 = answer(first, 6);
  conversation.push_back({"assistant", a1});
  conversation.push_back({"user", "the world"});
  const auto second = chat_ids(conversation);
  EXPECT_EQ(r.out, ids_line(first) + a1 + "\n" + ids_line(second) + answer(second, 6) + "\n");
}

// Issue 33, finding 5: an --interactive line is at most as long as a prompt may be, in a chat too
// (the conversation's lines come from standard input the same way).
TEST_F(LlmChat, InteractiveChatLineLongerThanAPromptIsRefused) {
  CliRun r = llm(*scratch_, "--model " + dir_ + " --chat --interactive --max-new-tokens 2",
                 "hello\n" + std::string(20000, 'a') + "\n");
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_NE(r.err.find("a line of standard input is longer than 16384 bytes"), std::string::npos) << r.err;
}

TEST_F(LlmChat, MisuseAndRefusalsSayWhatIsWrong) {
  CliRun ids = llm(*scratch_, "--model " + dir_ + " --chat --prompt-ids 1,2");
  EXPECT_EQ(ids.rc, 2);
  EXPECT_NE(ids.err.find("--chat takes the user's message from --prompt"), std::string::npos) << ids.err;
  CliRun sys = llm(*scratch_, "--model " + dir_ + " --system x --prompt hi");
  EXPECT_EQ(sys.rc, 2);
  EXPECT_NE(sys.err.find("--system is the chat's system message: add --chat"), std::string::npos) << sys.err;
  CliRun builtin = llm(*scratch_, "--model builtin:tiny --chat --prompt hi");
  EXPECT_EQ(builtin.rc, 2);
  EXPECT_NE(builtin.err.find("has no tokenizer"), std::string::npos) << builtin.err;
  // Gemma's template refuses a system message: the template's words, its file and line.
  std::filesystem::copy_file(testing::source_dir() + "/tests/fixtures/chat_templates/gemma-2.jinja",
                             dir_ + "/chat_template.jinja");
  CliRun gemma = llm(*scratch_, "--model " + dir_ + " --chat --system x --prompt hi");
  EXPECT_EQ(gemma.rc, 2);
  EXPECT_NE(
      gemma.err.find(dir_ + "/chat_template.jinja:1: the template refused the conversation: System role not supported"),
      std::string::npos)
      << gemma.err;
  // A base model without a template.
  std::filesystem::remove(dir_ + "/chat_template.jinja");
  std::ofstream(dir_ + "/tokenizer_config.json", std::ios::trunc) << R"({"bos_token": "<|begin_of_text|>"})";
  CliRun base = llm(*scratch_, "--model " + dir_ + " --chat --prompt hi");
  EXPECT_EQ(base.rc, 2);
  EXPECT_NE(base.err.find("no chat template"), std::string::npos) << base.err;
}

}  // namespace
}  // namespace tunableop::llm
