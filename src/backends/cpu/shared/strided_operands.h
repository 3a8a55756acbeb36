// Element pointers into the operands of a strided batch, for the CPU BLAS providers: batch b of
// A starts at element b * stride_a of ops.a (likewise B and C).
#pragma once

#include <cstdint>

namespace tunableop::cpu_shared {

// Element `offset` of a typed buffer; a null buffer (k == 0 leaves A and B empty) stays null.
template <class T>
T* at(void* base, int64_t offset) {
  return base ? static_cast<T*>(base) + offset : nullptr;
}
template <class T>
const T* at(const void* base, int64_t offset) {
  return base ? static_cast<const T*>(base) + offset : nullptr;
}
// The same as a non-const pointer, for APIs that take non-const inputs but only read them
// (BLIS's typed API).
template <class T>
T* mutable_at(const void* base, int64_t offset) {
  return const_cast<T*>(at<T>(base, offset));
}

}  // namespace tunableop::cpu_shared
