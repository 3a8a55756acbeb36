// The fp8 engine's quantizing kernels (src/llm/cuda/fp8_kernels.cu) on odd sizes: the plain row
// quantizer bit for bit against the host quantizer (quantize_fp8, the same scale rule), the
// fused norm -> e4m3 and gated activation -> e4m3 against fp64 (within e4m3's rounding plus
// bf16's, which the kernels apply first), and the non-finite rows' NaN scales. Outputs start
// NaN-poisoned (0xff in e4m3) with guard bytes after them that must stay so. Skips without a GPU.
#include "llm/cuda/fp8_kernels.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/cuda_testing.h"
#include "tunableop/fp8.h"
#include "tunableop/half.h"
#include "tunableop/scaled_gemm.h"

namespace tunableop::llm::cuda {
namespace {

constexpr size_t kGuard = 16;

// Device memory holding `bytes` of `init`, plus kGuard bytes of 0xff.
class Dev {
 public:
  Dev(const void* init, size_t bytes) : bytes_(bytes) {
    std::vector<uint8_t> all(bytes + kGuard, 0xff);
    if (init) std::memcpy(all.data(), init, bytes);
    EXPECT_EQ(cudaMalloc(&p_, all.size()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p_, all.data(), all.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  explicit Dev(size_t bytes) : Dev(nullptr, bytes) {}  // poisoned
  ~Dev() { cudaFree(p_); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  void* get() const { return p_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  // The bytes; the guard must still be 0xff.
  std::vector<uint8_t> read() const {
    std::vector<uint8_t> all(bytes_ + kGuard);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(all.data(), p_, all.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = bytes_; i < all.size(); ++i) EXPECT_EQ(all[i], 0xff) << "guard byte " << i - bytes_ << " written";
    all.resize(bytes_);
    return all;
  }
  std::vector<float> floats() const {
    const std::vector<uint8_t> b = read();
    std::vector<float> f(b.size() / 4);
    std::memcpy(f.data(), b.data(), f.size() * 4);
    return f;
  }

 private:
  size_t bytes_;
  void* p_ = nullptr;
};

std::vector<uint16_t> to_bf16_bits(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = to_bf16(v[i]).bits;
  return b;
}
float bf16_round(float v) { return to_float(to_bf16(v)); }

// Magnitudes over several decades, signs mixed; rows scaled differently.
std::vector<float> random_rows(int64_t rows, int64_t width, uint64_t seed, bool bf16) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<float> mag(0.0f, 1.5f);
  std::vector<float> v(size_t(rows * width));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < width; ++i) {
      const float x = (rng() % 2 ? -1.0f : 1.0f) * mag(rng) * float(1 << (r % 5)) * 0.01f;
      v[size_t(r * width + i)] = bf16 ? bf16_round(x) : x;
    }
  return v;
}

struct Shape {
  int64_t rows, width;
};
const Shape kShapes[] = {{1, 7}, {3, 33}, {5, 4099}, {2, 16384}, {9, 1000}};

TEST(LlmCudaFp8Kernels, QuantizeRowsEqualsTheHostQuantizer) {
  TUNABLEOP_REQUIRE_GPU();
  for (const bool f32 : {true, false}) {
    for (const Shape s : kShapes) {
      SCOPED_TRACE(std::string(f32 ? "fp32" : "bf16") + " " + std::to_string(s.rows) + "x" + std::to_string(s.width));
      std::vector<float> x = random_rows(s.rows, s.width, uint64_t(s.width), !f32);
      if (s.rows > 2)
        for (int64_t i = 0; i < s.width; ++i) x[size_t(2 * s.width + i)] = 0.0f;  // a zero row: scale 1
      const std::vector<uint16_t> xb = to_bf16_bits(x);
      Dev dx(f32 ? static_cast<const void*>(x.data()) : xb.data(), x.size() * (f32 ? 4 : 2));
      Dev dq(x.size()), ds(size_t(s.rows) * 4);
      ASSERT_EQ(quantize_rows_fp8(Elem::kBF16, f32, dx.get(), s.rows, s.width, dq.as<uint8_t>(), ds.as<float>(), 0),
                cudaSuccess);
      std::vector<uint8_t> want(x.size());
      std::vector<float> want_s(static_cast<size_t>(s.rows));
      ASSERT_TRUE(quantize_fp8(DType::kF8E4M3, ScaleMode::kRowwise, s.rows, s.width, x.data(), s.width, want.data(),
                               s.width, want_s.data())
                      .is_ok());
      EXPECT_EQ(dq.read(), want);
      EXPECT_EQ(ds.floats(), want_s);
    }
  }
}

TEST(LlmCudaFp8Kernels, NonFiniteRowsGetNaNScalesAndOthersAreUntouched) {
  TUNABLEOP_REQUIRE_GPU();
  const int64_t rows = 3, width = 37;
  std::vector<float> x = random_rows(rows, width, 3, false);
  x[5] = NAN;
  x[size_t(width + 9)] = INFINITY;
  Dev dx(x.data(), x.size() * 4), dq(x.size()), ds(rows * 4);
  ASSERT_EQ(quantize_rows_fp8(Elem::kBF16, true, dx.get(), rows, width, dq.as<uint8_t>(), ds.as<float>(), 0),
            cudaSuccess);
  const std::vector<float> s = ds.floats();
  EXPECT_TRUE(std::isnan(s[0]));
  EXPECT_TRUE(std::isnan(s[1]));
  EXPECT_TRUE(std::isfinite(s[2]) && s[2] > 0);
  EXPECT_EQ(quantize_rows_fp8(Elem::kBF16, true, dx.get(), rows, 0, dq.as<uint8_t>(), ds.as<float>(), 0),
            cudaErrorInvalidValue);
}

// Each dequantized element within e4m3's rounding (2^-4 relative, 2^-10 scale absolute at the
// bottom) of the fp64 value, plus bf16's (2^-8: the kernels round to E first) with room for the
// fp32 math (rsqrtf, __expf); the scale within bf16's rounding of amax / 448.
void expect_quantized(const std::vector<double>& want, int64_t rows, int64_t width, const std::vector<uint8_t>& q,
                      const std::vector<float>& scales) {
  int bad = 0;
  for (int64_t r = 0; r < rows && bad < 5; ++r) {
    double amax = 0;
    for (int64_t i = 0; i < width; ++i) amax = std::max(amax, std::fabs(want[size_t(r * width + i)]));
    const double s = scales[size_t(r)];
    if (!(std::fabs(s - amax / 448) <= (0x1p-8 + 1e-6) * amax / 448)) {
      ++bad;
      ADD_FAILURE() << "row " << r << ": scale " << s << ", want " << amax / 448;
    }
    for (int64_t i = 0; i < width && bad < 5; ++i) {
      const double v = want[size_t(r * width + i)];
      const double got = double(to_float(fp8_e4m3{q[size_t(r * width + i)]})) * s;
      // e4m3's rounding of the bf16 value, bf16's (2^-8) and their product, twice over for slack
      const double tol = (0x1p-4 + 0x1p-7) * std::fabs(v) + 0x1p-10 * s * 1.01 + 1e-6 * amax;
      if (!(std::fabs(got - v) <= tol)) {
        ++bad;
        ADD_FAILURE() << "[" << r << "," << i << "]: " << got << ", want " << v << " (scale " << s << ")";
      }
    }
  }
}

TEST(LlmCudaFp8Kernels, RmsnormToFp8MatchesFp64) {
  TUNABLEOP_REQUIRE_GPU();
  for (const bool add_one : {false, true}) {
    for (const Shape s : kShapes) {
      SCOPED_TRACE(std::string(add_one ? "(1 + w) " : "w ") + std::to_string(s.rows) + "x" + std::to_string(s.width));
      const std::vector<float> x = random_rows(s.rows, s.width, 11, false), w = random_rows(1, s.width, 12, true);
      const std::vector<uint16_t> wb = to_bf16_bits(w);
      Dev dx(x.data(), x.size() * 4), dw(wb.data(), wb.size() * 2), dq(x.size()), ds(size_t(s.rows) * 4);
      const float eps = 1e-5f;
      ASSERT_EQ(rmsnorm_fp8(Elem::kBF16, dx.as<float>(), dw.get(), s.rows, s.width, eps, add_one, dq.as<uint8_t>(),
                            ds.as<float>(), 0),
                cudaSuccess);
      std::vector<double> want(x.size());
      for (int64_t r = 0; r < s.rows; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < s.width; ++i) ss += double(x[size_t(r * s.width + i)]) * x[size_t(r * s.width + i)];
        const double inv = 1 / std::sqrt(ss / double(s.width) + eps);
        for (int64_t i = 0; i < s.width; ++i)
          want[size_t(r * s.width + i)] =
              x[size_t(r * s.width + i)] * inv * (add_one ? 1 + w[size_t(i)] : w[size_t(i)]);
      }
      expect_quantized(want, s.rows, s.width, dq.read(), ds.floats());
    }
  }
}

double act_f64(Act a, double g) {
  if (a == Act::kSilu) return g / (1 + std::exp(-g));
  if (a == Act::kGeluTanh) return 0.5 * g * (1 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g)));
  return 0.5 * g * (1 + std::erf(g / std::sqrt(2.0)));
}

TEST(LlmCudaFp8Kernels, GatedActivationToFp8MatchesFp64) {
  TUNABLEOP_REQUIRE_GPU();
  for (const Act act : {Act::kSilu, Act::kGeluTanh, Act::kGeluErf}) {
    for (const Shape s : kShapes) {
      SCOPED_TRACE(std::to_string(int(act)) + " " + std::to_string(s.rows) + "x" + std::to_string(s.width));
      const std::vector<float> gu = random_rows(s.rows, 2 * s.width, 21, true);
      const std::vector<uint16_t> gub = to_bf16_bits(gu);
      Dev dgu(gub.data(), gub.size() * 2), dq(size_t(s.rows * s.width)), ds(size_t(s.rows) * 4);
      ASSERT_EQ(gated_activation_fp8(Elem::kBF16, dgu.get(), s.rows, s.width, act, dq.as<uint8_t>(), ds.as<float>(), 0),
                cudaSuccess);
      std::vector<double> want(size_t(s.rows * s.width));
      for (int64_t r = 0; r < s.rows; ++r)
        for (int64_t i = 0; i < s.width; ++i)
          want[size_t(r * s.width + i)] =
              act_f64(act, gu[size_t(r * 2 * s.width + i)]) * gu[size_t(r * 2 * s.width + s.width + i)];
      expect_quantized(want, s.rows, s.width, dq.read(), ds.floats());
    }
  }
}

}  // namespace
}  // namespace tunableop::llm::cuda
