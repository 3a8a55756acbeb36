// From checked request fields to what the runtime takes: the model's name checked, the prompt
// tokenized (text through the model's tokenizer with BOS as the model wants; a conversation
// through its chat template), every id checked against the vocabulary and the lengths against
// the context. Every failure is a 400 (404 for another model's name) naming the field.
#pragma once

#include <vector>

#include "serve/openai/api_error.h"
#include "serve/openai/request_params.h"
#include "serve/openai/served_model.h"
#include "serve/request.h"

namespace tunableop::serve::openai {

// max_tokens of a completion that gives none (OpenAI's default), cut to the context's room.
constexpr int64_t kDefaultCompletionTokens = 16;

ApiOr<GenerationRequest> prepare_generation(const CompletionParams& p, const ServedModel& model,
                                            Clock::time_point arrival);

// The prompt ids of a conversation: the model's chat template rendered with the generation
// prompt, then tokenized as it stands (the template writes BOS itself, as transformers'
// apply_chat_template does). Errors: no template, no tokenizer, or the template's own.
StatusOr<std::vector<int32_t>> chat_prompt_ids(const ServedModel& model, const std::vector<ChatMessage>& messages);

}  // namespace tunableop::serve::openai
