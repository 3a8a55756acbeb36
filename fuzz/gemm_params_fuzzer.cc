// Fuzzes GEMM parameter validation with real runs: parameters are drawn from the input (sizes
// small or anywhere in int64, so products overflow), validated, and when valid and small run
// through every CPU candidate on buffers of exactly the validated span (the bytes around them
// poisoned for ASan), then compared with the fp64 reference; elements outside the m x n
// matrices (ld and stride gaps) must keep their values. This is the class of the issue's
// `--ldc 2^62` heap corruption: a wrapped span sizing a buffer that a kernel writes past.
#include <fuzzer/FuzzedDataProvider.h>
#include <sanitizer/asan_interface.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fuzz_util.h"
#include "ops/gemm/dispatch.h"
#include "ops/gemm/reference.h"
#include "tunableop/checked_size.h"
#include "tunableop/context.h"
#include "tunableop/gemm.h"
#include "tunableop/gemm_and_bias.h"

using namespace tunableop;

namespace {

constexpr int64_t kMaxRunElements = 1 << 14;  // per operand: keeps an execution fast

// A buffer of exactly `bytes`, 64-byte aligned, with everything after it (to the next 64) and a
// guard before it poisoned: an access one byte out is an ASan report.
class ExactBuffer {
 public:
  explicit ExactBuffer(size_t bytes) : bytes_(bytes) {
    total_ = 64 + (bytes + 63) / 64 * 64 + 64;
    base_ = static_cast<uint8_t*>(std::aligned_alloc(64, total_));
    ASAN_POISON_MEMORY_REGION(base_, 64);
    ASAN_POISON_MEMORY_REGION(base_ + 64 + bytes_, total_ - 64 - bytes_);
  }
  ~ExactBuffer() {
    ASAN_UNPOISON_MEMORY_REGION(base_, total_);
    std::free(base_);
  }
  uint8_t* data() { return base_ + 64; }

 private:
  size_t bytes_, total_;
  uint8_t* base_;
};

int64_t draw_size(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: return in.ConsumeIntegralInRange<int64_t>(0, 9);
    case 1: return in.ConsumeIntegralInRange<int64_t>(0, 40);
    case 2: return int64_t(1) << in.ConsumeIntegralInRange<int>(0, 62);
    default: return in.ConsumeIntegral<int64_t>();
  }
}

char draw_trans(FuzzedDataProvider& in) {
  static const char kLetters[] = {'N', 'T', 'n', 't', 'C', 'X'};
  return kLetters[in.ConsumeIntegralInRange<int>(0, 5)];
}

Context& cpu_context() {
  static Context* ctx = [] {
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    auto* c = new Context(Device::cpu());
    (void)c->config().set(Setting::kEnabled, false);
    return c;
  }();
  return *ctx;
}

