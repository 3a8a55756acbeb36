// An inference engine: a model's weights on one device, a static KV cache, and the two steps
// of greedy generation (prefill a batch of prompts; decode one token per sequence). Every
// matmul goes through LinearOp, i.e. tunableop::linear on the engine's context, so each GEMM
// problem is tuned once, recorded in the results file and served from it afterwards.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "llm/config.h"
#include "llm/random_model.h"
#include "llm/weights.h"
#include "tunableop/context.h"
#include "tunableop/gemm.h"
#include "tunableop/status.h"

namespace tunableop::llm {

enum class Phase { kPrefill, kDecode };

// y[tokens, out] = x[tokens, in] * W[out, in]^T, counted by distinct GEMM problem.
class LinearOp {
 public:
  using Fn = std::function<Status(DType dtype, int64_t tokens, int64_t in, int64_t out, const void* x, const void* w,
                                  void* y, void* stream)>;
  using GemmFn = std::function<Status(const GemmParams& p, const GemmOperands& ops)>;
  // The engine's path is tunableop_linear(ctx); tests may pass another (a naive matmul).
  // `gemm` serves other GEMMs (prefill attention on CUDA); null where the engine has none.
  explicit LinearOp(Fn fn, GemmFn gemm = {}) : fn_(std::move(fn)), gemm_fn_(std::move(gemm)) {}

  Status operator()(Phase phase, DType dtype, int64_t tokens, int64_t in, int64_t out, const void* x, const void* w,
                    void* y, void* stream = nullptr);
  // Any other GEMM of the forward pass, counted the same way.
  Status gemm(Phase phase, const GemmParams& p, const GemmOperands& ops);
  bool has_gemm() const { return bool(gemm_fn_); }

  struct Problem {
    std::string op;      // GemmTunableOp_float_TN
    std::string params;  // tn_<out>_<tokens>_<in>
    bool in_prefill = false, in_decode = false;
    int64_t calls = 0;          // all phases
    int64_t prefill_calls = 0;  // of which in prefill
    double flops = 0;           // per call
  };
  std::vector<Problem> problems() const;  // first-seen order
  int64_t calls() const;
  void reset_counts();
  // A CUDA graph replays the GEMMs it captured without calling through here: the engine keeps
  // the calls made while capturing (difference of two problems() snapshots) and credits each
  // replay with them.
  static std::vector<Problem> difference(const std::vector<Problem>& before, const std::vector<Problem>& after);
  void add_calls(const std::vector<Problem>& calls, int64_t times);

 private:
  void count(Phase phase, const GemmParams& p);
  Fn fn_;
  GemmFn gemm_fn_;
  mutable std::mutex mu_;
  std::vector<Problem> problems_;
};

// tunableop::linear(ctx, ...) and tunableop::gemm(ctx, ...): tuned, recorded and reused
// through the context.
LinearOp::Fn tunableop_linear(Context& ctx);
LinearOp::GemmFn tunableop_gemm(Context& ctx);

struct EngineOptions {
  int64_t max_batch = 1;
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
  // Logits of the last step's last real position of each sequence, [batch, vocab].
  virtual Status last_logits(std::vector<float>* out) = 0;
  // Current length of each sequence (prompt + decoded tokens, padding excluded).
  virtual std::vector<int64_t> sequence_lengths() const = 0;
  // Padded prompt length of the last prefill.
  virtual int64_t padded_prompt_length() const = 0;
  // Bytes of weights as stored on the device: what a decode step must read at least once.
  virtual int64_t weight_bytes() const = 0;

  virtual LinearOp& linear() = 0;
};

// Prefill attention as two strided-batched GEMMs, one batch entry per (sequence, kv head), the
// group of query heads sharing that kv head stacked into M = tokens * group rows:
//   scores [M x tokens] = scale * q_perm [M x hd] * K [tokens x hd]^T   (column-major S^T = K q^T)
//   out    [M x hd]     = P [M x tokens] * V [tokens x hd]               (column-major O^T = V^T P^T)
// K and V are read in place from the cache ([seq][kv_head][max_seq][hd]); q_perm, scores and
// out are dense. A causal softmax turns scores into P in between.
struct AttentionGemms {
  GemmParams scores, output;
};
AttentionGemms prefill_attention_gemms(const ModelConfig& c, DType dtype, int64_t seqs, int64_t tokens,
                                       int64_t max_seq);

// Rounds n up to a multiple of m (m >= 1).
inline int64_t round_up(int64_t n, int64_t m) { return m <= 1 ? n : (n + m - 1) / m * m; }

// Checks prompts against the engine's limits; shared by the CPU and CUDA engines.
Status check_prompts(const ModelConfig& c, const EngineOptions& o, const std::vector<std::vector<int32_t>>& prompts);

// Builds the CPU engine (fp32): weights are used in place (kept alive by the shared_ptr).
// Prefill attention uses `gemm` (tunableop_gemm(ctx)) when given, else a plain kernel.
StatusOr<std::unique_ptr<Engine>> make_cpu_engine(std::shared_ptr<const ModelWeights> weights, EngineOptions options,
                                                  LinearOp::Fn linear, LinearOp::GemmFn gemm = {});

// Builds the CUDA engine on ctx's GPU (bf16 weights and activations, fp32 accumulation; decode
// captured once as a CUDA graph). Built-in models are generated on the GPU directly. Returns
// Unsupported in builds without CUDA.
StatusOr<std::unique_ptr<Engine>> make_cuda_engine(const ModelSpec& spec, uint64_t seed, int64_t layers,
                                                   EngineOptions options, Context& ctx);

}  // namespace tunableop::llm
