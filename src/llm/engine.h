// An inference engine: a model's weights on one device, its KV cache, and the two steps of
// greedy generation (prefill a batch of prompts; decode one token per sequence). There is one
// forward pass (model.cc) over a per-device kernel interface (device_kernels.h) that the CPU
// and the CUDA devices implement; every matmul goes through LinearOp, i.e. tunableop::linear on
// the engine's context, so each GEMM problem is tuned once, recorded in the results file and
// served from it afterwards.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "llm/config.h"
#include "llm/kv_cache.h"
#include "llm/linear_op.h"
#include "llm/profile.h"
#include "llm/random_model.h"
#include "llm/sampling.h"
#include "llm/weights.h"
#include "tunableop/context.h"
#include "tunableop/gemm.h"
#include "tunableop/status.h"

namespace tunableop::llm {

struct EngineOptions {
  int64_t max_batch = 1;
  // The batch sizes a continuous-batching decode step is padded to (decode_buckets()): powers
  // of two up to this, then every multiple of it up to max_batch; 0: powers of two all the way.
  // Each bucket costs start-up tuning and a CUDA graph; a padding row costs a position of
  // attention, and GEMM work where the step is compute-bound (large batches, and the CPU).
  int64_t decode_bucket_step = 0;
  // Static KV cache length per sequence (prompt after padding + new tokens must fit).
  // 0 -> the model's max_position_embeddings.
  int64_t max_seq = 0;
  // Prompts are right-padded to a multiple of this, so prompts of nearby lengths share GEMM
  // shapes (the seed's "discretize the sequence lengths"); 1 = no padding.
  int64_t pad_multiple = 8;
  // CUDA only: element type of weights, activations and KV cache (kBF16 or kF32; the residual
  // stream is fp32 either way). The CPU engine computes in fp32 always.
  DType dtype = DType::kBF16;
  // CUDA only: capture the decode step once per batch size and replay it.
  bool cuda_graph = true;
  // CUDA only (issue 12): capture a prefill once per shape (batch, padded length) and replay it
  // for later prompts of that shape (static KV cache, one GPU; llm/prefill_graphs.h). Measured
  // on an H100 (docs/results/attention/stage9-prefill.md): Gemma-2B's TTFT at 128 tokens 12%
  // lower, at 2048 the same.
  bool prefill_graph = true;
  // Prefill: the last layer's MLP (gate_up, down) runs on the rows that get logits only (each
  // sequence's last real position), not on every prompt row: nothing reads the others (the
  // cache holds each layer's keys and values, which come before it). false: every row, as the
  // layers before it (A/B runs and tests).
  bool prefill_outputs_only = true;
  // CUDA only (issue 13): fused decode projections (rmsnorm prologue, residual / gated / argmax
  // epilogue in the GEMV). kAuto: with TunableOp on, each projection of the first decode step
  // times the fused kernel shapes against the unfused path (tuned GEMM + element-wise kernels)
  // and keeps the fastest; with TunableOp off, unfused (the seed's untuned baseline). kOn: fused
  // wherever supported, first shape (tests). kOff: never.
  enum class Fusion { kOff, kAuto, kOn };
  Fusion fusion = Fusion::kAuto;
  // CUDA only: programmatic dependent launch between the engine's kernels (sm_90 and newer).
  bool pdl = true;
  // CUDA only: how decode steps are built, as an index into cuda::step_variants() (fused or not,
  // PDL mode, L2 prefetch); -1: timed and chosen per batch size when the projections are tuned
  // (kAuto with TunableOp on), else the default (fused where chosen, PDL early). For A/B runs
  // and tests.
  int step_variant = -1;
  // Static (max_batch x max_seq positions up front) or paged (pages handed out as sequences grow).
  KvCacheOptions kv_cache;
  // CUDA only, one GPU (`--dtype fp8`; docs/llm.md, "FP8"): the projections' weights in fp8 e4m3
  // with one fp32 scale per output channel, quantized at load; their inputs quantized per token
  // (one scale per row) by the kernel that makes them; the GEMMs as ScaledGemm problems. `dtype`
  // stays the element type of everything else (bf16: embedding, norms, KV cache, attention).
  // lm_head: e4m3 too, else bf16 (the default).
  struct Fp8 {
    bool projections = false;
    bool lm_head = false;
    bool any() const { return projections || lm_head; }
  } fp8;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const ModelConfig& config() const = 0;
  virtual const EngineOptions& options() const = 0;
  virtual std::string device_name() const = 0;  // "cpu (fp32)", "cuda:0 (bf16, H100 ...)"

