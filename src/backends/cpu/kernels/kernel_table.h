// The contract between the ISA-independent drivers (blocked_gemm.cc, skinny_gemm.cc) and the
// kernels of one instruction set (isa_*.cc). README.md explains the layouts in prose.
#pragma once

#include <cstdint>
#include <type_traits>

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

// Packs a rows x k block of op(X) into slivers of the micro-kernel's width W (mr for A, nr for
// B): element (r, l) of the block is src[r + l*ld] when r_contiguous, else src[l + r*ld]; sliver
// s (rows [s*W, s*W + W)) starts at out + s*W*k and holds (r, l) at l*W + (r - s*W); rows past
// `rows` are zero. Converts bf16/fp16 to fp32 on the way.
template <class Tin, class Acc>
using PackFn = void (*)(const Tin* src, int64_t ld, bool r_contiguous, int64_t rows, int64_t k, Acc* out);

// Skinny (small n) products in the accumulation type Acc: y(i, j) = sum_l op(A)(i, l) * x(l, j)
// for i < m, j < n, with x(l, j) = x[l + j*ldx] and y(i, j) = y[i + j*ldy]; y is overwritten.
// `dot` reads A stored transposed (op(A)(i, l) = a[l + i*lda], one contiguous row of op(A) per
// output); `axpy` reads A as stored (a[i + l*lda], contiguous columns).
template <class Tin, class Acc>
using SkinnyFn = void (*)(int64_t m, int64_t n, int64_t k, const Tin* a, int64_t lda, const Acc* x, int64_t ldx, Acc* y,
                          int64_t ldy);

// What an ISA provides for one input dtype. Acc is fp64 for fp64 and fp32 otherwise, so the bf16
// and fp16 entries reuse the fp32 micro-kernel and differ only where inputs are read raw.
template <class Tin>
struct TypeKernels {
  using Acc = std::conditional_t<std::is_same_v<Tin, double>, double, float>;
  MicroKernel<Acc> uk;
  PackFn<Tin, Acc> pack_a = nullptr;  // slivers of uk.mr
  PackFn<Tin, Acc> pack_b = nullptr;  // slivers of uk.nr
  SkinnyFn<Tin, Acc> skinny_dot = nullptr;
  SkinnyFn<Tin, Acc> skinny_axpy = nullptr;
};

// Everything one instruction set provides.
struct IsaKernels {
  Isa isa = Isa::kPortable;
  TypeKernels<float> for_f32;
  TypeKernels<double> for_f64;
  TypeKernels<bf16> for_bf16;
  TypeKernels<fp16> for_fp16;

  template <class Tin>
  const TypeKernels<Tin>& get() const {
    if constexpr (std::is_same_v<Tin, float>) return for_f32;
    if constexpr (std::is_same_v<Tin, double>) return for_f64;
    if constexpr (std::is_same_v<Tin, tunableop::bf16>) return for_bf16;
    if constexpr (std::is_same_v<Tin, tunableop::fp16>) return for_fp16;
  }
};

const IsaKernels& portable_kernels();
#if defined(TUNABLEOP_CPU_KERNELS_X86)
const IsaKernels& avx2_kernels();    // call only when isa_available(Isa::kAvx2)
const IsaKernels& avx512_kernels();  // call only when isa_available(Isa::kAvx512)
#endif
// The table for `isa`, or nullptr when it was not built or the CPU lacks it.
const IsaKernels* kernels_for(Isa isa);

}  // namespace tunableop::cpu_kernels
