// The engine's continuous-batching calls (engine.h, model_engine.h): prefill_slots packs chunks of
// several sequences into one prefill pass, decode_slots runs one step over any set of slots padded
// to a bucket, warm_up_slots prepares (and, with tuning on, tunes) what serving will meet. The
// layouts of both passes come from model_slots.h; the pass itself is forward() (model.cc).
#include <algorithm>
#include <cstring>

#include "llm/model_engine.h"
#include "llm/random_hash.h"
#include "tunableop/half.h"

namespace tunableop::llm::model_impl {

// --- Continuous batching (engine.h, model_slots.h).
Status Model::prefill_slots(const std::vector<SlotChunk>& chunks, const SamplingRow* sampling,
                            std::vector<int32_t>* next) {
  TUNABLEOP_RETURN_IF_ERROR(check_slot_engine());
  if (int64_t(chunks.size()) > o_.max_batch) return Status::invalid_argument("prefill_slots: more chunks than slots");
  std::vector<SlotPassInput> in;
  for (const SlotChunk& c : chunks) {
    TUNABLEOP_RETURN_IF_ERROR(check_slot(c.slot));
    TUNABLEOP_RETURN_IF_ERROR(check_ids(c.tokens, c.count));
    const int64_t start = seq_len_[size_t(c.slot)];
    if (start + c.count > o_.max_seq) {
      return Status::invalid_argument("slot " + std::to_string(c.slot) + ": " + std::to_string(start + c.count) +
                                      " positions do not fit the KV cache of " + std::to_string(o_.max_seq));
    }
    TUNABLEOP_RETURN_IF_ERROR(cache_->reserve(c.slot, start + c.count));
    in.push_back({c.slot, start, c.count, c.tokens, paged().host_row(c.slot)});
  }
  const PagedKvCache::Geometry& g = paged().geometry();
  auto L = layout_prefill(in, o_.pad_multiple, g.pages_per_seq(), g.page_size, o_.max_seq, paged().scratch_page());
  if (!L.is_ok()) return L.status();
  TUNABLEOP_RETURN_IF_ERROR(upload_prefill_layout(*L));
  const int64_t S = int64_t(chunks.size());
  batch_ = S;  // output rows: each chunk's last
  Pass p;
  p.phase = Phase::kPrefill;
  p.batch = 1;
  p.tokens = L->rows;
  p.ids = pre_.ids.as<int32_t>();
  p.seqs = pre_.seqs.as<int32_t>();
  p.positions = pre_.pos.as<int32_t>();
  p.seq_lens = pre_.lens.as<int32_t>();
  p.block_table = slot_table_pre_.as<int32_t>();
  Packed packed;
  packed.chunk = p;  // each chunk's attention: its rows, its lengths and table row
  packed.chunk.batch = 1;
  packed.chunk.ragged = true;
  packed.layout = &*L;
  packed_ = &packed;
  Status st = dev_->run_prefill(p, linear_, [&] { return forward(p, pre_); });
  packed_ = nullptr;
  TUNABLEOP_RETURN_IF_ERROR(st);
  for (const SlotChunk& c : chunks) seq_len_[size_t(c.slot)] += c.count;
  return choose_next(S, sampling, next);
}

Status Model::decode_slots(const std::vector<int64_t>& slots, const std::vector<int32_t>& tokens,
                           const SamplingRow* sampling, std::vector<int32_t>* next) {
  TUNABLEOP_RETURN_IF_ERROR(check_slot_engine());
  if (slots.size() != tokens.size() || slots.empty() || int64_t(slots.size()) > o_.max_batch) {
    return Status::invalid_argument("decode_slots: " + std::to_string(slots.size()) + " slots and " +
                                    std::to_string(tokens.size()) + " tokens (1.." + std::to_string(o_.max_batch) +
                                    " of each)");
  }
  std::vector<SlotPassInput> in;
  for (size_t i = 0; i < slots.size(); ++i) {
    const int64_t slot = slots[i];
    TUNABLEOP_RETURN_IF_ERROR(check_slot(slot));
    TUNABLEOP_RETURN_IF_ERROR(check_ids(&tokens[i], 1));
    TUNABLEOP_RETURN_IF_ERROR(reserve_decode_position(slot, seq_len_[size_t(slot)]));
    in.push_back({slot, seq_len_[size_t(slot)], 1, &tokens[i], paged().host_row(slot)});
  }
  const int64_t bucket = decode_bucket(int64_t(slots.size()));
  const PagedKvCache::Geometry& g = paged().geometry();
  auto L = layout_decode(in, bucket, g.pages_per_seq(), g.page_size, paged().scratch_page());
  if (!L.is_ok()) return L.status();
  TUNABLEOP_RETURN_IF_ERROR(upload_decode_layout(*L));
  batch_ = bucket;
  Pass p = decode_pass();
  p.block_table = slot_table_dec_.as<int32_t>();
  TUNABLEOP_RETURN_IF_ERROR(dev_->run_decode_step(
      bucket, linear_, [&] { return forward(p, dec_); }, /*slot_table=*/true));
  for (int64_t slot : slots) ++seq_len_[size_t(slot)];
  TUNABLEOP_RETURN_IF_ERROR(choose_next(bucket, sampling, next, int64_t(slots.size())));
  next->resize(slots.size());
  return Status::ok();
}

std::vector<int64_t> Model::decode_buckets() const {
  std::vector<int64_t> b;
  // Powers of two by default: a padding row costs a decode step one position of attention and
  // nothing in its GEMMs while they are memory-bound, and every bucket costs start-up tuning
  // and a graph. Where the GEMMs turn compute-bound (large batches), decode_bucket_step bounds
  // the padding to less than one step.
  const int64_t step = o_.decode_bucket_step;
  for (int64_t n = 1; n < o_.max_batch && (step <= 0 || n < step); n *= 2) b.push_back(n);
  if (step > 0)
    for (int64_t n = step; n < o_.max_batch; n += step)
      if (b.empty() || n > b.back()) b.push_back(n);
  b.push_back(o_.max_batch);
  return b;
}

int64_t Model::slot_pages() const {
  if (cache_->kind() != KvCacheKind::kPaged) return 0;
  auto& pc = const_cast<PagedKvCache&>(static_cast<const PagedKvCache&>(*cache_));
  pc.scratch_page();  // taken once, before anything else: it never counts as free
  return pc.geometry().pages - 1;
}

Status Model::warm_up_slots(const std::vector<int64_t>& prefill_rows) {
  TUNABLEOP_RETURN_IF_ERROR(check_slot_engine());
  // Every slot is free here: warm-up sequences take the first ones and give them back.
  for (int64_t s = 0; s < o_.max_batch; ++s) {
    if (seq_len_[size_t(s)] != 0) return Status::invalid_argument("warm_up_slots: slots are in use");
  }
  std::vector<int32_t> next;
  int64_t longest = 1;
  for (int64_t rows : prefill_rows) {
    const int64_t n = std::min(rows, o_.max_seq);
    longest = std::max(longest, n);
    std::vector<int32_t> ids(static_cast<size_t>(n), 0);
    Status st = prefill_slots({SlotChunk{0, ids.data(), n}}, nullptr, &next);
    release_slot(0);
    TUNABLEOP_RETURN_IF_ERROR(st);
  }
  TUNABLEOP_RETURN_IF_ERROR(prepare_chunk_attention(longest));
  // Each decode bucket: its sequences start with one token each (one packed prefill), then one
  // decode step over all of them.
  const int32_t id = 0;
  for (int64_t bucket : decode_buckets()) {
    std::vector<SlotChunk> chunks;
    std::vector<int64_t> slots;
    for (int64_t s = 0; s < bucket; ++s) chunks.push_back(SlotChunk{s, &id, 1}), slots.push_back(s);
    Status st = prefill_slots(chunks, nullptr, &next);
    if (st.is_ok()) st = decode_slots(slots, std::vector<int32_t>(size_t(bucket), 0), nullptr, &next);
    for (int64_t s : slots) release_slot(s);
    TUNABLEOP_RETURN_IF_ERROR(st);
  }
  return Status::ok();
}

// The slot calls need a paged cache (pages move with sequences, not with batch rows).
Status Model::check_slot_engine() {
  if (cache_->kind() != KvCacheKind::kPaged)
    return Status::unsupported("continuous batching needs a paged KV cache (--kv-cache paged)");
  TUNABLEOP_RETURN_IF_ERROR(drop_ahead());
  return dev_->make_current();
}

Status Model::check_slot(int64_t slot) const {
  if (slot < 0 || slot >= o_.max_batch) {
    return Status::invalid_argument("slot " + std::to_string(slot) + " outside 0.." + std::to_string(o_.max_batch - 1));
  }
  return Status::ok();
}

Status Model::check_ids(const int32_t* ids, int64_t n) const {
  if (!ids || n < 1) return Status::invalid_argument("no tokens");
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= c_.vocab_size) {
      return Status::invalid_argument("token id " + std::to_string(ids[i]) + " is outside the vocabulary [0, " +
                                      std::to_string(c_.vocab_size) + ")");
    }
  }
  return Status::ok();
}

