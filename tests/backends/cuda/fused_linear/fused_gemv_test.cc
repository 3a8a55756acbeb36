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
  }
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
}

}  // namespace
}  // namespace tunableop::cuda
