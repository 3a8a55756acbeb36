// What the host CPU is: the CPU validator and the last-level cache size for rotating buffers.
#pragma once

#include <cstddef>
#include <string>

namespace tunableop {

std::string cpu_model_name();         // "Intel(R) Xeon(R) Processor"
std::string cpu_isa_flags();          // "avx2 fma avx512f ..." (the flags GEMM speed depends on)
int cpu_core_count();                 // hardware threads available to this process
std::string cpu_validator_value();    // "<model> <isa flags> <N> cores"
size_t cpu_last_level_cache_bytes();  // largest cache level in sysfs; 32 MiB when unknown

}  // namespace tunableop
