// The fused decode-projection kernel (src/backends/cuda/fused_linear/fused_gemv.h), every shape, against an fp64
// reference on fresh random data: every offered shape, each (input, output) pair, fp32 and bf16, n = 1, 3, 8, odd m and
// k that are not multiples of a chunk; outputs poisoned with NaN and followed by guard elements that must survive; the
// residual accumulated, not overwritten; argmax ties to the first index; the argmax scratch left zero. The support
// rules run anywhere; the kernels skip without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/fused_linear/fused_gemv.h"
#include "tunableop/half.h"

namespace tunableop::cuda {
namespace {

bool have_gpu() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    (void)cudaGetLastError();
    return false;
  }
  return true;
}

// Host values as the device stores them: E is fp32 or bf16.
struct HostTensor {
  Elem e;
  std::vector<float> v;  // the values (already representable in E)
  std::vector<unsigned char> bytes() const {
    std::vector<unsigned char> b(v.size() * (e == Elem::kF32 ? 4 : 2));
    for (size_t i = 0; i < v.size(); ++i) {
      if (e == Elem::kF32) {
        std::memcpy(&b[i * 4], &v[i], 4);
      } else {
        const uint16_t h = to_bf16(v[i]).bits;
        std::memcpy(&b[i * 2], &h, 2);
      }
    }
    return b;
  }
};

float round_e(Elem e, float f) { return e == Elem::kF32 ? f : to_float(to_bf16(f)); }

HostTensor random_e(Elem e, size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(lo, hi);
  HostTensor t{e, std::vector<float>(n)};
  for (auto& x : t.v) x = round_e(e, d(rng));
  return t;
}

