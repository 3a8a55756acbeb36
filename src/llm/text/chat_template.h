// Chat templates: a conversation rendered into the prompt text the model was trained on, by the
// model's own Jinja template (jinja.h), as transformers' apply_chat_template renders it. The
// server's /v1/chat/completions and `tunableop llm --chat` both use this.
//
//   auto tmpl = load_chat_template(dir);          // once per model
//   auto text = render_chat(*tmpl, {{"system", "Be brief."}, {"user", "Hi"}}, true);
//   auto ids  = tokenizer.encode(*text);          // no BOS added: the template wrote it
//
// The text already holds the special tokens the template writes (<|begin_of_text|>, <|im_start|>,
// ...): encode it with the tokenizer as it is (special tokens in text are matched), never through
// encode_prompt, which would add a second BOS.
#pragma once

#include <string>
#include <vector>

#include "llm/text/jinja.h"
#include "tunableop/status.h"

namespace tunableop::llm {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (a template may refuse others, or system)
  std::string content;
};

struct ChatTemplate {
  jinja::Template compiled;
  std::string source;  // where it came from, for messages: "DIR/chat_template.jinja"
  // The tokenizer's special tokens as strings (bos_token, eos_token, unk_token, pad_token, ...:
  // those tokenizer_config.json sets), passed to the template as transformers does.
  jinja::Dict special_tokens;
};

// The template DIR ships, where transformers looks: DIR/chat_template.jinja, else
// tokenizer_config.json's "chat_template" (a string, or a list of {"name", "template"} from
// which `name` is taken: "default" unless asked). Special tokens from tokenizer_config.json.
// Errors name the file and the field (no template, a template of the wrong type, a Jinja
// syntax error with its line, an unsupported construct).
StatusOr<ChatTemplate> load_chat_template(const std::string& model_dir, const std::string& name = "default");

// A template from its source; `source_name` names it in messages.
StatusOr<ChatTemplate> make_chat_template(const std::string& text, const std::string& source_name,
                                          jinja::Dict special_tokens = {});

// The prompt text for `messages`, with the assistant's turn opened when add_generation_prompt.
// The template sees messages, add_generation_prompt, the special tokens, tools = none and
// documents = none. A template's raise_exception() (say, Gemma's "System role not supported")
// is an InvalidArgument error carrying the template's message.
StatusOr<std::string> render_chat(const ChatTemplate& chat_template, const std::vector<ChatMessage>& messages,
                                  bool add_generation_prompt);

}  // namespace tunableop::llm
