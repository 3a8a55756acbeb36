// Chat templates: the families' templates (tests/fixtures/chat_templates/*.jinja) rendered as
// transformers' apply_chat_template renders them. A few cases are written out here; the full
// set is compared with the renders transformers recorded (reference.json, made by
// scripts/make_tokenizer_fixtures.py), and that test says so when the file is missing. Loading:
// where the template comes from, and every way a directory's template can be broken.
#include "llm/text/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "text_test_util.h"

namespace tunableop::llm {
namespace {

using testing::ScratchDir;

std::string templates_dir() { return testing::source_dir() + "/tests/fixtures/chat_templates"; }

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

ChatTemplate family(const std::string& file, const char* bos, const char* eos) {
  jinja::Dict special;
  if (bos) special.set("bos_token", jinja::Value(bos));
  if (eos) special.set("eos_token", jinja::Value(eos));
  auto t = make_chat_template(read(templates_dir() + "/" + file), file, special);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  return std::move(*t);
}

std::string render(const ChatTemplate& t, const std::vector<ChatMessage>& m, bool gen) {
  auto r = render_chat(t, m, gen);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? *r : "";
}

TEST(ChatTemplate, FamiliesRenderTheirFormats) {
  EXPECT_EQ(render(family("llama3.1.jinja", "<|begin_of_text|>", "<|eot_id|>"), {{"user", "Hello!"}}, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December "
            "2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render(family("qwen2.5.jinja", nullptr, "<|im_end|>"),
                   {{"system", "You are a terse assistant."}, {"user", "What is 2+2?"}}, true),
            "<|im_start|>system\nYou are a terse assistant.<|im_end|>\n<|im_start|>user\nWhat is "
            "2+2?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render(family("gemma-2.jinja", "<bos>", "<eos>"),
                   {{"user", "Hi"}, {"assistant", " Hello, how? "}, {"user", "Joke."}}, true),
            "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello, "
            "how?<end_of_turn>\n<start_of_turn>user\nJoke.<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(
      render(family("mistral-v0.3.jinja", "<s>", "</s>"),
             {{"system", "One word."}, {"user", "Capital of France?"}, {"assistant", "Paris."}, {"user", "And Italy?"}},
             false),
      "<s>[INST] Capital of France?[/INST] Paris.</s>[INST] One word.\n\nAnd Italy?[/INST]");
  // Qwen3 drops the reasoning of earlier turns.
  EXPECT_EQ(render(family("qwen3.jinja", nullptr, "<|im_end|>"),
                   {{"user", "Q1"}, {"assistant", "<think>\nlet me see\n</think>\n\nA1"}, {"user", "Q2"}}, true),
            "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, TemplateRefusalsAreErrorsWithTheirMessage) {
  auto gemma = family("gemma-2.jinja", "<bos>", "<eos>");
  auto r = render_chat(gemma, {{"system", "Be brief."}, {"user", "Hi"}}, true);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(
      r.status().message().find("gemma-2.jinja:1: the template refused the conversation: System role not supported"),
      std::string::npos)
      << r.status().message();
  auto mistral = family("mistral-v0.3.jinja", "<s>", "</s>");
  r = render_chat(mistral, {{"user", "one"}, {"user", "two"}}, true);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("conversation roles must alternate"), std::string::npos) << r.status().message();
}

// The work limit (jinja_builtins.h's kMaxRenderWork) is far above what real templates cost: a
// conversation of 2,000 turns of 4 KB each (8 MB, about 2M tokens) renders through every family.
TEST(ChatTemplate, LongConversationsRenderWithinTheWorkLimit) {
  std::vector<ChatMessage> long_chat;
  for (int i = 0; i < 2000; ++i) long_chat.push_back({i % 2 ? "assistant" : "user", std::string(4096, 'a' + i % 26)});
  for (const char* file : {"llama3.1.jinja", "qwen3.jinja", "qwen2.5.jinja", "mistral-v0.3.jinja", "gemma-2.jinja"}) {
    auto t = family(file, "<s>", "</s>");
    auto r = render_chat(t, long_chat, true);
    ASSERT_TRUE(r.is_ok()) << file << ": " << r.status().to_string();
    EXPECT_GT(r->size(), 2000u * 4096) << file;
  }
}

TEST(ChatTemplate, MessagesThatAreNotUtf8AreNamed) {
  auto llama3 = family("llama3.jinja", "<|begin_of_text|>", "<|eot_id|>");
  auto r = render_chat(llama3, {{"user", "Hi"}, {"assistant", "Yes"}, {"user", "caf\xe9 \xe4"}}, true);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "message 3's content is not valid UTF-8 (the byte at offset 3)");
  r = render_chat(llama3, {{"us\xc0r", "Hi"}}, true);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "message 1's role is not valid UTF-8 (the byte at offset 2)");
}

