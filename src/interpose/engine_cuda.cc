#include "interpose/engine_cuda.h"

#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include "interpose/engine.h"
#include "interpose/map_cublas.h"
#include "interpose/map_cublaslt.h"
#include "interpose/serve.h"

#define TUNABLEOP_STR2(x) #x
#define TUNABLEOP_STR(x) TUNABLEOP_STR2(x)

namespace tunableop::interpose {

namespace {

// The sonames this engine was linked against (its DT_NEEDED entries resolve to these objects).
constexpr const char* kOwnCublas = "libcublas.so." TUNABLEOP_STR(CUBLAS_VER_MAJOR);
constexpr const char* kOwnCublasLt = "libcublasLt.so." TUNABLEOP_STR(CUBLAS_VER_MAJOR);

void* own_handle(Library lib) {
  static void* cublas = dlopen(kOwnCublas, RTLD_NOLOAD | RTLD_LAZY);
  static void* cublaslt = dlopen(kOwnCublasLt, RTLD_NOLOAD | RTLD_LAZY);
  return lib == Library::kCublas ? cublas : lib == Library::kCublasLt ? cublaslt : nullptr;
}

const void* object_of(const void* fn) {
  Dl_info info{};
  return fn != nullptr && dladdr(fn, &info) != 0 ? info.dli_fbase : nullptr;
}

// Our candidates create handles with the engine's cuBLAS; the program's calls use its own. When
// those are different libraries (another major version loaded by the program), a handle of one
// must never reach the other: then every call passes through.
bool same_library(Library lib, const char* anchor) {
  const void* prog = object_of(Engine::get().program_symbol(lib, anchor));
  const void* own = object_of(engine_own_symbol(lib, anchor));
  return prog != nullptr && prog == own;
}

struct ProgramCublas {
  bool usable = false;
  cublasStatus_t (*get_stream)(cublasHandle_t, cudaStream_t*) = nullptr;
  cublasStatus_t (*get_pointer_mode)(cublasHandle_t, cublasPointerMode_t*) = nullptr;
  cublasStatus_t (*get_math_mode)(cublasHandle_t, cublasMath_t*) = nullptr;
  cublasStatus_t (*get_sm_count_target)(cublasHandle_t, int*) = nullptr;
};

const ProgramCublas& program_cublas() {
  static const ProgramCublas p = [] {
    ProgramCublas x;
    Engine& e = Engine::get();
    x.get_stream = reinterpret_cast<decltype(x.get_stream)>(e.program_symbol(Library::kCublas, "cublasGetStream_v2"));
    x.get_pointer_mode =
        reinterpret_cast<decltype(x.get_pointer_mode)>(e.program_symbol(Library::kCublas, "cublasGetPointerMode_v2"));
    x.get_math_mode =
        reinterpret_cast<decltype(x.get_math_mode)>(e.program_symbol(Library::kCublas, "cublasGetMathMode"));
    x.get_sm_count_target =
        reinterpret_cast<decltype(x.get_sm_count_target)>(e.program_symbol(Library::kCublas, "cublasGetSmCountTarget"));
    x.usable =
        x.get_stream && x.get_pointer_mode && x.get_math_mode && same_library(Library::kCublas, "cublasCreate_v2");
    return x;
  }();
  return p;
}

struct ProgramLt {
  bool usable = false;
  LtFunctions fns;
};

const ProgramLt& program_lt() {
  static const ProgramLt p = [] {
    ProgramLt x;
    Engine& e = Engine::get();
    auto sym = [&](const char* n) { return e.program_symbol(Library::kCublasLt, n); };
    x.fns.desc_get = reinterpret_cast<decltype(x.fns.desc_get)>(sym("cublasLtMatmulDescGetAttribute"));
    x.fns.layout_get = reinterpret_cast<decltype(x.fns.layout_get)>(sym("cublasLtMatrixLayoutGetAttribute"));
    x.fns.desc_create = reinterpret_cast<decltype(x.fns.desc_create)>(sym("cublasLtMatmulDescCreate"));
    x.fns.layout_create = reinterpret_cast<decltype(x.fns.layout_create)>(sym("cublasLtMatrixLayoutCreate"));
    x.usable = x.fns.desc_get && x.fns.layout_get && x.fns.desc_create && x.fns.layout_create &&
               same_library(Library::kCublasLt, "cublasLtCreate");
    return x;
  }();
  return p;
}

bool allow_tf32_setting() {
  static const bool v = Config().snapshot().policy.allow_tf32;
  return v;
}

// The device of the calling thread; null (with the reason) when no call should be served.
DeviceEngine* current_device(Reason* why) {
  // An error the program has not collected yet stays the program's: we make no CUDA call.
  if (cudaPeekAtLastError() != cudaSuccess) {
    *why = Reason::kPendingCudaError;
    return nullptr;
  }
  int ordinal = 0;
  if (cudaGetDevice(&ordinal) != cudaSuccess) {
    (void)cudaGetLastError();
    *why = Reason::kEngineUnavailable;
    return nullptr;
  }
  DeviceEngine* d = Engine::get().cuda(ordinal);
  if (d == nullptr) *why = Reason::kEngineUnavailable;
  return d;
}

}  // namespace

void* engine_own_symbol(Library lib, const char* name) {
  void* h = own_handle(lib);
  return h != nullptr ? dlsym(h, name) : nullptr;
}

Outcome serve_cublas_call(const CublasCall& call) {
  const ProgramCublas& fns = program_cublas();
  if (!fns.usable) return {Reason::kEngineUnavailable};
  auto handle = static_cast<cublasHandle_t>(call.handle);
  HandleState h;
  cudaStream_t stream = nullptr;
  cublasPointerMode_t pmode = CUBLAS_POINTER_MODE_HOST;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
  if (fns.get_stream(handle, &stream) != CUBLAS_STATUS_SUCCESS ||
      fns.get_pointer_mode(handle, &pmode) != CUBLAS_STATUS_SUCCESS ||
      fns.get_math_mode(handle, &math) != CUBLAS_STATUS_SUCCESS)
    return {Reason::kInvalidArguments};  // not a valid handle: cuBLAS says so itself
  h.stream = stream;
  h.pointer_mode = pmode;
  h.math_mode = math;
  if (fns.get_sm_count_target && fns.get_sm_count_target(handle, &h.sm_count_target) != CUBLAS_STATUS_SUCCESS)
    h.sm_count_target = 0;
  GemmParams p;
  GemmOperands ops;
  Reason r = map_cublas_call(call, h, allow_tf32_setting(), &p, &ops);
  if (r != Reason::kServed) return {r};
  DeviceEngine* dev = current_device(&r);
  if (dev == nullptr) return {r};
  return serve_gemm(*dev, p, ops, CallSite{true, h.stream, call.workspace, call.workspace_bytes});
}

Outcome serve_lt_call(const LtCall& call) {
  const ProgramLt& lt = program_lt();
  if (!lt.usable) return {Reason::kEngineUnavailable};
  LtMapped m;
  Reason r = map_lt_call(call, lt.fns, allow_tf32_setting(), &m);
  if (r != Reason::kServed) return {r};
  DeviceEngine* dev = current_device(&r);
  if (dev == nullptr) return {r};
  CallSite site{true, call.stream, call.workspace, call.workspace_bytes};
  if (!m.has_bias) return serve_gemm(*dev, m.gemm, m.ops, site);
  GemmAndBiasOperands ops{m.ops.a, m.ops.b, m.bias_ptr, m.ops.c, m.ops.stream};
  return serve_gemm_and_bias(*dev, m.bias, ops, site);
}

}  // namespace tunableop::interpose
