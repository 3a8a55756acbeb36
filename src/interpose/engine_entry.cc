// The engine library's one exported function: the preload library calls it once after dlopen.
#include <atomic>
#include <cstdio>
#include <exception>

#include "interpose/engine.h"
#include "interpose/map_blas.h"
#include "interpose/serve.h"

#ifdef TUNABLEOP_INTERPOSE_CUDA
#include "interpose/engine_cuda.h"
#endif

namespace tunableop::interpose {

namespace {

Outcome serve_blas_call(const BlasCall& call) {
  GemmParams p;
  GemmOperands ops;
  Reason r = map_blas_call(call, &p, &ops);
  if (r != Reason::kServed) return {r};
  return serve_gemm(Engine::get().cpu(), p, ops, CallSite{});
}

// Nothing may unwind into the hooks (built without exceptions) and on into C callers: an
// exception becomes a pass-through, reported once.
template <auto Fn, class Call>
Outcome guarded(const Call& call) {
  try {
    return Fn(call);
  } catch (const std::exception& e) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      std::fprintf(stderr, "tunableop: interpose: internal error (%s); such calls go to the library\n", e.what());
  } catch (...) {
  }
  return {Reason::kInternalError};
}

#ifndef TUNABLEOP_INTERPOSE_CUDA
// Built without CUDA: a program's cuBLAS calls go to cuBLAS untouched.
Outcome serve_cublas_call(const CublasCall&) { return {Reason::kEngineUnavailable}; }
Outcome serve_lt_call(const LtCall&) { return {Reason::kEngineUnavailable}; }
void* engine_own_symbol(Library, const char*) { return nullptr; }
#endif

}  // namespace

}  // namespace tunableop::interpose

extern "C" __attribute__((visibility("default"))) const tunableop::interpose::EngineApi* tunableop_interpose_engine(
    const tunableop::interpose::PreloadApi* preload) {
  using namespace tunableop::interpose;
  if (preload == nullptr || preload->version != kAbiVersion || preload->real_symbol == nullptr) return nullptr;
  Engine::get().init(preload);
  static const EngineApi api{kAbiVersion, &guarded<serve_blas_call, BlasCall>, &guarded<serve_cublas_call, CublasCall>,
                             &guarded<serve_lt_call, LtCall>, &engine_own_symbol};
  return &api;
}
