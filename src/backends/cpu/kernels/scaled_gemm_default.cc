// ScaledGemm on the CPU. No CPU has fp8 arithmetic, and every fp8 value is exactly an fp32
// value, so "Default" widens A and B to fp32 (a table lookup per element), runs the CPU GEMM
// Default on them into an fp32 C, and applies the scales, the bias and the one rounding to the
// output type in a single pass: the accumulation is the fp32 GEMM's, the rest as on a GPU
// (scale the fp32 sum, add the bias, round once).
#include <fmt/format.h>

#include <array>
#include <vector>

#include "backends/cpu/kernels/register.h"
#include "tunableop/checked_size.h"
#include "tunableop/fp8.h"
#include "tunableop/gemm.h"
#include "tunableop/op_tools.h"
#include "tunableop/scaled_gemm.h"

namespace tunableop {

namespace {

std::array<float, 256> widen_table(DType t) {
  std::array<float, 256> v{};
  for (int b = 0; b < 256; ++b)
    v[size_t(b)] = t == DType::kF8E4M3 ? to_float(fp8_e4m3{uint8_t(b)}) : to_float(fp8_e5m2{uint8_t(b)});
  return v;
}

std::vector<float> widen(DType t, const void* src, int64_t count) {
  const std::array<float, 256> table = widen_table(t);
  const auto* in = static_cast<const uint8_t*>(src);
  std::vector<float> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out[size_t(i)] = table[in[i]];
  return out;
}

}  // namespace

void register_cpu_scaled_gemm(Registry& r) {
  const GemmCandidate* gemm_default = nullptr;
  for (const auto& c : r.list<GemmCandidate>())
    if (c.device == DeviceKind::kCpu && c.name == "Default") gemm_default = &c;
  if (!gemm_default) return;
  ScaledGemmCandidate d;
  d.name = "Default";
  d.device = DeviceKind::kCpu;
  d.supports = [](const ScaledGemmParams& p) { return p.validate(); };
  d.workspace_bytes = [](const ScaledGemmParams&) { return size_t(0); };
  d.run = [gemm = gemm_default->run](const ScaledGemmParams& p, const ScaledGemmOperands& o) -> Status {
    // fp32 copies of A and B as stored and a dense fp32 C: 4 bytes for each of their elements.
    const CheckedInt bytes = (CheckedInt(p.a_span()) + p.b_span() + CheckedInt(p.m) * p.n) * 4;
    TUNABLEOP_RETURN_IF_ERROR(check_host_allocation(bytes, "ScaledGemm's fp32 copies of A, B and C"));
    const std::vector<float> a = widen(p.a_dtype, o.a, p.a_span());
    const std::vector<float> b = widen(p.b_dtype, o.b, p.b_span());
    std::vector<float> acc(size_t(p.m * p.n));
    GemmParams g;
    g.dtype = DType::kF32;
    g.transa = p.transa, g.transb = p.transb;
    g.m = p.m, g.n = p.n, g.k = p.k;
    g.lda = p.lda, g.ldb = p.ldb, g.ldc = p.m;
    TUNABLEOP_RETURN_IF_ERROR(gemm(g.with_defaults(), GemmOperands{a.data(), b.data(), acc.data(), o.stream}));
    const bool rowwise = p.scale_mode == ScaleMode::kRowwise;
    for (int64_t j = 0; j < p.n; ++j) {
      const float sb = o.scale_b[rowwise ? j : 0];
      for (int64_t i = 0; i < p.m; ++i) {
        float v = o.scale_a[rowwise ? i : 0] * sb * acc[size_t(i + j * p.m)];
        if (p.bias_dtype) v += float(load_as_double(*p.bias_dtype, o.bias, i));
        store_from_double(p.out_dtype, o.c, i + j * p.ldc, v);
      }
    }
    return Status::ok();
  };
  d.info = {"tunableop", "fp32 widening + default", gemm_default->info.details};
  r.list<ScaledGemmCandidate>().push_back(std::move(d));
}

}  // namespace tunableop
