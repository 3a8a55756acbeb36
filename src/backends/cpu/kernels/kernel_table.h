// The contract between the ISA-independent drivers (blocked_gemm.cc, skinny_gemm.cc) and the
// kernels of one instruction set (isa_*.cc). README.md explains the layouts in prose.
#pragma once

#include <cstdint>

#include "backends/cpu/kernels/cpu_features.h"
#include "tunableop/half.h"

namespace tunableop::cpu_kernels {

// One register tile: C[0:mr, 0:nr] = alpha * sum_p a[p*mr + i] * b[p*nr + j] + beta * C, with
// c(i, j) at c[i + j*ldc]. `a` and `b` are packed slivers (zero-padded, 64-byte aligned); beta
// == 0 must not read C. The driver only passes full tiles; it routes edge tiles through a
// scratch tile of its own.
template <class T>
using MicroKernelFn = void (*)(int64_t kc, const T* a, const T* b, T* c, int64_t ldc, T alpha, T beta);

template <class T>
struct MicroKernel {
  int mr = 0;
  int nr = 0;
  MicroKernelFn<T> fn = nullptr;
};

// Skinny (small n) products in the accumulation type Acc: y(i, j) = sum_l op(A)(i, l) * x(l, j)
// for i < m, j < n, with x(l, j) = x[l + j*ldx] and y(i, j) = y[i + j*ldy]; y is overwritten.
// `dot` reads A stored transposed (op(A)(i, l) = a[l + i*lda], one contiguous row of op(A) per
// output); `axpy` reads A as stored (a[i + l*lda], contiguous columns).
template <class Tin, class Acc>
using SkinnyFn = void (*)(int64_t m, int64_t n, int64_t k, const Tin* a, int64_t lda, const Acc* x, int64_t ldx, Acc* y,
                          int64_t ldy);

template <class Tin, class Acc>
struct SkinnyPair {
  SkinnyFn<Tin, Acc> dot = nullptr;
  SkinnyFn<Tin, Acc> axpy = nullptr;
};

// Everything one instruction set provides. bf16 and fp16 inputs use the fp32 micro-kernel (the
// driver converts while packing), so only the skinny path sees them raw.
struct IsaKernels {
  Isa isa = Isa::kPortable;
  MicroKernel<float> f32;
  MicroKernel<double> f64;
  SkinnyPair<float, float> skinny_f32;
  SkinnyPair<double, double> skinny_f64;
  SkinnyPair<bf16, float> skinny_bf16;
  SkinnyPair<fp16, float> skinny_fp16;
};

const IsaKernels& portable_kernels();
#if defined(TUNABLEOP_CPU_KERNELS_X86)
const IsaKernels& avx2_kernels();    // call only when isa_available(Isa::kAvx2)
const IsaKernels& avx512_kernels();  // call only when isa_available(Isa::kAvx512)
#endif
// The table for `isa`, or nullptr when it was not built or the CPU lacks it.
const IsaKernels* kernels_for(Isa isa);

}  // namespace tunableop::cpu_kernels
