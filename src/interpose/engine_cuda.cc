#include "interpose/engine_cuda.h"

#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <string>

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
  // The GEMM entry points, for replaying the program's call while it is tuned (null: not found,
  // then our Default stands in for that entry point).
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  cublasStatus_t (*gemm_strided_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, long long, const void*, cudaDataType, int,
                                    long long, const void*, void*, cudaDataType, int, long long, int,
                                    cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasDgemm_v2) dgemm = nullptr;
  decltype(&cublasSgemmStridedBatched) sgemm_strided = nullptr;
  decltype(&cublasDgemmStridedBatched) dgemm_strided = nullptr;
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
    auto sym = [&](const char* n) { return e.program_symbol(Library::kCublas, n); };
    x.gemm_ex = reinterpret_cast<decltype(x.gemm_ex)>(sym("cublasGemmEx"));
    x.gemm_strided_ex = reinterpret_cast<decltype(x.gemm_strided_ex)>(sym("cublasGemmStridedBatchedEx"));
    x.sgemm = reinterpret_cast<decltype(x.sgemm)>(sym("cublasSgemm_v2"));
    x.dgemm = reinterpret_cast<decltype(x.dgemm)>(sym("cublasDgemm_v2"));
    x.sgemm_strided = reinterpret_cast<decltype(x.sgemm_strided)>(sym("cublasSgemmStridedBatched"));
    x.dgemm_strided = reinterpret_cast<decltype(x.dgemm_strided)>(sym("cublasDgemmStridedBatched"));
    x.usable =
        x.get_stream && x.get_pointer_mode && x.get_math_mode && same_library(Library::kCublas, "cublasCreate_v2");
    return x;
  }();
  return p;
}

struct ProgramLt {
  bool usable = false;
  LtFunctions fns;
  decltype(&cublasLtMatmul) matmul = nullptr;  // for replaying the program's call while tuning
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
    x.matmul = reinterpret_cast<decltype(x.matmul)>(sym("cublasLtMatmul"));
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

Status replayed(cublasStatus_t st) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status::ok();
  return Status::device_error(std::string("the program's own call, replayed for tuning: ") + cublasGetStatusName(st));
}

// CallSite::replay for cuBLAS: the program's entry point, handle (stream, workspace, math mode)
// and algorithm, on the tuning buffers.
Status replay_cublas(const void* what, const void* a, const void* b, void* c) {
  const auto& call = *static_cast<const CublasCall*>(what);
  const ProgramCublas& f = program_cublas();
  auto h = static_cast<cublasHandle_t>(call.handle);
  auto ta = cublasOperation_t(call.transa), tb = cublasOperation_t(call.transb);
  auto at = cudaDataType(call.a_type), bt = cudaDataType(call.b_type), ct = cudaDataType(call.c_type);
  auto compute = cublasComputeType_t(call.compute_type);
  auto algo = cublasGemmAlgo_t(call.algo);
  using F = float;
  using D = double;
  switch (call.api) {
    case Api::kCublasGemmEx:
      return replayed(f.gemm_ex(h, ta, tb, call.m, call.n, call.k, call.alpha, a, at, call.lda, b, bt, call.ldb,
                                call.beta, c, ct, call.ldc, compute, algo));
    case Api::kCublasGemmStridedBatchedEx:
      return replayed(f.gemm_strided_ex(h, ta, tb, call.m, call.n, call.k, call.alpha, a, at, call.lda, call.stride_a,
                                        b, bt, call.ldb, call.stride_b, call.beta, c, ct, call.ldc, call.stride_c,
                                        call.batch, compute, algo));
    case Api::kCublasSgemm:
      return replayed(f.sgemm(h, ta, tb, call.m, call.n, call.k, static_cast<const F*>(call.alpha),
                              static_cast<const F*>(a), call.lda, static_cast<const F*>(b), call.ldb,
                              static_cast<const F*>(call.beta), static_cast<F*>(c), call.ldc));
    case Api::kCublasDgemm:
      return replayed(f.dgemm(h, ta, tb, call.m, call.n, call.k, static_cast<const D*>(call.alpha),
                              static_cast<const D*>(a), call.lda, static_cast<const D*>(b), call.ldb,
                              static_cast<const D*>(call.beta), static_cast<D*>(c), call.ldc));
    case Api::kCublasSgemmStridedBatched:
      return replayed(f.sgemm_strided(h, ta, tb, call.m, call.n, call.k, static_cast<const F*>(call.alpha),
                                      static_cast<const F*>(a), call.lda, call.stride_a, static_cast<const F*>(b),
                                      call.ldb, call.stride_b, static_cast<const F*>(call.beta), static_cast<F*>(c),
                                      call.ldc, call.stride_c, call.batch));
    case Api::kCublasDgemmStridedBatched:
      return replayed(f.dgemm_strided(h, ta, tb, call.m, call.n, call.k, static_cast<const D*>(call.alpha),
                                      static_cast<const D*>(a), call.lda, call.stride_a, static_cast<const D*>(b),
                                      call.ldb, call.stride_b, static_cast<const D*>(call.beta), static_cast<D*>(c),
                                      call.ldc, call.stride_c, call.batch));
    default: return Status::unsupported("no replay for this entry point");
  }
}

