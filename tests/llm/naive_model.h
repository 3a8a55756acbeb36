// An fp64 reference forward pass written straight from the Hugging Face definitions, with no
// KV cache, no padding and no fusion: it recomputes the whole sequence every call. It shares
// nothing with the engine but the weights, so agreement means the engine's cache, masks,
// padding, GQA mapping and fused layouts are right.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "llm/weights.h"

namespace tunableop::llm::testing {

// Logits [tokens.size(), vocab] for every position of `tokens`.
inline std::vector<double> naive_logits(const ModelWeights& w, const std::vector<int32_t>& tokens) {
  const ModelConfig& c = w.config;
  const int64_t T = int64_t(tokens.size()), H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  const int64_t NH = c.num_heads, NKV = c.num_kv_heads, Q = c.q_dim(), KV = c.kv_dim();
  const bool gemma = c.arch == Architecture::kGemma;
  using Mat = std::vector<double>;
  // y[t, o] = sum_i x[t, i] W[o, i], W given as rows [row0, row0 + out) of a fused matrix.
  auto matmul = [&](const Mat& x, int64_t in, const float* w_rows, int64_t out) {
    Mat y(size_t(T * out), 0.0);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t o = 0; o < out; ++o) {
        double s = 0;
        for (int64_t i = 0; i < in; ++i) s += x[size_t(t * in + i)] * double(w_rows[o * in + i]);
        y[size_t(t * out + o)] = s;
      }
    return y;
  };
  auto norm = [&](const Mat& x, const std::vector<float>& g) {
    Mat y(x.size());
    for (int64_t t = 0; t < T; ++t) {
      double ss = 0;
      for (int64_t i = 0; i < H; ++i) ss += x[size_t(t * H + i)] * x[size_t(t * H + i)];
      double inv = 1.0 / std::sqrt(ss / double(H) + c.rms_norm_eps);
      for (int64_t i = 0; i < H; ++i) {
        y[size_t(t * H + i)] = x[size_t(t * H + i)] * inv * (gemma ? 1.0 + g[size_t(i)] : double(g[size_t(i)]));
      }
    }
    return y;
  };
  auto rope = [&](Mat& m, int64_t heads) {
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < D / 2; ++i) {
          double f = double(t) / std::pow(c.rope_theta, double(2 * i) / double(D));
          double& a = m[size_t(t * heads * D + h * D + i)];
          double& b = m[size_t(t * heads * D + h * D + i + D / 2)];
          double na = a * std::cos(f) - b * std::sin(f), nb = b * std::cos(f) + a * std::sin(f);
          a = na;
          b = nb;
        }
  };
  auto act = [&](double g) {
    switch (c.activation) {
      case Activation::kSilu: return g / (1 + std::exp(-g));
      case Activation::kGeluTanh: return 0.5 * g * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
      case Activation::kGeluErf: return 0.5 * g * (1 + std::erf(g / std::sqrt(2.0)));
    }
    return 0.0;
  };

  Mat x(size_t(T * H));
  const double scale = gemma ? std::sqrt(double(H)) : 1.0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < H; ++i) x[size_t(t * H + i)] = w.embed[size_t(tokens[size_t(t)] * H + i)] * scale;

  for (const LayerWeights& L : w.layers) {
    Mat xn = norm(x, L.attn_norm);
    Mat q = matmul(xn, H, L.wqkv.data(), Q);
    Mat k = matmul(xn, H, L.wqkv.data() + Q * H, KV);
    Mat v = matmul(xn, H, L.wqkv.data() + (Q + KV) * H, KV);
    rope(q, NH);
    rope(k, NKV);
    Mat attn(size_t(T * Q), 0.0);
    for (int64_t h = 0; h < NH; ++h) {
      const int64_t g = h * NKV / NH;  // repeat_kv: head h uses kv head h / (NH / NKV)
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> s(size_t(t + 1));
        double m = -1e300, sum = 0;
        for (int64_t j = 0; j <= t; ++j) {
          double d = 0;
          for (int64_t i = 0; i < D; ++i) d += q[size_t(t * Q + h * D + i)] * k[size_t(j * KV + g * D + i)];
          s[size_t(j)] = d / std::sqrt(double(D));
          m = std::max(m, s[size_t(j)]);
        }
        for (double& e : s) sum += (e = std::exp(e - m));
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t i = 0; i < D; ++i)
            attn[size_t(t * Q + h * D + i)] += s[size_t(j)] / sum * v[size_t(j * KV + g * D + i)];
      }
    }
    Mat o = matmul(attn, Q, L.wo.data(), H);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    xn = norm(x, L.mlp_norm);
    Mat gate = matmul(xn, H, L.w_gate_up.data(), I);
    Mat up = matmul(xn, H, L.w_gate_up.data() + I * H, I);
    for (size_t i = 0; i < gate.size(); ++i) gate[i] = act(gate[i]) * up[i];
    Mat d = matmul(gate, I, L.w_down.data(), H);
    for (size_t i = 0; i < x.size(); ++i) x[i] += d[i];
  }
  return matmul(norm(x, w.final_norm), H, w.lm_head_data(), c.vocab_size);
}

}  // namespace tunableop::llm::testing