// Device memory freed at scope exit; `guard` extra elements of bytes 0xff (NaN in fp32 and bf16).
struct Dev {
  void* p = nullptr;
  size_t bytes = 0;
  Dev(size_t n, size_t guard_bytes = 0) : bytes(n) {
    EXPECT_EQ(cudaMalloc(&p, n + guard_bytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(p, 0xff, n + guard_bytes), cudaSuccess);
  }
  ~Dev() { cudaFree(p); }
  void put(const void* src, size_t n) { EXPECT_EQ(cudaMemcpy(p, src, n, cudaMemcpyHostToDevice), cudaSuccess); }
  std::vector<unsigned char> get(size_t n) const {
    std::vector<unsigned char> out(n);
    EXPECT_EQ(cudaMemcpy(out.data(), p, n, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
};

std::vector<float> as_floats(Elem e, const std::vector<unsigned char>& b) {
  const size_t es = e == Elem::kF32 ? 4 : 2;
  std::vector<float> out(b.size() / es);
  for (size_t i = 0; i < out.size(); ++i) {
    if (e == Elem::kF32) {
      std::memcpy(&out[i], &b[i * 4], 4);
    } else {
      uint16_t h;
      std::memcpy(&h, &b[i * 2], 2);
      out[i] = to_float(bf16{h});
    }
  }
  return out;
}

double rel_err(const std::vector<float>& got, const std::vector<double>& want, double scale_floor = 0) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;  // unwritten (NaN poison) or broken
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, scale_floor));
}

double act_ref(GatedAct a, double g) {
  switch (a) {
    case GatedAct::kSilu: return g / (1 + std::exp(-g));
    case GatedAct::kGeluTanh: return 0.5 * g * (1 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
    case GatedAct::kGeluErf: return 0.5 * g * (1 + std::erf(g * 0.7071067811865476));
  }
  return 0;
}

struct Case {
  Elem e;
  GemvOut out;
  int64_t m, k;
  int n;
  FusedGemvShape shape;
  std::string name() const {
    return std::string(e == Elem::kF32 ? "f32" : "bf16") + " out" + std::to_string(int(out)) + " m" +
           std::to_string(m) + " k" + std::to_string(k) + " n" + std::to_string(n) + " r" + std::to_string(shape.rows) +
           " sk" + std::to_string(shape.k_split);
  }
};

// Runs one case twice (the second launch must see the argmax scratch the first left zero) and
// checks everything it wrote.
void check_case(const Case& c, std::mt19937& rng) {
  SCOPED_TRACE(c.name());
  const Elem e = c.e;
  const size_t es = e == Elem::kF32 ? 4 : 2, n = size_t(c.n), m = size_t(c.m), k = size_t(c.k);
  const bool norm = c.out != GemvOut::kAddResidual && c.out != GemvOut::kStoreF32;
  const bool add_one = c.k % 3 == 0;  // Gemma's (1 + w) on some cases
  HostTensor w = random_e(e, m * k, -1, 1, rng);
  HostTensor input = random_e(e, n * k, -1, 1, rng);
  HostTensor norm_w = random_e(e, k, -0.5f, 0.5f, rng);
  std::vector<float> x(n * k), residual(n * m);
  std::uniform_real_distribution<float> d(-2, 2);
  for (auto& v : x) v = d(rng);
  for (auto& v : residual) v = d(rng);

  // Reference: the input rounded to E where the kernel rounds it, the dot products in fp64.
  std::vector<double> b(n * k);
  for (size_t j = 0; j < n; ++j) {
    double ss = 0;
    for (size_t i = 0; i < k; ++i) ss += double(x[j * k + i]) * x[j * k + i];
    const float inv = float(1.0 / std::sqrt(ss / double(k) + 1e-6));
    for (size_t i = 0; i < k; ++i) {
      const float wi = norm_w.v[i];
      b[j * k + i] = norm ? round_e(e, x[j * k + i] * inv * (add_one ? 1.0f + wi : wi)) : input.v[j * k + i];
    }
  }
  if (c.out == GemvOut::kArgmax && m > 20) {
    // A tie for column 0's maximum: rows 5 and 17 both sign(b), whose dot product sum |b| beats
    // any random row's by far; the first of the two must win.
    for (size_t i = 0; i < k; ++i) w.v[5 * k + i] = w.v[17 * k + i] = b[i] < 0 ? -1.0f : 1.0f;
  }
  std::vector<double> acc(n * m);
  for (size_t j = 0; j < n; ++j)
    for (size_t r = 0; r < m; ++r) {
      double s = 0;
      for (size_t i = 0; i < k; ++i) s += double(w.v[r * k + i]) * b[j * k + i];
      acc[j * m + r] = s;
    }

  constexpr size_t kGuard = 64;  // bytes after each output
  Dev dw(m * k * es), din(n * k * es), dx(n * k * 4), dnorm(k * es);
  Dev dy(n * m * 4, kGuard), dres(n * m * 4, kGuard), dgated(n * (m / 2) * es, kGuard);
  Dev dids(n * 4, kGuard), dkeys(64 * 8);
  EXPECT_EQ(cudaMemset(dkeys.p, 0, 64 * 8), cudaSuccess);
  dw.put(w.bytes().data(), m * k * es);
  din.put(input.bytes().data(), n * k * es);
  dx.put(x.data(), n * k * 4);
  dnorm.put(norm_w.bytes().data(), k * es);
  dres.put(residual.data(), n * m * 4);

  FusedGemvArgs a;
  a.e = e;
  a.in_kind = norm ? GemvIn::kNorm : GemvIn::kInput;
  a.out_kind = c.out;
  a.w = dw.p;
  a.m = c.m;
  a.k = c.k;
  a.n = c.n;
  a.input = din.p;
  a.x = static_cast<const float*>(dx.p);
  a.norm_w = dnorm.p;
  a.eps = 1e-6f;
  a.add_one = add_one;
  a.y = dy.p;
  a.residual = static_cast<float*>(dres.p);
  a.gated = dgated.p;
  a.act = c.k % 2 ? GatedAct::kSilu : GatedAct::kGeluTanh;
  a.ids = static_cast<int32_t*>(dids.p);
  a.keys = static_cast<unsigned long long*>(dkeys.p);
  a.counter = reinterpret_cast<unsigned*>(static_cast<unsigned long long*>(dkeys.p) + 32);
  // Launch modes change no result: PDL (early or late trigger, sm_90) and L2 prefetches of
  // other buffers, varied over the cases.
  int dev = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), cudaSuccess);
  a.pdl = major >= 9 && c.n != 1;
  a.pdl_late = c.n == 3;
  if (c.n == 8) {
    a.prefetch[0] = dw.p;
    a.prefetch_bytes[0] = int64_t(m * k * es);
    a.prefetch[1] = din.p;
    a.prefetch_bytes[1] = int64_t(n * k * es) - 16;  // not a multiple of a line
  }
  ASSERT_EQ(fused_gemv_unsupported(a, c.shape), nullptr);
  const int launches = c.out == GemvOut::kAddResidual ? 1 : 2;  // the residual accumulates
  for (int l = 0; l < launches; ++l) ASSERT_EQ(fused_gemv(a, c.shape, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  const double tol = e == Elem::kF32 ? 1e-5 : 1.5e-2;
  auto guard_ok = [&](const Dev& dv, size_t bytes) {
    auto all = dv.get(bytes + kGuard);
    for (size_t i = bytes; i < bytes + kGuard; ++i) {
      if (all[i] != 0xff) return false;
    }
    return true;
  };
  switch (c.out) {
    case GemvOut::kStore:
    case GemvOut::kArgmax: {
      const auto y = as_floats(e, dy.get(n * m * es));
      EXPECT_LT(rel_err(y, acc), tol);
      EXPECT_TRUE(guard_ok(dy, n * m * es)) << "wrote past y";
      if (c.out == GemvOut::kArgmax) {
        std::vector<int32_t> ids(n);
        auto raw = dids.get(n * 4);
        std::memcpy(ids.data(), raw.data(), n * 4);
        for (size_t j = 0; j < n; ++j) {
          size_t best = 0;
          for (size_t r = 1; r < m; ++r) {
            if (y[j * m + r] > y[j * m + best]) best = r;
          }
          EXPECT_EQ(ids[j], int32_t(best)) << "column " << j;
        }
        if (m > 20) {
          EXPECT_EQ(ids[0], 5) << "ties go to the first index";
        }
        EXPECT_TRUE(guard_ok(dids, n * 4)) << "wrote past ids";
        auto keys = dkeys.get(64 * 8);
        for (auto byte : keys) ASSERT_EQ(byte, 0) << "argmax scratch not left zero";
      }
      break;
    }
    case GemvOut::kStoreF32: {  // unrounded: the fp32 accumulation's error only
      std::vector<float> got(n * m);
      auto raw = dy.get(n * m * 4);
      std::memcpy(got.data(), raw.data(), n * m * 4);
      EXPECT_LT(rel_err(got, acc), 1e-5) << "fp32 y";
      EXPECT_TRUE(guard_ok(dy, n * m * 4)) << "wrote past y";
      break;
    }
    case GemvOut::kAddResidual: {
      std::vector<float> got(n * m);
      auto raw = dres.get(n * m * 4);
      std::memcpy(got.data(), raw.data(), n * m * 4);
      std::vector<double> want(n * m), delta_err(n * m);
      double num = 0, den = 0;
      for (size_t i = 0; i < n * m; ++i) {
        ASSERT_TRUE(std::isfinite(got[i])) << i;
        const double diff = double(got[i]) - (double(residual[i]) + acc[i]);
        num += diff * diff;
        den += acc[i] * acc[i];
      }
      EXPECT_LT(std::sqrt(num / den), tol) << "residual += y";
      EXPECT_TRUE(guard_ok(dres, n * m * 4)) << "wrote past the residual";
      break;
    }
    case GemvOut::kGated: {
      const size_t half = m / 2;
      std::vector<double> want(n * half);
      for (size_t j = 0; j < n; ++j)
        for (size_t i = 0; i < half; ++i) {
          const double g = round_e(e, float(acc[j * m + i])), u = round_e(e, float(acc[j * m + half + i]));
          want[j * half + i] = act_ref(a.act, g) * u;
        }
      const auto got = as_floats(e, dgated.get(n * half * es));
      EXPECT_LT(rel_err(got, want), tol);
      EXPECT_TRUE(guard_ok(dgated, n * half * es)) << "wrote past the gated output";
      break;
    }
    case GemvOut::kRope: ADD_FAILURE() << "kRope has its own test (check_rope)"; break;
  }
}

// kRope (the qkv projection with RoPE and the KV-cache write): y and both caches against an fp64
// reference: the projection rounded to E, rotated in fp64 with the fp32 tables, rounded. Tokens of
// different sequences at ragged positions; a static cache or a paged one with its pages out of
// order and one token past its sequence's length (a padding row: nothing stored). Every output
// poisoned with NaN first; cache slots not written must keep their poison.
struct RopeCase {
  Elem e;
  int64_t heads, kv_heads, hd, k;
  int n;
  bool paged;
  FusedGemvShape shape;
};

void check_rope(const RopeCase& c, std::mt19937& rng) {
  SCOPED_TRACE(std::string(c.e == Elem::kF32 ? "f32" : "bf16") + " heads " + std::to_string(c.heads) + "/" +
               std::to_string(c.kv_heads) + " hd " + std::to_string(c.hd) + " k " + std::to_string(c.k) + " n " +
               std::to_string(c.n) + (c.paged ? " paged" : " static") + " r" + std::to_string(c.shape.rows) + " sk" +
               std::to_string(c.shape.k_split));
  const Elem e = c.e;
  const size_t es = e == Elem::kF32 ? 4 : 2, n = size_t(c.n), k = size_t(c.k);
  const int64_t hd = c.hd, half = hd / 2, H = c.heads, KV = c.kv_heads;
  const size_t m = size_t((H + 2 * KV) * hd);
  const int64_t max_seq = 40, page = 8, pages_per_seq = max_seq / page, seqs = int64_t(n) + 1;
  HostTensor w = random_e(e, m * k, -1, 1, rng);
  HostTensor norm_w = random_e(e, k, -0.5f, 0.5f, rng);
  std::vector<float> x(n * k);
  std::uniform_real_distribution<float> d(-2, 2);
  for (auto& v : x) v = d(rng);
  // Token j belongs to sequence (j * 2 + 1) % seqs at a ragged position; tables [max_seq][half].
  std::vector<int32_t> seq_of(n), pos(n), seq_lens(size_t(seqs), 0);
  for (size_t j = 0; j < n; ++j) {
    seq_of[j] = int32_t((j * 2 + 1) % size_t(seqs));
    pos[j] = int32_t((j * 13 + 5) % size_t(max_seq));
    seq_lens[size_t(seq_of[j])] = pos[j] + 1;
  }
  if (c.paged && n > 1) seq_lens[size_t(seq_of[n - 1])] = pos[n - 1];  // the last token: a padding row
  std::vector<float> cosv(size_t(max_seq * half)), sinv(size_t(max_seq * half));
  for (int64_t p = 0; p < max_seq; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double th = double(p) * std::pow(10000.0, -2.0 * double(i) / double(hd));
      cosv[size_t(p * half + i)] = float(std::cos(th));
      sinv[size_t(p * half + i)] = float(std::sin(th));
    }
  // Pages: sequence s's page q is pool page (s * pages_per_seq + q) * 7 % pool (out of order).
  const int64_t pool = seqs * pages_per_seq;
  std::vector<int32_t> table(static_cast<size_t>(pool));
  for (int64_t i = 0; i < pool; ++i) table[size_t(i)] = int32_t(i * 7 % pool);  // pool is not a multiple of 7
  ASSERT_NE(pool % 7, 0);
  auto cache_off = [&](int64_t s, int64_t h, int64_t p) -> int64_t {
    if (!c.paged) return ((s * KV + h) * max_seq + p) * hd;
    if (p >= seq_lens[size_t(s)]) return -1;
    return ((table[size_t(s * pages_per_seq + p / page)] * KV + h) * page + p % page) * hd;
  };
  const size_t cache_elems = size_t(c.paged ? pool * KV * page * hd : seqs * KV * max_seq * hd);

  // Reference.
  std::vector<double> yref(n * m);
  std::vector<double> kref(cache_elems, NAN), vref(cache_elems, NAN);
  for (size_t j = 0; j < n; ++j) {
    double ss = 0;
    for (size_t i = 0; i < k; ++i) ss += double(x[j * k + i]) * x[j * k + i];
    const float inv = float(1.0 / std::sqrt(ss / double(k) + 1e-6));
    std::vector<double> b(k);
    for (size_t i = 0; i < k; ++i) b[i] = round_e(e, x[j * k + i] * inv * (1.0f + norm_w.v[i]));
    std::vector<double> y(m);
    for (size_t r = 0; r < m; ++r) {
      double s = 0;
      for (size_t i = 0; i < k; ++i) s += double(w.v[r * k + i]) * b[i];
      y[r] = round_e(e, float(s));
    }
    for (int64_t h = 0; h < H + 2 * KV; ++h) {
      for (int64_t i = 0; i < half; ++i) {
        const size_t r0 = size_t(h * hd + i), r1 = r0 + size_t(half);
        double o0 = y[r0], o1 = y[r1];
        if (h < H + KV) {
          const double cs = cosv[size_t(pos[j] * half + i)], sn = sinv[size_t(pos[j] * half + i)];
          o0 = y[r0] * cs - y[r1] * sn;
          o1 = y[r1] * cs + y[r0] * sn;
        }
        yref[j * m + r0] = o0;
        yref[j * m + r1] = o1;
        if (h >= H) {
          const bool is_k = h < H + KV;
          const int64_t off = cache_off(seq_of[j], h - H - (is_k ? 0 : KV), pos[j]);
          if (off >= 0) {
            auto& dst = is_k ? kref : vref;
            dst[size_t(off + i)] = o0;
            dst[size_t(off + i + half)] = o1;
          }
        }
      }
    }
  }

  constexpr size_t kGuard = 64;
  Dev dw(m * k * es), dx(n * k * 4), dnorm(k * es), dy(n * m * es, kGuard);
  Dev dkc(cache_elems * es, kGuard), dvc(cache_elems * es, kGuard);
  Dev dseq(n * 4), dpos(n * 4), dlens(size_t(seqs) * 4), dtable(size_t(pool) * 4), dcos(cosv.size() * 4),
      dsin(sinv.size() * 4);
  dw.put(w.bytes().data(), m * k * es);
  dx.put(x.data(), n * k * 4);
  dnorm.put(norm_w.bytes().data(), k * es);
  dseq.put(seq_of.data(), n * 4);
  dpos.put(pos.data(), n * 4);
  dlens.put(seq_lens.data(), size_t(seqs) * 4);
  dtable.put(table.data(), size_t(pool) * 4);
  dcos.put(cosv.data(), cosv.size() * 4);
  dsin.put(sinv.data(), sinv.size() * 4);

  FusedGemvArgs a;
  a.e = e;
  a.in_kind = GemvIn::kNorm;
  a.out_kind = GemvOut::kRope;
  a.w = dw.p;
  a.m = int64_t(m);
  a.k = c.k;
  a.n = c.n;
  a.x = static_cast<const float*>(dx.p);
  a.norm_w = dnorm.p;
  a.eps = 1e-6f;
  a.add_one = true;
  a.y = dy.p;
  a.pdl = c.n == 3;
  GemvRope& r = a.rope;
  r.n_heads = H;
  r.n_kv_heads = KV;
  r.head_dim = hd;
  r.seqs = static_cast<const int32_t*>(dseq.p);
  r.positions = static_cast<const int32_t*>(dpos.p);
  r.cos = static_cast<const float*>(dcos.p);
  r.sin = static_cast<const float*>(dsin.p);
  r.k_cache = dkc.p;
  r.v_cache = dvc.p;
  if (c.paged) {
    r.block_table = static_cast<const int32_t*>(dtable.p);
    r.page_size = page;
    r.pages_per_seq = pages_per_seq;
    r.seq_lens = static_cast<const int32_t*>(dlens.p);
  } else {
    r.max_seq = max_seq;
  }
  ASSERT_EQ(fused_gemv_unsupported(a, c.shape), nullptr);
  ASSERT_EQ(fused_gemv(a, c.shape, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  const double tol = e == Elem::kF32 ? 1e-5 : 1.5e-2;
  EXPECT_LT(rel_err(as_floats(e, dy.get(n * m * es)), yref), tol) << "y";
  for (int kv = 0; kv < 2; ++kv) {
    const Dev& dc = kv ? dvc : dkc;
    const std::vector<double>& want = kv ? vref : kref;
    auto raw = dc.get(cache_elems * es + kGuard);
    for (size_t i = cache_elems * es; i < raw.size(); ++i) ASSERT_EQ(raw[i], 0xff) << "wrote past the cache";
    raw.resize(cache_elems * es);
    const auto got = as_floats(e, raw);
    std::vector<float> got_written;
    std::vector<double> want_written;
    for (size_t i = 0; i < cache_elems; ++i) {
      if (std::isnan(want[i])) {
        ASSERT_TRUE(std::isnan(got[i])) << (kv ? "v" : "k") << " cache element " << i << " written, not a token's slot";
      } else {
        got_written.push_back(got[i]);
        want_written.push_back(want[i]);
      }
    }
    ASSERT_FALSE(want_written.empty());
    EXPECT_LT(rel_err(got_written, want_written), tol) << (kv ? "v" : "k") << " cache";
  }

  // Bit for bit: kStore's y (one row per unit, the same k split: each row's sum is the same),
  // rotated on the host as rope_rotate rotates (each product and difference rounded to fp32, no
  // FMA), rounded to E: what the engine's qkv projection followed by its rope_store kernel
  // stores. An FMA contracted differently in either kernel shows here as one ulp in fp32.
  Dev dplain(n * m * es);
  FusedGemvArgs plain = a;
  plain.out_kind = GemvOut::kStore;
  plain.y = dplain.p;
  plain.rope = GemvRope{};
  const FusedGemvShape row_shape{1, c.shape.k_split};
  ASSERT_EQ(fused_gemv_unsupported(plain, row_shape), nullptr);
  ASSERT_EQ(fused_gemv(plain, row_shape, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> yp = as_floats(e, dplain.get(n * m * es));
  auto rounded = [](float f) {  // a product or a sum rounded to fp32, never fused with the next
    volatile float v = f;
    return float(v);
  };
  std::vector<float> want_y(n * m), want_k(cache_elems, NAN), want_v(cache_elems, NAN);
  for (size_t j = 0; j < n; ++j) {
    for (int64_t h = 0; h < H + 2 * KV; ++h) {
      for (int64_t i = 0; i < half; ++i) {
        const size_t r0 = j * m + size_t(h * hd + i), r1 = r0 + size_t(half);
        float o0 = yp[r0], o1 = yp[r1];
        if (h < H + KV) {
          const float cs = cosv[size_t(pos[j] * half + i)], sn = sinv[size_t(pos[j] * half + i)];
          o0 = round_e(e, rounded(rounded(yp[r0] * cs) - rounded(yp[r1] * sn)));
          o1 = round_e(e, rounded(rounded(yp[r1] * cs) + rounded(yp[r0] * sn)));
        }
        want_y[r0] = o0;
        want_y[r1] = o1;
        if (h >= H) {
          const bool is_k = h < H + KV;
          const int64_t off = cache_off(seq_of[j], h - H - (is_k ? 0 : KV), pos[j]);
          if (off >= 0) {
            auto& dst = is_k ? want_k : want_v;
            dst[size_t(off + i)] = o0;
            dst[size_t(off + i + half)] = o1;
          }
        }
      }
    }
  }
  auto same_bits = [](const std::vector<float>& got, const std::vector<float>& want, const char* what) {
    size_t differ = 0, first = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::isnan(want[i]) || std::memcmp(&got[i], &want[i], 4) == 0) continue;
      if (differ++ == 0) first = i;
    }
    EXPECT_EQ(differ, 0u) << what << ": " << differ << " elements differ from kStore + rope_rotate, the first " << first
                          << ": " << got[first] << " vs " << want[first];
  };
  same_bits(as_floats(e, dy.get(n * m * es)), want_y, "y");
  same_bits(as_floats(e, dkc.get(cache_elems * es)), want_k, "k cache");
  same_bits(as_floats(e, dvc.get(cache_elems * es)), want_v, "v cache");
}

TEST(FusedGemv, RopeEpilogueAgainstTheFp64Reference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  std::mt19937 rng(77);
  const FusedGemvShape* shapes = nullptr;
  const int count = fused_gemv_shapes(GemvOut::kRope, &shapes);
  for (Elem e : {Elem::kBF16, Elem::kF32}) {
    const int64_t vec = e == Elem::kF32 ? 4 : 8;
    for (int s = 0; s < count; ++s) {
      for (int n : {1, 3, 8}) {
        for (bool paged : {false, true}) {
          // Odd head counts, GQA and MQA, a head_dim whose half is odd, k not a chunk's multiple.
          check_rope({e, 3, 1, 10, 9 * vec, n, paged, shapes[s]}, rng);
          check_rope({e, 4, 2, 64, 65 * vec, n, paged, shapes[s]}, rng);
        }
      }
    }
  }
  check_rope({Elem::kBF16, 8, 1, 256, 2048, 1, false, {2, 1}}, rng);  // Gemma-2B's qkv
  check_rope({Elem::kBF16, 8, 1, 256, 2048, 2, true, {2, 1}}, rng);
}

TEST(FusedGemv, EveryShapeAgainstTheFp64Reference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  std::mt19937 rng(1234);
  for (Elem e : {Elem::kBF16, Elem::kF32}) {
    const int64_t vec = e == Elem::kF32 ? 4 : 8;
    for (GemvOut out :
         {GemvOut::kStore, GemvOut::kAddResidual, GemvOut::kGated, GemvOut::kArgmax, GemvOut::kStoreF32}) {
      const FusedGemvShape* shapes = nullptr;
      const int count = fused_gemv_shapes(out, &shapes);
      for (int s = 0; s < count; ++s) {
        // Odd m (gated: even, odd half), k a multiple of 16 bytes but not of a chunk.
        for (auto [m, k] : {std::pair<int64_t, int64_t>{37, 9 * vec}, {302, 65 * vec}, {1030, 2048}}) {
          if (out == GemvOut::kGated && m % 2) m += 1;
          for (int n : {1, 3, 8}) check_case({e, out, m, k, n, shapes[s]}, rng);
        }
      }
    }
  }
}

// A large k (Gemma's down projection: k = 16384) and a long row count in one shape each.
TEST(FusedGemv, LongRowsAndManyRows) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  std::mt19937 rng(99);
  check_case({Elem::kBF16, GemvOut::kAddResidual, 301, 16384, 1, {1, 8}}, rng);
  check_case({Elem::kBF16, GemvOut::kAddResidual, 301, 16384, 2, {2, 1}}, rng);
  check_case({Elem::kBF16, GemvOut::kArgmax, 40001, 256, 2, {2, 1}}, rng);
  check_case({Elem::kBF16, GemvOut::kGated, 2 * 3001, 512, 1, {4, 2}}, rng);
}

// What the kernels cannot run is refused with a reason, never launched (no GPU needed).
TEST(FusedGemv, SupportRules) {
  FusedGemvArgs a;
  alignas(16) static float buf[64];
  a.e = Elem::kBF16;
  a.in_kind = GemvIn::kNorm;
  a.out_kind = GemvOut::kStore;
  a.w = a.norm_w = a.y = buf;
  a.x = buf;
  a.m = 10;
  a.k = 64;
  a.n = 1;
  const FusedGemvShape ok{2, 1};
  EXPECT_EQ(fused_gemv_unsupported(a, ok), nullptr);
  FusedGemvArgs b = a;
  b.k = 60;  // 120 bytes: not a multiple of 16
  EXPECT_NE(fused_gemv_unsupported(b, ok), nullptr);
  b = a;
  b.n = 9;
  EXPECT_NE(fused_gemv_unsupported(b, ok), nullptr);
  b = a;
  b.w = reinterpret_cast<const char*>(buf) + 2;
  EXPECT_NE(fused_gemv_unsupported(b, ok), nullptr);
  EXPECT_NE(fused_gemv_unsupported(a, {3, 1}), nullptr) << "a shape not offered";
  b = a;
  b.in_kind = GemvIn::kInput;  // store takes a normalised input
  EXPECT_NE(fused_gemv_unsupported(b, ok), nullptr);
  b = a;
  b.out_kind = GemvOut::kGated;
  b.m = 11;  // gated rows pair up
  EXPECT_NE(fused_gemv_unsupported(b, ok), nullptr);
  b = a;
  b.out_kind = GemvOut::kArgmax;  // no ids, keys, counter
  EXPECT_NE(fused_gemv_unsupported(b, ok), nullptr);
  b = a;
  b.n = 8;
  b.k = 16384;  // 8 x 16384 bf16 = 256 KiB of shared memory
  EXPECT_NE(fused_gemv_unsupported(b, ok), nullptr);
  EXPECT_EQ(fused_gemv(b, ok, nullptr), cudaErrorInvalidValue);
  // kRope: m must be the qkv width of the heads, and every table and cache set.
  int32_t ints[4] = {};
  b = a;
  b.out_kind = GemvOut::kRope;
  b.m = (2 + 2 * 1) * 4;  // 2 q heads, 1 kv head, head_dim 4
  b.rope.n_heads = 2;
  b.rope.n_kv_heads = 1;
  b.rope.head_dim = 4;
  b.rope.seqs = b.rope.positions = ints;
  b.rope.cos = b.rope.sin = buf;
  b.rope.k_cache = b.rope.v_cache = buf;
  b.rope.max_seq = 4;
  EXPECT_EQ(fused_gemv_unsupported(b, ok), nullptr);
  EXPECT_NE(fused_gemv_unsupported(b, {1, 1}), nullptr) << "rope pairs rows";
  FusedGemvArgs r = b;
  r.m += 4;
  EXPECT_NE(fused_gemv_unsupported(r, ok), nullptr) << "m not the heads' width";
  r = b;
  r.rope.head_dim = 3;
  r.m = 12;
  EXPECT_NE(fused_gemv_unsupported(r, ok), nullptr) << "odd head_dim";
  r = b;
  r.rope.v_cache = nullptr;
  EXPECT_NE(fused_gemv_unsupported(r, ok), nullptr) << "no v cache";
  r = b;
  r.rope.block_table = ints;  // paged without seq_lens and page geometry
  EXPECT_NE(fused_gemv_unsupported(r, ok), nullptr) << "paged geometry missing";
  r = b;
  r.in_kind = GemvIn::kInput;
  r.input = buf;
  EXPECT_NE(fused_gemv_unsupported(r, ok), nullptr) << "rope takes the normalised input";
}

}  // namespace
}  // namespace tunableop::cuda
