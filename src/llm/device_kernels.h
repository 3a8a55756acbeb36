// The per-device kernel interface of the forward pass. model.cc is the one forward pass of every
// family, a straight list of calls into this interface; a device (cpu/, cuda/) implements it.
//
// Conventions every device follows:
//   E            the device's element type (dtype()): weights, GEMM operands, q/k/v, KV cache,
//                logits. The residual stream x is fp32 on every device.
//   rows         tokens of the pass, [rows, width] row-major; widths come from config()
//   qkv row      [q heads | k heads | v heads], each head_dim wide (the fused projection)
//   gate_up row  [gate (I) | up (I)]
//   pointers     device memory from alloc(), except where a comment says host
// Fusion points (issue 13): a call that a device may implement as one kernel has a default
// that composes the plain calls: project() = rmsnorm + linear + (residual add [+ the next
// rmsnorm] | gated activation | argmax).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "llm/buffer.h"
#include "llm/config.h"
#include "llm/kv_cache.h"
#include "llm/linear_op.h"
#include "llm/profile.h"
#include "llm/sampling.h"
#include "tunableop/gemm.h"
#include "tunableop/status.h"

namespace tunableop::llm {

// One forward pass over `batch` sequences of `tokens` rows each (rows of one sequence are
// consecutive): the padded prompts in prefill, one token per sequence in decode.
struct Pass {
  Phase phase = Phase::kPrefill;
  int64_t batch = 0, tokens = 0;
  int64_t rows() const { return batch * tokens; }
  // Per row: token id, sequence (its slot in the KV cache) and position; device memory.
  const int32_t* ids = nullptr;
  const int32_t* seqs = nullptr;
  const int32_t* positions = nullptr;
  // Per sequence: its length once this pass is done (prefill: its real prompt length; decode:
  // positions + 1); device memory. Rows at positions >= it are padding: their keys need not
  // reach the cache and their attention output is not used.
  const int32_t* seq_lens = nullptr;
  // Prefill: some prompt is shorter than `tokens` (attention then takes per-sequence lengths).
  bool ragged = false;
  // Continuous batching (model_slots.h): the paged block table this pass's sequence indices read,
  // [sequences][pages_per_seq], device memory; null: the cache's own (sequence = slot).
  const int32_t* block_table = nullptr;
  // A prefill over a cached prefix (chunked prefill): sequence b's queries are its last
  // q_lens[b] positions of seq_lens[b] (device memory), and kv_len (>= every seq_lens[b]) is the
  // attention's key length. Null / 0: a prefill from position 0 (q_lens = seq_lens, kv_len = tokens).
  const int32_t* q_lens = nullptr;
  int64_t kv_len = 0;
};

// The weights as a device holds them (element type E; fused layout of weights.h).
struct DeviceWeights {
  struct Layer {
    const void* attn_norm = nullptr;  // [H]
    const void* wqkv = nullptr;       // [q_dim + 2 kv_dim, H]
    const void* wo = nullptr;         // [H, q_dim]
    const void* mlp_norm = nullptr;   // [H]
    const void* w_gate_up = nullptr;  // [2 I, H]
    const void* w_down = nullptr;     // [H, I]
    // Family features (config.h), null when the model has none.
    const void* qkv_bias = nullptr;        // [q_dim + 2 kv_dim] (Qwen2)
    const void* q_norm = nullptr;          // [head_dim] (Qwen3)
    const void* k_norm = nullptr;          // [head_dim] (Qwen3)
    const void* post_attn_norm = nullptr;  // [H] (Gemma-2)
    const void* post_mlp_norm = nullptr;   // [H] (Gemma-2)
  };
  const void* embed = nullptr;       // [V, H]
  const void* final_norm = nullptr;  // [H]
  const void* lm_head = nullptr;     // [V, H] (the embedding when tied)
  std::vector<Layer> layers;
  int64_t bytes = 0;  // as stored: what one decode step reads at least once
};

// Tensor parallelism (src/llm/parallel, docs/parallel.md): a device may hold one rank's shard
// of the model; its config() is then the rank's (its heads, kv heads and MLP columns). The
// forward pass all-reduces after each row-parallel projection (after_row_parallel_linear) and
// gathers the lm_head's vocabulary shards; one device alone has world 1 and does neither.
struct TensorParallelRank {
  int rank = 0, world = 1;
  int64_t vocab_begin = 0, vocab_rows = 0;  // the lm_head rows this rank holds
  // out[i] = sum over the ranks of their in[i], `count` elements of dtype(), on stream(); every
  // rank calls it at the same point of the forward pass. in == out is allowed.
  std::function<Status(const void* in, void* out, int64_t count)> all_reduce;
  // residual[i] += float(E(sum over the ranks of their partial[i])): fp32 partial sums of a
  // row-parallel projection, summed in fp32 and rounded to dtype() once, as one device rounds its
  // GEMM output (a device whose row-parallel GEMMs write fp32 uses it instead of all_reduce and
  // add_residual; the CUDA device does). On stream(); every rank calls it at the same point.
  // `prefetch`: what this rank reads next (bytes of the next weights), a hint the all-reduce may
  // use while it waits (AllReduceOperands::prefetch).
  std::function<Status(const float* partial, float* residual, int64_t count, const void* prefetch,
                       int64_t prefetch_bytes)>
      all_reduce_residual;
};

// One projection y = input W^T with the element-wise work around it in a layer, as one call so
// that a device can fuse it (issue 13): the input is `input` (E) or rmsnorm(x, norm) of the
// fp32 residual stream; the output is stored, added to the residual stream, gated, or reduced
// to each row's argmax. Every buffer is [rows, width] in the layouts above.
struct Projection {
  enum class Epilogue {
    kStore,        // y
    kAddResidual,  // residual += y (width H; after the all-reduce when row-parallel)
    kGated,        // gated = act(y[:, :out/2]) * y[:, out/2:] (the gate_up row layout)
    kArgmax,       // y (the logits) and ids = each row's argmax
  };
  const char* name = "";  // "qkv", "o", "gate_up", "down", "lm_head": profiles and tuning
  Phase phase = Phase::kPrefill;
  int64_t rows = 0, in = 0, out = 0;
  const void* w = nullptr;      // [out, in] E
  bool row_parallel = false;    // o, down: tensor parallelism all-reduces y before the epilogue
  const void* input = nullptr;  // [rows, in] E, when norm is null
  const float* x = nullptr;     // [rows, in] fp32, when norm is set: input = rmsnorm(x, norm)
  const void* norm = nullptr;   // [in] E
  void* normed = nullptr;       // [rows, in] E: where an unfused device puts rmsnorm(x)
  Epilogue epilogue = Epilogue::kStore;
  void* y = nullptr;          // [rows, out] E (kAddResidual, kGated: scratch of an unfused device)
  float* residual = nullptr;  // kAddResidual: [rows, out] fp32
  // kAddResidual, optional (prefill): after the add, next_normed = rmsnorm(residual, next_norm),
  // the next projection's input, which a device may compute in the same pass as the add.
  const void* next_norm = nullptr;  // [out] E
  void* next_normed = nullptr;      // [rows, out] E
  void* gated = nullptr;            // kGated: [rows, out / 2] E
  int32_t* ids = nullptr;           // kArgmax: [rows]
  int64_t weight_bytes(size_t elem) const { return in * out * int64_t(elem); }
  double flops() const { return 2.0 * double(rows) * double(in) * double(out); }
};

class DeviceKernels {
 public:
  explicit DeviceKernels(ModelConfig config) : config_(std::move(config)) {}
  virtual ~DeviceKernels() = default;
  DeviceKernels(const DeviceKernels&) = delete;
  DeviceKernels& operator=(const DeviceKernels&) = delete;