// Whether replay_cublas can make `call` (its entry point was found in the program's cuBLAS).
bool can_replay(const CublasCall& call) {
  const ProgramCublas& f = program_cublas();
  switch (call.api) {
    case Api::kCublasGemmEx: return f.gemm_ex != nullptr;
    case Api::kCublasGemmStridedBatchedEx: return f.gemm_strided_ex != nullptr;
    case Api::kCublasSgemm: return f.sgemm != nullptr;
    case Api::kCublasDgemm: return f.dgemm != nullptr;
    case Api::kCublasSgemmStridedBatched: return f.sgemm_strided != nullptr;
    case Api::kCublasDgemmStridedBatched: return f.dgemm_strided != nullptr;
    default: return false;
  }
}

// CallSite::replay for cuBLASLt: the program's handle, descriptors (bias included), algorithm,
// workspace and stream, on the tuning buffers (A and B back in the call's roles, D in place). An
// FP8 call's C is never read and may be typed otherwise than D (PyTorch types it as the bias):
// its pointer is then A's, as PyTorch passes it, never D's.
struct LtReplay {
  const LtCall* call;
  bool swap_ab;
  bool c_is_a;
};
Status replay_lt(const void* what, const void* a, const void* b, void* c) {
  const auto& r = *static_cast<const LtReplay*>(what);
  const LtCall& call = *r.call;
  auto desc = static_cast<cublasLtMatmulDesc_t>(const_cast<void*>(call.desc));
  auto layout = [](const void* l) { return static_cast<cublasLtMatrixLayout_t>(const_cast<void*>(l)); };
  const void* in_a = r.swap_ab ? b : a;
  return replayed(program_lt().matmul(static_cast<cublasLtHandle_t>(call.handle), desc, call.alpha, in_a,
                                      layout(call.adesc), r.swap_ab ? a : b, layout(call.bdesc), call.beta,
                                      r.c_is_a ? in_a : c, layout(call.cdesc), c, layout(call.ddesc),
                                      static_cast<const cublasLtMatmulAlgo_t*>(call.algo), call.workspace,
                                      call.workspace_bytes, static_cast<cudaStream_t>(call.stream)));
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
  CallSite site{true, h.stream, call.workspace, call.workspace_bytes};
  if (can_replay(call)) {
    site.replay = &replay_cublas;
    site.replay_call = &call;
  }
  return serve_gemm(*dev, p, ops, site);
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
  LtReplay replay{&call, m.swap_ab, m.fp8};
  if (lt.matmul != nullptr) {
    site.replay = &replay_lt;
    site.replay_call = &replay;
  }
  if (m.fp8) return serve_scaled_gemm(*dev, m.scaled, m.scaled_ops, site);
  if (!m.has_bias) return serve_gemm(*dev, m.gemm, m.ops, site);
  GemmAndBiasOperands ops{m.ops.a, m.ops.b, m.bias_ptr, m.ops.c, m.ops.stream};
  return serve_gemm_and_bias(*dev, m.bias, ops, site);
}

}  // namespace tunableop::interpose
