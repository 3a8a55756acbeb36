#include "llm/cpu/kernels.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace tunableop::llm::cpu {

namespace {
// Below this many elements a parallel region costs more than it saves: waking the team and the
// closing barrier take microseconds, and on a busy machine a descheduled team member stalls
// everyone. Decode steps (one row per sequence) stay single-threaded; the GEMMs use the cores.
[[maybe_unused]] constexpr int64_t kParallelMin = 1 << 15;  // unused when built without OpenMP
}  // namespace

void embedding(const int32_t* ids, int64_t rows, const float* table, int64_t width, float scale, float* out) {
#pragma omp parallel for schedule(static) if (rows * width >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = table + int64_t(ids[r]) * width;
    float* dst = out + r * width;
    for (int64_t i = 0; i < width; ++i) dst[i] = src[i] * scale;
  }
}

void rmsnorm(const float* x, const float* w, int64_t rows, int64_t width, float eps, bool add_one, float* out) {
#pragma omp parallel for schedule(static) if (rows * width >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * width;
    float* o = out + r * width;
    // The mean of squares is a long sum: accumulate in double so it is not the error source.
    double ss = 0;
    for (int64_t i = 0; i < width; ++i) ss += double(xr[i]) * double(xr[i]);
    const float inv = 1.0f / std::sqrt(float(ss / double(width)) + eps);
    if (add_one) {
      for (int64_t i = 0; i < width; ++i) o[i] = (xr[i] * inv) * (1.0f + w[i]);
    } else {
      for (int64_t i = 0; i < width; ++i) o[i] = w[i] * (xr[i] * inv);
    }
  }
}

void rope(float* x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim, const int32_t* positions,
          const RopeTable& table) {
  const int64_t half = head_dim / 2;
#pragma omp parallel for schedule(static) if (rows * heads * head_dim >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* c = table.cos.data() + int64_t(positions[r]) * half;
    const float* s = table.sin.data() + int64_t(positions[r]) * half;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + r * row_stride + h * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * c[i] - b * s[i];
        v[i + half] = b * c[i] + a * s[i];
      }
    }
  }
}

void store_kv(const float* qkv, int64_t rows, int64_t row_stride, int64_t q_dim, const int32_t* seqs,
              const int32_t* positions, const KvLayout& kv, float* k_cache, float* v_cache) {
  const int64_t kv_dim = kv.n_kv_heads * kv.head_dim;
  const size_t bytes = size_t(kv.head_dim) * sizeof(float);
#pragma omp parallel for schedule(static) if (rows * kv_dim >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* k = qkv + r * row_stride + q_dim;
    const float* v = k + kv_dim;
    for (int64_t h = 0; h < kv.n_kv_heads; ++h) {
      const int64_t off = kv.offset(seqs[r], h, positions[r]);
      std::memcpy(k_cache + off, k + h * kv.head_dim, bytes);
      std::memcpy(v_cache + off, v + h * kv.head_dim, bytes);
    }
  }
}

void attention(const float* qkv, int64_t rows, int64_t row_stride, int64_t n_heads, const int32_t* seqs,
               const int32_t* positions, const KvLayout& kv, const float* k_cache, const float* v_cache,
               const ScoreRule& rule, float* out) {
  const int64_t hd = kv.head_dim;
  const int64_t group = n_heads / kv.n_kv_heads;
  [[maybe_unused]] int64_t work = 0;  // multiply-adds, roughly (read by the OpenMP pragma only)
  for (int64_t r = 0; r < rows; ++r) work += (int64_t(positions[r]) + 1) * n_heads * hd * 2;
#pragma omp parallel if (work >= 4 * kParallelMin)
  {
    std::vector<float> scores(size_t(kv.max_seq));
#pragma omp for schedule(dynamic, 4) collapse(2)
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t h = 0; h < n_heads; ++h) {
        const float* q = qkv + r * row_stride + h * hd;
        const int64_t len = int64_t(positions[r]) + 1;
        const int64_t first = rule.window > 0 && len > rule.window ? len - rule.window : 0;
        const int64_t base = kv.offset(seqs[r], h / group, 0);
        const float* kc = k_cache + base;
        const float* vc = v_cache + base;
        float m = -INFINITY;
        for (int64_t j = first; j < len; ++j) {
          float dot = 0;
          for (int64_t i = 0; i < hd; ++i) dot += q[i] * kc[j * hd + i];
          float s = dot * rule.scale;
          if (rule.softcap > 0) s = rule.softcap * std::tanh(s / rule.softcap);
          scores[size_t(j)] = s;
          m = std::max(m, s);
        }
        float sum = 0;
        for (int64_t j = first; j < len; ++j) {
          scores[size_t(j)] = std::exp(scores[size_t(j)] - m);
          sum += scores[size_t(j)];
        }
        const float inv = 1.0f / sum;
        float* o = out + r * n_heads * hd + h * hd;
        std::fill(o, o + hd, 0.0f);
        for (int64_t j = first; j < len; ++j) {
          const float p = scores[size_t(j)] * inv;
          for (int64_t i = 0; i < hd; ++i) o[i] += p * vc[j * hd + i];
        }
      }
    }
  }
}

