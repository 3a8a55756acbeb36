// The engine over a DeviceKernels (model.cc): its state and its calls, declared once for the
// files that define them. model.cc holds the forward pass and the static-batch calls (prefill,
// decode, decode_ahead); model_slot_calls.cc the continuous-batching ones (prefill_slots,
// decode_slots, the chunk attention warm-up). Internal to src/llm: make_engine (model.h) is the
// way in.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "llm/device_kernels.h"
#include "llm/engine.h"
#include "llm/model_slots.h"

namespace tunableop::llm::model_impl {

// Activations for `rows` tokens. Prefill and decode keep separate sets: decode's are allocated
// once for max_batch rows and never move, which a captured CUDA graph relies on.
struct Activations {
  int64_t rows = 0;
  Buffer x;                                 // residual stream, fp32 [rows, H]
  Buffer xn, qkv, attn, tmp, gate_up, act;  // E
  Buffer ids, seqs, pos;                    // int32 [rows]
  Buffer lens;                              // int32 [max_batch]: each sequence's length after the pass
};

class Model final : public Engine {
 public:
  Model(std::unique_ptr<DeviceKernels> dev, const EngineOptions& o, LinearOp::Fn fn, LinearOp::GemmFn gemm,
        LinearOp::AttentionFn attention)
      : dev_(std::move(dev)),
        c_(dev_->config()),
        o_(o),
        linear_(std::move(fn), std::move(gemm), std::move(attention)) {}

  Status init();

  const ModelConfig& config() const override { return c_; }
  const EngineOptions& options() const override { return o_; }
  std::string device_name() const override { return dev_->name(); }
  LinearOp& linear() override { return linear_; }
  std::vector<int64_t> sequence_lengths() const override;
  int64_t padded_prompt_length() const override { return padded_; }
  int64_t weight_bytes() const override { return dev_->weights().bytes; }
  KvCacheStats kv_cache_stats() const override { return cache_->stats(); }

  Status prefill(const std::vector<std::vector<int32_t>>& prompts, std::vector<int32_t>* next) override;

  // prefill(), with every op timed (the breakdown of issue 12).
  StatusOr<std::vector<ProfileSpan>> profile_prefill(const std::vector<std::vector<int32_t>>& prompts,
                                                     std::vector<int32_t>* next, double* host_ms) override;

  // Checks the prompts, starts their sequences and uploads ids, positions and lengths: all of a
  // prefill but the pass itself.
  StatusOr<Pass> prepare_prefill(const std::vector<std::vector<int32_t>>& prompts);

  Status decode(const std::vector<int32_t>& tokens, std::vector<int32_t>* next) override;

  // decode(), run eagerly with every op timed (not through run_decode_step's graph).
  StatusOr<std::vector<ProfileSpan>> profile_decode(const std::vector<int32_t>& tokens,
                                                    std::vector<int32_t>* next) override;

  bool decode_ahead_supported() const override { return true; }

  Status decode_ahead(const std::vector<int32_t>* tokens) override;

  Status collect_ahead(std::vector<int32_t>* next) override;

  std::string kernel_choices() const override { return dev_->kernel_choices(); }

  StatusOr<double> copy_bandwidth_gbps() override;

  // --- Continuous batching (engine.h, model_slots.h).
  Status prefill_slots(const std::vector<SlotChunk>& chunks, const SamplingRow* sampling,
                       std::vector<int32_t>* next) override;

  Status decode_slots(const std::vector<int64_t>& slots, const std::vector<int32_t>& tokens,
                      const SamplingRow* sampling, std::vector<int32_t>* next) override;

  void release_slot(int64_t slot) override;
  void* stream() const override { return dev_->stream(); }
  int64_t slot_length(int64_t slot) const override;
  std::vector<int64_t> decode_buckets() const override;
  int64_t slot_pages() const override;

  Status warm_up_slots(const std::vector<int64_t>& prefill_rows) override;

  Status last_logits(std::vector<float>* out) override;

 private:
  // The slot calls need a paged cache (pages move with sequences, not with batch rows).
  Status check_slot_engine();
  Status check_slot(int64_t slot) const;
  Status check_ids(const int32_t* ids, int64_t n) const;
  PagedKvCache& paged() { return static_cast<PagedKvCache&>(*cache_); }

  // The packed prefill's inputs and layout to the device (prefill_slots).
  Status upload_prefill_layout(const SlotPassLayout& L);

  // A slot decode step's inputs to the buffers its (captured) pass reads.
  Status upload_decode_layout(const SlotPassLayout& L);