  const ModelConfig& config() const { return config_; }

  // --- What and where.
  virtual std::string name() const = 0;             // "cpu (fp32)", "cuda:0 (bf16, NVIDIA H200), CUDA graph decode"
  virtual DType dtype() const = 0;                  // E
  virtual void* stream() const { return nullptr; }  // where LinearOp's GEMMs run
  virtual const DeviceWeights& weights() const = 0;
  virtual Status make_current() { return Status::ok(); }  // before each pass (the CUDA device)

  // --- Memory. upload is ordered before later work; download waits for it.
  virtual StatusOr<Buffer> alloc(size_t bytes) = 0;       // device memory
  virtual StatusOr<Buffer> alloc_host(size_t bytes) = 0;  // host staging (pinned on CUDA)
  virtual Status upload(void* dst, const void* src, size_t bytes) = 0;
  virtual Status download(void* dst, const void* src, size_t bytes) = 0;
  // Device memory free now (CUDA: cudaMemGetInfo); Unsupported where the device does not say.
  virtual StatusOr<int64_t> free_memory_bytes();
  // The cache rope_kv and attention work with; default: a static or paged cache (per `o`)
  // from alloc() and, for the paged one's block table, alloc_host() and upload().
  virtual StatusOr<std::unique_ptr<KvCache>> make_kv_cache(const KvCacheOptions& o, int64_t max_batch, int64_t max_seq);

