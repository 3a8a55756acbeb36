#include "serve/openai/prepare.h"

#include <fmt/format.h>

namespace tunableop::serve::openai {

namespace {

ApiOr<std::vector<int32_t>> prompt_ids(const CompletionParams& p, const ServedModel& m) {
  if (p.endpoint == Endpoint::kChat) {
    auto ids = chat_prompt_ids(m, p.messages);
    if (!ids.is_ok()) return invalid_field("messages", ids.status().message());
    return std::move(ids.value());
  }
  if (p.prompt_text) {
    if (!m.tokenizer) {
      return invalid_field("prompt",
                           fmt::format("model {} has no tokenizer: give the prompt as an array of token ids", m.name));
    }
    auto ids = llm::encode_prompt(*m.tokenizer, m.special, *p.prompt_text);
    if (!ids.is_ok()) return invalid_field("prompt", "cannot tokenize the prompt: " + ids.status().message());
    return std::move(ids.value());
  }
  std::vector<int32_t> ids;
  ids.reserve(p.prompt_ids->size());
  for (size_t i = 0; i < p.prompt_ids->size(); ++i) {
    const int64_t id = (*p.prompt_ids)[i];
    if (id >= m.vocab_size)
      return invalid_field("prompt",
                           fmt::format("prompt[{}] = {} is not a token id: the vocabulary has {} tokens (ids 0 "
                                       "to {})",
                                       i, id, m.vocab_size, m.vocab_size - 1));
    ids.push_back(int32_t(id));
  }
  return ids;
}

}  // namespace

StatusOr<std::vector<int32_t>> chat_prompt_ids(const ServedModel& model, const std::vector<ChatMessage>& messages) {
  if (!model.chat_template) {
    return Status::invalid_argument(
        fmt::format("model {} has no chat template: use /v1/completions with the prompt written out", model.name));
  }
  if (!model.tokenizer) {
    return Status::invalid_argument(fmt::format("model {} has no tokenizer to encode the conversation", model.name));
  }
  auto text = model.chat_template(messages);
  if (!text.is_ok()) return text.status();
  return model.tokenizer->encode(*text);
}

ApiOr<GenerationRequest> prepare_generation(const CompletionParams& p, const ServedModel& m,
                                            Clock::time_point arrival) {
  if (!p.model.empty() && p.model != m.name) {
    ApiError e =
        invalid_field("model", fmt::format("the model `{}` does not exist: this server serves `{}`", p.model, m.name));
    e.http_status = 404;
    e.code = "model_not_found";
    return e;
  }
  if (!p.stop.empty() && !m.tokenizer) {
    return invalid_field(
        "stop", fmt::format("model {} has no tokenizer: stop strings cannot be matched (stop_token_ids can)", m.name));
  }
  for (size_t i = 0; i < p.stop_token_ids.size(); ++i) {
    if (p.stop_token_ids[i] >= m.vocab_size)
      return invalid_field("stop_token_ids",
                           fmt::format("stop_token_ids[{}] = {} is not a token id: the vocabulary has {} tokens", i,
                                       p.stop_token_ids[i], m.vocab_size));
  }
  auto ids = prompt_ids(p, m);
  if (!ids.ok()) return ids.error();
  const char* prompt_field = p.endpoint == Endpoint::kChat ? "messages" : "prompt";
  const int64_t n = int64_t(ids->size());
  if (n == 0) return invalid_field(prompt_field, "the prompt has no tokens");
  if (n >= m.max_context) {
    return invalid_field(prompt_field,
                         fmt::format("the prompt has {} tokens; the model's context is {} tokens, prompt and "
                                     "new tokens together",
                                     n, m.max_context));
  }
  const int64_t room = m.max_context - n;
  int64_t max_tokens = 0;
  if (p.max_tokens) {
    max_tokens = *p.max_tokens;
    if (max_tokens > room) {
      return invalid_field("max_tokens",
                           fmt::format("the prompt ({} tokens) + max_tokens ({}) = {} exceeds the model's context of "
                                       "{} tokens",
                                       n, max_tokens, n + max_tokens, m.max_context));
    }
  } else {
    max_tokens = p.endpoint == Endpoint::kChat ? room : std::min(kDefaultCompletionTokens, room);
  }
  GenerationRequest g;
  g.prompt = std::move(ids.value());
  g.max_tokens = max_tokens;
  g.sampling = p.sampling;
  g.ignore_eos = p.ignore_eos;
  g.stop_ids.assign(p.stop_token_ids.begin(), p.stop_token_ids.end());
  g.arrival = arrival;
  return g;
}

}  // namespace tunableop::serve::openai