  // Starts new sequences: pads every prompt to the same length (a multiple of pad_multiple),
  // runs the model over all of them, fills the cache, and returns each sequence's greedy next
  // token. 1 <= prompts.size() <= max_batch; ids must be < vocab_size.
  virtual Status prefill(const std::vector<std::vector<int32_t>>& prompts, std::vector<int32_t>* next) = 0;
  // Feeds one token per sequence, at each sequence's current length; returns the next ones.
  virtual Status decode(const std::vector<int32_t>& tokens, std::vector<int32_t>* next) = 0;
  // Greedy decode with the host one step behind the device (issue 13): decode_ahead queues a
  // decode step and returns without waiting; collect_ahead waits for the oldest queued step and
  // returns its tokens (each sequence one longer). With `tokens` (the first step after prefill, no
  // step in flight) the step's ids, positions and lengths are uploaded as decode() does; without
  // (nullptr), the step takes them from the previous queued step, whose argmax wrote the ids and
  // advanced positions and lengths on the device. The cache room a step needs is reserved (pages
  // allocated) by the host before it is queued. At most kMaxAhead steps in flight. Tokens equal
  // decode()'s. prefill() and decode() first drop whatever is still in flight.
  static constexpr int kMaxAhead = 3;
  virtual bool decode_ahead_supported() const { return false; }
  virtual Status decode_ahead(const std::vector<int32_t>* tokens) {
    (void)tokens;
    return Status::unsupported("this engine does not queue decode steps ahead");
  }
  virtual Status collect_ahead(std::vector<int32_t>* next) {
    (void)next;
    return Status::unsupported("this engine does not queue decode steps ahead");
  }
  // Logits of the last step's last real position of each sequence, [batch, vocab].
  virtual Status last_logits(std::vector<float>* out) = 0;
  // Current length of each sequence (prompt + decoded tokens, padding excluded).
  virtual std::vector<int64_t> sequence_lengths() const = 0;
  // Padded prompt length of the last prefill.
  virtual int64_t padded_prompt_length() const = 0;
  // Bytes of weights as stored on the device: what a decode step must read at least once.
  virtual int64_t weight_bytes() const = 0;
  // The KV cache's memory: allocated, in use by the current sequences, the most used so far.
  virtual KvCacheStats kv_cache_stats() const = 0;

  virtual LinearOp& linear() = 0;

  // decode(), run eagerly with each kernel timed (issue 13's breakdown): the spans of the step
  // in the order they ran (see DeviceKernels::begin_profile).
  virtual StatusOr<std::vector<ProfileSpan>> profile_decode(const std::vector<int32_t>& tokens,
                                                            std::vector<int32_t>* next) = 0;
  // prefill(), with each kernel timed (issue 12's breakdown): the spans of the pass in the order
  // they ran; *host_ms (when given): the host's time to queue the pass, which stays far below the
  // GPU's unless something waits on the GPU part-way. Unsupported unless an engine offers it.
  virtual StatusOr<std::vector<ProfileSpan>> profile_prefill(const std::vector<std::vector<int32_t>>& prompts,
                                                             std::vector<int32_t>* next, double* host_ms = nullptr) {
    (void)prompts, (void)next, (void)host_ms;
    return Status::unsupported("this engine does not profile its prefill");
  }
  // The device's memory ceiling, measured now: a large copy's bytes read + written per second.
  virtual StatusOr<double> copy_bandwidth_gbps() = 0;
  // Kernel choices the device made by measurement (fused decode projections), one per line;
  // empty when it made none.
  virtual std::string kernel_choices() const = 0;