  // --- The ops, in the order a layer calls them.
  // x[r] = float(E(embed[ids[r]] * scale)): the scaled embedding in the model's dtype.
  virtual Status embedding(const Pass& p, float scale, float* x) = 0;
  // out = E(x / sqrt(mean(x^2) + eps) * w), or * (1 + w) for Gemma.
  virtual Status rmsnorm(const float* x, const void* w, int64_t rows, void* out) = 0;
  // x += y (y in E).
  virtual Status add_residual(float* x, const void* y, int64_t rows) = 0;
  // Rotate-half RoPE on the q and k heads of each qkv row (in place, at its position), then k and
  // v into the cache at (seq, position) for this layer.
  virtual Status rope_kv(const Pass& p, int64_t layer, void* qkv, KvCache& cache) = 0;
  // Causal attention of each row's q heads over its sequence's cache positions 0..position
  // (GQA/MQA: query head h reads kv head h / (heads / kv_heads)), out [rows, q_dim] in E.
  // Prefill and decode alike; GEMMs it runs go through `linear` (counted, tuned).
  virtual Status attention(const Pass& p, int64_t layer, const void* qkv, KvCache& cache, LinearOp& linear,
                           void* out) = 0;
  // out[r, i] = act(gate[r, i]) * up[r, i] (SiLU, tanh GELU or erf GELU per config).
  virtual Status gated_activation(const void* gate_up, int64_t rows, void* out) = 0;
  // After a row-parallel projection (o, down): with tensor parallelism, the all-reduce of the
  // partial sums y [rows, width] across the group (tensor_parallel().all_reduce). One device:
  // nothing to do.
  virtual Status after_row_parallel_linear(void* y, int64_t rows, int64_t width);
  // out[i] = x[rows[i]], rows of row_bytes bytes (a multiple of 4: fp32 residual rows, E qkv
  // rows); `rows` in device memory.
  virtual Status gather_rows(const void* x, int64_t row_bytes, const int64_t* rows, int64_t count, void* out) = 0;
  // Index of each row's largest logit, the first one on ties (torch.argmax).
  virtual Status argmax(const void* logits, int64_t rows, int32_t* out) = 0;
  // out[r] = the token sampling.h's algorithm chooses from row r of the logits under rows[r]
  // (device memory, like out). Default: the logits and parameters to the host, sample_row(), the
  // tokens back (devices whose copies are cheap: the CPU's).
  virtual Status sample(const void* logits, int64_t rows, const SamplingRow* params, int32_t* out);

  // --- The families' extra ops (config.h), called only for models that have the feature. Each
  // default computes on the host in fp32 through download() and upload() (correct on any
  // device, not fast); devices override them with kernels.
  // y[r, i] = E(y[r, i] + bias[i]), rows x width (Qwen2's q, k, v biases on the qkv rows).
  virtual Status add_bias(void* y, const void* bias, int64_t rows, int64_t width);
  // Each q head of each qkv row = E(rmsnorm(head) * q_norm), each k head with k_norm, over
  // head_dim with the config's eps, in place (Qwen3, before RoPE).
  virtual Status qk_norm(void* qkv, int64_t rows, const void* q_norm, const void* k_norm);
  // x += float(E(rmsnorm(float(y)) * (1 + w))): an output normed before its residual add
  // (Gemma-2's post-attention and post-feedforward norms), rows of hidden_size.
  virtual Status add_normed_residual(float* x, const void* y, const void* w, int64_t rows);
  // x = E(cap * tanh(x / cap)), rows x width (Gemma-2's final logits).
  virtual Status softcap(void* x, int64_t rows, int64_t width, float cap);
  // A projection and its neighbours (see Projection). The default composes the calls above with
  // `linear` (rmsnorm, linear, after_row_parallel_linear, add_residual | gated_activation |
  // argmax); a device overrides it to run fused kernels where they are faster.
  virtual Status project(const Projection& p, LinearOp& linear);

