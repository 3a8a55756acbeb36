// Fuzzes the OpenAI request bodies `tunableop serve` takes from the network: the input is the
// body of POST /v1/completions and of /v1/chat/completions. Every body must end in parameters
// or an API error (a 4xx with a message naming the problem), never a crash or an exception; the
// parameters of a body that parses are inside the ranges the runtime relies on.
#include <cmath>
#include <cstdint>
#include <string_view>

#include "fuzz_util.h"
#include "serve/openai/json_fields.h"
#include "serve/openai/request_params.h"

using namespace tunableop::serve;
using namespace tunableop::serve::openai;

namespace {

void check(const ApiOr<CompletionParams>& p, const char* endpoint) {
  if (!p.ok()) {
    const ApiError& e = p.error();
    FUZZ_CHECK(e.http_status >= 400 && e.http_status < 500, "%s: status %d for a bad body", endpoint, e.http_status);
    FUZZ_CHECK(!e.message.empty(), "%s: an error without a message", endpoint);
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
  FUZZ_CHECK(c.prompt_text.has_value() + c.prompt_ids.has_value() + !c.messages.empty() == 1,
             "%s: not exactly one of prompt text, prompt ids, messages", endpoint);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  ApiOr<Json> j = parse_json_object(body);
  if (!j.ok()) {
    FUZZ_CHECK(!j.error().message.empty(), "a JSON error without a message");
    return 0;
  }
  check(parse_completion_params(j.value()), "/v1/completions");
  check(parse_chat_params(j.value()), "/v1/chat/completions");
  return 0;
}
