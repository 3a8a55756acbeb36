// UTF-8 for the text library: validation, code points, and the few Unicode facts the tokenizers
// and the chat-template renderer need without a Unicode library (White_Space). Character classes
// (letters, numbers) come from PCRE2, normalisation from utf8proc: not from here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tunableop::llm::utf8 {

// Length of the well-formed sequence (no overlongs, surrogates or code points past U+10FFFF)
// starting at s[i], or 0 when s[i] does not start one.
size_t sequence_length(std::string_view s, size_t i);

// Offset of the first byte that is not part of a well-formed sequence; npos when s is valid.
size_t first_invalid(std::string_view s);

// `bytes` with each maximal ill-formed subsequence replaced by U+FFFD (Unicode's recommended
// practice, as Rust's String::from_utf8_lossy and Python's errors="replace" do).
std::string lossy(std::string_view bytes);

// The code point at s[i] (which starts a well-formed sequence); *len gets its length.
uint32_t decode(std::string_view s, size_t i, size_t* len);

void append(std::string& out, uint32_t cp);

// The code points of `s`; each maximal ill-formed subsequence reads as one U+FFFD, as lossy()
// writes it, so any bytes are safe here (a chat message typed as Latin-1 went through
// `|trim` and read past its string before: fuzz/chat_template_fuzzer).
std::vector<uint32_t> code_points(std::string_view s);
std::string from_code_points(const std::vector<uint32_t>& cps, size_t begin, size_t end);

// Unicode's White_Space property (what Rust's char::is_whitespace and Oniguruma's \s test).
bool is_white_space(uint32_t cp);

// "U+00A0" for messages.
std::string code_point_name(uint32_t cp);

// At most `max_bytes` of `s`, cut on a character boundary, with "..." when cut: messages quote
// values from files without dumping an attacker-sized one.
std::string excerpt(std::string_view s, size_t max_bytes = 60);

}  // namespace tunableop::llm::utf8