  // --- How a decode step runs: the default calls `step`; the CUDA device captures it once per
  // (batch, TunableOp on/off) as a graph and replays it, crediting `linear` with its GEMMs.
  // `slot_table`: the step reads a slot pass's own block table (Engine::decode_slots), a graph
  // of its own beside the plain decode step's.
  virtual Status run_decode_step(int64_t batch, LinearOp& linear, const std::function<Status()>& step,
                                 bool slot_table = false);

  // --- How a prefill pass runs: the default calls `pass`; the CUDA device captures the pass of
  // each (batch, padded length, ragged, TunableOp on/off) after its first, eager run and replays
  // the graph for later prefills of that shape, crediting `linear` with its GEMMs.
  virtual Status run_prefill(const Pass& p, LinearOp& linear, const std::function<Status()>& pass);

  // --- Greedy decode with the next step queued before the previous token is read (issue 13).
  // The step as run_decode_step runs it, then `advance` (which readies the next step's inputs on
  // the device: advance_decode). The CUDA device captures the two as one graph per (batch,
  // TunableOp on/off, `slot`), next to run_decode_step's, with the step variant chosen for that
  // one (`slot`: the caller's ring slot, 0..3, when `advance` differs by slot). Default:
  // run_decode_step with `advance` appended to the step.
  virtual Status run_decode_step_ahead(int64_t batch, LinearOp& linear, const std::function<Status()>& step,
                                       const std::function<Status()>& advance, int slot = 0);
  // For b < batch: ids[b] = next[b], positions[b] += 1, lens[b] += 1 (device memory): the next
  // decode step's inputs from this one's argmax, without the host; and host_next[b] = next[b]
  // where host_next is given (pinned host memory from alloc_host; CUDA: the kernel writes it, so
  // no copy sits between two steps; read it once download_async(..., 0 bytes, slot)'s mark is
  // reached). Default: through download and upload (devices whose copies are synchronous, like
  // the CPU's).
  virtual Status advance_decode(const int32_t* next, int32_t* ids, int32_t* positions, int32_t* lens, int64_t batch,
                                int32_t* host_next = nullptr);
  // A download queued behind the work before it, into `slot` (0..3) of the device's ring;
  // wait_download(slot) waits for the last one queued there (0 bytes: nothing copied, only that
  // mark). dst must stay valid (pinned host memory from alloc_host on CUDA). Default: download
  // (synchronous) and a no-op wait.
  virtual Status download_async(void* dst, const void* src, size_t bytes, int slot);
  virtual Status wait_download(int slot);

  // --- Tensor parallelism: set once, before the engine is built over this device.
  void set_tensor_parallel(TensorParallelRank tp) { tp_ = std::move(tp); }
  const TensorParallelRank& tensor_parallel() const { return tp_; }

  // --- Profiling one step (eagerly). Between begin_profile() and end_profile(), mark(label)
  // closes a span: the work queued since the previous mark. The default times on the host
  // (devices whose calls are synchronous); the CUDA device records events and queues the step
  // behind a busy kernel, so the spans are GPU time, not the host's launch rate.
  virtual Status begin_profile();
  virtual StatusOr<std::vector<ProfileSpan>> end_profile();
  bool profiling() const { return profiling_; }
  // `part` is appended to `label` after a dot when given; a no-op unless profiling.
  void mark(const char* label, const char* part = nullptr, int64_t bytes = 0, bool matmul = false, double flops = 0) {
    if (profiling_) record_mark(part ? std::string(label) + "." + part : std::string(label), bytes, matmul, flops);
  }

  // --- The memory ceiling: a large copy, bytes read + written per second (GB/s), measured now.
  virtual StatusOr<double> copy_bandwidth_gbps();
  // Kernel choices made by measurement (e.g. fused projections), one per line; default none.
  virtual std::string kernel_choices() const { return ""; }

 protected:
  virtual void record_mark(std::string label, int64_t bytes, bool matmul, double flops);
  std::vector<ProfileSpan> spans_;  // of the profile in progress

 private:
  ModelConfig config_;
  TensorParallelRank tp_;
  bool profiling_ = false;
  double last_mark_s_ = 0;  // host clock of the default profiler
};

}  // namespace tunableop::llm
