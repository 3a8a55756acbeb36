// The gemv family as candidates: support rules, names and the launch through gemv_launch.h
// (host C++ only; the kernels are in gemv_*.cu).
#include "backends/cuda/kernels/gemv.h"

#include <fmt/format.h>

#include "backends/cuda/common/cuda_util.h"
#include "backends/cuda/kernels/gemv_launch.h"

namespace tunableop::cuda {

namespace {

// Default-effort variants first (effort 0 gets these): the regimes of decode GEMMs.
const GemvShape kShapes[] = {
    {2, 2},               // many rows, moderate k
    {1, 8},               // few rows, long k (Gemma down: 2048 x 16384)
    {4, 1},               // many rows, short k: B loads shared by 4 rows
    {16, 4, true},        // 2..16 tokens: tensor cores
    {16, 4, true, true},  // the same with programmatic dependent launch
    {4, 4, false, true},  // small, latency-bound layers
    {1, 1},
    {1, 2},
    {1, 4},
    {2, 1},
    {2, 4},
    {2, 8},
    {4, 2},
    {4, 4},
    {4, 8},
    {16, 1, true},
    {16, 2, true},
    {16, 8, true},
    {2, 2, false, true},
    {1, 8, false, true},
    {4, 1, false, true},
    {1, 4, false, true},
    {2, 4, false, true},
    {4, 8, false, true},
    {16, 2, true, true},
    {16, 8, true, true},
    {16, 16, true},
    {16, 16, true, true},
};
constexpr int kEffort0Shapes = 6;

bool pdl_capable() {
  auto info = current_device_info();
  return info.is_ok() && info->cc_major >= 9;
}

}  // namespace

std::string gemv_name(DType dtype, const GemvShape& s) {
  std::string rows = s.mma ? "mma" : fmt::format("r{}", s.rows);
  return fmt::format("Gemv_{}_{}_sk{}{}", dtype_name(dtype), rows, s.k_split, s.pdl ? "_pdl" : "");
}

Status gemv_supports(const GemvShape& s, const GemmParams& p) {
  if (p.widens()) return Status::unsupported("gemv: C in the inputs' dtype only");
  if (p.dtype != DType::kF32 && p.dtype != DType::kBF16 && p.dtype != DType::kF16) {
    return Status::unsupported("gemv: fp32, bf16 and fp16 only");
  }
  if (s.mma && p.dtype == DType::kF32) return Status::unsupported("gemv mma: bf16 and fp16 only");
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
  if (s.pdl && !pdl_capable()) return Status::unsupported("gemv pdl: needs compute capability 9.0 or newer");
  return Status::ok();
}

Status gemv_run(const GemvShape& s, const GemmParams& p, const GemmOperands& o) {
  TUNABLEOP_RETURN_IF_ERROR(gemv_supports(s, p));
  if (!aligned16(o.a) || !aligned16(o.b)) return Status::unsupported("gemv: A and B must be 16-byte aligned");
  GemvLaunch l;
  l.rows = s.rows;
  l.k_split = s.k_split;
  l.mma = s.mma ? 1 : 0;
  l.pdl = s.pdl ? 1 : 0;
  l.a = o.a;
  l.b = o.b;
  l.c = o.c;
  l.m = int(p.m);
  l.n = int(p.n);
  l.k = p.k;
  l.lda = p.lda;
  l.ldb = p.ldb;
  l.ldc = p.ldc;
  l.stride_a = p.stride_a;
  l.stride_b = p.stride_b;
  l.stride_c = p.stride_c;
  l.batch = p.batch;
  l.alpha = float(p.alpha);
  l.beta = float(p.beta);
  auto stream = static_cast<cudaStream_t>(o.stream);
  cudaError_t e = p.dtype == DType::kF32    ? gemv_launch_f32(l, stream)
                  : p.dtype == DType::kBF16 ? gemv_launch_bf16(l, stream)
                                            : gemv_launch_f16(l, stream);
  return cuda_status(e, "gemv kernel launch");
}

std::vector<GemmCandidate> make_gemv_candidates() {
  std::vector<GemmCandidate> out;
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32}) {
    int i = 0;
    for (const GemvShape& s : kShapes) {
      const bool effort0 = i++ < kEffort0Shapes;
      if (s.mma && dt == DType::kF32) continue;
      GemmCandidate c;
      c.name = gemv_name(dt, s);
      c.device = DeviceKind::kCuda;
      c.min_effort = effort0 ? 0 : 1;
      c.supports = [s, dt](const GemmParams& p) -> Status {
        if (p.dtype != dt) return Status::unsupported(fmt::format("gemv: built for {}", dtype_name(dt)));
        return gemv_supports(s, p);
      };
      c.run = [s](const GemmParams& p, const GemmOperands& o) { return gemv_run(s, p, o); };
      c.info = {"tunableop", s.mma ? "gemv mma" : "gemv", {}};
      c.info.add("dtype", dtype_name(dt))
          .add("rows", std::to_string(s.rows))
          .add("k_split", std::to_string(s.k_split))
          .add("pdl", s.pdl ? "1" : "0");
      out.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace tunableop::cuda
