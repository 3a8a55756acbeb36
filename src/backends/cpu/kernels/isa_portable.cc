// Portable kernels: plain C++ on scalars, built with the project's default flags. They run on
// any CPU (the compiler may still vectorize them for its baseline ISA) and decide which tables
// exist for kernels_for().
#include "backends/cpu/kernels/isa_table_impl.h"

namespace tunableop::cpu_kernels {
namespace {

template <class Scalar>
struct Scalar1 {
  using T = Scalar;
  using R = Scalar;
  static constexpr int kWidth = 1;
  static constexpr int kRegs = 16;
  static R zero() { return R(0); }
  static R load(const T* p) { return *p; }
  static R load(const bf16* p) { return to_float(*p); }
  static R load(const fp16* p) { return to_float(*p); }
  static R broadcast(const T* p) { return *p; }
  static R set1(T v) { return v; }
  static R fma(R a, R b, R c) { return a * b + c; }
  static R mul(R a, R b) { return a * b; }
  static R add(R a, R b) { return a + b; }
  static void store(T* p, R v) { *p = v; }
  static T reduce(R v) { return v; }
  static T scalar(T v) { return v; }
  static T scalar(bf16 v) { return to_float(v); }
  static T scalar(fp16 v) { return to_float(v); }
  static void prefetch(const void* p) { __builtin_prefetch(p); }
  static void transpose(R*) {}  // 1 x 1
};

// 8 x 4 scalar tile: 32 accumulators is more than most baseline ISAs have, but the compiler
// keeps the inner column in SIMD registers at whatever width it targets.
constexpr int kMr = 8;
constexpr int kNr = 4;

}  // namespace

const IsaKernels& portable_kernels() {
  static const IsaKernels k = [] {
    IsaKernels t;
    t.isa = Isa::kPortable;
    t.for_f32 = make_type_kernels<float, Scalar1<float>, kMr, kNr>();
    t.for_f64 = make_type_kernels<double, Scalar1<double>, kMr, kNr>();
    t.for_bf16 = make_type_kernels<bf16, Scalar1<float>, kMr, kNr>();
    t.for_fp16 = make_type_kernels<fp16, Scalar1<float>, kMr, kNr>();
    return t;
  }();
  return k;
}

const IsaKernels* kernels_for(Isa isa) {
  if (!isa_available(isa)) return nullptr;
  switch (isa) {
    case Isa::kPortable: return &portable_kernels();
#if defined(TUNABLEOP_CPU_KERNELS_X86)
    case Isa::kAvx2: return &avx2_kernels();
    case Isa::kAvx512: return &avx512_kernels();
#endif
    default: return nullptr;
  }
}

}  // namespace tunableop::cpu_kernels
