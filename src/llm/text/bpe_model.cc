#include "llm/text/bpe_model.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <queue>

#include "llm/text/utf8.h"

namespace tunableop::llm {

// Words up to kMaxCachedBytes, kCacheEntries of them; the cache is emptied when full (simple,
// and a text's words repeat within it). Shared by the threads that encode with one tokenizer.
struct BpeModel::Cache {
  static constexpr size_t kMaxCachedBytes = 256, kCacheEntries = 1 << 16;
  std::mutex mu;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> words;
};

BpeModel::~BpeModel() = default;

StatusOr<std::unique_ptr<BpeModel>> BpeModel::build(Vocab vocab,
                                                    const std::vector<std::pair<std::string, std::string>>& merges,
                                                    BpeOptions options, const std::string& file) {
  std::unique_ptr<BpeModel> m(new BpeModel());
  int64_t max_id = -1;
  for (const auto& [tok, id] : vocab) {
    if (id < 0) {
      return Status::parse_error(file + ": model.vocab: \"" + utf8::excerpt(tok) + "\" has a negative id " +
                                 std::to_string(id));
    }
    max_id = std::max<int64_t>(max_id, id);
  }
  // Ids index a table: they must be dense enough that the table is the vocabulary's size, not
  // whatever number a file writes.
  if (max_id >= int64_t(vocab.size()) * 2 + 65536) {
    return Status::parse_error(file + ": model.vocab: id " + std::to_string(max_id) + " for " +
                               std::to_string(vocab.size()) + " tokens (ids must be 0 .. size - 1, with few gaps)");
  }
  m->tokens_.assign(size_t(max_id + 1), std::string());
  m->has_token_.assign(size_t(max_id + 1), false);
  for (const auto& [tok, id] : vocab) {
    if (m->has_token_[size_t(id)]) {
      return Status::parse_error(file + ": model.vocab: id " + std::to_string(id) + " is given to both \"" +
                                 utf8::excerpt(m->tokens_[size_t(id)]) + "\" and \"" + utf8::excerpt(tok) + "\"");
    }
    m->tokens_[size_t(id)] = tok;
    m->has_token_[size_t(id)] = true;
  }
  m->vocab_ = std::move(vocab);
  m->merges_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& a = merges[i].first;
    const std::string& b = merges[i].second;
    auto where = [&] {
      return file + ": model.merges[" + std::to_string(i) + "] (\"" + utf8::excerpt(a) + "\", \"" + utf8::excerpt(b) +
             "\")";
    };
    auto ia = m->id(a), ib = m->id(b);
    if (!ia || !ib) {
      return Status::parse_error(where() + ": \"" + utf8::excerpt(!ia ? a : b) + "\" is not in model.vocab");
    }
    auto merged = m->id(a + b);
    if (!merged)
      return Status::parse_error(where() + ": the merged token \"" + utf8::excerpt(a + b) + "\" is not in model.vocab");
    // A pair listed twice keeps its later rank, as `tokenizers` does.
    m->merges_[key(*ia, *ib)] = Merge{int32_t(i), *merged};
  }
  if (options.unk && (*options.unk < 0 || *options.unk > max_id || !m->has_token_[size_t(*options.unk)])) {
    return Status::parse_error(file + ": model.unk_token is not in model.vocab");
  }
  if (options.byte_fallback) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      m->byte_ids_[b] = m->id(name);
    }
  }
  // Byte-level vocabularies spell every byte as one character below U+0144: a table lookup
  // instead of a hash per character.
  m->char_ids_.assign(0x200, -1);
  for (uint32_t cp = 0; cp < 0x200; ++cp) {
    std::string ch;
    utf8::append(ch, cp);
    if (auto id = m->id(ch)) m->char_ids_[cp] = *id;
  }
  m->options_ = options;
  m->cache_ = std::make_unique<Cache>();
  return m;
}

std::optional<int32_t> BpeModel::id(std::string_view token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? std::nullopt : std::optional<int32_t>(it->second);
}

