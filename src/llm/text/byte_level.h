// The byte <-> character mapping of byte-level BPE (GPT-2's, used by Llama-3, Qwen, Mistral's
// tekken-era tokenizer.json): every byte becomes one printable character, so a vocabulary of
// strings covers any byte sequence. Bytes that are printable Latin-1 map to themselves; the
// other 68 (controls, space, DEL, NBSP, soft hyphen) map to U+0100 onwards, in byte order.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tunableop::llm::byte_level {

// The UTF-8 of the character byte b maps to ("Ġ" for a space).
const std::string& char_of(uint8_t b);

// The byte a character maps back to, or -1 when it is not one of the 256.
int byte_of(uint32_t cp);

// Every byte of `bytes` as its character.
std::string encode(std::string_view bytes);

// The bytes of `text` when every character is one of the 256; false (out untouched) otherwise.
bool decode(std::string_view text, std::string& out);

}  // namespace tunableop::llm::byte_level
