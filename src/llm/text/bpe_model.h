// The BPE model of a tokenizer.json ("model": {"type": "BPE", ...}): a vocabulary of strings
// and a ranked list of merges. A pre-tokenized word starts as one symbol per character and the
// lowest-ranked adjacent pair is merged until none is left, as Hugging Face `tokenizers` does
// (ties: the leftmost pair). A heap keeps each word at O(n log n); a cache keeps each distinct
// word's ids (text repeats words).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tunableop/status.h"

namespace tunableop::llm {

struct BpeOptions {
  bool ignore_merges = false;  // a word that is in the vocabulary is one token, merges or not
  bool byte_fallback = false;  // a character outside the vocabulary becomes its <0xXX> bytes
  bool fuse_unk = false;       // consecutive unknown characters become one unk
  std::optional<int32_t> unk;  // unknown characters without byte fallback; none: dropped (as HF does)
};

class BpeModel {
 public:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

  // `vocab`: token -> id; `merges`: pairs of tokens, highest priority first. `file` names the
  // source in errors (merges naming unknown tokens, ids out of range or duplicated).
  static StatusOr<std::unique_ptr<BpeModel>> build(Vocab vocab,
                                                   const std::vector<std::pair<std::string, std::string>>& merges,
                                                   BpeOptions options, const std::string& file);

  // Appends the ids of one pre-tokenized word (already in the vocabulary's alphabet).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> id(std::string_view token) const;
  // The token of an id of the vocabulary; null for ids outside it.
  const std::string* token(int32_t id) const;
  // One past the largest id.
  int64_t id_bound() const { return int64_t(tokens_.size()); }
  size_t merge_count() const { return merges_.size(); }
  const BpeOptions& options() const { return options_; }

  ~BpeModel();

 private:
  struct Merge {
    int32_t rank, id;
  };
  BpeModel() = default;
  void merge_symbols(std::string_view word, std::vector<int32_t>& out) const;
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

  Vocab vocab_;
  std::vector<std::string> tokens_;  // id -> token ("" for ids the vocabulary lacks)
  std::vector<bool> has_token_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<int32_t> byte_ids_[256];  // <0xXX> tokens, for byte fallback
  std::vector<int32_t> char_ids_;         // single characters below U+0200 -> id (-1: none): the fast path
  BpeOptions options_;
  struct Cache;
  std::unique_ptr<Cache> cache_;
};

}  // namespace tunableop::llm
