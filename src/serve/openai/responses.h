// The bodies the API answers with, in OpenAI's shapes: a whole completion (text_completion /
// chat.completion), stream chunks (text_completion / chat.completion.chunk) framed as
// server-sent events and ended by `data: [DONE]`, usage, and /v1/models. With
// return_token_ids (vLLM's extension), each choice also carries prompt_token_ids (in the first
// chunk of a stream) and token_ids (the ids its text came from).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "serve/openai/api_error.h"
#include "serve/openai/request_params.h"
#include "serve/openai/served_model.h"
#include "serve/request.h"

namespace tunableop::serve::openai {

// What every body of one response shares.
struct ResponseMeta {
  std::string id;  // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;
  std::string model;
  Endpoint endpoint = Endpoint::kCompletions;
  bool return_token_ids = false;
};

// "cmpl-<32 hex digits>" or "chatcmpl-...", unique within this process and across restarts.
std::string new_response_id(Endpoint endpoint);

// "stop" or "length" (the API has no other reason for a generation that ended well).
const char* api_finish_reason(FinishReason r);

std::string completion_body(const ResponseMeta& meta, const std::string& text, FinishReason reason,
                            const std::vector<int32_t>& prompt, const std::vector<int32_t>& ids);

// One stream event: `data: {...}\n\n`. `first`: the first chunk of the stream (chat: carries the
// assistant role; with return_token_ids: the prompt's ids). `reason` kNone: not the last chunk.
std::string chunk_event(const ResponseMeta& meta, const std::string& text, const std::vector<int32_t>& ids,
                        FinishReason reason, bool first, const std::vector<int32_t>& prompt);
// stream_options.include_usage: the chunk after the last choice, with no choices.
std::string usage_event(const ResponseMeta& meta, int64_t prompt_tokens, int64_t completion_tokens);
// An error after the stream began (the status line is sent): an event with the error object.
std::string error_event(const ApiError& e);
inline constexpr std::string_view kDoneEvent = "data: [DONE]\n\n";

// GET /v1/models: the served model, with vLLM's max_model_len and our vocab_size.
std::string models_body(const ServedModel& model);

}  // namespace tunableop::serve::openai