const std::string* BpeModel::token(int32_t id) const {
  if (id < 0 || size_t(id) >= tokens_.size() || !has_token_[size_t(id)]) return nullptr;
  return &tokens_[size_t(id)];
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (auto whole = id(word)) {
      out.push_back(*whole);
      return;
    }
  }
  const bool cacheable = word.size() <= Cache::kMaxCachedBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_->mu);
    auto it = cache_->words.find(word);
    if (it != cache_->words.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  merge_symbols(word, ids);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_->mu);
    if (cache_->words.size() >= Cache::kCacheEntries) cache_->words.clear();
    cache_->words.emplace(std::string(word), ids);
  }
  out.insert(out.end(), ids.begin(), ids.end());
}

void BpeModel::merge_symbols(std::string_view word, std::vector<int32_t>& out) const {
  // One symbol per character (or per byte, through byte fallback); prev/next link the live ones.
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool live;
  };
  // Per-thread scratch: a word's symbols and candidate heap, reused from word to word.
  thread_local std::vector<Symbol> sym;
  sym.clear();
  bool last_unk = false;
  for (size_t i = 0; i < word.size();) {
    size_t n = utf8::sequence_length(word, i);
    if (n == 0) n = 1;  // callers pass valid UTF-8; never loop forever on a bad byte
    const std::string_view ch = word.substr(i, n);
    i += n;
    size_t len = 0;
    const uint32_t cp = n > 2 ? 0x200 : utf8::decode(ch, 0, &len);
    if (cp < char_ids_.size() && char_ids_[cp] >= 0) {
      sym.push_back({char_ids_[cp], 0, 0, true});
      last_unk = false;
      continue;
    }
    if (auto tid = cp < char_ids_.size() ? std::nullopt : id(ch)) {
      sym.push_back({*tid, 0, 0, true});
      last_unk = false;
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (char c : ch) all = all && byte_ids_[static_cast<uint8_t>(c)].has_value();
      if (all) {
        for (char c : ch) sym.push_back({*byte_ids_[static_cast<uint8_t>(c)], 0, 0, true});
        last_unk = false;
        continue;
      }
    }
    if (!options_.unk) continue;  // `tokenizers` drops a character it cannot represent
    if (!(options_.fuse_unk && last_unk)) sym.push_back({*options_.unk, 0, 0, true});
    last_unk = true;
  }
  const int32_t n = int32_t(sym.size());
  for (int32_t i = 0; i < n; ++i) sym[size_t(i)].prev = i - 1, sym[size_t(i)].next = i + 1 < n ? i + 1 : -1;

  struct Candidate {
    int32_t rank, pos, id;
    bool operator<(const Candidate& o) const {  // the heap's top: lowest rank, then leftmost
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  thread_local std::vector<Candidate> heap;  // a binary heap through std::push_heap / pop_heap
  heap.clear();
  auto push = [&](int32_t pos) {
    if (pos < 0 || sym[size_t(pos)].next < 0) return;
    auto it = merges_.find(key(sym[size_t(pos)].id, sym[size_t(sym[size_t(pos)].next)].id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, pos, it->second.id});
    std::push_heap(heap.begin(), heap.end());
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = sym[size_t(c.pos)];
    if (!left.live || left.next < 0) continue;
    Symbol& right = sym[size_t(left.next)];
    // Stale entry: one side has merged with something else since it was pushed.
    auto it = merges_.find(key(left.id, right.id));
    if (it == merges_.end() || it->second.id != c.id || it->second.rank != c.rank) continue;
    left.id = c.id;
    right.live = false;
    left.next = right.next;
    if (right.next >= 0) sym[size_t(right.next)].prev = c.pos;
    push(left.prev);
    push(c.pos);
  }
  for (const Symbol& s : sym) {
    if (s.live) out.push_back(s.id);
  }
}

}  // namespace tunableop::llm
