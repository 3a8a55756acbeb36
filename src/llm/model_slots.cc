#include "llm/model_slots.h"

#include <algorithm>
#include <string>

namespace tunableop::llm {

int64_t pow2_bucket(int64_t n, int64_t lo, int64_t hi) {
  int64_t b = std::max<int64_t>(lo, 1);
  while (b < n) b *= 2;
  return std::min(b, hi);
}

namespace {

// Copies a slot's table row (its pages for positions < `positions`; the rest point at the
// scratch page, which no kernel reads past a sequence's length anyway).
void put_row(int32_t* dst, const int32_t* row, int64_t positions, int64_t pps, int64_t page_size, int32_t scratch) {
  const int64_t held = (positions + page_size - 1) / page_size;
  for (int64_t j = 0; j < pps; ++j) dst[j] = (row && j < held) ? row[j] : scratch;
}

Status check_inputs(const std::vector<SlotPassInput>& in, int64_t pps, int64_t page_size) {
  if (in.empty()) return Status::invalid_argument("a slot pass with no sequences");
  std::vector<int64_t> seen;
  for (const SlotPassInput& s : in) {
    if (s.count < 1 || !s.tokens) return Status::invalid_argument("slot " + std::to_string(s.slot) + ": no tokens");
    if (s.start < 0 || s.start + s.count > pps * page_size) {
      return Status::invalid_argument("slot " + std::to_string(s.slot) + ": positions " + std::to_string(s.start) +
                                      ".." + std::to_string(s.start + s.count - 1) + " beyond the cache's " +
                                      std::to_string(pps * page_size));
    }
    if (!s.table_row) return Status::internal("slot " + std::to_string(s.slot) + ": no block table row");
    seen.push_back(s.slot);
  }
  std::sort(seen.begin(), seen.end());
  if (std::adjacent_find(seen.begin(), seen.end()) != seen.end())
    return Status::invalid_argument("a slot appears twice in one pass");
  return Status::ok();
}

}  // namespace

StatusOr<SlotPassLayout> layout_prefill(const std::vector<SlotPassInput>& chunks, int64_t row_multiple,
                                        int64_t pages_per_seq, int64_t page_size, int64_t max_seq,
                                        int32_t scratch_page) {
  TUNABLEOP_RETURN_IF_ERROR(check_inputs(chunks, pages_per_seq, page_size));
  SlotPassLayout L;
  const int64_t S = int64_t(chunks.size());
  int64_t tokens = 0;
  for (const SlotPassInput& c : chunks) tokens += c.count;
  const int64_t m = std::max<int64_t>(row_multiple, 1);
  L.rows = (tokens + m - 1) / m * m;
  L.batch = S;
  L.ids.assign(size_t(L.rows), 0);
  L.seqs.assign(size_t(L.rows), int32_t(S));  // padding rows: the padding sequence, length 0
  L.positions.assign(size_t(L.rows), 0);
  L.lens.assign(size_t(S + 1), 0);
  L.q_lens.assign(size_t(S + 1), 0);
  L.table.assign(size_t((S + 1) * pages_per_seq), scratch_page);
  int64_t row = 0;
  for (int64_t b = 0; b < S; ++b) {
    const SlotPassInput& c = chunks[size_t(b)];
    L.offsets.push_back(row);
    const int64_t q = pow2_bucket(c.count, 16, max_seq);
    L.q_buckets.push_back(q);
    L.kv_buckets.push_back(std::max(pow2_bucket(c.start + c.count, 16, max_seq), q));
    L.slack = std::max(L.slack, q);
    for (int64_t j = 0; j < c.count; ++j, ++row) {
      L.ids[size_t(row)] = c.tokens[j];
      L.seqs[size_t(row)] = int32_t(b);
      L.positions[size_t(row)] = int32_t(c.start + j);
    }
    L.lens[size_t(b)] = int32_t(c.start + c.count);
    L.q_lens[size_t(b)] = int32_t(c.count);
    L.last_rows.push_back(row - 1);
    put_row(L.table.data() + b * pages_per_seq, c.table_row, c.start + c.count, pages_per_seq, page_size, scratch_page);
  }
  return L;
}

StatusOr<SlotPassLayout> layout_decode(const std::vector<SlotPassInput>& slots, int64_t bucket, int64_t pages_per_seq,
                                       int64_t page_size, int32_t scratch_page) {
  TUNABLEOP_RETURN_IF_ERROR(check_inputs(slots, pages_per_seq, page_size));
  const int64_t n = int64_t(slots.size());
  if (bucket < n) return Status::internal("decode bucket " + std::to_string(bucket) + " < " + std::to_string(n));
  SlotPassLayout L;
  L.rows = L.batch = bucket;
  L.ids.assign(size_t(bucket), 0);
  L.seqs.resize(size_t(bucket));
  L.positions.assign(size_t(bucket), 0);
  L.lens.assign(size_t(bucket), 1);  // padding rows: one position, in the scratch page
  L.q_lens.assign(size_t(bucket), 1);
  L.table.assign(size_t(bucket * pages_per_seq), scratch_page);
  L.last_rows.resize(size_t(n));
  for (int64_t i = 0; i < bucket; ++i) L.seqs[size_t(i)] = int32_t(i);
  for (int64_t i = 0; i < n; ++i) {
    const SlotPassInput& s = slots[size_t(i)];
    if (s.count != 1) return Status::invalid_argument("a decode step appends one token per sequence");
    L.ids[size_t(i)] = s.tokens[0];
    L.positions[size_t(i)] = int32_t(s.start);
    L.lens[size_t(i)] = int32_t(s.start + 1);
    L.last_rows[size_t(i)] = i;
    put_row(L.table.data() + i * pages_per_seq, s.table_row, s.start + 1, pages_per_seq, page_size, scratch_page);
  }
  return L;
}

}  // namespace tunableop::llm
