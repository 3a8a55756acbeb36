// Sampling on the GPU (src/llm/cuda/sampling.cu) against the host algorithm (sample_row):
// greedy rows equal the argmax; sampled rows (temperature, top-k, top-p, their mixes, on fp32
// and bf16 logits, vocabularies of odd sizes up to Llama-3's) give the host's token but where
// exp() rounding puts the draw within a few ulps of a boundary (at most 1 row in 200 here), and
// every token is one the host keeps; the draws follow the distribution (chi-square over 20000
// draws of one row); a NaN or +inf row answers -1. Skips without a GPU.
#include "llm/cuda/sampling.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cuda/cuda_testing.h"
#include "llm/sampling.h"
#include "tunableop/half.h"

namespace tunableop::llm::cuda {
namespace {

struct Rows {
  std::vector<float> logits;  // [rows][vocab], as the device holds them (bf16 values rounded)
  std::vector<SamplingRow> params;
};

// Runs the kernel on `r` (E = bf16 or fp32) and returns the tokens.
std::vector<int32_t> run(const Rows& r, int64_t vocab, bool bf16) {
  const size_t rows = r.params.size();
  std::vector<uint8_t> bytes(r.logits.size() * (bf16 ? 2 : 4));
  for (size_t i = 0; i < r.logits.size(); ++i) {
    if (bf16) {
      const uint16_t raw = to_bf16(r.logits[i]).bits;
      std::memcpy(bytes.data() + 2 * i, &raw, 2);
    } else {
      std::memcpy(bytes.data() + 4 * i, &r.logits[i], 4);
    }
  }
  testing::DeviceBuffer logits(bytes.size()), params(rows * sizeof(SamplingRow)), out(rows * 4);
  EXPECT_EQ(cudaMemcpy(logits.data(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(params.data(), r.params.data(), rows * sizeof(SamplingRow), cudaMemcpyHostToDevice),
            cudaSuccess);
  EXPECT_EQ(cudaMemset(out.data(), 0x7f, rows * 4), cudaSuccess);  // poisoned
  EXPECT_EQ(
      sample_rows(bf16 ? Elem::kBF16 : Elem::kF32, logits.data(), int64_t(rows), vocab,
                  reinterpret_cast<const SamplingRow*>(params.data()), reinterpret_cast<int32_t*>(out.data()), nullptr),
      cudaSuccess);
  std::vector<int32_t> tokens(rows);
  EXPECT_EQ(cudaMemcpy(tokens.data(), out.data(), rows * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  return tokens;
}

Rows random_rows(size_t rows, int64_t vocab, bool bf16, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  Rows r;
  r.logits.resize(rows * size_t(vocab));
  for (float& x : r.logits) x = bf16 ? to_float(to_bf16(d(gen))) : d(gen);
  const float temps[] = {0.0f, 0.5f, 1.0f, 1.7f};
  const int32_t ks[] = {0, 1, 5, 50};
  const float ps[] = {1.0f, 0.95f, 0.5f, 0.1f};
  for (size_t i = 0; i < rows; ++i) {
    SamplingRow p;
    p.temperature = temps[i % 4];
    p.top_k = ks[(i / 4) % 4];
    p.top_p = ps[(i / 16) % 4];
    p.seed = 1000 + i;
    p.counter = i * 7;
    r.params.push_back(p);
  }
  return r;
}

// Whether `token` has a weight the host keeps under p (top-k and top-p sets, ties included).
bool kept(const float* l, int64_t vocab, const SamplingRow& p, int32_t token) {
  if (token < 0 || token >= vocab) return false;
  std::vector<float> sorted(l, l + vocab);
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  const float best = sorted[0];
  const float floor = (p.top_k > 0 && p.top_k < vocab) ? sorted[size_t(p.top_k - 1)] : -INFINITY;
  if (l[token] < floor) return false;
  if (p.top_p >= 1) return true;
  double total = 0, above = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (l[i] >= floor) total += std::exp(double(l[i] - best) / p.temperature);
  }
  for (int64_t i = 0; i < vocab; ++i) {
    if (l[i] >= floor && l[i] > l[token]) above += std::exp(double(l[i] - best) / p.temperature);
  }
  return above < double(p.top_p) * total * (1 + 1e-6);  // ranked above it: less than top_p of the mass
}

TEST(LlmCudaSampling, MatchesTheHostAlgorithm) {
  TUNABLEOP_REQUIRE_GPU();
  for (bool bf16 : {false, true}) {
    for (int64_t vocab : {int64_t(97), int64_t(32000), int64_t(128256)}) {
      const size_t rows = vocab > 100000 ? 64 : 200;
      const Rows r = random_rows(rows, vocab, bf16, uint32_t(vocab));
      const std::vector<int32_t> got = run(r, vocab, bf16);
      int differ = 0;
      for (size_t i = 0; i < rows; ++i) {
        const float* l = r.logits.data() + i * size_t(vocab);
        auto want = sample_row(std::span<const float>(l, size_t(vocab)), r.params[i]);
        ASSERT_TRUE(want.is_ok());
        if (r.params[i].greedy()) {
          EXPECT_EQ(got[i], *want) << "greedy row " << i << " vocab " << vocab;
          continue;
        }
        EXPECT_TRUE(kept(l, vocab, r.params[i], got[i]))
            << "row " << i << " vocab " << vocab << (bf16 ? " bf16" : " fp32") << ": token " << got[i];
        differ += got[i] != *want;
      }
      EXPECT_LE(differ, int(rows / 200) + 1) << "vocab " << vocab << (bf16 ? " bf16" : " fp32");
    }
  }
}

// One row of 8 tokens drawn 20000 times (counters 0..19999): the frequencies against
// softmax(l / t) restricted to the top-p set, by chi-square (7 degrees of freedom: 40 is far
// past its 99.99th percentile).
TEST(LlmCudaSampling, DrawsFollowTheDistribution) {
  TUNABLEOP_REQUIRE_GPU();
  const int64_t vocab = 8;
  const float l[vocab] = {0.1f, 1.2f, -0.5f, 0.9f, 2.0f, -1.0f, 0.0f, 1.5f};
  const size_t n = 20000;
  Rows r;
  for (size_t i = 0; i < n; ++i) {
    r.logits.insert(r.logits.end(), l, l + vocab);
    SamplingRow p;
    p.temperature = 0.8f;
    p.seed = 42;
    p.counter = i;
    r.params.push_back(p);
  }
  const std::vector<int32_t> got = run(r, vocab, false);
  std::vector<double> count(vocab, 0), prob(vocab);
  for (int32_t t : got) {
    ASSERT_TRUE(t >= 0 && t < vocab);
    count[size_t(t)] += 1;
  }
  double z = 0;
  for (int64_t i = 0; i < vocab; ++i) z += prob[size_t(i)] = std::exp((l[i] - 2.0) / 0.8);
  double chi2 = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    const double want = double(n) * prob[size_t(i)] / z;
    chi2 += (count[size_t(i)] - want) * (count[size_t(i)] - want) / want;
  }
  EXPECT_LT(chi2, 40.0);
}

TEST(LlmCudaSampling, NonFiniteRowsAnswerMinusOne) {
  TUNABLEOP_REQUIRE_GPU();
  Rows r = random_rows(3, 50, false, 5);
  for (SamplingRow& p : r.params) p.temperature = 1.0f;
  r.logits[7] = NAN;
  r.logits[50 + 3] = INFINITY;
  const std::vector<int32_t> got = run(r, 50, false);
  EXPECT_EQ(got[0], -1);
  EXPECT_EQ(got[1], -1);
  EXPECT_GE(got[2], 0);
}

}  // namespace
}  // namespace tunableop::llm::cuda
