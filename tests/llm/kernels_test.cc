// The CPU kernels against fp64 references written from the definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "llm/cpu/family_kernels.h"
#include "llm/cpu/kernels.h"

namespace tunableop::llm::cpu {
namespace {

std::vector<float> random_vector(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

TEST(LlmKernels, RmsNormMatchesFp64) {
  const int64_t rows = 5, width = 67;
  auto x = random_vector(size_t(rows * width), 1, -3, 3);
  auto w = random_vector(size_t(width), 2);
  for (bool add_one : {false, true}) {
    std::vector<float> out(x.size());
    rmsnorm(x.data(), w.data(), rows, width, 1e-5f, add_one, out.data());
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < width; ++i) ss += double(x[size_t(r * width + i)]) * x[size_t(r * width + i)];
      double inv = 1.0 / std::sqrt(ss / double(width) + 1e-5);
      for (int64_t i = 0; i < width; ++i) {
        double ref = double(x[size_t(r * width + i)]) * inv * (add_one ? 1.0 + w[size_t(i)] : double(w[size_t(i)]));
        EXPECT_NEAR(out[size_t(r * width + i)], ref, 1e-5 * (1 + std::abs(ref)));
      }
    }
  }
}

TEST(LlmKernels, RopeRotatesHalvesAtEachPosition) {
  const int64_t rows = 4, heads = 3, hd = 16, stride = heads * hd + 5;  // row padding untouched
  const double theta = 10000;
  auto x = random_vector(size_t(rows * stride), 3);
  std::vector<float> y = x;
  std::vector<int32_t> pos = {0, 1, 7, 31};
  RopeTable table = make_rope_table(hd, theta, 32);
  rope(y.data(), rows, stride, heads, hd, pos.data(), table);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < hd / 2; ++i) {
        double f = double(pos[size_t(r)]) / std::pow(theta, double(2 * i) / double(hd));
        double a = x[size_t(r * stride + h * hd + i)], b = x[size_t(r * stride + h * hd + i + hd / 2)];
        EXPECT_NEAR(y[size_t(r * stride + h * hd + i)], a * std::cos(f) - b * std::sin(f), 2e-5);
        EXPECT_NEAR(y[size_t(r * stride + h * hd + i + hd / 2)], b * std::cos(f) + a * std::sin(f), 2e-5);
      }
    }
    for (int64_t i = heads * hd; i < stride; ++i) EXPECT_EQ(y[size_t(r * stride + i)], x[size_t(r * stride + i)]);
  }
}

// Attention over a cache filled by store_kv, against fp64 softmax(q k^T * scale) v with the
// causal limit (and a window, a softcap when given) and GQA head mapping written out directly.
void check_attention(int64_t n_heads, int64_t n_kv, int64_t window = 0, float softcap = 0) {
  const int64_t hd = 8, batch = 2, max_seq = 12;
  const int64_t q_dim = n_heads * hd, kv_dim = n_kv * hd, stride = q_dim + 2 * kv_dim;
  KvLayout kv{n_kv, hd, max_seq};
  // Sequence 0 has 7 tokens, sequence 1 has 4: all rows written in one store_kv call.
  std::vector<int32_t> seqs, pos;
  for (int t = 0; t < 7; ++t) seqs.push_back(0), pos.push_back(t);
  for (int t = 0; t < 4; ++t) seqs.push_back(1), pos.push_back(t);
  const int64_t rows = int64_t(seqs.size());
  auto qkv = random_vector(size_t(rows * stride), 11, -2, 2);
  std::vector<float> kc(size_t(batch * n_kv * max_seq * hd), NAN), vc = kc;  // unwritten slots are NaN
  store_kv(qkv.data(), rows, stride, q_dim, seqs.data(), pos.data(), kv, kc.data(), vc.data());
  std::vector<float> out(size_t(rows * q_dim));
  const float scale = 1.0f / std::sqrt(float(hd));
  attention(qkv.data(), rows, stride, n_heads, seqs.data(), pos.data(), kv, kc.data(), vc.data(),
            ScoreRule{scale, softcap, window}, out.data());

  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t g = h / (n_heads / n_kv);
      // Keys/values of the rows of the same sequence at positions <= pos[r].
      std::vector<double> s;
      std::vector<int64_t> src;
      for (int64_t j = 0; j < rows; ++j) {
        if (seqs[size_t(j)] != seqs[size_t(r)] || pos[size_t(j)] > pos[size_t(r)]) continue;
        if (window > 0 && pos[size_t(j)] <= pos[size_t(r)] - window) continue;
        double dot = 0;
        for (int64_t i = 0; i < hd; ++i) {
          dot += double(qkv[size_t(r * stride + h * hd + i)]) * qkv[size_t(j * stride + q_dim + g * hd + i)];
        }
        s.push_back(softcap > 0 ? softcap * std::tanh(dot * scale / softcap) : dot * scale);
        src.push_back(j);
      }
      double m = *std::max_element(s.begin(), s.end()), sum = 0;
      for (double& v : s) sum += (v = std::exp(v - m));
      for (int64_t i = 0; i < hd; ++i) {
        double ref = 0;
        for (size_t k = 0; k < s.size(); ++k) {
          ref += s[k] / sum * qkv[size_t(src[k] * stride + q_dim + kv_dim + g * hd + i)];
        }
        ASSERT_NEAR(out[size_t(r * q_dim + h * hd + i)], ref, 1e-5) << "row " << r << " head " << h;
      }
    }
  }
}

