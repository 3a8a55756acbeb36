// The forward pass, written once as the list of ops it is (llm.c style) over DeviceKernels:
//
//   x = embed(ids) [* sqrt(hidden) for Gemma]
//   per layer:  xn = rmsnorm(x); qkv = xn Wqkv [+ bias] [q/k head norms]; rope + cache; a = attention
//               x += a Wo [post-norm];  xn = rmsnorm(x); x += act(xn Wgate) * (xn Wup) Wdown [post-norm]
//   last real row of each sequence: rmsnorm, lm_head, argmax [, softcap]
// (bracketed: the families' features, config.h; attention's window, softcap and scale per layer
// come from layer_attention.)
//
// Everything about a device (memory, kernels, KV cache layout, CUDA graphs) sits behind
// DeviceKernels; what is here is the same on every device: prompt padding and checks, the
// decode bookkeeping, buffer sizes, the layer list. The engine's state is declared in
// model_engine.h; its continuous-batching calls are in model_slot_calls.cc.
#include "llm/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>

#include "llm/model_engine.h"
#include "llm/random_hash.h"
#include "llm/rope.h"
#include "tunableop/half.h"

namespace tunableop::llm {
namespace {

// Prompts against the engine's limits (before anything runs).
Status check_prompts(const ModelConfig& c, const EngineOptions& o, const std::vector<std::vector<int32_t>>& prompts) {
  if (prompts.empty()) return Status::invalid_argument("prefill: no prompts");
  if (int64_t(prompts.size()) > o.max_batch) {
    return Status::invalid_argument("prefill: batch " + std::to_string(prompts.size()) + " exceeds max_batch " +
                                    std::to_string(o.max_batch));
  }
  int64_t longest = 0;
  for (size_t b = 0; b < prompts.size(); ++b) {
    if (prompts[b].empty()) return Status::invalid_argument("prefill: prompt " + std::to_string(b) + " is empty");
    for (int32_t id : prompts[b]) {
      if (id < 0 || id >= c.vocab_size) {
        return Status::invalid_argument("prefill: token id " + std::to_string(id) + " in prompt " + std::to_string(b) +
                                        " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
      }
    }
    longest = std::max<int64_t>(longest, int64_t(prompts[b].size()));
  }
  if (round_up(longest, o.pad_multiple) > o.max_seq) {
    return Status::invalid_argument("prefill: prompt of " + std::to_string(longest) + " tokens (padded to " +
                                    std::to_string(round_up(longest, o.pad_multiple)) +
                                    ") does not fit the KV cache of " + std::to_string(o.max_seq) + " positions");
  }
  return Status::ok();
}

// Every tensor the family's features need is on the device: one that did not load them would
// otherwise run another model without a word.
Status check_family_weights(const ModelConfig& c, const DeviceWeights& w, const std::string& device) {
  for (const DeviceWeights::Layer& l : w.layers) {
    const char* missing = c.qkv_bias && !l.qkv_bias                                 ? "q/k/v biases"
                          : c.qk_norm && (!l.q_norm || !l.k_norm)                   ? "q/k head norms"
                          : c.post_norms && (!l.post_attn_norm || !l.post_mlp_norm) ? "post-norms"
                                                                                    : nullptr;
    if (missing) {
      return Status::unsupported(device + " does not hold the " + missing + " of this " + architecture_name(c.arch) +
                                 " model (layer " + std::to_string(&l - w.layers.data()) + ")");
    }
  }
  return Status::ok();
}

}  // namespace

namespace model_impl {

Status Model::init() {
  TUNABLEOP_RETURN_IF_ERROR(check_family_weights(c_, dev_->weights(), dev_->name()));
  TUNABLEOP_RETURN_IF_ERROR(dev_->make_current());
  esize_ = dtype_size(dev_->dtype());
  auto cache = dev_->make_kv_cache(o_.kv_cache, o_.max_batch, o_.max_seq);
  if (!cache.is_ok()) return cache.status();
  cache_ = std::move(cache.value());
  const int64_t B = o_.max_batch, H = c_.hidden_size;
  TUNABLEOP_RETURN_IF_ERROR(ensure(last_x_, size_t(B * H) * 4));
  TUNABLEOP_RETURN_IF_ERROR(ensure(last_norm_, size_t(B * H) * esize_));
  TUNABLEOP_RETURN_IF_ERROR(ensure(logits_, size_t(B * c_.vocab_size) * esize_));
  if (dev_->tensor_parallel().world > 1) {  // zeroed once: only this rank's columns are ever written
    TUNABLEOP_RETURN_IF_ERROR(ensure(logit_parts_, size_t(B * c_.vocab_size) * esize_));
    const std::vector<uint8_t> zeros(logit_parts_.bytes(), 0);
    TUNABLEOP_RETURN_IF_ERROR(dev_->upload(logit_parts_.get(), zeros.data(), zeros.size()));
  }
  TUNABLEOP_RETURN_IF_ERROR(ensure(next_, size_t(B) * 4));
  TUNABLEOP_RETURN_IF_ERROR(ensure(last_rows_, size_t(B) * 8));
  // The last layer's attention and MLP on each sequence's last row (prefill_outputs_only).
  TUNABLEOP_RETURN_IF_ERROR(ensure(last_qkv_, size_t(B * c_.qkv_dim()) * esize_));
  TUNABLEOP_RETURN_IF_ERROR(ensure(last_attn_, size_t(B * c_.q_dim()) * esize_));
  TUNABLEOP_RETURN_IF_ERROR(ensure(last_pos_, size_t(B) * 4));
  TUNABLEOP_RETURN_IF_ERROR(ensure_rows(dec_, B));
  TUNABLEOP_RETURN_IF_ERROR(ensure(pre_.lens, size_t(B) * 4));
  // A decode step's ids, positions and lengths travel as one upload (one copy instead of three
  // ahead of every step's graph): [ids | positions | lengths], max_batch each.
  TUNABLEOP_RETURN_IF_ERROR(ensure(dec_in_, size_t(3 * B) * 4));
  for (Buffer* b : {&dec_in_host_, &next_host_, &ahead_host_}) {
    auto h = dev_->alloc_host(size_t(b == &dec_in_host_ ? 3 * B : b == &ahead_host_ ? kMaxAhead * B : B) * 4);
    if (!h.is_ok()) return h.status();
    *b = std::move(h.value());
  }
  // Decode row b is sequence b: the sequence indices never change.
  std::vector<int32_t> seqs(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) seqs[size_t(b)] = int32_t(b);
  TUNABLEOP_RETURN_IF_ERROR(dev_->upload(dec_.seqs.get(), seqs.data(), seqs.size() * 4));
  // transformers multiplies by sqrt(hidden) cast to the activations' dtype first.
  const double scale = c_.scales_embedding() ? std::sqrt(double(H)) : 1.0;
  embed_scale_ = dev_->dtype() == DType::kBF16 ? to_float(to_bf16(float(scale))) : float(scale);
  seq_len_.assign(size_t(B), 0);
  return Status::ok();
}

std::vector<int64_t> Model::sequence_lengths() const {
  return std::vector<int64_t>(seq_len_.begin(), seq_len_.begin() + batch_);
}

Status Model::prefill(const std::vector<std::vector<int32_t>>& prompts, std::vector<int32_t>* next) {
  TUNABLEOP_RETURN_IF_ERROR(drop_ahead());
  auto p = prepare_prefill(prompts);
  if (!p.is_ok()) return p.status();
  TUNABLEOP_RETURN_IF_ERROR(dev_->run_prefill(*p, linear_, [&] { return forward(*p, pre_); }));
  return fetch_next(next);
}

// prefill(), with every op timed (the breakdown of issue 12).
StatusOr<std::vector<ProfileSpan>> Model::profile_prefill(const std::vector<std::vector<int32_t>>& prompts,
                                                          std::vector<int32_t>* next, double* host_ms) {
  TUNABLEOP_RETURN_IF_ERROR(drop_ahead());
  auto p = prepare_prefill(prompts);
  if (!p.is_ok()) return p.status();
  TUNABLEOP_RETURN_IF_ERROR(dev_->begin_profile());
  const auto t0 = std::chrono::steady_clock::now();
  Status st = forward(*p, pre_);
  if (host_ms) *host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  auto spans = dev_->end_profile();  // ends the profile whatever happened
  TUNABLEOP_RETURN_IF_ERROR(st);
  if (!spans.is_ok()) return spans.status();
  TUNABLEOP_RETURN_IF_ERROR(fetch_next(next));
  return spans;
}

// Checks the prompts, starts their sequences and uploads ids, positions and lengths: all of a
// prefill but the pass itself.
StatusOr<Pass> Model::prepare_prefill(const std::vector<std::vector<int32_t>>& prompts) {
  TUNABLEOP_RETURN_IF_ERROR(check_prompts(c_, o_, prompts));
  TUNABLEOP_RETURN_IF_ERROR(dev_->make_current());
  for (int64_t b = 0; b < batch_; ++b) cache_->release(b);
  batch_ = int64_t(prompts.size());
  int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<int64_t>(longest, int64_t(p.size()));
  padded_ = round_up(longest, o_.pad_multiple);
  const int64_t T = padded_, rows = batch_ * T;
  TUNABLEOP_RETURN_IF_ERROR(ensure_rows(pre_, rows));
  const size_t n_rows = static_cast<size_t>(rows), n_seqs = static_cast<size_t>(batch_);
  // The pass's inputs go up from one pinned block: from pageable vectors each copy would cost
  // the host a staging copy before the first kernel can start (TTFT).
  const size_t host_bytes = n_seqs * 8 + (3 * n_rows + 2 * n_seqs) * 4;
  if (pre_host_.bytes() < host_bytes) {
    pre_host_.reset();
    auto h = dev_->alloc_host(host_bytes);
    if (!h.is_ok()) return h.status();
    pre_host_ = std::move(h.value());
  }
  int64_t* last = pre_host_.as<int64_t>();
  int32_t* ids = reinterpret_cast<int32_t*>(last + n_seqs);
  int32_t *seqs = ids + n_rows, *pos = seqs + n_rows, *lens = pos + n_rows, *last_pos = lens + n_seqs;
  bool ragged = false;
  for (int64_t b = 0; b < batch_; ++b) {
    const auto& p = prompts[size_t(b)];
    // Padding rows never reach the cache of a sequence that holds only its real positions.
    TUNABLEOP_RETURN_IF_ERROR(cache_->reserve(b, int64_t(p.size())));
    lens[size_t(b)] = int32_t(p.size());
    ragged = ragged || int64_t(p.size()) != T;
    for (int64_t t = 0; t < T; ++t) {
      // Right padding: pad tokens come after the prompt, so causal attention keeps every real
      // token from seeing them, and their cache slots are overwritten by decode before any
      // query can reach them. The padded run therefore equals the unpadded one.
      ids[size_t(b * T + t)] = t < int64_t(p.size()) ? p[size_t(t)] : int32_t(c_.pad_token_id);
      seqs[size_t(b * T + t)] = int32_t(b);
      pos[size_t(b * T + t)] = int32_t(t);
    }
    last[size_t(b)] = b * T + int64_t(p.size()) - 1;
    last_pos[size_t(b)] = int32_t(p.size()) - 1;
    seq_len_[size_t(b)] = int64_t(p.size());
  }
  TUNABLEOP_RETURN_IF_ERROR(dev_->upload(pre_.ids.get(), ids, n_rows * 4));
  TUNABLEOP_RETURN_IF_ERROR(dev_->upload(pre_.seqs.get(), seqs, n_rows * 4));
  TUNABLEOP_RETURN_IF_ERROR(dev_->upload(pre_.pos.get(), pos, n_rows * 4));
  TUNABLEOP_RETURN_IF_ERROR(dev_->upload(last_rows_.get(), last, n_seqs * 8));
  TUNABLEOP_RETURN_IF_ERROR(dev_->upload(pre_.lens.get(), lens, n_seqs * 4));
  TUNABLEOP_RETURN_IF_ERROR(dev_->upload(last_pos_.get(), last_pos, n_seqs * 4));
  Pass p = pass(Phase::kPrefill, T, pre_);
  p.ragged = ragged;
  return p;
}

Status Model::decode(const std::vector<int32_t>& tokens, std::vector<int32_t>* next) {
  TUNABLEOP_RETURN_IF_ERROR(drop_ahead());
  TUNABLEOP_RETURN_IF_ERROR(prepare_decode(tokens));
  const Pass p = decode_pass();
  TUNABLEOP_RETURN_IF_ERROR(dev_->run_decode_step(batch_, linear_, [&] { return forward(p, dec_); }));
  return finish_decode(next);
}

// decode(), run eagerly with every op timed (not through run_decode_step's graph).
StatusOr<std::vector<ProfileSpan>> Model::profile_decode(const std::vector<int32_t>& tokens,
                                                         std::vector<int32_t>* next) {
  TUNABLEOP_RETURN_IF_ERROR(drop_ahead());
  TUNABLEOP_RETURN_IF_ERROR(prepare_decode(tokens));
  TUNABLEOP_RETURN_IF_ERROR(dev_->begin_profile());
  Status st = forward(decode_pass(), dec_);
  auto spans = dev_->end_profile();  // ends the profile whatever happened
  TUNABLEOP_RETURN_IF_ERROR(st);
  if (!spans.is_ok()) return spans.status();
  TUNABLEOP_RETURN_IF_ERROR(finish_decode(next));
  return spans;
}

Status Model::decode_ahead(const std::vector<int32_t>* tokens) {
  if (batch_ == 0) return Status::invalid_argument("decode_ahead: no sequences (call prefill first)");
  if (int64_t(ahead_.size()) >= kMaxAhead) {
    return Status::invalid_argument("decode_ahead: " + std::to_string(kMaxAhead) +
                                    " steps in flight already (collect_ahead first)");
  }
  const int64_t queued = int64_t(ahead_.size());
  if (tokens) {
    if (queued > 0) return Status::invalid_argument("decode_ahead: tokens given while steps are in flight");
    TUNABLEOP_RETURN_IF_ERROR(prepare_decode(*tokens));
  } else {
    if (!ahead_chain_) {
      return Status::invalid_argument("decode_ahead: no previous step left this one's inputs (give the tokens)");
    }
    // The step writes each sequence's cache at its length plus the steps still in flight: the
    // host makes that room (a paged cache's pages, their block table entries uploaded ahead of
    // the step on the same stream) before the step is queued.
    for (int64_t b = 0; b < batch_; ++b) {
      TUNABLEOP_RETURN_IF_ERROR(reserve_decode_position(b, seq_len_[size_t(b)] + queued));
    }
    TUNABLEOP_RETURN_IF_ERROR(dev_->make_current());
  }
  ahead_chain_ = false;
  const Pass p = decode_pass();
  int32_t* ids = dec_in_.as<int32_t>();
  int32_t* pos = ids + o_.max_batch;
  int32_t* lens = pos + o_.max_batch;
  // The step's tokens go to this slot of the host ring from advance_decode itself (no copy
  // between two steps); download_async only marks the step's end for collect_ahead.
  const int slot = ahead_slot_;
  ahead_slot_ = (ahead_slot_ + 1) % kMaxAhead;
  int32_t* host = ahead_host_.as<int32_t>() + slot * o_.max_batch;
  TUNABLEOP_RETURN_IF_ERROR(dev_->run_decode_step_ahead(
      batch_, linear_, [&] { return forward(p, dec_); },
      [&] { return dev_->advance_decode(next_.as<int32_t>(), ids, pos, lens, batch_, host); }, slot));
  TUNABLEOP_RETURN_IF_ERROR(dev_->download_async(host, next_.get(), 0, slot));
  ahead_.push_back(slot);
  ahead_chain_ = true;
  return Status::ok();
}

Status Model::collect_ahead(std::vector<int32_t>* next) {
  if (ahead_.empty()) return Status::invalid_argument("collect_ahead: no decode step in flight");
  const int slot = ahead_.front();
  TUNABLEOP_RETURN_IF_ERROR(dev_->wait_download(slot));
  ahead_.pop_front();
  const int32_t* host = ahead_host_.as<int32_t>() + slot * o_.max_batch;
  next->assign(host, host + batch_);
  for (int64_t b = 0; b < batch_; ++b) ++seq_len_[size_t(b)];
  return Status::ok();
}

StatusOr<double> Model::copy_bandwidth_gbps() {
  TUNABLEOP_RETURN_IF_ERROR(dev_->make_current());
  return dev_->copy_bandwidth_gbps();
}

void Model::release_slot(int64_t slot) {
  if (slot < 0 || slot >= o_.max_batch) return;
  cache_->release(slot);
  seq_len_[size_t(slot)] = 0;
}

int64_t Model::slot_length(int64_t slot) const { return slot >= 0 && slot < o_.max_batch ? seq_len_[size_t(slot)] : 0; }

Status Model::last_logits(std::vector<float>* out) {
  const size_t n = size_t(batch_ * c_.vocab_size);
  out->resize(n);
  if (n == 0) return Status::ok();  // nothing ran yet
  if (dev_->dtype() == DType::kF32) return dev_->download(out->data(), logits_.get(), n * 4);
  std::vector<uint16_t> raw(n);
  TUNABLEOP_RETURN_IF_ERROR(dev_->download(raw.data(), logits_.get(), n * 2));
  for (size_t i = 0; i < n; ++i) (*out)[i] = to_float(bf16{raw[i]});
  return Status::ok();
}

// The next token of each of the first `rows` output rows: the pass's argmax, or sampled on the
// device where any row samples. `keep`: rows whose tokens are wanted (the rest are padding).
Status Model::choose_next(int64_t rows, const SamplingRow* sampling, std::vector<int32_t>* next, int64_t keep) {
  if (keep < 0) keep = rows;
  const bool any = sampling && std::any_of(sampling, sampling + keep, [](const SamplingRow& r) { return !r.greedy(); });
  if (any) {
    TUNABLEOP_RETURN_IF_ERROR(ensure(sampling_, size_t(o_.max_batch) * sizeof(SamplingRow)));
    std::vector<SamplingRow> all(static_cast<size_t>(rows));  // padding rows: greedy
    std::copy(sampling, sampling + keep, all.begin());
    TUNABLEOP_RETURN_IF_ERROR(dev_->upload(sampling_.get(), all.data(), all.size() * sizeof(SamplingRow)));
    TUNABLEOP_RETURN_IF_ERROR(dev_->sample(logits_.get(), rows, sampling_.as<SamplingRow>(), next_.as<int32_t>()));
  }
  int32_t* host = next_host_.as<int32_t>();
  TUNABLEOP_RETURN_IF_ERROR(dev_->download(host, next_.get(), size_t(keep) * 4));
  next->assign(host, host + keep);
  for (int64_t i = 0; any && i < keep; ++i) {
    if ((*next)[size_t(i)] < 0) return Status::numerics("the model produced a NaN or +inf logit: cannot sample");
  }
  return Status::ok();
}

// Checks one token per sequence and room in the cache, then uploads ids, positions and lengths.
Status Model::prepare_decode(const std::vector<int32_t>& tokens) {
  if (int64_t(tokens.size()) != batch_ || batch_ == 0) {
    return Status::invalid_argument("decode: got " + std::to_string(tokens.size()) + " tokens for a batch of " +
                                    std::to_string(batch_) + " (call prefill first)");
  }
  int32_t* ids = dec_in_host_.as<int32_t>();
  int32_t* pos = ids + o_.max_batch;
  int32_t* lens = pos + o_.max_batch;
  for (int64_t b = 0; b < batch_; ++b) {
    if (tokens[size_t(b)] < 0 || tokens[size_t(b)] >= c_.vocab_size) {
      return Status::invalid_argument("decode: token id " + std::to_string(tokens[size_t(b)]) +
                                      " is outside the vocabulary");
    }
    TUNABLEOP_RETURN_IF_ERROR(reserve_decode_position(b, seq_len_[size_t(b)]));
    ids[b] = tokens[size_t(b)];
    pos[b] = int32_t(seq_len_[size_t(b)]);
    lens[b] = pos[b] + 1;
  }
  TUNABLEOP_RETURN_IF_ERROR(dev_->make_current());
  return dev_->upload(dec_in_.get(), ids, dec_in_.bytes());
}

// The cache room for sequence b's decode step at `position` (a paged cache's pages), or why not.
Status Model::reserve_decode_position(int64_t b, int64_t position) {
  if (position >= o_.max_seq) {
    return Status::invalid_argument("decode: sequence " + std::to_string(b) + " is full (KV cache of " +
                                    std::to_string(o_.max_seq) + " positions)");
  }
  return cache_->reserve(b, position + 1);
}

// Steps still in flight from decode_ahead: waited for and their tokens dropped (the cache and
// the lengths keep them); the next step's inputs come from the host again.
Status Model::drop_ahead() {
  std::vector<int32_t> dropped;
  while (!ahead_.empty()) TUNABLEOP_RETURN_IF_ERROR(collect_ahead(&dropped));
  ahead_chain_ = false;
  return Status::ok();
}

// After a decode step: the next tokens to the host, every sequence one longer.
Status Model::finish_decode(std::vector<int32_t>* next) {
  TUNABLEOP_RETURN_IF_ERROR(fetch_next(next));
  for (int64_t b = 0; b < batch_; ++b) ++seq_len_[size_t(b)];
  return Status::ok();
}

Status Model::ensure(Buffer& b, size_t bytes) {
  if (b.bytes() >= bytes) return Status::ok();
  b.reset();
  auto m = dev_->alloc(bytes);
  if (!m.is_ok()) return m.status();
  b = std::move(m.value());
  return Status::ok();
}

Status Model::ensure_rows(Activations& a, int64_t rows) {
  if (rows <= a.rows) return Status::ok();
  const size_t r = size_t(rows), H = size_t(c_.hidden_size), I = size_t(c_.intermediate_size), E = esize_;
  TUNABLEOP_RETURN_IF_ERROR(ensure(a.x, r * H * 4));
  TUNABLEOP_RETURN_IF_ERROR(ensure(a.xn, r * H * E));
  TUNABLEOP_RETURN_IF_ERROR(ensure(a.tmp, r * H * E));
  TUNABLEOP_RETURN_IF_ERROR(ensure(a.qkv, r * size_t(c_.qkv_dim()) * E));
  TUNABLEOP_RETURN_IF_ERROR(ensure(a.attn, r * size_t(c_.q_dim()) * E));
  TUNABLEOP_RETURN_IF_ERROR(ensure(a.gate_up, r * 2 * I * E));
  TUNABLEOP_RETURN_IF_ERROR(ensure(a.act, r * I * E));
  TUNABLEOP_RETURN_IF_ERROR(ensure(a.ids, r * 4));
  TUNABLEOP_RETURN_IF_ERROR(ensure(a.seqs, r * 4));
  TUNABLEOP_RETURN_IF_ERROR(ensure(a.pos, r * 4));
  a.rows = rows;
  return Status::ok();
}

Pass Model::pass(Phase phase, int64_t tokens, const Activations& a) const {
  Pass p;
  p.phase = phase;
  p.batch = batch_;
  p.tokens = tokens;
  p.ids = a.ids.as<int32_t>();
  p.seqs = a.seqs.as<int32_t>();
  p.positions = a.pos.as<int32_t>();
  p.seq_lens = a.lens.as<int32_t>();
  return p;
}

// A prefill's output rows (each sequence's last real position) as a decode pass over the cache
// the prefill filled: one row per sequence at position length - 1 (for the last layer's
// attention; prefill_outputs_only).
Pass Model::output_rows_pass(const Pass& prefill) const {
  Pass p = pass(Phase::kDecode, 1, dec_);
  p.ids = nullptr;
  p.positions = last_pos_.as<int32_t>();
  p.seq_lens = prefill.seq_lens;
  return p;
}

// The decode pass reads its ids, positions and lengths from dec_in_ (prepare_decode).
Pass Model::decode_pass() const {
  Pass p = pass(Phase::kDecode, 1, dec_);
  p.ids = dec_in_.as<int32_t>();
  p.positions = p.ids + o_.max_batch;
  p.seq_lens = p.positions + o_.max_batch;
  return p;
}

Status Model::fetch_next(std::vector<int32_t>* next) {
  int32_t* host = next_host_.as<int32_t>();
  TUNABLEOP_RETURN_IF_ERROR(dev_->download(host, next_.get(), size_t(batch_) * 4));
  next->assign(host, host + batch_);
  return Status::ok();
}

// One pass; leaves the logits of each sequence's last real row in logits_ and their argmax in
// next_ (both on the device).
Status Model::forward(const Pass& p, Activations& a) {
  DeviceKernels& d = *dev_;
  const DeviceWeights& w = d.weights();
  const int64_t rows = p.rows(), H = c_.hidden_size, I = c_.intermediate_size, Q = c_.q_dim(), QKV = c_.qkv_dim();
  float* x = a.x.as<float>();
  // Every projection goes through the device's project(): LinearOp (tuned GEMMs) with the
  // rmsnorm before it and the residual add, gated activation or argmax after it, which a
  // device may fuse. o and down are row-parallel (tensor parallelism all-reduces them).
  auto proj = [&](const char* name, int64_t r, int64_t in, int64_t out, const void* weight) {
    Projection pr;
    pr.name = name;
    pr.phase = p.phase;
    pr.rows = r;
    pr.in = in;
    pr.out = out;
    pr.w = weight;
    return pr;
  };
  auto normed_input = [&](Projection& pr, const float* src, const void* norm, void* normed) {
    pr.x = src;
    pr.norm = norm;
    pr.normed = normed;
  };

  // Causal attention's work for the profile: each sequence's visible (query, key) pairs (the
  // padded length in prefill), 2 flops for QK^T and 2 for PV per pair, head and dimension.
  const double pairs = p.phase == Phase::kPrefill ? double(p.tokens) * double(p.tokens + 1) / 2 : 0;
  const double attention_flops = 4.0 * double(p.batch) * pairs * double(c_.num_heads * c_.head_dim);
  // Prefill (issue 12): each residual add also computes the next projection's rmsnorm (one
  // pass over x where a device fuses them; the same values either way). Decode keeps the
  // norm in the projection, where its fused kernels put it.
  const bool norm_ahead = p.phase == Phase::kPrefill && o_.fusion != EngineOptions::Fusion::kOff;
  auto normed_ahead = [&](Projection& pr) {
    pr.input = a.xn.get();
    pr.norm = nullptr;
  };
  // Prefill: nothing reads the last layer's output on rows other than each sequence's last
  // real one (the cache holds keys and values, written by rope_kv before attention), so past
  // its qkv projection that layer runs on those rows alone, gathered: their attention as a
  // decode step's (one query against the cache), o, gate_up and down on `batch` rows; for a
  // 2048-token prompt one row instead of 2048 (issue 12).
  const bool outputs_only = p.phase == Phase::kPrefill && o_.prefill_outputs_only && !w.layers.empty();
  TUNABLEOP_RETURN_IF_ERROR(d.embedding(p, embed_scale_, x));
  d.mark("embedding");
  for (const DeviceWeights::Layer& lw : w.layers) {
    const int64_t l = &lw - w.layers.data();
    // attention block: qkv = rmsnorm(x) Wqkv; rope + cache; attention; x += attn Wo
    Projection qkv = proj("qkv", rows, H, QKV, lw.wqkv);
    normed_input(qkv, x, lw.attn_norm, a.xn.get());
    if (norm_ahead && l > 0 && !w.layers[size_t(l - 1)].post_mlp_norm)
      normed_ahead(qkv);  // the previous down's add normed it
    qkv.y = a.qkv.get();
    TUNABLEOP_RETURN_IF_ERROR(d.project(qkv, linear_));
    // Qwen2: the q, k and v biases; Qwen3: RMSNorm over each q and k head, before RoPE.
    if (lw.qkv_bias) {
      TUNABLEOP_RETURN_IF_ERROR(d.add_bias(a.qkv.get(), lw.qkv_bias, rows, QKV));
      d.mark("qkv_bias");
    }
    if (lw.q_norm) {
      TUNABLEOP_RETURN_IF_ERROR(d.qk_norm(a.qkv.get(), rows, lw.q_norm, lw.k_norm));
      d.mark("qk_norm");
    }
    TUNABLEOP_RETURN_IF_ERROR(d.rope_kv(p, l, a.qkv.get(), *cache_));
    // Prefill: q and k read and rotated, v read, q written back, k and v into the cache.
    d.mark("rope_kv", nullptr, p.phase == Phase::kPrefill ? 2 * rows * QKV * int64_t(esize_) : 0);
    // The last layer of a prefill past rope_kv: the output rows only (outputs_only).
    const bool tail = outputs_only && l + 1 == int64_t(w.layers.size());
    float* mx = x;  // the residual rows the rest of the layer reads and adds to
    int64_t mrows = rows;
    const void* attn = a.attn.get();
    if (packed_) {
      // A packed prefill: each chunk's attention on its own rows, in order (model_slots.h).
      TUNABLEOP_RETURN_IF_ERROR(packed_attention(l, a));
      d.mark("attention", "packed", 0, false, attention_flops);
      if (tail) {  // the output rows only from here (outputs_only)
        TUNABLEOP_RETURN_IF_ERROR(
            d.gather_rows(a.attn.get(), Q * int64_t(esize_), last_rows_.as<int64_t>(), batch_, last_attn_.get()));
        TUNABLEOP_RETURN_IF_ERROR(
            d.gather_rows(x, H * int64_t(sizeof(float)), last_rows_.as<int64_t>(), batch_, last_x_.as<float>()));
        d.mark("gather_rows");
        mx = last_x_.as<float>(), mrows = batch_, attn = last_attn_.get();
      }
    } else if (tail) {
      TUNABLEOP_RETURN_IF_ERROR(
          d.gather_rows(a.qkv.get(), QKV * int64_t(esize_), last_rows_.as<int64_t>(), batch_, last_qkv_.get()));
      d.mark("gather_rows", "qkv");
      TUNABLEOP_RETURN_IF_ERROR(
          d.attention(output_rows_pass(p), l, last_qkv_.get(), *cache_, linear_, last_attn_.get()));
      d.mark("attention", "outputs", 0, false, 4.0 * double(batch_) * double(p.tokens) * double(Q));
      TUNABLEOP_RETURN_IF_ERROR(
          d.gather_rows(x, H * int64_t(sizeof(float)), last_rows_.as<int64_t>(), batch_, last_x_.as<float>()));
      d.mark("gather_rows");
      mx = last_x_.as<float>(), mrows = batch_, attn = last_attn_.get();
    } else {
      TUNABLEOP_RETURN_IF_ERROR(d.attention(p, l, a.qkv.get(), *cache_, linear_, a.attn.get()));
      d.mark("attention", nullptr, 0, false, attention_flops);
    }
    Projection o = proj("o", mrows, Q, H, lw.wo);
    o.row_parallel = true;
    o.input = attn;
    o.epilogue = Projection::Epilogue::kAddResidual;
    o.y = a.tmp.get();
    o.residual = mx;
    if (norm_ahead && !tail && !lw.post_attn_norm) o.next_norm = lw.mlp_norm, o.next_normed = a.xn.get();
    TUNABLEOP_RETURN_IF_ERROR(project_residual(o, lw.post_attn_norm));
    // MLP block: x += (act(rmsnorm(x) Wgate) * (rmsnorm(x) Wup)) Wdown
    Projection gate_up = proj("gate_up", mrows, H, 2 * I, lw.w_gate_up);
    normed_input(gate_up, mx, lw.mlp_norm, a.xn.get());
    if (norm_ahead && !tail && !lw.post_attn_norm) normed_ahead(gate_up);
    gate_up.epilogue = Projection::Epilogue::kGated;
    gate_up.y = a.gate_up.get();
    gate_up.gated = a.act.get();
    TUNABLEOP_RETURN_IF_ERROR(d.project(gate_up, linear_));
    Projection down = proj("down", mrows, I, H, lw.w_down);
    down.row_parallel = true;
    down.input = a.act.get();
    down.epilogue = Projection::Epilogue::kAddResidual;
    down.y = a.tmp.get();
    down.residual = mx;
    if (norm_ahead && l + 1 < int64_t(w.layers.size()) && !lw.post_mlp_norm) {
      down.next_norm = w.layers[size_t(l + 1)].attn_norm, down.next_normed = a.xn.get();
    }
    TUNABLEOP_RETURN_IF_ERROR(project_residual(down, lw.post_mlp_norm));
  }
  // Only the last real position of each sequence needs logits: the lm_head GEMM then has
  // `batch` rows in prefill as in decode, one problem instead of one per prompt length.
  // Decode rows already are those positions.
  const float* last = x;
  if (p.phase == Phase::kPrefill) {
    if (!outputs_only) {
      TUNABLEOP_RETURN_IF_ERROR(
          d.gather_rows(x, H * int64_t(sizeof(float)), last_rows_.as<int64_t>(), batch_, last_x_.as<float>()));
      d.mark("gather_rows");
    }
    last = last_x_.as<float>();
  }
  if (const TensorParallelRank& tp = d.tensor_parallel(); tp.world > 1) {
    TUNABLEOP_RETURN_IF_ERROR(d.rmsnorm(last, w.final_norm, batch_, last_norm_.get()));
    TUNABLEOP_RETURN_IF_ERROR(tensor_parallel_logits(p, tp));
    d.mark("lm_head");
    TUNABLEOP_RETURN_IF_ERROR(final_softcap());
    return d.argmax(logits_.get(), batch_, next_.as<int32_t>());
  }
  Projection head = proj("lm_head", batch_, H, c_.vocab_size, w.lm_head);
  normed_input(head, last, w.final_norm, last_norm_.get());
  head.epilogue = Projection::Epilogue::kArgmax;
  head.y = logits_.get();
  head.ids = next_.as<int32_t>();
  TUNABLEOP_RETURN_IF_ERROR(d.project(head, linear_));
  // After the argmax: tanh keeps the logits' order (it would tie only logits beyond ~9 caps).
  return final_softcap();
}

// An o or down projection and its residual add; with a post-norm (Gemma-2) the output is
// stored and added normed: x += rmsnorm(y) * (1 + w).
Status Model::project_residual(Projection& pr, const void* post_norm) {
  if (!post_norm) return dev_->project(pr, linear_);
  pr.epilogue = Projection::Epilogue::kStore;
  float* residual = pr.residual;
  pr.residual = nullptr;
  TUNABLEOP_RETURN_IF_ERROR(dev_->project(pr, linear_));
  TUNABLEOP_RETURN_IF_ERROR(dev_->add_normed_residual(residual, pr.y, post_norm, pr.rows));
  dev_->mark(pr.name, "post_norm");
  return Status::ok();
}

// Gemma-2's final logit softcapping: logits = cap * tanh(logits / cap).
Status Model::final_softcap() {
  if (c_.final_logit_softcapping <= 0) return Status::ok();
  TUNABLEOP_RETURN_IF_ERROR(dev_->softcap(logits_.get(), batch_, c_.vocab_size, float(c_.final_logit_softcapping)));
  dev_->mark("lm_head", "softcap");
  return Status::ok();
}

// Tensor parallel: this rank's vocabulary rows write its columns of a [batch, V] buffer whose
// other columns stay zero, and an all-reduce of the disjoint shards gathers the whole logits on
// every rank (adding zeros is exact), so every rank takes the same argmax.
Status Model::tensor_parallel_logits(const Pass& p, const TensorParallelRank& tp) {
  GemmParams g = linear_params(dev_->dtype(), batch_, c_.hidden_size, tp.vocab_rows);
  g.ldc = c_.vocab_size;
  void* shard = logit_parts_.as<char>() + size_t(tp.vocab_begin) * esize_;
  TUNABLEOP_RETURN_IF_ERROR(
      linear_.gemm(p.phase, g, GemmOperands{dev_->weights().lm_head, last_norm_.get(), shard, dev_->stream()}));
  return tp.all_reduce(logit_parts_.get(), logits_.get(), batch_ * c_.vocab_size);
}

}  // namespace model_impl

using model_impl::Model;

Status prepare_engine_options(const ModelConfig& c, const std::string& source, EngineOptions* o) {
  TUNABLEOP_RETURN_IF_ERROR(c.validate(source));
  if (o->max_seq <= 0) o->max_seq = c.max_position_embeddings;
  TUNABLEOP_RETURN_IF_ERROR(check_rope_positions(c, o->max_seq, source));
  if (o->max_batch < 1) return Status::invalid_argument("max_batch must be >= 1");
  if (o->pad_multiple < 1) return Status::invalid_argument("pad_multiple must be >= 1");
  return o->kv_cache.validate();
}

StatusOr<std::unique_ptr<Engine>> make_engine(std::unique_ptr<DeviceKernels> device, const EngineOptions& options,
                                              LinearOp::Fn linear, LinearOp::GemmFn gemm,
                                              LinearOp::AttentionFn attention) {
  if (!device) return Status::invalid_argument("make_engine: no device");
  if (!linear) return Status::invalid_argument("make_engine: no linear implementation");
  auto m =
      std::make_unique<Model>(std::move(device), options, std::move(linear), std::move(gemm), std::move(attention));
  TUNABLEOP_RETURN_IF_ERROR(m->init());
  return std::unique_ptr<Engine>(std::move(m));
}

}  // namespace tunableop::llm
