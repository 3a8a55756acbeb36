// Fuzzes the chat-template engine (our Jinja subset) the way a model directory drives it: the
// input's first 2 bytes (little-endian) give the template's length L, the next L bytes are
// chat_template.jinja, and the rest, split at NUL bytes, are the conversation's messages (roles
// system/user/assistant in turn, chosen by each message's first byte). A template is untrusted
// text: parsing and rendering must end in text or an error, never a crash, a hang (libFuzzer's
// -timeout) or more than the renderer's output cap.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "llm/text/chat_template.h"
#include "llm/text/jinja_builtins.h"

using namespace tunableop;
using namespace tunableop::llm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string source, rest;
  if (!tunableop::fuzz::split_input(data, size, source, rest)) return 0;

  std::vector<ChatMessage> messages;
  static const char* kRoles[] = {"system", "user", "assistant", "tool"};
  for (size_t at = 0; at <= rest.size() && messages.size() < 16;) {
    size_t end = rest.find('\0', at);
    if (end == std::string::npos) end = rest.size();
    const std::string part = rest.substr(at, end - at);
    const char* role = kRoles[part.empty() ? 1 : uint8_t(part[0]) % 4];
    messages.push_back({role, part.empty() ? part : part.substr(1)});
    at = end + 1;
  }

  jinja::Dict special;
  special.items.emplace_back("bos_token", jinja::Value(std::string("<s>")));
  special.items.emplace_back("eos_token", jinja::Value(std::string("</s>")));
  auto tmpl = make_chat_template(source, "fuzz.jinja", special);
  if (!tmpl.is_ok()) {
    FUZZ_CHECK(!tmpl.status().message().empty(), "a template error without a message");
    return 0;
  }
  for (bool open : {true, false}) {
    auto text = render_chat(*tmpl, messages, open);
    if (text.is_ok())
      FUZZ_CHECK(text->size() <= jinja::kMaxOutputBytes, "rendered %zu bytes, over the cap", text->size());
    else
      FUZZ_CHECK(!text.status().message().empty(), "a render error without a message");
  }
  return 0;
}
