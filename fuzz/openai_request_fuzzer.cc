// Fuzzes the OpenAI request bodies `tunableop serve` takes from the network: the input is the
// body of POST /v1/completions and of /v1/chat/completions, parsed and then prepared against a
// small served model (a byte-level BPE tokenizer, Llama-3's chat template, a context of 64).
// Every body must end in a generation request or an API error (a 4xx with a message naming the
// problem), never a crash or an exception; what parses is inside the ranges the runtime relies
// on, and what is prepared fits the model (ids in the vocabulary, prompt + max_tokens within the
// context, max_tokens >= 1).
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "llm/text/chat_template.h"
#include "llm/text/tokenizer_json.h"
#include "serve/openai/json_fields.h"
#include "serve/openai/prepare.h"
#include "serve/openai/request_params.h"
#include "tokenizer_json_util.h"

using namespace tunableop::serve;
using namespace tunableop::serve::openai;

namespace {

constexpr const char* kLlama3Template =
    "{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";

const ServedModel& model() {
  static const ServedModel m = [] {
    ServedModel s;
    s.name = "tiny";
    s.max_context = 64;
    auto tok = tunableop::llm::make_tokenizer_json(
        nlohmann::json::parse(tunableop::llm::testing::tiny_tokenizer_json().dump()), "tiny/tokenizer.json");
    FUZZ_CHECK(tok.is_ok(), "the tiny tokenizer: %s", tok.status().to_string().c_str());
    s.vocab_size = (*tok)->vocab_size();
    s.special.bos = (*tok)->bos_id();
    s.tokenizer = std::shared_ptr<const tunableop::llm::Tokenizer>(std::move(*tok));
    tunableop::llm::jinja::Dict special;
    special.set("bos_token", tunableop::llm::jinja::Value("<|begin_of_text|>"));
    auto t = tunableop::llm::make_chat_template(kLlama3Template, "tiny/chat_template.jinja", special);
    FUZZ_CHECK(t.is_ok(), "the template: %s", t.status().to_string().c_str());
    s.chat_template = rendering(std::make_shared<const tunableop::llm::ChatTemplate>(std::move(*t)));
    return s;
  }();
  return m;
}

bool is_client_error(const ApiError& e, const char* endpoint) {
  FUZZ_CHECK(e.http_status >= 400 && e.http_status < 500, "%s: status %d for a bad body", endpoint, e.http_status);
  FUZZ_CHECK(!e.message.empty(), "%s: an error without a message", endpoint);
  return true;
}

void check(const ApiOr<CompletionParams>& p, const char* endpoint) {
  if (!p.ok()) {
    is_client_error(p.error(), endpoint);
    return;
  }
  const CompletionParams& c = p.value();
  if (c.max_tokens)
    FUZZ_CHECK(*c.max_tokens >= 0 && *c.max_tokens <= kMaxTokensLimit, "%s: max_tokens %lld", endpoint,
               (long long)*c.max_tokens);
  const SamplingParams& s = c.sampling;
  FUZZ_CHECK(s.temperature >= 0 && std::isfinite(s.temperature), "%s: temperature %g", endpoint, s.temperature);
  FUZZ_CHECK(s.top_p > 0 && s.top_p <= 1, "%s: top_p %g", endpoint, s.top_p);
  FUZZ_CHECK(s.top_k >= 0, "%s: top_k %lld", endpoint, (long long)s.top_k);
  FUZZ_CHECK(c.stop.size() <= size_t(kMaxStopStrings), "%s: %zu stop strings", endpoint, c.stop.size());
  for (const std::string& stop : c.stop)
    FUZZ_CHECK(!stop.empty() && stop.size() <= kMaxStopStringBytes, "%s: a stop string of %zu bytes", endpoint,
               stop.size());
  FUZZ_CHECK(c.stop_token_ids.size() <= size_t(kMaxStopTokenIds), "%s: %zu stop ids", endpoint,
             c.stop_token_ids.size());
  for (int64_t id : c.stop_token_ids) FUZZ_CHECK(id >= 0, "%s: stop id %lld", endpoint, (long long)id);
  if (c.prompt_ids)
    for (int64_t id : *c.prompt_ids) FUZZ_CHECK(id >= 0, "%s: prompt id %lld", endpoint, (long long)id);
  FUZZ_CHECK(c.prompt_text.has_value() + c.prompt_ids.has_value() + !c.messages.empty() == 1,
             "%s: not exactly one of prompt text, prompt ids, messages", endpoint);

  const ServedModel& m = model();
  ApiOr<GenerationRequest> g = prepare_generation(c, m, Clock::now());
  if (!g.ok()) {
    is_client_error(g.error(), endpoint);
    return;
  }
  const GenerationRequest& r = g.value();
  FUZZ_CHECK(!r.prompt.empty(), "%s: an empty prompt was prepared", endpoint);
  for (int32_t id : r.prompt) FUZZ_CHECK(id >= 0 && id < m.vocab_size, "%s: prompt id %d", endpoint, id);
  for (int32_t id : r.stop_ids) FUZZ_CHECK(id >= 0 && id < m.vocab_size, "%s: stop id %d", endpoint, id);
  FUZZ_CHECK(r.max_tokens >= 1 && int64_t(r.prompt.size()) + r.max_tokens <= m.max_context,
             "%s: %zu prompt tokens + max_tokens %lld past a context of %lld", endpoint, r.prompt.size(),
             (long long)r.max_tokens, (long long)m.max_context);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  ApiOr<Json> j = parse_json_object(body);
  if (!j.ok()) {
    is_client_error(j.error(), "parse");
    return 0;
  }
  check(parse_completion_params(j.value()), "/v1/completions");
  check(parse_chat_params(j.value()), "/v1/chat/completions");
  return 0;
}
