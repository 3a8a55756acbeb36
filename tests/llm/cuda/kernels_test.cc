// The CUDA engine's element-wise kernels (src/llm/cuda/kernels.cu) against fp64 references on
// the host: the fused residual add + rmsnorm of prefill (issue 12) and the packed forms of
// rmsnorm, the residual add, the gated activation, RoPE + KV-cache store and argmax (its tie
// rule), at widths that take the packed path and widths that fall back to the scalar one; the
// families' kernels (family_kernels.cu: biases, q/k head norms, post-norm residual adds, softcap).
// Outputs start as NaN and sit before guard elements that must stay NaN; cache slots a pass
// must not write stay NaN too. Skips without a GPU.
#include "llm/cuda/kernels.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/cuda_testing.h"
#include "llm/cuda/cudnn_gate.h"
#include "llm/cuda/family_kernels.h"
#include "llm/rope.h"
#include "tunableop/half.h"

namespace tunableop::llm::cuda {
namespace {

constexpr size_t kGuard = 16;  // NaN elements after every output

size_t esize(Elem e) { return e == Elem::kBF16 ? 2 : 4; }
const char* ename(Elem e) { return e == Elem::kBF16 ? "bf16" : "fp32"; }
// The value E stores for v (what the kernels read back).
float round_to(Elem e, float v) { return e == Elem::kBF16 ? to_float(to_bf16(v)) : v; }

// A device array of n elements of E (or fp32), plus kGuard NaN elements after it.
class DeviceArray {
 public:
  DeviceArray(Elem e, const std::vector<float>& host) : e_(e), n_(host.size()) {
    std::vector<float> all = host;
    all.resize(n_ + kGuard, NAN);
    const std::vector<uint8_t> bytes = encode(all);
    EXPECT_EQ(cudaMalloc(&p_, bytes.size()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p_, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  DeviceArray(Elem e, size_t n) : DeviceArray(e, std::vector<float>(n, NAN)) {}  // NaN-poisoned
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  void* get() const { return p_; }
  float* f32() const { return static_cast<float*>(p_); }
  // The n elements; the guard must still be NaN.
  std::vector<float> read() const {
    std::vector<uint8_t> bytes((n_ + kGuard) * esize(e_));
    EXPECT_EQ(cudaMemcpy(bytes.data(), p_, bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    std::vector<float> all(n_ + kGuard);
    for (size_t i = 0; i < all.size(); ++i) {
      if (e_ == Elem::kBF16) {
        uint16_t raw;
        std::memcpy(&raw, bytes.data() + 2 * i, 2);
        all[i] = to_float(bf16{raw});
      } else {
        std::memcpy(&all[i], bytes.data() + 4 * i, 4);
      }
    }
    for (size_t i = n_; i < all.size(); ++i)
      EXPECT_TRUE(std::isnan(all[i])) << "guard element " << i - n_ << " written";
    all.resize(n_);
    return all;
  }

 private:
  std::vector<uint8_t> encode(const std::vector<float>& v) const {
    std::vector<uint8_t> out(v.size() * esize(e_));
    for (size_t i = 0; i < v.size(); ++i) {
      if (e_ == Elem::kBF16) {
        const uint16_t raw = to_bf16(v[i]).bits;
        std::memcpy(out.data() + 2 * i, &raw, 2);
      } else {
        std::memcpy(out.data() + 4 * i, &v[i], 4);
      }
    }
    return out;
  }
  Elem e_;
  size_t n_;
  void* p_ = nullptr;
};

std::vector<float> random_values(Elem e, size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = round_to(e, d(gen));
  return v;
}

// |got - want| within the output's rounding (bf16: 2^-8 relative) plus a little absolute slack.
void expect_close(Elem e, const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  const double rel = e == Elem::kBF16 ? 8e-3 : 2e-5, abs = e == Elem::kBF16 ? 1e-3 : 1e-5;
  int bad = 0;
  for (size_t i = 0; i < want.size() && bad < 5; ++i) {
    if (!(std::fabs(got[i] - want[i]) <= rel * std::fabs(want[i]) + abs)) {
      ++bad;
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", want " << want[i];
    }
  }
}

const Elem kElems[] = {Elem::kF32, Elem::kBF16};

// cuDNN's gate GEMM with the gated activation in its epilogue (prefill's gate_up, issue 12):
// out = act(x W_gate^T) * up against fp64, W_gate the first n rows of a [2n, in] gate_up weight;
// out NaN-poisoned. The first configuration that builds, and with GELU tanh at 64 x 256 x 128
// every engine configuration cuDNN offers (mode A and fallback: the engine times them all; it
// also checks each on sampled rows before timing it). Skips where cuDNN is not loaded.
TEST(LlmCudaKernels, CudnnGateMatchesTheReference) {
  TUNABLEOP_REQUIRE_GPU();
  CudnnGate gate;
  struct Shape {
    int64_t rows, in, n;
  };
  const Elem e = Elem::kBF16;
  int checked = 0;
  for (Act act : {Act::kSilu, Act::kGeluTanh, Act::kGeluErf}) {
    for (Shape s : {Shape{1, 64, 40}, Shape{17, 136, 24}, Shape{64, 256, 128}}) {
      const auto x = random_values(e, size_t(s.rows * s.in), 7), w = random_values(e, size_t(2 * s.n * s.in), 8, 0.1f),
                 up = random_values(e, size_t(s.rows * s.n), 9);
      DeviceArray dx(e, x), dw(e, w), dup(e, up);
      std::vector<double> want(size_t(s.rows * s.n));
      for (int64_t r = 0; r < s.rows; ++r) {
        for (int64_t j = 0; j < s.n; ++j) {
          double g = 0;
          for (int64_t k = 0; k < s.in; ++k) g += double(x[size_t(r * s.in + k)]) * w[size_t(j * s.in + k)];
          const double a = act == Act::kSilu ? g / (1 + std::exp(-g))
                           : act == Act::kGeluTanh
                               ? 0.5 * g * (1 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)))
                               : 0.5 * g * (1 + std::erf(g / std::sqrt(2.0)));
          want[size_t(r * s.n + j)] = a * up[size_t(r * s.n + j)];
        }
      }
      std::vector<std::string> tags = {""};  // the first that builds
      if (s.rows == 64 && act == Act::kGeluTanh) {
        auto all = gate.configs(act, s.rows, s.in, s.n);
        if (all.status().code() == StatusCode::kUnsupported) GTEST_SKIP() << all.status().message();
        ASSERT_TRUE(all.is_ok()) << all.status().to_string();
        tags = *all;
      }
      for (const std::string& tag : tags) {
        const std::string what = "act " + std::to_string(int(act)) + " rows " + std::to_string(s.rows) + " in " +
                                 std::to_string(s.in) + " n " + std::to_string(s.n) + " config " + tag;
        DeviceArray out(e, size_t(s.rows * s.n));  // NaN-poisoned
        Status st = gate.run(nullptr, act, s.rows, s.in, s.n, dx.get(), dw.get(), dup.get(), out.get(), tag);
        if (st.code() == StatusCode::kUnsupported) GTEST_SKIP() << st.message();
        ASSERT_TRUE(st.is_ok()) << what << ": " << st.to_string();
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        expect_close(e, out.read(), want, what);
        ++checked;
      }
    }
  }
  std::printf("cuDNN %lld: %d gate runs checked\n", (long long)CudnnGate::version(), checked);
}

// add_rmsnorm: x += y, out = rmsnorm(x) against fp64, and the same bits as add_residual followed
// by rmsnorm (the unfused prefill and the CPU-order composition).
TEST(LlmCudaKernels, AddRmsnormMatchesTheReferenceAndTheUnfusedKernels) {
  TUNABLEOP_REQUIRE_GPU();
  const float eps = 1e-6f;
  for (Elem e : kElems) {
    for (int64_t width : {4096, 2048, 36, 37, 1000, 6}) {
      for (int64_t rows : {1, 3, 17}) {
        for (bool add_one : {false, true}) {
          const std::string what = std::string(ename(e)) + " width " + std::to_string(width) + " rows " +
                                   std::to_string(rows) + (add_one ? " (1 + w)" : "");
          const size_t n = size_t(rows * width);
          const auto x = random_values(Elem::kF32, n, 1, 3.0f), y = random_values(e, n, 2),
                     w = random_values(e, size_t(width), 3, 0.5f);
          DeviceArray dx(Elem::kF32, x), dy(e, y), dw(e, w), out(e, n);
          ASSERT_EQ(add_rmsnorm(e, dx.f32(), dy.get(), dw.get(), rows, width, eps, add_one, out.get(), nullptr),
                    cudaSuccess);
          const auto got_x = dx.read(), got = out.read();
          std::vector<double> want(n);
          for (int64_t r = 0; r < rows; ++r) {
            double ss = 0;
            for (int64_t i = 0; i < width; ++i) {
              const size_t k = size_t(r * width + i);
              ASSERT_EQ(got_x[k], x[k] + y[k]) << what << ": the residual is the fp32 sum";
              ss += double(got_x[k]) * got_x[k];
            }
            const double inv = 1.0 / std::sqrt(ss / double(width) + eps);
            for (int64_t i = 0; i < width; ++i) {
              const size_t k = size_t(r * width + i);
              want[k] = double(got_x[k]) * inv * (add_one ? 1.0 + w[size_t(i)] : w[size_t(i)]);
            }
          }
          expect_close(e, got, want, what);

          DeviceArray ux(Elem::kF32, x), unfused(e, n);
          ASSERT_EQ(add_residual(e, ux.f32(), dy.get(), int64_t(n), nullptr), cudaSuccess);
          ASSERT_EQ(rmsnorm(e, ux.f32(), dw.get(), rows, width, eps, add_one, unfused.get(), nullptr), cudaSuccess);
          EXPECT_EQ(ux.read(), got_x) << what;
          const auto u = unfused.read();
          EXPECT_EQ(std::memcmp(u.data(), got.data(), n * sizeof(float)), 0) << what << ": fused and unfused differ";
        }
      }
    }
  }
}

double act_ref(Act a, double g) {
  switch (a) {
    case Act::kSilu: return g / (1.0 + std::exp(-g));
    case Act::kGeluTanh: return 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
    case Act::kGeluErf: return 0.5 * g * (1.0 + std::erf(g / std::sqrt(2.0)));
  }
  return 0;
}

// out[r, i] = act(gate) * up, packed (inter a multiple of 16 bytes) and scalar, more rows than a
// grid's y dimension holds.
TEST(LlmCudaKernels, GatedActivationMatchesTheReference) {
  TUNABLEOP_REQUIRE_GPU();
  struct Shape {
    int64_t rows, inter;
  };
  for (Elem e : kElems) {
    for (Shape s : {Shape{3, 64}, Shape{5, 12}, Shape{2, 3}, Shape{70000, 8}, Shape{7, 1000}}) {
      for (Act a : {Act::kSilu, Act::kGeluTanh, Act::kGeluErf}) {
        const std::string what = std::string(ename(e)) + " rows " + std::to_string(s.rows) + " inter " +
                                 std::to_string(s.inter) + " act " + std::to_string(int(a));
        const size_t n = size_t(s.rows * s.inter);
        const auto gu = random_values(e, 2 * n, 4, 2.0f);
        DeviceArray dgu(e, gu), out(e, n);
        ASSERT_EQ(gated_activation(e, dgu.get(), s.rows, s.inter, a, out.get(), nullptr), cudaSuccess);
        std::vector<double> want(n);
        for (int64_t r = 0; r < s.rows; ++r) {
          for (int64_t i = 0; i < s.inter; ++i) {
            const double g = gu[size_t(r * 2 * s.inter + i)], u = gu[size_t(r * 2 * s.inter + s.inter + i)];
            want[size_t(r * s.inter + i)] = act_ref(a, g) * u;
          }
        }
        expect_close(e, out.read(), want, what);
      }
    }
  }
}

// argmax_rows on the packed path (widths a multiple of 16 bytes: Gemma's 256000, Llama's 32000)
// and the scalar one (37), a few rows each: a tie of the maximum placed in every row (the first
// index must win, as torch.argmax), once at the first element, once at the last.
TEST(LlmCudaKernels, ArgmaxTakesTheFirstMaximumPackedAndScalar) {
  TUNABLEOP_REQUIRE_GPU();
  for (Elem e : kElems) {
    for (int64_t width : {int64_t(256000), int64_t(32000), int64_t(37)}) {
      const int64_t rows = 3;
      auto x = random_values(e, size_t(rows * width), 11);
      std::mt19937 gen(12);
      std::vector<int32_t> want(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) {
        float* row = x.data() + r * width;
        int64_t a = std::uniform_int_distribution<int64_t>(1, width - 2)(gen);
        int64_t b = std::uniform_int_distribution<int64_t>(a + 1, width - 1)(gen);
        if (r == 1) a = 0;          // the first element
        if (r == 2) b = width - 1;  // a tie with the last element
        row[a] = row[b] = 100.0f;   // exact in bf16, above every N(0, 1) draw
        want[size_t(r)] = int32_t(a);
      }
      DeviceArray dx(e, x), out(Elem::kF32, size_t(rows));
      ASSERT_EQ(argmax_rows(e, dx.get(), rows, width, reinterpret_cast<int32_t*>(out.get()), nullptr), cudaSuccess);
      std::vector<int32_t> got(static_cast<size_t>(rows));
      ASSERT_EQ(cudaMemcpy(got.data(), out.get(), got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      for (int64_t r = 0; r < rows; ++r)
        EXPECT_EQ(got[size_t(r)], want[size_t(r)]) << ename(e) << " width " << width << " row " << r;
    }
  }
}

TEST(LlmCudaKernels, AddResidualPackedAndScalar) {
  TUNABLEOP_REQUIRE_GPU();
  for (Elem e : kElems) {
    for (int64_t n : {int64_t(3 * 4096), int64_t(37), int64_t(1)}) {
      const auto x = random_values(Elem::kF32, size_t(n), 5), y = random_values(e, size_t(n), 6);
      DeviceArray dx(Elem::kF32, x), dy(e, y);
      ASSERT_EQ(add_residual(e, dx.f32(), dy.get(), n, nullptr), cudaSuccess);
      const auto got = dx.read();
      for (size_t i = 0; i < size_t(n); ++i) ASSERT_EQ(got[i], x[i] + y[i]) << ename(e) << " n " << n << " at " << i;
    }
  }
}

// Rows gathered by index: fp32 residual rows and E qkv rows, on the 16-byte path (rows a
// multiple of 16 bytes) and the 4-byte one; the rows not asked for and the guard stay untouched;
// a row size that is not a multiple of 4 bytes is refused.
TEST(LlmCudaKernels, GatherRowsCopiesTheRowsAsked) {
  TUNABLEOP_REQUIRE_GPU();
  for (Elem e : {Elem::kF32, Elem::kBF16}) {
    for (int64_t width : {int64_t(2560), int64_t(6), int64_t(2)}) {
      const int64_t rows = 7, row_bytes = width * int64_t(esize(e));
      const auto x = random_values(e, size_t(rows * width), 21);
      const std::vector<int64_t> pick = {6, 0, 3};
      DeviceArray dx(e, x), out(e, pick.size() * size_t(width));
      int64_t* dpick = nullptr;
      ASSERT_EQ(cudaMalloc(&dpick, pick.size() * 8), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(dpick, pick.data(), pick.size() * 8, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(gather_rows(dx.get(), row_bytes, dpick, int64_t(pick.size()), out.get(), nullptr), cudaSuccess);
      const auto got = out.read();
      for (size_t i = 0; i < pick.size(); ++i) {
        for (int64_t j = 0; j < width; ++j) {
          ASSERT_EQ(got[i * size_t(width) + size_t(j)], round_to(e, x[size_t(pick[i] * width + j)]))
              << ename(e) << " width " << width << " row " << i << " at " << j;
        }
      }
      EXPECT_EQ(gather_rows(dx.get(), 6, dpick, 1, out.get(), nullptr), cudaErrorInvalidValue);
      cudaFree(dpick);
    }
  }
}

// RoPE on q (in place) and k, k and v into the cache, static and paged (pages out of order, a
// sequence shorter than the pass: its padding rows not stored), head dims on the packed path
// (64, 128, 256) and off it (6), MHA, GQA and MQA.
TEST(LlmCudaKernels, RopeStoreMatchesTheReference) {
  TUNABLEOP_REQUIRE_GPU();
  struct Heads {
    int64_t q, kv;
  };
  const int64_t batch = 2, tokens = 5, max_seq = 9, page = 4, pages_per_seq = 3;
  const std::vector<int32_t> lens = {5, 3};  // sequence 1 has 2 padding rows
  const std::vector<int32_t> table = {4, 0, 2, 5, 1, 3};
  for (Elem e : kElems) {
    for (int64_t hd : {64, 128, 256, 6}) {
      for (Heads h : {Heads{4, 4}, Heads{8, 1}, Heads{6, 2}}) {
        for (bool paged : {false, true}) {
          const std::string what = std::string(ename(e)) + " head_dim " + std::to_string(hd) + " heads " +
                                   std::to_string(h.q) + "/" + std::to_string(h.kv) + (paged ? " paged" : " static");
          const int64_t stride = (h.q + 2 * h.kv) * hd, rows = batch * tokens, half = hd / 2;
          const auto qkv = random_values(e, size_t(rows * stride), 7);
          const RopeTable rope = make_rope_table(hd, 10000.0, max_seq);
          const size_t n_rows = static_cast<size_t>(rows);
          std::vector<int32_t> seqs(n_rows), pos(n_rows);
          for (int64_t r = 0; r < rows; ++r)
            seqs[size_t(r)] = int32_t(r / tokens), pos[size_t(r)] = int32_t(r % tokens + 2 * (r / tokens));
          const size_t cache_n = paged ? size_t(6 * h.kv * page * hd) : size_t(batch * h.kv * max_seq * hd);
          DeviceArray dqkv(e, qkv), kc(e, cache_n), vc(e, cache_n), dcos(Elem::kF32, rope.cos),
              dsin(Elem::kF32, rope.sin);
          int32_t *dseqs = nullptr, *dpos = nullptr, *dtable = nullptr, *dlens = nullptr;
          ASSERT_EQ(cudaMalloc(&dseqs, 4 * size_t(rows)), cudaSuccess);
          ASSERT_EQ(cudaMalloc(&dpos, 4 * size_t(rows)), cudaSuccess);
          ASSERT_EQ(cudaMalloc(&dtable, 4 * table.size()), cudaSuccess);
          ASSERT_EQ(cudaMalloc(&dlens, 4 * lens.size()), cudaSuccess);
          cudaMemcpy(dseqs, seqs.data(), 4 * seqs.size(), cudaMemcpyHostToDevice);
          cudaMemcpy(dpos, pos.data(), 4 * pos.size(), cudaMemcpyHostToDevice);
          cudaMemcpy(dtable, table.data(), 4 * table.size(), cudaMemcpyHostToDevice);
          cudaMemcpy(dlens, lens.data(), 4 * lens.size(), cudaMemcpyHostToDevice);
          RopeStoreArgs a;
          a.qkv = dqkv.get(), a.rows = rows, a.row_stride = stride, a.n_heads = h.q, a.n_kv_heads = h.kv,
          a.head_dim = hd;
          a.seqs = dseqs, a.positions = dpos, a.cos = dcos.f32(), a.sin = dsin.f32();
          a.k_cache = kc.get(), a.v_cache = vc.get(), a.max_seq = max_seq;
          if (paged) a.block_table = dtable, a.page_size = page, a.pages_per_seq = pages_per_seq, a.seq_lens = dlens;
          ASSERT_EQ(rope_store(e, a, nullptr), cudaSuccess);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          const auto got = dqkv.read(), k = kc.read(), v = vc.read();
          std::vector<bool> stored(cache_n, false);
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t seq = seqs[size_t(r)], p = pos[size_t(r)];
            const float* c = rope.cos.data() + p * half;
            const float* sn = rope.sin.data() + p * half;
            auto rot = [&](int64_t col, int64_t i, bool first) {
              const double x0 = qkv[size_t(r * stride + col + i)], x1 = qkv[size_t(r * stride + col + i + half)];
              return first ? x0 * c[i] - x1 * sn[i] : x1 * c[i] + x0 * sn[i];
            };
            for (int64_t hq = 0; hq < h.q; ++hq) {
              std::vector<float> g;
              std::vector<double> want;
              for (int64_t i = 0; i < hd; ++i) {
                g.push_back(got[size_t(r * stride + hq * hd + i)]);
                want.push_back(i < half ? rot(hq * hd, i, true) : rot(hq * hd, i - half, false));
              }
              expect_close(e, g, want, what + " q");
            }
            const bool real = !paged || p < lens[size_t(seq)];
            for (int64_t kh = 0; kh < h.kv && real; ++kh) {
              const int64_t off =
                  paged ? ((table[size_t(seq * pages_per_seq + p / page)] * h.kv + kh) * page + p % page) * hd
                        : ((seq * h.kv + kh) * max_seq + p) * hd;
              std::vector<float> gk, gv;
              std::vector<double> wk, wv;
              const int64_t kcol = (h.q + kh) * hd, vcol = (h.q + h.kv + kh) * hd;
              for (int64_t i = 0; i < hd; ++i) {
                stored[size_t(off + i)] = true;
                gk.push_back(k[size_t(off + i)]);
                wk.push_back(i < half ? rot(kcol, i, true) : rot(kcol, i - half, false));
                gv.push_back(v[size_t(off + i)]);
                wv.push_back(qkv[size_t(r * stride + vcol + i)]);
              }
              expect_close(e, gk, wk, what + " k");
              ASSERT_EQ(std::vector<double>(gv.begin(), gv.end()), wv) << what << ": v is copied as it is";
            }
          }
          for (size_t i = 0; i < cache_n; ++i) {
            if (!stored[i]) {
              ASSERT_TRUE(std::isnan(k[i]) && std::isnan(v[i])) << what << ": cache element " << i << " written";
            }
          }
          cudaFree(dseqs), cudaFree(dpos), cudaFree(dtable), cudaFree(dlens);
        }
      }
    }
  }
}

// Qwen2's biases folded into rope_store (decode keeps one kernel) give the bits of add_bias
// followed by rope_store, packed (head_dim 128) and scalar (6) forms, q in place and k, v cached.
TEST(LlmCudaKernels, RopeStoreWithBiasEqualsAddBiasThenRopeStore) {
  TUNABLEOP_REQUIRE_GPU();
  for (Elem e : kElems) {
    for (int64_t hd : {128, 6}) {
      const int64_t rows = 3, nh = 4, nkv = 2, stride = (nh + 2 * nkv) * hd, max_seq = 8;
      const auto qkv = random_values(e, size_t(rows * stride), 61), bias = random_values(e, size_t(stride), 62);
      const RopeTable rope = make_rope_table(hd, 10000.0, max_seq);
      const std::vector<int32_t> seqs = {0, 1, 2}, pos = {0, 3, 7};
      int32_t* dints = nullptr;
      ASSERT_EQ(cudaMalloc(&dints, 4 * 6), cudaSuccess);
      cudaMemcpy(dints, seqs.data(), 12, cudaMemcpyHostToDevice);
      cudaMemcpy(dints + 3, pos.data(), 12, cudaMemcpyHostToDevice);
      DeviceArray dcos(Elem::kF32, rope.cos), dsin(Elem::kF32, rope.sin), dbias(e, bias);
      std::vector<float> out[2][3];  // [fused][q rows, k cache, v cache]
      for (int fused = 0; fused < 2; ++fused) {
        const size_t cache_n = size_t(rows * nkv * max_seq * hd);
        DeviceArray dqkv(e, qkv), kc(e, cache_n), vc(e, cache_n);
        RopeStoreArgs a;
        a.qkv = dqkv.get(), a.rows = rows, a.row_stride = stride, a.n_heads = nh, a.n_kv_heads = nkv, a.head_dim = hd;
        a.seqs = dints, a.positions = dints + 3, a.cos = dcos.f32(), a.sin = dsin.f32();
        a.k_cache = kc.get(), a.v_cache = vc.get(), a.max_seq = max_seq;
        if (fused) {
          a.qkv_bias = dbias.get();
        } else {
          ASSERT_EQ(add_bias(e, dqkv.get(), dbias.get(), rows, stride, nullptr), cudaSuccess);
        }
        ASSERT_EQ(rope_store(e, a, nullptr), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<float> q = dqkv.read(), q_only;
        for (int64_t r = 0; r < rows; ++r)
          q_only.insert(q_only.end(), q.begin() + r * stride, q.begin() + r * stride + nh * hd);
        out[fused][0] = q_only, out[fused][1] = kc.read(), out[fused][2] = vc.read();
      }
      for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(out[0][i].size(), out[1][i].size());
        for (size_t j = 0; j < out[0][i].size(); ++j) {
          const float x = out[0][i][j], y = out[1][i][j];
          ASSERT_TRUE((std::isnan(x) && std::isnan(y)) || x == y)
              << ename(e) << " head_dim " << hd << " part " << i << " element " << j << ": " << x << " vs " << y;
        }
      }
      cudaFree(dints);
    }
  }
}

// Qwen2's biases and Gemma-2's softcap, element-wise, in both dtypes; the output's neighbours
// (guard elements) untouched.
TEST(LlmCudaKernels, FamilyBiasAndSoftcapMatchTheReference) {
  TUNABLEOP_REQUIRE_GPU();
  for (Elem e : kElems) {
    const int64_t rows = 5, width = 1000;  // odd rows, a width that is no power of two
    const auto y = random_values(e, size_t(rows * width), 31, 3.f), b = random_values(e, size_t(width), 32);
    DeviceArray dy(e, y), db(e, b);
    ASSERT_EQ(add_bias(e, dy.get(), db.get(), rows, width, nullptr), cudaSuccess);
    std::vector<double> want(y.size());
    for (size_t i = 0; i < y.size(); ++i) want[i] = double(y[i]) + b[i % size_t(width)];
    expect_close(e, dy.read(), want, std::string("add_bias ") + ename(e));

    DeviceArray dc(e, y);
    ASSERT_EQ(softcap(e, dc.get(), rows * width, 2.5f, nullptr), cudaSuccess);
    for (size_t i = 0; i < y.size(); ++i) want[i] = 2.5 * std::tanh(double(y[i]) / 2.5);
    expect_close(e, dc.read(), want, std::string("softcap ") + ename(e));
  }
}

// Qwen3's per-head q/k norms: each q head with wq, each k head with wk, v and the gaps between
// rows untouched; head dims 64 and 128 (the real ones) and 24.
TEST(LlmCudaKernels, QkNormNormsEachHead) {
  TUNABLEOP_REQUIRE_GPU();
  for (Elem e : kElems) {
    for (int64_t hd : {24, 64, 128}) {
      const int64_t rows = 3, nh = 4, nkv = 2, stride = (nh + 2 * nkv) * hd + 8;
      const auto x = random_values(e, size_t(rows * stride), 41, 2.f);
      const auto wq = random_values(e, size_t(hd), 42), wk = random_values(e, size_t(hd), 43);
      DeviceArray dx(e, x), dq(e, wq), dk(e, wk);
      ASSERT_EQ(qk_norm(e, dx.get(), rows, stride, nh, nkv, hd, dq.get(), dk.get(), 1e-6f, nullptr), cudaSuccess);
      std::vector<double> want(x.begin(), x.end());
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t h = 0; h < nh + nkv; ++h) {
          const int64_t at = r * stride + h * hd;
          double ss = 0;
          for (int64_t i = 0; i < hd; ++i) ss += double(x[size_t(at + i)]) * x[size_t(at + i)];
          const double inv = 1 / std::sqrt(ss / double(hd) + 1e-6);
          for (int64_t i = 0; i < hd; ++i)
            want[size_t(at + i)] = x[size_t(at + i)] * inv * (h < nh ? wq[size_t(i)] : wk[size_t(i)]);
        }
      }
      expect_close(e, dx.read(), want, std::string("qk_norm ") + ename(e) + " d" + std::to_string(hd));
    }
  }
}

// Gemma-2's post-norms: x (fp32) += E(rmsnorm(y) * (1 + w)), decode (1 row) and prefill rows.
TEST(LlmCudaKernels, AddNormedResidualMatchesTheReference) {
  TUNABLEOP_REQUIRE_GPU();
  for (Elem e : kElems) {
    for (int64_t rows : {1, 7}) {
      const int64_t width = 3584;  // Gemma-2-9B's hidden size
      const auto x = random_values(Elem::kF32, size_t(rows * width), 51),
                 y = random_values(e, size_t(rows * width), 52, 4.f);
      const auto w = random_values(e, size_t(width), 53, 0.3f);
      DeviceArray dx(Elem::kF32, x), dy(e, y), dw(e, w);
      ASSERT_EQ(add_normed_residual(e, dx.f32(), dy.get(), dw.get(), rows, width, 1e-6f, true, nullptr), cudaSuccess);
      const std::vector<float> got = dx.read();
      int bad = 0;
      for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < width; ++i) ss += double(y[size_t(r * width + i)]) * y[size_t(r * width + i)];
        const double inv = 1 / std::sqrt(ss / double(width) + 1e-6);
        for (int64_t i = 0; i < width && bad < 5; ++i) {
          const size_t k = size_t(r * width + i);
          // The normed term is rounded to E before the fp32 add: one rounding of E on it, fp32's on the sum.
          const double term = y[k] * inv * (1.0 + w[size_t(i)]), want = x[k] + term;
          const double tol = std::fabs(term) * (e == Elem::kBF16 ? 0.0079 : 2e-6) + 2e-6 * (1 + std::fabs(want));
          if (!(std::fabs(got[k] - want) <= tol)) {
            ++bad;
            ADD_FAILURE() << ename(e) << " row " << r << " element " << i << ": " << got[k] << ", want " << want;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tunableop::llm::cuda