  // The next token of each of the first `rows` output rows: the pass's argmax, or sampled on the
  // device where any row samples. `keep`: rows whose tokens are wanted (the rest are padding).
  Status choose_next(int64_t rows, const SamplingRow* sampling, std::vector<int32_t>* next, int64_t keep = -1);

  // Checks one token per sequence and room in the cache, then uploads ids, positions and lengths.
  Status prepare_decode(const std::vector<int32_t>& tokens);

  // The cache room for sequence b's decode step at `position` (a paged cache's pages), or why not.
  Status reserve_decode_position(int64_t b, int64_t position);

  // Steps still in flight from decode_ahead: waited for and their tokens dropped (the cache and
  // the lengths keep them); the next step's inputs come from the host again.
  Status drop_ahead();

  // After a decode step: the next tokens to the host, every sequence one longer.
  Status finish_decode(std::vector<int32_t>* next);

  Status ensure(Buffer& b, size_t bytes);

  Status ensure_rows(Activations& a, int64_t rows);

  Pass pass(Phase phase, int64_t tokens, const Activations& a) const;

  // A prefill's output rows (each sequence's last real position) as a decode pass over the cache
  // the prefill filled: one row per sequence at position length - 1 (for the last layer's
  // attention; prefill_outputs_only).
  Pass output_rows_pass(const Pass& prefill) const;

  // The decode pass reads its ids, positions and lengths from dec_in_ (prepare_decode).
  Pass decode_pass() const;

  Status fetch_next(std::vector<int32_t>* next);

  // Every chunk attention problem a prefill pass of at most `longest` tokens can meet
  // (model_slots.h: q and kv rounded up to powers of two, capped at max_seq), run once on a layer
  // of each attention kind (layer 0, and the first of another window) over the scratch page filled
  // with noise: with TunableOp tuning on, each is tuned here, so a
  // server never meets one untuned while it serves (Default, the math path, is several times
  // slower on long prompts).
  Status prepare_chunk_attention(int64_t longest);

  // A packed prefill's attention for layer l: one call per chunk, on its rows of a.qkv into its
  // rows of a.attn, with its q and kv counts rounded up to powers of two (model_slots.h).
  Status packed_attention(int64_t l, Activations& a);

  // One pass; leaves the logits of each sequence's last real row in logits_ and their argmax in
  // next_ (both on the device).
  Status forward(const Pass& p, Activations& a);

  // An o or down projection and its residual add; with a post-norm (Gemma-2) the output is
  // stored and added normed: x += rmsnorm(y) * (1 + w).
  Status project_residual(Projection& pr, const void* post_norm);

  // Gemma-2's final logit softcapping: logits = cap * tanh(logits / cap).
  Status final_softcap();

  // Tensor parallel: this rank's vocabulary rows write its columns of a [batch, V] buffer whose
  // other columns stay zero, and an all-reduce of the disjoint shards gathers the whole logits on
  // every rank (adding zeros is exact), so every rank takes the same argmax.
  Status tensor_parallel_logits(const Pass& p, const TensorParallelRank& tp);

  std::unique_ptr<DeviceKernels> dev_;
  const ModelConfig& c_;
  EngineOptions o_;
  LinearOp linear_;
  size_t esize_ = 4;
  float embed_scale_ = 1;
  std::unique_ptr<KvCache> cache_;
  Activations pre_, dec_;
  Buffer last_x_, last_norm_, logits_, next_, last_rows_;  // device
  Buffer last_qkv_, last_attn_, last_pos_;                 // device: the output rows' last layer
  Buffer logit_parts_;                                     // tensor parallel: this rank's logit columns
  Buffer dec_in_, dec_in_host_, next_host_;                // decode's packed inputs (device, host staging); next ids
  Buffer pre_host_;                                        // prefill's inputs, host staging
  Buffer ahead_host_;                                      // decode_ahead's tokens: kMaxAhead slots of max_batch
  std::deque<int> ahead_;                                  // slots of the steps in flight, oldest first
  int ahead_slot_ = 0;                                     // the next step's slot
  bool ahead_chain_ = false;  // dec_in_ holds the next step's inputs, advanced by the last queued step
  std::vector<int64_t> seq_len_;
  int64_t batch_ = 0, padded_ = 0;
  // Continuous batching: the passes' own block tables, the packed prefill's layout and query
  // counts, the sampling parameters, and the packed pass in progress (forward() reads it).
  struct Packed {
    Pass chunk;  // one chunk's attention pass (its rows, lengths and table row filled per call)
    const SlotPassLayout* layout = nullptr;
  };
  Buffer slot_table_dec_, slot_table_pre_, slot_q_lens_, sampling_;
  const Packed* packed_ = nullptr;
};

}  // namespace tunableop::llm::model_impl
