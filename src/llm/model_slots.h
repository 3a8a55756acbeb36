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
// back (GEMMs see exactly the prompt tokens, rounded up to `row_multiple`). Attention takes a
// [batch][q_len] layout (tunableop/attention.h: queries of sequence b in its first q_lens[b]
// rows, the last q_lens[b] positions of its kv_lens[b] keys): to_layout gathers the packed qkv
// rows into it, to_rows gathers the output back. The layout's sequences are rounded up to a
// power of two (and its rows and keys too), so that passes of nearby shapes are one attention
// problem: the extra sequences hold one position in the scratch page and no row. Padding rows
// belong to one more local sequence whose length is 0, so the cache write skips them.
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
  int64_t rows = 0;                           // rows of the pass (padding included)
  int64_t batch = 0;                          // sequences the attention sees (decode: the bucket, padding included)
  int64_t q_len = 0;                          // packed prefill: the layout's rows per sequence (1 for decode)
  int64_t kv_len = 0;                         // the longest sequence after the pass, rounded up (attention's kv_len)
  std::vector<int32_t> ids, seqs, positions;  // per row
  std::vector<int32_t> lens;                  // per local sequence, padding sequence last: its length after the pass
  std::vector<int32_t> q_lens;                // per local sequence: the queries it has in this pass
  std::vector<int32_t> table;                 // [batch + 1][pages_per_seq] (the last row: the padding sequence's)
  std::vector<int64_t> to_layout, to_rows;    // packed prefill only (see above)
  std::vector<int64_t> last_rows;             // per chunk: the row whose logits choose its next token
};

// The smallest power of two >= n (and >= lo), at most hi.
int64_t pow2_bucket(int64_t n, int64_t lo, int64_t hi);

// A prefill pass over `chunks`. Rows are rounded up to `row_multiple`; the layout's q_len and the
// kv_len to powers of two (>= 16, <= max_seq), so that passes of nearby sizes are one attention
// problem. `scratch_page`: a pool page that no sequence owns (the padding rows' table entries).
StatusOr<SlotPassLayout> layout_prefill(const std::vector<SlotPassInput>& chunks, int64_t row_multiple,
                                        int64_t pages_per_seq, int64_t page_size, int64_t max_seq,
                                        int32_t scratch_page);

// A decode step over `slots` (count 1 each), padded to `bucket` rows whose sequences hold one
// position in the scratch page.
StatusOr<SlotPassLayout> layout_decode(const std::vector<SlotPassInput>& slots, int64_t bucket, int64_t pages_per_seq,
                                       int64_t page_size, int32_t scratch_page);

}  // namespace tunableop::llm