void run_every_candidate(const GemmParams& p, uint64_t seed) {
  const size_t es = dtype_size(p.dtype);
  const int64_t spans[3] = {p.a_span(), p.b_span(), p.c_span()};
  ExactBuffer a(size_t(spans[0]) * es), b(size_t(spans[1]) * es), c(size_t(spans[2]) * es);
  std::vector<uint8_t> c_init(size_t(spans[2]) * es);
  uint64_t x = seed | 1;
  auto next = [&] {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return double(x % 2001) / 1000.0 - 1.0;
  };
  for (int64_t i = 0; i < spans[0]; ++i) store_from_double(p.dtype, a.data(), i, next());
  for (int64_t i = 0; i < spans[1]; ++i) store_from_double(p.dtype, b.data(), i, next());
  // beta == 0 must not read C: NaN there; every element starts distinct so gap writes show.
  for (int64_t i = 0; i < spans[2]; ++i) store_from_double(p.dtype, c_init.data(), i, p.beta == 0 ? NAN : next());
  // Drawn scalars and tiny shapes cancel (alpha AB + beta C near 0): errors are measured against
  // the terms' scale as well as the result's.
  std::vector<double> scale;
  const std::vector<double> ref = gemm_reference_f64(p, a.data(), b.data(), c_init.data(), &scale);
  const double tol = gemm_tolerance(p);
  std::vector<bool> written(size_t(spans[2]), false);
  for (int64_t bi = 0; bi < p.batch; ++bi)
    for (int64_t j = 0; j < p.n; ++j)
      for (int64_t i = 0; i < p.m; ++i) written[size_t(bi * p.stride_c + j * p.ldc + i)] = true;
  Context& ctx = cpu_context();
  for (const GemmCandidate& cand : gemm_candidates_for(ctx, p, 2)) {
    if (!cand.supports(p).is_ok()) continue;
    if (!c_init.empty()) std::memcpy(c.data(), c_init.data(), c_init.size());
    std::vector<uint8_t> ws(cand.workspace_bytes ? cand.workspace_bytes(p) : 0);
    GemmOperands ops{a.data(), b.data(), c.data(), nullptr, ws.empty() ? nullptr : ws.data(), ws.size()};
    Status st = cand.run(p, ops);
    if (!st.is_ok()) continue;  // unsupported at run time (alignment, ...) is a normal answer
    const double err = relative_error(p, c.data(), ref, scale);
    FUZZ_CHECK(err <= tol, "%s on %s alpha %g beta %g batch %lld: relative error %g > %g", cand.name.c_str(),
               gemm_params_signature(p).c_str(), p.alpha, p.beta, (long long)p.batch, err, tol);
    // Gaps: every element of C outside the m x n matrices keeps its bytes.
    for (int64_t e = 0; e < spans[2]; ++e) {
      if (!written[size_t(e)])
        FUZZ_CHECK(std::memcmp(c.data() + e * int64_t(es), c_init.data() + e * int64_t(es), es) == 0,
                   "%s wrote element %lld of C, outside the m x n matrices", cand.name.c_str(), (long long)e);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  GemmParams p;
  p.dtype = DType(in.ConsumeIntegralInRange<int>(0, 3));
  p.transa = draw_trans(in);
  p.transb = draw_trans(in);
  p.m = draw_size(in), p.n = draw_size(in), p.k = draw_size(in);
  // ld and strides: 0 (dense) often, otherwise anything.
  for (int64_t* v : {&p.lda, &p.ldb, &p.ldc}) *v = in.ConsumeBool() ? 0 : draw_size(in);
  p.batch = in.ConsumeBool() ? 1 : draw_size(in);
  for (int64_t* v : {&p.stride_a, &p.stride_b, &p.stride_c}) *v = in.ConsumeBool() ? 0 : draw_size(in);
  static const double kScalars[] = {0.0, 1.0, -1.0, 0.5, 2.0};
  p.alpha = kScalars[in.ConsumeIntegralInRange<int>(0, 4)];
  p.beta = kScalars[in.ConsumeIntegralInRange<int>(0, 4)];
  const uint64_t seed = in.ConsumeIntegral<uint64_t>();

  GemmAndBiasParams gb{p, Activation(in.ConsumeIntegralInRange<int>(0, 3))};
  (void)gb.with_defaults().validate();  // must not crash for any input

  const GemmParams q = p.with_defaults();
  if (!q.validate().is_ok()) return 0;
  // Valid parameters: every span and byte count fits, so a buffer of span() elements is right.
  for (int64_t span : {q.a_span(), q.b_span(), q.c_span()}) {
    FUZZ_CHECK(span >= 0 && checked_bytes(span, dtype_size(q.dtype)), "validate() accepted a span that overflows");
    if (span > kMaxRunElements) return 0;
  }
  // Keep a run cheap: the spans do not bound the work. With m == 0 the fp64 reference still
  // walks batch x n x k elements of B (a batch of 16k over a B of stride 1 and n x k = 16k ran
  // past libFuzzer's timeout), and k is unbounded when m or n is 0; so every factor counts as
  // at least 1.
  auto at_least_1 = [](int64_t v) { return std::max<int64_t>(v, 1); };
  const CheckedInt work = CheckedInt(at_least_1(q.m)) * at_least_1(q.n) * at_least_1(q.k) * at_least_1(q.batch);
  if (!(work.value() <= (int64_t(1) << 20))) return 0;
  (void)gemm_params_signature(q);
  run_every_candidate(q, seed);
  return 0;
}
