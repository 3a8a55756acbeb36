// The seam every matmul of the model goes through: y[tokens, out] = x[tokens, in] * W[out, in]^T
// (tunableop::linear on the engine's context, so each GEMM problem is tuned once, recorded in
// the results file and served from it afterwards), plus the other GEMMs of the forward pass
// and attention, each call counted by distinct problem. tunableop_linear holds one plan per
// shape (the framework's hot path); counting a linear call builds no strings after its shape's
// first call.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "tunableop/attention.h"
#include "tunableop/context.h"
#include "tunableop/gemm.h"
#include "tunableop/scaled_gemm.h"
#include "tunableop/status.h"

namespace tunableop::llm {

enum class Phase { kPrefill, kDecode };

// y[tokens, out] = x[tokens, in] * W[out, in]^T, counted by distinct GEMM problem.
class LinearOp {
 public:
  using Fn = std::function<Status(DType dtype, int64_t tokens, int64_t in, int64_t out, const void* x, const void* w,
                                  void* y, void* stream)>;
  using GemmFn = std::function<Status(const GemmParams& p, const GemmOperands& ops)>;
  using AttentionFn = std::function<Status(const AttentionParams& p, const AttentionOperands& ops)>;
  // The engine's path is tunableop_linear(ctx); tests may pass another (a naive matmul).
  // `gemm` serves other GEMMs (the CPU's attention without `attention`); `attention` the
  // devices' attention (tunableop_attention(ctx)); either null where the engine has none.
  explicit LinearOp(Fn fn, GemmFn gemm = {}, AttentionFn attention = {})
      : fn_(std::move(fn)), gemm_fn_(std::move(gemm)), attention_fn_(std::move(attention)) {}

  Status operator()(Phase phase, DType dtype, int64_t tokens, int64_t in, int64_t out, const void* x, const void* w,
                    void* y, void* stream = nullptr);
  // Any other GEMM of the forward pass, counted the same way.
  Status gemm(Phase phase, const GemmParams& p, const GemmOperands& ops);
  bool has_gemm() const { return bool(gemm_fn_); }
  // Attention (prefill or decode) through the engine's attention function, counted by problem
  // in attention_problems().
  Status attention(Phase phase, const AttentionParams& p, const AttentionOperands& ops);
  bool has_attention() const { return bool(attention_fn_); }
  // The fp8 projections (EngineOptions::fp8): y[tokens, out] (bf16) = x[tokens, in] W[out, in]^T
  // with x and W in e4m3, x_scale one fp32 per token and w_scale one per output channel: the
  // ScaledGemm problem scaled_linear_params(e4m3, bf16, rowwise, tokens, in, out), counted with
  // the GEMMs (by shape, as a linear call) and run by the scaled function (set_scaled;
  // tunableop_scaled_linear(ctx) on the engine: tuned, recorded and served like the GEMMs).
  using ScaledFn = std::function<Status(const ScaledGemmParams& p, const ScaledGemmOperands& ops)>;
  void set_scaled(ScaledFn fn) { scaled_fn_ = std::move(fn); }
  bool has_scaled() const { return bool(scaled_fn_); }
  Status scaled(Phase phase, int64_t tokens, int64_t in, int64_t out, const void* x, const float* x_scale,
                const void* w, const float* w_scale, void* y, void* stream);

  struct Problem {
    std::string op;      // GemmTunableOp_float_TN
    std::string params;  // tn_<out>_<tokens>_<in>
    bool in_prefill = false, in_decode = false;
    int64_t calls = 0;          // all phases
    int64_t prefill_calls = 0;  // of which in prefill
    double flops = 0;           // per call
  };
  std::vector<Problem> problems() const;  // GEMM problems, first-seen order
  std::vector<Problem> attention_problems() const;
  int64_t calls() const;
  void reset_counts();
  // A CUDA graph replays the GEMMs it captured without calling through here: the engine keeps
  // the calls made while capturing (difference of two problems() snapshots) and credits each
  // replay with them.
  static std::vector<Problem> difference(const std::vector<Problem>& before, const std::vector<Problem>& after);
  void add_calls(const std::vector<Problem>& calls, int64_t times);
  void add_attention_calls(const std::vector<Problem>& calls, int64_t times);

 private:
  void count(std::vector<Problem>& list, Phase phase, std::string op, std::string params, double flops);
  void count_linear(Phase phase, DType dtype, int64_t tokens, int64_t in, int64_t out);
  struct LinearShape {
    DType dtype;
    int64_t tokens, in, out;
    size_t index;  // into problems_
  };
  Fn fn_;
  GemmFn gemm_fn_;
  AttentionFn attention_fn_;
  ScaledFn scaled_fn_;
  mutable std::mutex mu_;
  std::vector<Problem> problems_, attention_problems_;
  std::vector<LinearShape> linear_shapes_;
};

// tunableop::linear(ctx, ...) and tunableop::gemm(ctx, ...): tuned, recorded and reused
// through the context. tunableop_attention(ctx): tunableop::attention(ctx, ...), the Attention op.
LinearOp::Fn tunableop_linear(Context& ctx);
LinearOp::GemmFn tunableop_gemm(Context& ctx);
LinearOp::AttentionFn tunableop_attention(Context& ctx);
// tunableop::scaled_gemm through one plan per problem (as tunableop_linear's).
LinearOp::ScaledFn tunableop_scaled_linear(Context& ctx);

}  // namespace tunableop::llm