TEST(LlmKernels, AttentionMultiHead) { check_attention(4, 4); }
TEST(LlmKernels, AttentionGroupedQuery) { check_attention(6, 2); }
TEST(LlmKernels, AttentionMultiQuery) { check_attention(5, 1); }
TEST(LlmKernels, AttentionSlidingWindowAndSoftcap) {
  check_attention(6, 2, 3, 0);
  check_attention(4, 4, 0, 0.7f);
  check_attention(5, 1, 2, 1.5f);
}

// The GEMM path's softmax: row r (token r / group) sees columns max(0, t + 1 - window) .. t,
// softcapped first.
TEST(LlmKernels, CausalSoftmaxWindowAndSoftcap) {
  const int64_t rows = 12, cols = 6, group = 2;
  auto scores = random_vector(size_t(rows * cols), 17, -3, 3);
  std::vector<float> got = scores;
  causal_softmax(got.data(), 1, rows, cols, group, ScoreRule{1, 1.5f, 3});
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = r / group, first = std::max<int64_t>(0, t - 2);
    double sum = 0;
    for (int64_t j = first; j <= t; ++j) sum += std::exp(1.5 * std::tanh(scores[size_t(r * cols + j)] / 1.5));
    for (int64_t j = 0; j < cols; ++j) {
      const double want =
          j < first || j > t ? 0.0 : std::exp(1.5 * std::tanh(scores[size_t(r * cols + j)] / 1.5)) / sum;
      EXPECT_NEAR(got[size_t(r * cols + j)], want, 1e-6) << r << " " << j;
    }
  }
}

