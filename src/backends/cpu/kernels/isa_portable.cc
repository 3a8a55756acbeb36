// Portable kernels: plain C++ on scalars, built with the project's default flags. They run on
// any CPU (the compiler may still vectorize them for its baseline ISA) and decide which tables
// exist for kernels_for().
#include "backends/cpu/kernels/kernel_table.h"
#include "backends/cpu/kernels/micro_kernel_impl.h"
#include "backends/cpu/kernels/skinny_impl.h"

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
    t.f32 = {kMr, kNr, &micro_kernel<Scalar1<float>, kMr, kNr>};
    t.f64 = {kMr, kNr, &micro_kernel<Scalar1<double>, kMr, kNr>};
    t.skinny_f32 = {&skinny_dot<Scalar1<float>, float>, &skinny_axpy<Scalar1<float>, float>};
    t.skinny_f64 = {&skinny_dot<Scalar1<double>, double>, &skinny_axpy<Scalar1<double>, double>};
    t.skinny_bf16 = {&skinny_dot<Scalar1<float>, bf16>, &skinny_axpy<Scalar1<float>, bf16>};
    t.skinny_fp16 = {&skinny_dot<Scalar1<float>, fp16>, &skinny_axpy<Scalar1<float>, fp16>};
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
