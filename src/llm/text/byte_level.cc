#include "llm/text/byte_level.h"

#include <array>

#include "llm/text/utf8.h"

namespace tunableop::llm::byte_level {

namespace {

bool maps_to_itself(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

struct Tables {
  std::array<uint32_t, 256> cp{};
  std::array<std::string, 256> text;
  std::array<int16_t, 256 + 68> back{};  // code point -> byte, -1 for none
  Tables() {
    back.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      cp[size_t(b)] = maps_to_itself(b) ? uint32_t(b) : next++;
      back[cp[size_t(b)]] = int16_t(b);
      utf8::append(text[size_t(b)], cp[size_t(b)]);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& char_of(uint8_t b) { return tables().text[b]; }

int byte_of(uint32_t cp) { return cp < tables().back.size() ? tables().back[cp] : -1; }

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += char_of(static_cast<uint8_t>(c));
  return out;
}

bool decode(std::string_view text, std::string& out) {
  std::string bytes;
  bytes.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (utf8::sequence_length(text, i) == 0) return false;
    size_t n = 1;
    const int b = byte_of(utf8::decode(text, i, &n));
    if (b < 0) return false;
    bytes += char(b);
    i += n;
  }
  out += bytes;
  return true;
}

}  // namespace tunableop::llm::byte_level