void permute_q(const float* qkv, int64_t rows, int64_t row_stride, int64_t n_heads, int64_t n_kv_heads,
               int64_t head_dim, int64_t tokens, float* q_perm) {
  const int64_t group = n_heads / n_kv_heads;
  const size_t bytes = size_t(head_dim) * sizeof(float);
#pragma omp parallel for schedule(static) if (rows * n_heads * head_dim >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t seq = r / tokens, t = r % tokens;
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t g = h / group, i = h % group;
      std::memcpy(q_perm + (((seq * n_kv_heads + g) * tokens + t) * group + i) * head_dim,
                  qkv + r * row_stride + h * head_dim, bytes);
    }
  }
}

void causal_softmax(float* scores, int64_t mats, int64_t rows, int64_t cols, int64_t group, const ScoreRule& rule) {
#pragma omp parallel for schedule(static) if (mats * rows * cols >= kParallelMin)
  for (int64_t row = 0; row < mats * rows; ++row) {
    float* s = scores + row * cols;
    const int64_t valid = (row % rows) / group + 1;
    const int64_t first = rule.window > 0 && valid > rule.window ? valid - rule.window : 0;
    if (rule.softcap > 0)
      for (int64_t j = first; j < valid; ++j) s[j] = rule.softcap * std::tanh(s[j] / rule.softcap);
    float m = -INFINITY;
    for (int64_t j = first; j < valid; ++j) m = std::max(m, s[j]);
    float sum = 0;
    for (int64_t j = first; j < valid; ++j) sum += (s[j] = std::exp(s[j] - m));
    const float inv = 1.0f / sum;
    for (int64_t j = first; j < valid; ++j) s[j] *= inv;
    std::fill(s, s + first, 0.0f);
    std::fill(s + valid, s + cols, 0.0f);
  }
}

void unpermute_heads(const float* o_perm, int64_t seqs, int64_t n_kv_heads, int64_t tokens, int64_t group,
                     int64_t head_dim, float* attn) {
  const int64_t width = n_kv_heads * group * head_dim;
  const size_t bytes = size_t(head_dim) * sizeof(float);
#pragma omp parallel for schedule(static) if (seqs * tokens * width >= kParallelMin)
  for (int64_t r = 0; r < seqs * tokens; ++r) {
    const int64_t seq = r / tokens, t = r % tokens;
    for (int64_t h = 0; h < n_kv_heads * group; ++h) {
      const int64_t g = h / group, i = h % group;
      std::memcpy(attn + r * width + h * head_dim,
                  o_perm + (((seq * n_kv_heads + g) * tokens + t) * group + i) * head_dim, bytes);
    }
  }
}

double copy_bandwidth_gbps(size_t bytes) {
  constexpr size_t kChunk = size_t(1) << 20;
  const int64_t chunks = int64_t(bytes / kChunk);
  if (chunks < 1) return 0;
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> src(static_cast<char*>(std::aligned_alloc(64, size_t(chunks) * kChunk)));
  std::unique_ptr<char, Free> dst(static_cast<char*>(std::aligned_alloc(64, size_t(chunks) * kChunk)));
  if (!src || !dst) return 0;
  char* s = src.get();
  char* d = dst.get();
  // First touch on the threads that copy (pages land near them), then the copies.
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    std::memset(s + c * kChunk, int(c & 0x7f), kChunk);
    std::memset(d + c * kChunk, 0, kChunk);
  }
  double best = 1e30;
  for (int rep = 0; rep < 4; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) std::memcpy(d + c * kChunk, s + c * kChunk, kChunk);
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) best = std::min(best, t);  // rep 0 warms up
  }
  return 2.0 * double(chunks) * double(kChunk) / best / 1e9;
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
}

float gelu_erf(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f)); }

void gated_activation(const float* gate_up, int64_t rows, int64_t inter, Activation act, float* out) {
#pragma omp parallel for schedule(static) if (rows * inter >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * inter;
    const float* u = g + inter;
    float* o = out + r * inter;
    switch (act) {
      case Activation::kSilu:
        for (int64_t i = 0; i < inter; ++i) o[i] = silu(g[i]) * u[i];
        break;
      case Activation::kGeluTanh:
        for (int64_t i = 0; i < inter; ++i) o[i] = gelu_tanh(g[i]) * u[i];
        break;
      case Activation::kGeluErf:
        for (int64_t i = 0; i < inter; ++i) o[i] = gelu_erf(g[i]) * u[i];
        break;
    }
  }
}

void add_inplace(float* x, const float* y, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= 4 * kParallelMin)
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void gather_rows(const void* x, int64_t row_bytes, const int64_t* rows, int64_t count, void* out) {
  const auto* src = static_cast<const char*>(x);
  auto* dst = static_cast<char*>(out);
  for (int64_t i = 0; i < count; ++i) std::memcpy(dst + i * row_bytes, src + rows[i] * row_bytes, size_t(row_bytes));
}

void argmax_rows(const float* x, int64_t rows, int64_t width, int32_t* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* v = x + r * width;
    int64_t best = 0;
    for (int64_t i = 1; i < width; ++i) {
      if (v[i] > v[best]) best = i;
    }
    out[r] = int32_t(best);
  }
}

}  // namespace tunableop::llm::cpu
