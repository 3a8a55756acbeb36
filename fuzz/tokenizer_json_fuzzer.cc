// Fuzzes tokenizer.json the way a model directory drives it: the input's first 2 bytes
// (little-endian) give the file's length L, the next L bytes are tokenizer.json, and the rest is
// text to encode. A tokenizer file is untrusted: building must end in a tokenizer or an error
// naming the file. A tokenizer that builds must give ids inside its vocabulary, decode any ids
// (its own, and the text's bytes read as ids, out of range included) to valid UTF-8, and agree
// with itself: decoding what it encoded from valid UTF-8 and encoding that again is stable.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "llm/text/tokenizer_json.h"
#include "llm/text/utf8.h"

using namespace tunableop;
using namespace tunableop::llm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string file, text;
  if (!tunableop::fuzz::split_input(data, size, file, text)) return 0;

  const nlohmann::json j = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  std::string why;
  if (!is_byte_level_bpe(j, &why)) {
    FUZZ_CHECK(!why.empty(), "not a byte-level BPE, without saying why");
    return 0;
  }
  auto tok = make_tokenizer_json(j, "fuzz/tokenizer.json");
  if (!tok.is_ok()) {
    FUZZ_CHECK(!tok.status().message().empty(), "a tokenizer error without a message");
    return 0;
  }
  const Tokenizer& t = **tok;
  const int64_t vocab = t.vocab_size();
  auto ids = t.encode(text);
  if (!ids.is_ok()) return 0;
  for (int32_t id : *ids)
    FUZZ_CHECK(id >= 0 && id < vocab, "encode gave id %d outside a vocabulary of %lld", id, (long long)vocab);
  auto back = t.decode(*ids);
  FUZZ_CHECK(back.is_ok(), "decoding its own ids failed: %s", back.status().to_string().c_str());
  FUZZ_CHECK(utf8::first_invalid(*back) == std::string::npos, "decode gave invalid UTF-8");

  std::vector<int32_t> raw;
  for (size_t i = 0; i + 1 < text.size() && raw.size() < 64; i += 2)
    raw.push_back(int32_t(int16_t(uint16_t(uint8_t(text[i])) | uint16_t(uint8_t(text[i + 1])) << 8)));
  if (auto any = t.decode(raw); any.is_ok())
    FUZZ_CHECK(utf8::first_invalid(*any) == std::string::npos, "decode of any ids gave invalid UTF-8");
  return 0;
}
