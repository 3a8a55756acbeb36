// Which instruction sets our CPU kernels may use, decided once at run time from the CPU.
#pragma once

namespace tunableop::cpu_kernels {

// Ordered from least to most capable; a machine that has one level may not have the next.
enum class Isa { kPortable, kAvx2, kAvx512 };

const char* isa_name(Isa isa);  // "portable", "avx2", "avx512" (used in candidate names)
bool isa_available(Isa isa);    // CPU (and OS register state) support, cached, at most
                                // $TUNABLEOP_CPU_MAX_ISA (portable, avx2, avx512) when set
Isa best_isa();                 // the most capable available level

}  // namespace tunableop::cpu_kernels
