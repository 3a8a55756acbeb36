// Choosing the next token: greedy (the engine's own argmax, on the device that holds the
// logits) or sampled (temperature, top-k, top-p) on the host from Engine::last_logits().
//
// The engine's greedy prefill()/decode() are untouched: a TokenSelector runs after each step,
// receives the engine's greedy choice and may read the step's logits instead. A sampler that
// runs on the device later implements the same interface.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "llm/engine.h"
#include "tunableop/status.h"

namespace tunableop::llm {

struct SamplingOptions {
  // 0: greedy. Otherwise logits are divided by it before the softmax.
  double temperature = 0;
  // Keep only the k most likely tokens (0: all).
  int64_t top_k = 0;
  // Keep the most likely tokens until their probability reaches top_p (1: all). As in
  // transformers, a token is kept while the mass of the tokens ranked above it is < top_p.
  double top_p = 1;
  // Sequence b of a batch draws from its own generator, seeded from (seed, b).
  uint64_t seed = 0;

  bool greedy() const { return temperature == 0; }
  Status validate() const;
  std::string describe() const;  // "greedy" or "temperature 0.8, top-k 40, top-p 0.95, seed 7"
};

// Host sampling over one row of logits (temperature, then top-k, then top-p, then a draw), in
// double precision and in a fixed order, with the standard's mt19937_64 and our own mapping to
// [0, 1): the same seed and the same logits give the same token on every platform.
class Sampler {
 public:
  explicit Sampler(const SamplingOptions& o);
  // Draws sequence `sequence`'s next token. NaN or +inf logits are an error (the model is broken).
  StatusOr<int32_t> sample(int64_t sequence, std::span<const float> logits);
  const SamplingOptions& options() const { return o_; }

 private:
  std::mt19937_64& generator(int64_t sequence);
  SamplingOptions o_;
  std::vector<std::mt19937_64> generators_;
  std::vector<int32_t> order_;   // scratch: candidate ids, most likely first
  std::vector<double> weights_;  // scratch: exp((logit - max) / temperature) by id
};

// Picks each sequence's next token after a prefill or decode step.
class TokenSelector {
 public:
  virtual ~TokenSelector() = default;
  // `greedy`: the engine's argmax per sequence. `next` gets one token per sequence.
  virtual Status select(Engine& engine, const std::vector<int32_t>& greedy, std::vector<int32_t>* next) = 0;
  virtual std::string describe() const = 0;
};

// Greedy: the engine's choice as it is (no logits leave the device). Otherwise a host Sampler
// over last_logits().
std::unique_ptr<TokenSelector> make_token_selector(const SamplingOptions& o);

}  // namespace tunableop::llm
