// The library boundary promises Status, never an exception: a public entry point runs its body
// through status_boundary(), which turns anything thrown inside (std::bad_alloc for a huge but
// well-formed size that slipped past the limits, std::length_error, a failure in a dependency)
// into a Status naming the input. The normal path costs nothing (zero-cost exceptions).
#pragma once

#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tunableop/status.h"

namespace tunableop {

// `body` returns Status or StatusOr<T>; `describe` (called only on an exception) names what was
// being done and to which input, e.g. "gemm GemmTunableOp_float_NN(nn_4_4_4)".
template <class Describe, class Body>
auto status_boundary(Describe&& describe, Body&& body) -> std::invoke_result_t<Body> {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Status::internal(describe() + ": out of memory");
  } catch (const std::length_error& e) {
    return Status::invalid_argument(describe() + ": a size is too large (" + e.what() + ")");
  } catch (const std::exception& e) {
    return Status::internal(describe() + ": " + e.what());
  } catch (...) {
    return Status::internal(describe() + ": unknown exception");
  }
}

}  // namespace tunableop