// Qwen2's biases, Qwen3's per-head norms (each head of the q and k columns normed alone, the rest
// of the row untouched), Gemma-2's softcap.
TEST(LlmKernels, FamilyKernels) {
  const int64_t rows = 3, width = 10;
  auto y = random_vector(size_t(rows * width), 21, -2, 2), bias = random_vector(size_t(width), 22, -1, 1);
  std::vector<float> yb = y;
  add_bias(yb.data(), bias.data(), rows, width);
  for (int64_t i = 0; i < rows * width; ++i) EXPECT_FLOAT_EQ(yb[size_t(i)], y[size_t(i)] + bias[size_t(i % width)]);

  const int64_t hd = 4, stride = 20;  // heads 1..3 of each row normed, columns 0..3 and 16..19 kept
  auto x = random_vector(size_t(rows * stride), 23, -3, 3), w = random_vector(size_t(hd), 24, 0.5f, 1.5f);
  std::vector<float> xn = x;
  head_rmsnorm(xn.data(), rows, stride, 1, 3, hd, w.data(), 1e-6f);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < stride; ++i) {
      const int64_t head = i / hd;
      if (head < 1 || head > 3) {
        EXPECT_EQ(xn[size_t(r * stride + i)], x[size_t(r * stride + i)]);
        continue;
      }
      double ss = 0;
      for (int64_t e = 0; e < hd; ++e)
        ss += double(x[size_t(r * stride + head * hd + e)]) * x[size_t(r * stride + head * hd + e)];
      const double want = x[size_t(r * stride + i)] / std::sqrt(ss / hd + 1e-6) * w[size_t(i % hd)];
      EXPECT_NEAR(xn[size_t(r * stride + i)], want, 1e-5 * (1 + std::abs(want)));
    }
  }
  std::vector<float> c = y;
  cpu::softcap(c.data(), rows * width, 0.5f);
  for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], 0.5 * std::tanh(y[i] / 0.5), 1e-6);
}

TEST(LlmKernels, GatedActivations) {
  const int64_t rows = 3, inter = 11;
  auto gu = random_vector(size_t(rows * 2 * inter), 5, -4, 4);
  std::vector<float> out(size_t(rows * inter));
  const double k = std::sqrt(2.0 / M_PI);
  for (Activation act : {Activation::kSilu, Activation::kGeluTanh, Activation::kGeluErf}) {
    gated_activation(gu.data(), rows, inter, act, out.data());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < inter; ++i) {
        double g = gu[size_t(r * 2 * inter + i)], u = gu[size_t(r * 2 * inter + inter + i)];
        double a = act == Activation::kSilu       ? g / (1 + std::exp(-g))
                   : act == Activation::kGeluTanh ? 0.5 * g * (1 + std::tanh(k * (g + 0.044715 * g * g * g)))
                                                  : 0.5 * g * (1 + std::erf(g / std::sqrt(2.0)));
        EXPECT_NEAR(out[size_t(r * inter + i)], a * u, 1e-5 * (1 + std::abs(a * u))) << activation_name(act);
      }
    }
  }
}

TEST(LlmKernels, EmbeddingGatherArgmax) {
  const int64_t vocab = 10, width = 4;
  auto table = random_vector(size_t(vocab * width), 6);
  std::vector<int32_t> ids = {3, 0, 9};
  std::vector<float> out(size_t(3 * width));
  embedding(ids.data(), 3, table.data(), width, 2.0f, out.data());
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t i = 0; i < width; ++i)
      EXPECT_EQ(out[size_t(r * width + i)], 2.0f * table[size_t(ids[size_t(r)] * width + i)]);
  }
  std::vector<int64_t> rows = {2, 0};
  std::vector<float> g(size_t(2 * width));
  gather_rows(out.data(), width * int64_t(sizeof(float)), rows.data(), 2, g.data());
  EXPECT_EQ(g[0], out[size_t(2 * width)]);
  EXPECT_EQ(g[size_t(width)], out[0]);

  std::vector<float> logits = {1, 5, 5, -1, /*row 2*/ -3, -2, -2, -9};
  std::vector<int32_t> best(2);
  argmax_rows(logits.data(), 2, 4, best.data());
  EXPECT_EQ(best[0], 1);  // first of the tied maxima, like torch.argmax
  EXPECT_EQ(best[1], 1);
}

}  // namespace
}  // namespace tunableop::llm::cpu

namespace tunableop::llm::cpu {
namespace {

// The streaming-bandwidth probe the CPU device reports (bench --measure-bandwidth): a rate, and
// a clear zero for a size it cannot use.
TEST(LlmCpuKernels, CopyBandwidthIsARate) {
  EXPECT_GT(copy_bandwidth_gbps(size_t(8) << 20), 0.1);
  EXPECT_EQ(copy_bandwidth_gbps(1000), 0.0);  // under one 1 MiB chunk
}

}  // namespace
}  // namespace tunableop::llm::cpu
