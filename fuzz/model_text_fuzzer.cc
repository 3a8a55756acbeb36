// Fuzzes what `tunableop llm|serve --model DIR` reads to turn text into ids: the input is three
// parts, each 2-byte-length-prefixed (fuzz_util.h's split_input), then a text:
// tokenizer_config.json, generation_config.json and tokenizer.json (an empty part: the file is
// absent), written as a model directory. Loading the tokenizer, the special tokens and the chat
// template must each end in a result or an error with a message; a tokenizer and special tokens
// that load and pass their check give prompts inside the vocabulary, and a template that loads
// renders the text as a user's message or says why not.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "llm/text/chat_template.h"
#include "llm/text/special_tokens.h"
#include "llm/text/tokenizer.h"

using namespace tunableop;
using namespace tunableop::llm;

namespace {

void write_if_given(const std::string& path, const std::string& bytes) {
  if (!bytes.empty()) tunableop::fuzz::write_file(path, bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string tokenizer_config, rest, generation_config, rest2, tokenizer_json, text;
  if (!tunableop::fuzz::split_input(data, size, tokenizer_config, rest)) return 0;
  if (!tunableop::fuzz::split_input(reinterpret_cast<const uint8_t*>(rest.data()), rest.size(), generation_config,
                                    rest2))
    return 0;
  if (!tunableop::fuzz::split_input(reinterpret_cast<const uint8_t*>(rest2.data()), rest2.size(), tokenizer_json, text))
    return 0;
  tunableop::fuzz::clear_scratch();
  const std::string dir = tunableop::fuzz::scratch_dir();
  write_if_given(dir + "/tokenizer_config.json", tokenizer_config);
  write_if_given(dir + "/generation_config.json", generation_config);
  write_if_given(dir + "/tokenizer.json", tokenizer_json);

  auto tok = load_tokenizer(dir);
  if (!tok.is_ok()) FUZZ_CHECK(!tok.status().message().empty(), "a tokenizer error without a message");
  const Tokenizer* t = tok.is_ok() ? tok->get() : nullptr;
  auto special = load_special_tokens(dir, t);
  if (!special.is_ok()) {
    FUZZ_CHECK(!special.status().message().empty(), "a special-tokens error without a message");
  } else if (t && special->check(t->vocab_size()).is_ok()) {
    if (auto ids = encode_prompt(*t, *special, text); ids.is_ok())
      for (int32_t id : *ids)
        FUZZ_CHECK(id >= 0 && id < t->vocab_size(), "prompt id %d outside a vocabulary of %lld", id,
                   (long long)t->vocab_size());
  }
  auto tmpl = load_chat_template(dir);
  if (!tmpl.is_ok()) {
    FUZZ_CHECK(!tmpl.status().message().empty(), "a template error without a message");
    return 0;
  }
  auto rendered = render_chat(*tmpl, {{"user", text}}, true);
  if (!rendered.is_ok()) FUZZ_CHECK(!rendered.status().message().empty(), "a render error without a message");
  return 0;
}