// The packed prefill's inputs and layout to the device (prefill_slots).
Status Model::upload_prefill_layout(const SlotPassLayout& L) {
  // Slack after the rows: a chunk's attention writes zeros past its queries (model_slots.h).
  TUNABLEOP_RETURN_IF_ERROR(ensure_rows(pre_, L.rows + L.slack));
  TUNABLEOP_RETURN_IF_ERROR(ensure(pre_.lens, L.lens.size() * 4));
  TUNABLEOP_RETURN_IF_ERROR(ensure(slot_q_lens_, L.q_lens.size() * 4));
  TUNABLEOP_RETURN_IF_ERROR(ensure(slot_table_pre_, L.table.size() * 4));
  const size_t rows = size_t(L.rows);
  TUNABLEOP_RETURN_IF_ERROR(dev_->upload(pre_.ids.get(), L.ids.data(), rows * 4));
  TUNABLEOP_RETURN_IF_ERROR(dev_->upload(pre_.seqs.get(), L.seqs.data(), rows * 4));
  TUNABLEOP_RETURN_IF_ERROR(dev_->upload(pre_.pos.get(), L.positions.data(), rows * 4));
  TUNABLEOP_RETURN_IF_ERROR(dev_->upload(pre_.lens.get(), L.lens.data(), L.lens.size() * 4));
  TUNABLEOP_RETURN_IF_ERROR(dev_->upload(slot_q_lens_.get(), L.q_lens.data(), L.q_lens.size() * 4));
  TUNABLEOP_RETURN_IF_ERROR(dev_->upload(slot_table_pre_.get(), L.table.data(), L.table.size() * 4));
  return dev_->upload(last_rows_.get(), L.last_rows.data(), L.last_rows.size() * 8);
}

