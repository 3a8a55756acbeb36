// Packing of A blocks and B panels into the sliver layout the micro-kernel reads, written once
// over vector traits V like micro_kernel_impl.h (same rule: include only from an ISA
// translation unit). Besides the micro-kernel's traits it uses load(const Tin*) for every input
// type, scalar(Tin) and transpose(R*) (kWidth registers holding a square block, in place). The sliver width W is a
// compile-time constant, so the copies unroll into whole-register moves; packing also converts bf16/fp16 inputs to
// fp32.
#pragma once

#include <cstdint>

namespace tunableop::cpu_kernels {
namespace {

// Element (r, l) of the source block is src[r + l*ld] when r_contiguous, else src[l + r*ld].
// Rows [s*W, s*W + W) go to sliver s at out + s*W*k, element (r, l) at l*W + (r - s*W); rows
// past `rows` are zero.
template <class V, int W, class Tin>
void pack_panel(const Tin* src, int64_t ld, bool r_contiguous, int64_t rows, int64_t k, typename V::T* out) {
  using T = typename V::T;
  constexpr int VW = V::kWidth;
  for (int64_t s = 0; s < rows; s += W) {
    const int n = rows - s < W ? int(rows - s) : W;
    T* o = out + s * k;
    if (r_contiguous) {
      const Tin* p = src + s;
      if (n == W && W % VW == 0) {
        for (int64_t l = 0; l < k; ++l) {
#pragma GCC unroll 8
          for (int i = 0; i < W; i += VW) V::store(o + l * W + i, V::load(p + l * ld + i));
        }
      } else if (n == W) {
        for (int64_t l = 0; l < k; ++l) {
#pragma GCC unroll 32
          for (int i = 0; i < W; ++i) o[l * W + i] = V::scalar(p[l * ld + i]);
        }
      } else {
        for (int64_t l = 0; l < k; ++l) {
          for (int i = 0; i < n; ++i) o[l * W + i] = V::scalar(p[l * ld + i]);
          for (int i = n; i < W; ++i) o[l * W + i] = T(0);
        }
      }
      continue;
    }
    // A transpose: each source row is contiguous in l. Full slivers go through VW x VW
    // register transposes (VW rows of VW elements in, VW columns out); otherwise one cache line
    // of every row at a time, so the rows stream in parallel and the writes stay within a few KiB.
    const Tin* p = src + s * ld;
    int64_t l = 0;
    if (n == W && W % VW == 0 && VW > 1) {
      for (; l + VW <= k; l += VW) {
        for (int rb = 0; rb < W; rb += VW) {
          typename V::R r[VW];
#pragma GCC unroll 16
          for (int i = 0; i < VW; ++i) r[i] = V::load(p + (rb + i) * ld + l);
          V::transpose(r);
#pragma GCC unroll 16
          for (int q = 0; q < VW; ++q) V::store(o + (l + q) * W + rb, r[q]);
        }
      }
    } else if (n == W) {
      constexpr int64_t kLine = 64 / sizeof(Tin);
      for (; l + kLine <= k; l += kLine) {
#pragma GCC unroll 4
        for (int i = 0; i < W; ++i) {
          const Tin* row = p + i * ld + l;
#pragma GCC unroll 32
          for (int q = 0; q < kLine; ++q) o[(l + q) * W + i] = V::scalar(row[q]);
        }
      }
    }
    for (; l < k; ++l) {
      for (int i = 0; i < n; ++i) o[l * W + i] = V::scalar(p[i * ld + l]);
      for (int i = n; i < W; ++i) o[l * W + i] = T(0);
    }
  }
}

}  // namespace
}  // namespace tunableop::cpu_kernels
