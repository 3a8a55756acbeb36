// An fp64 reference forward pass written straight from the Hugging Face definitions, with no
// KV cache, no padding and no fusion: it recomputes the whole sequence every call. It shares
// nothing with the engine but the weights and RoPE's inverse frequencies (rope_frequencies:
// scaled RoPE is checked on its own in rope_test.cc and against transformers by the fixtures),
// so agreement means the engine's cache, masks, padding, GQA mapping, fused layouts and the
// families' features (biases, q/k norms, post-norms, softcapping, sliding windows) are right.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "llm/rope.h"
#include "llm/weights.h"

namespace tunableop::llm::testing {

// Logits [tokens.size(), vocab] for every position of `tokens`.
inline std::vector<double> naive_logits(const ModelWeights& w, const std::vector<int32_t>& tokens) {
  const ModelConfig& c = w.config;
  const int64_t T = int64_t(tokens.size()), H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  const int64_t NH = c.num_heads, NKV = c.num_kv_heads, Q = c.q_dim(), KV = c.kv_dim();
  const bool gemma = c.norm_adds_one();
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
  // RMSNorm of every `width`-wide piece of x: * (1 + g) for Gemma's norms (plus_one), * g else.
  auto norm_pieces = [&](Mat x, int64_t width, const float* g, bool plus_one) {
    for (size_t p = 0; p < x.size() / size_t(width); ++p) {
      double ss = 0;
      for (int64_t i = 0; i < width; ++i) ss += x[p * size_t(width) + size_t(i)] * x[p * size_t(width) + size_t(i)];
      const double inv = 1.0 / std::sqrt(ss / double(width) + c.rms_norm_eps);
      for (int64_t i = 0; i < width; ++i) {
        double& v = x[p * size_t(width) + size_t(i)];
        v = v * inv * (plus_one ? 1.0 + g[i] : double(g[i]));
      }
    }
    return x;
  };
  auto norm = [&](const Mat& x, const std::vector<float>& g) { return norm_pieces(x, H, g.data(), gemma); };
  const RopeFrequencies rope_freq = rope_frequencies(c);
  auto rope = [&](Mat& m, int64_t heads) {
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < D / 2; ++i) {
          const double f = double(t) * double(rope_freq.inv_freq[size_t(i)]), af = rope_freq.attention_factor;
          double& a = m[size_t(t * heads * D + h * D + i)];
          double& b = m[size_t(t * heads * D + h * D + i + D / 2)];
          double na = (a * std::cos(f) - b * std::sin(f)) * af, nb = (b * std::cos(f) + a * std::sin(f)) * af;
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
  auto softcap = [](double s, double cap) { return cap > 0 ? cap * std::tanh(s / cap) : s; };
  auto add_bias = [&](Mat& m, int64_t width, const float* bias) {
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < width; ++i) m[size_t(t * width + i)] += bias[i];
  };
  const double att_scale = c.query_pre_attn_scalar > 0 ? 1.0 / std::sqrt(c.query_pre_attn_scalar) : 1.0 / std::sqrt(D);

  Mat x(size_t(T * H));
  const double scale = gemma ? std::sqrt(double(H)) : 1.0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < H; ++i) x[size_t(t * H + i)] = w.embed[size_t(tokens[size_t(t)] * H + i)] * scale;

  for (const LayerWeights& L : w.layers) {
    const int64_t layer = &L - w.layers.data(), window = c.layer_window(layer);
    Mat xn = norm(x, L.attn_norm);
    Mat q = matmul(xn, H, L.wqkv.data(), Q);
    Mat k = matmul(xn, H, L.wqkv.data() + Q * H, KV);
    Mat v = matmul(xn, H, L.wqkv.data() + (Q + KV) * H, KV);
    if (!L.qkv_bias.empty()) {
      add_bias(q, Q, L.qkv_bias.data());
      add_bias(k, KV, L.qkv_bias.data() + Q);
      add_bias(v, KV, L.qkv_bias.data() + Q + KV);
    }
    if (!L.q_norm.empty()) {  // Qwen3: per head, before RoPE
      q = norm_pieces(q, D, L.q_norm.data(), false);
      k = norm_pieces(k, D, L.k_norm.data(), false);
    }
    rope(q, NH);
    rope(k, NKV);
    Mat attn(size_t(T * Q), 0.0);
    for (int64_t h = 0; h < NH; ++h) {
      const int64_t g = h * NKV / NH;  // repeat_kv: head h uses kv head h / (NH / NKV)
      for (int64_t t = 0; t < T; ++t) {
        // Causal, and within the window: keys t - window < j <= t.
        const int64_t first = window > 0 ? std::max<int64_t>(0, t - window + 1) : 0;
        std::vector<double> s(size_t(t + 1));
        double m = -1e300, sum = 0;
        for (int64_t j = first; j <= t; ++j) {
          double d = 0;
          for (int64_t i = 0; i < D; ++i) d += q[size_t(t * Q + h * D + i)] * k[size_t(j * KV + g * D + i)];
          s[size_t(j)] = softcap(d * att_scale, c.attn_logit_softcapping);
          m = std::max(m, s[size_t(j)]);
        }
        for (int64_t j = first; j <= t; ++j) sum += (s[size_t(j)] = std::exp(s[size_t(j)] - m));
        for (int64_t j = first; j <= t; ++j)
          for (int64_t i = 0; i < D; ++i)
            attn[size_t(t * Q + h * D + i)] += s[size_t(j)] / sum * v[size_t(j * KV + g * D + i)];
      }
    }
    Mat o = matmul(attn, Q, L.wo.data(), H);
    if (!L.post_attn_norm.empty()) o = norm(o, L.post_attn_norm);  // Gemma-2
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    xn = norm(x, L.mlp_norm);
    Mat gate = matmul(xn, H, L.w_gate_up.data(), I);
    Mat up = matmul(xn, H, L.w_gate_up.data() + I * H, I);
    for (size_t i = 0; i < gate.size(); ++i) gate[i] = act(gate[i]) * up[i];
    Mat d = matmul(gate, I, L.w_down.data(), H);
    if (!L.post_mlp_norm.empty()) d = norm(d, L.post_mlp_norm);  // Gemma-2
    for (size_t i = 0; i < x.size(); ++i) x[i] += d[i];
  }
  Mat logits = matmul(norm(x, w.final_norm), H, w.lm_head_data(), c.vocab_size);
  for (double& l : logits) l = softcap(l, c.final_logit_softcapping);
  return logits;
}

}  // namespace tunableop::llm::testing
