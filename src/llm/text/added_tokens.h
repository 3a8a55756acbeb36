// The added tokens of a tokenizer.json ("added_tokens": <|begin_of_text|>, <|im_start|>, ...),
// found in text as Hugging Face `tokenizers` finds them: leftmost-longest, non-overlapping,
// before any normalisation or pre-tokenisation, and each becomes its id directly. Per token:
//   normalized   matched in the normalized text (second pass) rather than the raw text (first);
//   single_word  only where no word character touches it on either side;
//   lstrip/rstrip  the white space before/after it is taken into the token (not tokenized).
// Special tokens in text are matched like the others (transformers' default,
// split_special_tokens = false).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "llm/text/normalizer.h"
#include "llm/text/regex.h"
#include "tunableop/status.h"

namespace tunableop::llm {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false, lstrip = false, rstrip = false, normalized = false, single_word = false;
};

class AddedTokenSplitter {
 public:
  struct Piece {
    std::string text;  // normalized, unless it is an added token (then its matched text)
    int32_t id = -1;   // an added token's id, or -1 for text to pre-tokenize
  };

  // `normalizer` (may be null) is applied to the contents of normalized tokens, as `tokenizers`
  // does when it builds its matcher, and to the text between the first pass's matches.
  static StatusOr<std::unique_ptr<AddedTokenSplitter>> build(const std::vector<AddedToken>& tokens,
                                                             const Normalizer* normalizer, const std::string& file);

  StatusOr<std::vector<Piece>> split(std::string_view text, const Normalizer* normalizer) const;

 private:
  struct Trie {
    struct Node {
      std::vector<std::pair<unsigned char, int32_t>> next;
      int32_t token = -1;  // index into tokens_
    };
    std::vector<Node> nodes{1};
    void add(std::string_view s, int32_t token);
    // The longest token starting at text[at]: (token, length) or (-1, 0).
    std::pair<int32_t, size_t> longest(std::string_view text, size_t at) const;
    bool empty() const { return nodes.size() == 1; }
  };
  // Text split on one trie's tokens, with the single_word / lstrip / rstrip rules applied.
  StatusOr<std::vector<Piece>> split_with(const Trie& trie, std::string_view text) const;
  StatusOr<bool> is_word_char_at(std::string_view text, size_t at, bool before) const;

  std::vector<AddedToken> tokens_;
  Trie raw_, normalized_;
  std::unique_ptr<Regex> word_char_;  // only when a token is single_word
};

}  // namespace tunableop::llm
