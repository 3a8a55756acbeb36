// What the front end knows of the model it serves: its name, sizes, tokenizer (absent for a
// built-in model: prompts are then token ids only) and chat template.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "llm/text/chat_template.h"
#include "llm/text/special_tokens.h"
#include "llm/text/tokenizer.h"
#include "tunableop/status.h"

namespace tunableop::serve::openai {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", ...
  std::string content;  // text parts joined with "\n"
};

// The conversation as the prompt text the model was trained on, the assistant's turn opened
// (add_generation_prompt). Errors name the message or construct at fault.
using ChatTemplate = std::function<StatusOr<std::string>(const std::vector<ChatMessage>&)>;

// `t` as the front end calls it: the messages rendered with the generation prompt opened.
ChatTemplate rendering(std::shared_ptr<const llm::ChatTemplate> t);

struct ServedModel {
  std::string name;                                 // what clients send as "model" (and /v1/models lists)
  int64_t created = 0;                              // unix seconds, for /v1/models
  int64_t vocab_size = 0;                           // token ids are < this
  int64_t max_context = 0;                          // prompt + new tokens of one request at most
  std::shared_ptr<const llm::Tokenizer> tokenizer;  // null: prompts as token ids only, no stop strings
  llm::SpecialTokens special;                       // BOS prepended to text prompts
  ChatTemplate chat_template;                       // empty: /v1/chat/completions answers 400
};

}  // namespace tunableop::serve::openai
