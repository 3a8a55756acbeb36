// The gemv family as candidates (host code only: nvcc's front end mishandles lambdas stored
// in std::function, so this lives in a .cc file).
#include <fmt/format.h>

#include "backends/cuda/kernels/gemv.h"

namespace tunableop::cuda {

namespace {

const GemvShape kShapes[] = {
    // Default-effort variants first (effort 0 gets these): the three regimes of decode GEMMs.
    {2, 2},  // many rows, moderate k
    {1, 8},  // few rows, long k (Gemma down: 2048 x 16384)
    {4, 1},  // many rows, short k: B loads shared by 4 rows
    {1, 1}, {1, 2}, {1, 4}, {2, 1}, {2, 4}, {2, 8}, {4, 2}, {4, 4}, {4, 8},
};
constexpr int kEffort0Shapes = 3;

}  // namespace

std::string gemv_name(DType dtype, GemvShape s) {
  return fmt::format("Gemv_{}_r{}_sk{}", dtype_name(dtype), s.rows, s.k_split);
}

Status gemv_supports(const GemvShape& s, const GemmParams& p) {
  if (p.dtype != DType::kF32 && p.dtype != DType::kBF16 && p.dtype != DType::kF16) {
    return Status::unsupported("gemv: fp32, bf16 and fp16 only");
  }
  if (p.transa != 'T' || p.transb != 'N') return Status::unsupported("gemv: TN layout only");
  if (p.n < 1 || p.n > kGemvMaxN) return Status::unsupported(fmt::format("gemv: n must be 1..{}", kGemvMaxN));
  if (p.m < 1 || p.m > (int64_t(1) << 30)) return Status::unsupported("gemv: m out of range");
  if (p.batch > 65535) return Status::unsupported("gemv: batch > 65535");
  const int64_t vec = 16 / int64_t(dtype_size(p.dtype));
  if (p.lda % vec || p.ldb % vec) {
    return Status::unsupported(fmt::format("gemv: lda and ldb must be multiples of {} elements (16 bytes)", vec));
  }
  if (p.batch > 1 && (p.stride_a % vec || p.stride_b % vec)) {
    return Status::unsupported("gemv: batch strides of A and B must be multiples of 16 bytes");
  }
  return Status::ok();
}

std::vector<GemmCandidate> make_gemv_candidates() {
  std::vector<GemmCandidate> out;
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    int i = 0;
    for (const GemvShape& s : kShapes) {
      GemmCandidate c;
      c.name = gemv_name(dt, s);
      c.device = DeviceKind::kCuda;
      c.min_effort = i++ < kEffort0Shapes ? 0 : 1;
      c.supports = [s, dt](const GemmParams& p) -> Status {
        if (p.dtype != dt) return Status::unsupported(fmt::format("gemv: built for {}", dtype_name(dt)));
        return gemv_supports(s, p);
      };
      c.run = [s](const GemmParams& p, const GemmOperands& o) { return gemv_run(s, p, o); };
      out.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace tunableop::cuda