  // --- Continuous batching (the server's runtime, serve/runtime.h; paged KV cache only). A
  // sequence lives in a slot (0 .. max_batch - 1) from its first prefill chunk until
  // release_slot(); any set of slots can run in one step, in any order. prefill()/decode() and
  // the slot calls must not be mixed on one engine.
  struct SlotChunk {
    int64_t slot = 0;
    const int32_t* tokens = nullptr;  // host memory
    int64_t count = 0;
  };
  bool slots_supported() const { return kv_cache_stats().kind == KvCacheKind::kPaged; }
  // One prefill pass over chunks of several sequences (packed back to back, no padding between
  // them): chunk i's tokens go to its slot's cache after what the slot holds already, and
  // next[i] is the token chosen after its last one (sampling[i]: how; null: greedy). A slot
  // appears at most once.
  virtual Status prefill_slots(const std::vector<SlotChunk>& chunks, const SamplingRow* sampling,
                               std::vector<int32_t>* next) {
    (void)chunks, (void)sampling, (void)next;
    return Status::unsupported("this engine does not run slots");
  }
  // One decode step: tokens[i] appended to slots[i] (each slot at most once), next[i] chosen after it.
  virtual Status decode_slots(const std::vector<int64_t>& slots, const std::vector<int32_t>& tokens,
                              const SamplingRow* sampling, std::vector<int32_t>* next) {
    (void)slots, (void)tokens, (void)sampling, (void)next;
    return Status::unsupported("this engine does not run slots");
  }
  // The slot's sequence ended: its pages go back to the pool and its length to 0.
  virtual void release_slot(int64_t slot) { (void)slot; }
  // Positions the slot's sequence holds.
  virtual int64_t slot_length(int64_t slot) const {
    (void)slot;
    return 0;
  }
  // The batch sizes decode_slots() pads a step to (one CUDA graph and one set of GEMM problems
  // each), ascending, the last max_batch.
  virtual std::vector<int64_t> decode_buckets() const { return {options().max_batch}; }
  // The batch size decode_slots() runs `n` sequences at: the smallest bucket that holds them (the
  // last, max_batch, for more).
  int64_t decode_bucket(int64_t n) const {
    const std::vector<int64_t> b = decode_buckets();
    for (int64_t size : b)
      if (size >= n) return size;
    return b.back();
  }
  // KV pages the slots can use (the pool less what the engine keeps for padding rows).
  virtual int64_t slot_pages() const { return 0; }
  // The device stream the engine's work is queued on (CUDA; null on the CPU): where work that must
  // not overlap a step (tuning between steps) goes.
  virtual void* stream() const { return nullptr; }
  // Runs the passes the slot calls will run, on padding rows only, so that everything they
  // choose or capture on first use (tuned GEMMs and attention, fused projections, CUDA graphs)
  // happens now: decode at every bucket, prefill at each of `prefill_rows` (packed rows).
  virtual Status warm_up_slots(const std::vector<int64_t>& prefill_rows) {
    (void)prefill_rows;
    return Status::ok();
  }
};

// Rounds n up to a multiple of m (m >= 1).
inline int64_t round_up(int64_t n, int64_t m) { return m <= 1 ? n : (n + m - 1) / m * m; }

// Builds the CPU engine (fp32): weights are used in place (kept alive by the shared_ptr).
// Attention runs through `attention` (tunableop_attention(ctx)) when given; without it, a
// static cache's prefill attention uses `gemm` (tunableop_gemm(ctx)) when given, else a plain
// kernel, and a paged cache is refused.
StatusOr<std::unique_ptr<Engine>> make_cpu_engine(std::shared_ptr<const ModelWeights> weights, EngineOptions options,
                                                  LinearOp::Fn linear, LinearOp::GemmFn gemm = {},
                                                  LinearOp::AttentionFn attention = {});

// Builds the CUDA engine on ctx's GPU (bf16 weights and activations, fp32 accumulation; decode
// captured once as a CUDA graph). Built-in models are generated on the GPU directly. Returns
// Unsupported in builds without CUDA.
StatusOr<std::unique_ptr<Engine>> make_cuda_engine(const ModelSpec& spec, uint64_t seed, int64_t layers,
                                                   EngineOptions options, Context& ctx);

}  // namespace tunableop::llm