// Every render transformers recorded, through our renderer.
TEST(ChatTemplate, EqualsTransformersOnEveryFamilyTemplate) {
  const std::string path = templates_dir() + "/reference.json";
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << path << " is missing: run scripts/make_tokenizer_fixtures.py (transformers) to record it";
  }
  const auto ref = nlohmann::json::parse(read(path));
  std::map<std::string, ChatTemplate> templates;
  for (const auto& [name, f] : ref.at("families").items()) {
    jinja::Dict special;
    if (f.at("bos_token").is_string()) special.set("bos_token", jinja::Value(f.at("bos_token").get<std::string>()));
    if (f.at("eos_token").is_string()) special.set("eos_token", jinja::Value(f.at("eos_token").get<std::string>()));
    const std::string file = f.at("file").get<std::string>();
    auto t = make_chat_template(read(templates_dir() + "/" + file), file, special);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    templates.emplace(name, std::move(*t));
  }
  int compared = 0;
  for (const auto& c : ref.at("cases")) {
    std::vector<ChatMessage> messages;
    for (const auto& m : c.at("messages")) messages.push_back({m.at("role"), m.at("content")});
    const std::string family = c.at("family");
    const std::string what = family + " / " + c.at("conversation").get<std::string>() +
                             (c.at("add_generation_prompt").get<bool>() ? " + generation prompt" : "");
    auto r = render_chat(templates.at(family), messages, c.at("add_generation_prompt"));
    if (c.contains("error")) {
      ASSERT_FALSE(r.is_ok()) << what << " rendered, but transformers raised: " << c.at("error");
      EXPECT_NE(r.status().message().find(c.at("error").get<std::string>()), std::string::npos)
          << what << ": " << r.status().message();
    } else {
      ASSERT_TRUE(r.is_ok()) << what << ": " << r.status().to_string();
      EXPECT_EQ(*r, c.at("rendered").get<std::string>()) << what;
    }
    ++compared;
  }
  EXPECT_GE(compared, 100);
}

TEST(ChatTemplate, LoadsFromWhereTransformersLooks) {
  ScratchDir dir("chat_load");
  const std::string cfg = dir.path() + "/tokenizer_config.json";
  // No template at all: a base model.
  std::ofstream(cfg) << R"({"bos_token": "<s>"})";
  auto none = load_chat_template(dir.path());
  ASSERT_FALSE(none.is_ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("no chat template"), std::string::npos);

  // tokenizer_config.json's string, with its special tokens ({"content": ...} objects too).
  std::ofstream(cfg, std::ios::trunc)
      << R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>", "pad_token": null,
            "chat_template": "{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}A:{% endif %}"})";
  auto t = load_chat_template(dir.path());
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(render(*t, {{"user", "hi"}}, true), "<s>user:hi</s>A:");
  EXPECT_EQ(render(*t, {{"user", "hi"}}, false), "<s>user:hi</s>");

  // The list form: "default" unless asked for another.
  std::ofstream(cfg, std::ios::trunc)
      << R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ messages | length }}"}]})";
  t = load_chat_template(dir.path());
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(render(*t, {{"user", "x"}}, false), "D1");
  auto tool = load_chat_template(dir.path(), "tool_use");
  ASSERT_TRUE(tool.is_ok());
  EXPECT_EQ(render(*tool, {}, false), "T");
  auto missing = load_chat_template(dir.path(), "rag");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("tool_use, default"), std::string::npos) << missing.status().message();

  // chat_template.jinja wins over tokenizer_config.json.
  std::ofstream(dir.path() + "/chat_template.jinja") << "J{{ messages[0].content }}\n";
  t = load_chat_template(dir.path());
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(render(*t, {{"user", "x"}}, false), "Jx");
  EXPECT_EQ(t->source, dir.path() + "/chat_template.jinja");
}

TEST(ChatTemplate, BrokenTemplatesNameTheFileAndTheField) {
  ScratchDir dir("chat_broken");
  const std::string cfg = dir.path() + "/tokenizer_config.json";
  struct Bad {
    const char* config;
    const char* expect;
  };
  const Bad cases[] = {
      {R"({"chat_template": 42})", "tokenizer_config.json: chat_template: must be a string or a list"},
      {R"({"chat_template": [{"name": "default"}]})", "chat_template[0]: must be {\"name\""},
      {R"({"chat_template": "line one\n{% if x %}"})",
       "tokenizer_config.json: chat_template:2: {% endif %} is missing"},
      {R"({"chat_template": "{% macro f() %}{% endmacro %}"})", "chat_template:1: unsupported construct: {% macro %}"},
      {R"({"chat_template": "{{ x }}", "bos_token": 7})", "\"bos_token\" must be a string"},
      {R"({"chat_template": )", "tokenizer_config.json: not valid JSON"},
  };
  for (const Bad& c : cases) {
    std::ofstream(cfg, std::ios::trunc) << c.config;
    auto t = load_chat_template(dir.path());
    ASSERT_FALSE(t.is_ok()) << c.config;
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos) << c.config << ": " << t.status().message();
    EXPECT_NE(t.status().message().find(dir.path()), std::string::npos) << t.status().message();
  }
  // An unknown filter is found when rendering, with its line.
  std::ofstream(cfg, std::ios::trunc) << R"({"chat_template": "\n{{ messages | shuffle }}"})";
  auto t = load_chat_template(dir.path());
  ASSERT_TRUE(t.is_ok());
  auto r = render_chat(*t, {{"user", "x"}}, true);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("chat_template:2: unsupported filter 'shuffle'"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace tunableop::llm
