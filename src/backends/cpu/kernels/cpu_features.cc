#include "backends/cpu/kernels/cpu_features.h"

#if defined(TUNABLEOP_CPU_KERNELS_X86)
#include <cpuid.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

namespace tunableop::cpu_kernels {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kPortable: return "portable";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "unknown";
}

namespace {

// TUNABLEOP_CPU_MAX_ISA=portable|avx2|avx512 caps the levels our kernels use: the fuzz job pins
// it so that its walk (which follows coverage, and so which ISA kernels exist) is the same on
// every CI machine; a user can also rule out AVX-512 (clock drops) or test the portable path.
Isa isa_cap() {
  static const Isa cap = [] {
    const char* env = std::getenv("TUNABLEOP_CPU_MAX_ISA");
    if (!env || !*env) return Isa::kAvx512;
    for (Isa i : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512})
      if (std::strcmp(env, isa_name(i)) == 0) return i;
    std::fprintf(stderr, "tunableop: ignoring TUNABLEOP_CPU_MAX_ISA=%s (expected portable, avx2 or avx512)\n", env);
    return Isa::kAvx512;
  }();
  return cap;
}

bool cpu_has(Isa isa) {
#if defined(TUNABLEOP_CPU_KERNELS_X86)  // set by CMakeLists.txt when the ISA files are built
  // libgcc's detector also checks XGETBV, so a CPU whose OS does not save zmm/ymm state reads
  // as unsupported. The AVX2 kernels convert fp16 with F16C and the AVX-512 ones with AVX512F.
  // F16C is read from CPUID directly: clang's __builtin_cpu_supports does not know "f16c" (the
  // sanitizer and fuzz builds use clang), and AVX2's check above already covers the OS state.
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
  }();
  static const bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
  switch (isa) {
    case Isa::kPortable: return true;
    case Isa::kAvx2: return avx2;
    case Isa::kAvx512: return avx512;
  }
  return false;
#else
  return isa == Isa::kPortable;
#endif
}

}  // namespace

bool isa_available(Isa isa) { return isa <= isa_cap() && cpu_has(isa); }

Isa best_isa() {
  if (isa_available(Isa::kAvx512)) return Isa::kAvx512;
  if (isa_available(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kPortable;
}

}  // namespace tunableop::cpu_kernels