// A slot decode step's inputs to the buffers its (captured) pass reads.
Status Model::upload_decode_layout(const SlotPassLayout& L) {
  const int64_t B = L.batch, pps = paged().geometry().pages_per_seq();
  TUNABLEOP_RETURN_IF_ERROR(ensure(slot_table_dec_, size_t(o_.max_batch * pps) * 4));  // never moves (graphs)
  int32_t* ids = dec_in_host_.as<int32_t>();
  std::copy(L.ids.begin(), L.ids.end(), ids);
  std::copy(L.positions.begin(), L.positions.end(), ids + o_.max_batch);
  std::copy(L.lens.begin(), L.lens.end(), ids + 2 * o_.max_batch);
  TUNABLEOP_RETURN_IF_ERROR(dev_->upload(dec_in_.get(), ids, dec_in_.bytes()));
  return dev_->upload(slot_table_dec_.get(), L.table.data(), size_t(B * pps) * 4);
}

// Every chunk attention problem a prefill pass of at most `longest` tokens can meet
// (model_slots.h: q and kv rounded up to powers of two, capped at max_seq), run once on a layer
// of each attention kind (layer 0, and the first of another window) over the scratch page filled
// with noise: with TunableOp tuning on, each is tuned here, so a
// server never meets one untuned while it serves (Default, the math path, is several times
// slower on long prompts).
Status Model::prepare_chunk_attention(int64_t longest) {
  PagedKvCache& pc = paged();
  const PagedKvCache::Geometry& g = pc.geometry();
  const int32_t scratch = pc.scratch_page();
  const int64_t q_max = pow2_bucket(longest, 16, o_.max_seq);
  TUNABLEOP_RETURN_IF_ERROR(ensure_rows(pre_, q_max));
  const size_t page = size_t(g.page_elems()), rows = size_t(q_max * c_.qkv_dim());
  std::vector<uint8_t> noise(std::max(page, rows) * esize_);
  for (size_t i = 0; i < noise.size() / esize_; ++i) {
    const float v = 0.5f * random_uniform(0x5EED, 7, i);
    if (esize_ == 2) {
      const uint16_t b = to_bf16(v).bits;
      std::memcpy(noise.data() + 2 * i, &b, 2);
    } else {
      std::memcpy(noise.data() + 4 * i, &v, 4);
    }
  }
  const size_t page_bytes = page * esize_;
  // A layer of each attention kind: a sliding window is another problem (Gemma-2's layers alternate).
  std::vector<int64_t> kinds;
  for (int64_t l = 0; l < c_.num_layers; ++l) {
    bool seen = false;
    for (int64_t k : kinds) seen = seen || c_.layer_window(k) == c_.layer_window(l);
    if (!seen) kinds.push_back(l);
  }
  for (int64_t l : kinds) {
    TUNABLEOP_RETURN_IF_ERROR(
        dev_->upload(static_cast<char*>(pc.k(l)) + size_t(scratch) * page_bytes, noise.data(), page_bytes));
    TUNABLEOP_RETURN_IF_ERROR(
        dev_->upload(static_cast<char*>(pc.v(l)) + size_t(scratch) * page_bytes, noise.data(), page_bytes));
  }
  TUNABLEOP_RETURN_IF_ERROR(dev_->upload(pre_.qkv.get(), noise.data(), rows * esize_));
  const std::vector<int32_t> table(size_t(g.pages_per_seq()), scratch);
  TUNABLEOP_RETURN_IF_ERROR(ensure(slot_table_pre_, table.size() * 4));
  TUNABLEOP_RETURN_IF_ERROR(dev_->upload(slot_table_pre_.get(), table.data(), table.size() * 4));
  TUNABLEOP_RETURN_IF_ERROR(ensure(slot_q_lens_, 8));
  for (int64_t q = std::min<int64_t>(16, o_.max_seq);; q = std::min(2 * q, o_.max_seq)) {
    for (int64_t kv = q;; kv = std::min(2 * kv, o_.max_seq)) {
      const int32_t lens[2] = {int32_t(kv), int32_t(q)};
      TUNABLEOP_RETURN_IF_ERROR(dev_->upload(slot_q_lens_.get(), lens, sizeof(lens)));
      Pass c;
      c.phase = Phase::kPrefill;
      c.batch = 1;
      c.tokens = q;
      c.kv_len = kv;
      c.ragged = true;
      c.seq_lens = slot_q_lens_.as<int32_t>();
      c.q_lens = slot_q_lens_.as<int32_t>() + 1;
      c.block_table = slot_table_pre_.as<int32_t>();
      for (int64_t l : kinds)
        TUNABLEOP_RETURN_IF_ERROR(dev_->attention(c, l, pre_.qkv.get(), *cache_, linear_, pre_.attn.get()));
      if (kv >= o_.max_seq) break;
    }
    if (q >= q_max) break;
  }
  return Status::ok();
}

// A packed prefill's attention for layer l: one call per chunk, on its rows of a.qkv into its
// rows of a.attn, with its q and kv counts rounded up to powers of two (model_slots.h).
Status Model::packed_attention(int64_t l, Activations& a) {
  const SlotPassLayout& L = *packed_->layout;
  const size_t pps = size_t(paged().geometry().pages_per_seq());
  for (size_t b = 0; b < L.offsets.size(); ++b) {
    Pass c = packed_->chunk;
    c.tokens = L.q_buckets[b];
    c.kv_len = L.kv_buckets[b];
    c.seq_lens = pre_.lens.as<int32_t>() + b;
    c.q_lens = slot_q_lens_.as<int32_t>() + b;
    c.block_table = slot_table_pre_.as<int32_t>() + b * pps;
    const size_t row = size_t(L.offsets[b]);
    const void* q = a.qkv.as<char>() + row * size_t(c_.qkv_dim()) * esize_;
    void* out = a.attn.as<char>() + row * size_t(c_.q_dim()) * esize_;
    TUNABLEOP_RETURN_IF_ERROR(dev_->attention(c, l, q, *cache_, linear_, out));
  }
  return Status::ok();
}

}  // namespace tunableop::llm::model_impl
