// Builds one ISA's kernel table from its vector traits. Include only from an ISA translation
// unit (see micro_kernel_impl.h for why).
#pragma once

#include "backends/cpu/kernels/kernel_table.h"
#include "backends/cpu/kernels/micro_kernel_impl.h"
#include "backends/cpu/kernels/pack_impl.h"
#include "backends/cpu/kernels/skinny_impl.h"

namespace tunableop::cpu_kernels {
namespace {

// V: traits of the accumulation type (fp32 or fp64); the tile is MV registers by NR columns.
template <class Tin, class V, int MV, int NR>
TypeKernels<Tin> make_type_kernels() {
  static_assert(std::is_same_v<typename V::T, typename TypeKernels<Tin>::Acc>);
  constexpr int MR = MV * V::kWidth;
  TypeKernels<Tin> t;
  t.uk = {MR, NR, &micro_kernel<V, MV, NR>};
  t.pack_a = &pack_panel<V, MR, Tin>;
  t.pack_b = &pack_panel<V, NR, Tin>;
  t.skinny_dot = &skinny_dot<V, Tin>;
  t.skinny_axpy = &skinny_axpy<V, Tin>;
  return t;
}

}  // namespace
}  // namespace tunableop::cpu_kernels
