// The fields of POST /v1/completions and /v1/chat/completions, read and checked one by one
// against what the API allows; nothing here depends on the model (prepare.h checks ids, lengths
// and the model's name against it). Unknown fields are ignored, as OpenAI's and vLLM's servers
// do; known fields that would change the answer in a way we do not implement (n > 1, logprobs,
// penalties, tools, ...) are refused with a 400 naming them rather than silently dropped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "serve/openai/api_error.h"
#include "serve/openai/json_fields.h"
#include "serve/openai/served_model.h"
#include "serve/request.h"

namespace tunableop::serve::openai {

enum class Endpoint { kCompletions, kChat };

struct CompletionParams {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;  // empty: not given (the served model)
  // /v1/completions: the prompt as text or as token ids (exactly one is set).
  std::optional<std::string> prompt_text;
  std::optional<std::vector<int64_t>> prompt_ids;
  // /v1/chat/completions.
  std::vector<ChatMessage> messages;
  std::optional<int64_t> max_tokens;  // absent: 16 for completions, the rest of the context for chat
  SamplingParams sampling;
  std::vector<std::string> stop;  // stop strings (cut from the output unless include_stop_str_in_output)
  std::vector<int64_t> stop_token_ids;
  bool include_stop_str_in_output = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
  bool ignore_eos = false;
  bool return_token_ids = false;
};

// Limits on what one request may carry (beyond the body size limit of the HTTP layer).
constexpr int kMaxStopStrings = 16;
constexpr size_t kMaxStopStringBytes = 256;
constexpr int kMaxStopTokenIds = 64;
constexpr int64_t kMaxTokensLimit = int64_t(1) << 30;  // above any context; the model's is checked later

ApiOr<CompletionParams> parse_completion_params(const Json& body);
ApiOr<CompletionParams> parse_chat_params(const Json& body);

}  // namespace tunableop::serve::openai
