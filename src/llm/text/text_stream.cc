#include "llm/text/text_stream.h"

namespace tunableop::llm {

bool ends_with_replacement_char(const std::string& s) {
  static const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD in UTF-8
  return s.size() >= 3 && s.compare(s.size() - 3, 3, kReplacement) == 0;
}

std::vector<int32_t> TextStream::context_of(const std::vector<int32_t>& prompt) {
  const size_t n = std::min(prompt.size(), kContextTokens);
  return std::vector<int32_t>(prompt.end() - ptrdiff_t(n), prompt.end());
}

TextStream::TextStream(const Tokenizer& tokenizer, std::vector<int32_t> context)
    : tokenizer_(tokenizer), all_(std::move(context)) {
  auto text = tokenizer_.decode(all_);
  if (text.is_ok()) {
    context_bytes_ = text->size();
  } else {
    context_status_ = text.status();
  }
}

StatusOr<std::string> TextStream::take(bool hold_incomplete) {
  TUNABLEOP_RETURN_IF_ERROR(context_status_);
  // The whole window again: linear in the answer's length per token, microseconds next to a
  // decode step, and exactly what a one-shot decode gives.
  auto text = tokenizer_.decode(all_);
  if (!text.is_ok()) return text.status();
  const size_t start = context_bytes_ + emitted_.size();
  if (hold_incomplete && ends_with_replacement_char(*text)) return std::string();
  if (text->size() < start) {
    // Only a context ending inside a character can shrink the text; emit nothing rather than
    // repeat or drop text.
    return std::string();
  }
  std::string out = text->substr(start);
  emitted_ += out;
  return out;
}

StatusOr<std::string> TextStream::put(int32_t id) {
  all_.push_back(id);
  generated_.push_back(id);
  return take(true);
}

StatusOr<std::string> TextStream::finish() { return take(false); }

StatusOr<std::string> decode_continuation(const Tokenizer& tokenizer, const std::vector<int32_t>& prompt,
                                          const std::vector<int32_t>& generated) {
  std::vector<int32_t> ids = TextStream::context_of(prompt);
  auto context = tokenizer.decode(ids);
  if (!context.is_ok()) return context.status();
  ids.insert(ids.end(), generated.begin(), generated.end());
  auto all = tokenizer.decode(ids);
  if (!all.is_ok()) return all.status();
  return all->size() < context->size() ? std::string() : all->substr(context->size());
}

}  // namespace tunableop::llm
