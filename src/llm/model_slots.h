// The host side of a continuous-batching pass (Engine::prefill_slots / decode_slots): which
// token, sequence and position each row of the pass is, the pass's own block table, and for a
// packed prefill the layout its attention runs on. Model (model.cc) uploads these and runs the
// one forward pass; nothing here touches a device.
//
// A slot pass numbers its sequences 0 .. batch - 1 in the order given ("local" sequences) and
// carries a block table of its own, [batch (+1)][pages_per_seq], gathered from the slots' rows
// of the paged cache's table: the kernels index the table by local sequence, so any set of slots
// runs in one pass and a captured decode graph reads the same buffers every step.
//
// Packed prefill: chunk b's rows are rows [offset_b, offset_b + count_b) of the pass, back to
// back (GEMMs see exactly the prompt tokens, rounded up to `row_multiple`). Attention runs once
// per chunk, on its own rows in place (tunableop/attention.h with batch 1: its q_lens[b] queries
// are the last positions of its kv_lens[b] keys), as a problem whose query and key counts are
// rounded up to powers of two: every pass of every mix of prompts uses a few dozen attention
// problems at most, which the server tunes at start-up. Rows past a chunk's queries are the
// next chunk's (or slack the pass keeps after its rows): the op writes zeros there, and the
// next chunk's call writes its own rows after. Padding rows belong to one more local sequence
// whose length is 0, so the cache write skips them.
#pragma once

#include <cstdint>
#include <vector>

#include "tunableop/status.h"

namespace tunableop::llm {

struct SlotPassInput {
  int64_t slot = 0;
  int64_t start = 0;  // positions the slot holds before the pass
  int64_t count = 0;  // tokens the pass appends (decode: 1)
  const int32_t* tokens = nullptr;
  const int32_t* table_row = nullptr;  // the slot's row of the cache's block table (host)
};

struct SlotPassLayout {
  int64_t rows = 0;   // rows of the pass (padding included)
  int64_t batch = 0;  // sequences (decode: the bucket, padding rows included)
  int64_t slack = 0;  // prefill: rows after `rows` a chunk's attention may write (the largest q bucket)
  std::vector<int32_t> ids, seqs, positions;  // per row
  // Per local sequence (prefill: then the padding rows' sequence, of length 0): its length after
  // the pass, its queries in the pass, its row of the pass's block table ([.][pages_per_seq]).
  std::vector<int32_t> lens, q_lens, table;
  std::vector<int64_t> offsets;                // prefill, per chunk: its first row
  std::vector<int64_t> q_buckets, kv_buckets;  // prefill, per chunk: its attention's q_len and kv_len
  std::vector<int64_t> last_rows;              // per chunk: the row whose logits choose its next token
};

// The smallest power of two >= n (and >= lo), at most hi.
int64_t pow2_bucket(int64_t n, int64_t lo, int64_t hi);

// A prefill pass over `chunks`. Rows are rounded up to `row_multiple`; each chunk's attention
// q_len and kv_len to powers of two (>= 16, <= max_seq). `scratch_page`: a pool page that no
// sequence owns (the padding rows' table entries).
StatusOr<SlotPassLayout> layout_prefill(const std::vector<SlotPassInput>& chunks, int64_t row_multiple,
                                        int64_t pages_per_seq, int64_t page_size, int64_t max_seq,
                                        int32_t scratch_page);

// A decode step over `slots` (count 1 each), padded to `bucket` rows whose sequences hold one
// position in the scratch page.
StatusOr<SlotPassLayout> layout_decode(const std::vector<SlotPassInput>& slots, int64_t bucket, int64_t pages_per_seq,
                                       int64_t page_size, int32_t scratch_page);

}  // namespace tunableop::llm
