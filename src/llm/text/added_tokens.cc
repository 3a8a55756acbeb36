#include "llm/text/added_tokens.h"

#include <algorithm>

#include "llm/text/utf8.h"

namespace tunableop::llm {

void AddedTokenSplitter::Trie::add(std::string_view s, int32_t token) {
  int32_t at = 0;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    auto& next = nodes[size_t(at)].next;
    auto it = std::find_if(next.begin(), next.end(), [&](const auto& e) { return e.first == c; });
    if (it != next.end()) {
      at = it->second;
    } else {
      nodes[size_t(at)].next.emplace_back(c, int32_t(nodes.size()));
      at = int32_t(nodes.size());
      nodes.emplace_back();
    }
  }
  if (nodes[size_t(at)].token < 0) nodes[size_t(at)].token = token;  // the same content twice: the first
}

std::pair<int32_t, size_t> AddedTokenSplitter::Trie::longest(std::string_view text, size_t at) const {
  std::pair<int32_t, size_t> best{-1, 0};
  int32_t node = 0;
  for (size_t i = at; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const auto& next = nodes[size_t(node)].next;
    auto it = std::find_if(next.begin(), next.end(), [&](const auto& e) { return e.first == c; });
    if (it == next.end()) break;
    node = it->second;
    if (nodes[size_t(node)].token >= 0) best = {nodes[size_t(node)].token, i + 1 - at};
  }
  return best;
}

StatusOr<std::unique_ptr<AddedTokenSplitter>> AddedTokenSplitter::build(const std::vector<AddedToken>& tokens,
                                                                        const Normalizer* normalizer,
                                                                        const std::string& file) {
  std::unique_ptr<AddedTokenSplitter> s(new AddedTokenSplitter());
  s->tokens_ = tokens;
  bool single_word = false;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const AddedToken& t = tokens[i];
    single_word = single_word || t.single_word;
    if (t.normalized && normalizer) {
      auto n = normalizer->normalize(t.content);
      if (!n.is_ok())
        return Status::parse_error(file + ": added_tokens[" + std::to_string(i) + "]: " + n.status().message());
      if (!n->empty()) s->normalized_.add(*n, int32_t(i));
    } else if (t.normalized) {
      s->normalized_.add(t.content, int32_t(i));
    } else {
      s->raw_.add(t.content, int32_t(i));
    }
  }
  if (single_word) {
    // Rust regex's \w: what `tokenizers` tests on either side of a single_word token.
    auto re = Regex::compile(R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])",
                             file + ": added_tokens (single_word's word characters)");
    if (!re.is_ok()) return re.status();
    s->word_char_ = std::move(*re);
  }
  return s;
}

StatusOr<bool> AddedTokenSplitter::is_word_char_at(std::string_view text, size_t at, bool before) const {
  // The character just before `at` (before) or at `at`.
  size_t begin = at;
  if (before) {
    if (at == 0) return false;
    begin = at - 1;
    while (begin > 0 && (static_cast<unsigned char>(text[begin]) & 0xC0) == 0x80) --begin;
  } else if (at >= text.size()) {
    return false;
  }
  const size_t n = utf8::sequence_length(text, begin);
  return word_char_->search(text.substr(begin, n ? n : 1));
}

StatusOr<std::vector<AddedTokenSplitter::Piece>> AddedTokenSplitter::split_with(const Trie& trie,
                                                                                std::string_view text) const {
  std::vector<Piece> out;
  size_t done = 0;  // text before this is in `out`
  auto white_space_at = [&](size_t i) {
    size_t n = 1;
    return utf8::is_white_space(utf8::decode(text, i, &n)) ? n : 0;
  };
  for (size_t at = 0; at < text.size() && !trie.empty();) {
    auto [token, len] = trie.longest(text, at);
    if (token < 0) {
      ++at;
      continue;
    }
    const AddedToken& t = tokens_[size_t(token)];
    size_t start = at, stop = at + len;
    at = stop;  // matches never overlap, even one dropped below
    if (t.single_word) {
      auto left = is_word_char_at(text, start, true), right = is_word_char_at(text, stop, false);
      if (!left.is_ok()) return left.status();
      if (!right.is_ok()) return right.status();
      if (*left || *right) continue;
    }
    if (t.lstrip) {
      size_t s = start;
      while (s > done) {
        size_t b = s - 1;
        while (b > done && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
        if (!white_space_at(b)) break;
        s = b;
      }
      start = s;
    }
    if (t.rstrip) {
      for (size_t n; stop < text.size() && (n = white_space_at(stop)) > 0;) stop += n;
      at = stop;
    }
    if (start > done) out.push_back({std::string(text.substr(done, start - done)), -1});
    out.push_back({std::string(text.substr(start, stop - start)), t.id});
    done = stop;
  }
  if (done < text.size()) out.push_back({std::string(text.substr(done)), -1});
  return out;
}

StatusOr<std::vector<AddedTokenSplitter::Piece>> AddedTokenSplitter::split(std::string_view text,
                                                                           const Normalizer* normalizer) const {
  auto first = split_with(raw_, text);
  if (!first.is_ok()) return first.status();
  std::vector<Piece> out;
  for (Piece& p : *first) {
    if (p.id >= 0) {
      out.push_back(std::move(p));
      continue;
    }
    if (normalizer) {
      auto n = normalizer->normalize(p.text);
      if (!n.is_ok()) return n.status();
      p.text = std::move(*n);
    }
    auto second = split_with(normalized_, p.text);
    if (!second.is_ok()) return second.status();
    for (Piece& q : *second) out.push_back(std::move(q));
  }
  return out;
}

}  // namespace tunableop::llm
