// Finding the program's real BLAS / cuBLAS / cuBLASLt functions behind our hooks.
//
// dlsym(RTLD_NEXT) alone is not enough: inside Python, NumPy's libblas.so.3 and PyTorch's
// libcublas.so.13 are loaded under an extension module in a local scope, which RTLD_NEXT does not
// search (shared/reference/pytorch-blas-calls.md). So when RTLD_NEXT finds nothing, every loaded
// object is asked in turn through its own handle (dlopen(name, RTLD_NOLOAD), which never loads
// anything), skipping our own libraries. A handle only searches its object and that object's
// dependencies, never the preloaded hooks, so what it returns is the library's own definition.
#pragma once

#include <atomic>

#include "interpose/abi.h"

namespace tunableop::interpose::preload {

// The program's definition of `name` in the library `lib` (cuBLAS names are all taken from the
// one object that defines cublasCreate_v2 / cublasLtCreate, so that a handle and the functions
// used on it come from the same library), or null.
void* find_program_symbol(Library lib, const char* name);
// The engine's own definition (falls back to the program's when the engine has none).
void* find_engine_symbol(Library lib, const char* name);
// True when `addr` lies in the preload library or the engine.
bool is_ours(const void* addr);
// Tells is_ours() where the engine lives, once it is loaded.
void set_engine_address(const void* any_function_in_engine);
// The preload library's own file name (dladdr), for locating the engine beside it.
const char* preload_path();

// One hooked function's real counterparts, found on first use and cached (lock-free: two threads
// that race resolve the same pointer).
template <class Fn>
class RealFunction {
 public:
  constexpr RealFunction(Library lib, const char* name) : lib_(lib), name_(name) {}
  Fn program() {
    void* p = program_.load(std::memory_order_acquire);
    if (p == nullptr) {
      p = find_program_symbol(lib_, name_);
      program_.store(p, std::memory_order_release);
    }
    return reinterpret_cast<Fn>(p);
  }
  Fn engine_own() {
    void* p = engine_.load(std::memory_order_acquire);
    if (p == nullptr) {
      p = find_engine_symbol(lib_, name_);
      engine_.store(p, std::memory_order_release);
    }
    return reinterpret_cast<Fn>(p);
  }
  void report_missing();
  const char* name() const { return name_; }

 private:
  Library lib_;
  const char* name_;
  std::atomic<void*> program_{nullptr};
  std::atomic<void*> engine_{nullptr};
  std::atomic<bool> reported_{false};
};

void report_missing_symbol(const char* name);

template <class Fn>
void RealFunction<Fn>::report_missing() {
  if (!reported_.exchange(true)) report_missing_symbol(name_);
}

}  // namespace tunableop::interpose::preload
