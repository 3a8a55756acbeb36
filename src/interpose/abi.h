// The interface between the two libraries of the interposer:
// - libtunableop_preload.so (LD_PRELOAD): the exported BLAS/cuBLAS/cuBLASLt hooks, the lookup of
//   the program's real functions, the re-entrancy guard and the call counters. It depends on
//   libc only, so that preloading it into every process a command starts (shells, compilers) is
//   harmless.
// - libtunableop_interpose.so (the engine): maps an intercepted call onto our GEMM/GemmAndBias
//   problems and dispatches it through a tunableop::Context. The preload library dlopens it on
//   the first call it may serve, so a process that never calls a GEMM never loads it (nor CUDA).
// Both are built from one tree by one compiler, so plain C++ structs cross the boundary.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tunableop::interpose {

inline constexpr uint32_t kAbiVersion = 1;

// The intercepted entry points (counters are kept per entry point).
enum class Api : uint8_t {
  kCublasGemmEx,
  kCublasSgemm,
  kCublasDgemm,
  kCublasHgemm,
  kCublasGemmStridedBatchedEx,
  kCublasSgemmStridedBatched,
  kCublasDgemmStridedBatched,
  kCublasHgemmStridedBatched,
  kCublasLtMatmul,
  kCblasSgemm,
  kCblasDgemm,
  kSgemm,  // Fortran sgemm_
  kDgemm,  // Fortran dgemm_
  kCount
};

inline const char* api_name(Api a) {
  switch (a) {
    case Api::kCublasGemmEx: return "cublasGemmEx";
    case Api::kCublasSgemm: return "cublasSgemm_v2";
    case Api::kCublasDgemm: return "cublasDgemm_v2";
    case Api::kCublasHgemm: return "cublasHgemm";
    case Api::kCublasGemmStridedBatchedEx: return "cublasGemmStridedBatchedEx";
    case Api::kCublasSgemmStridedBatched: return "cublasSgemmStridedBatched";
    case Api::kCublasDgemmStridedBatched: return "cublasDgemmStridedBatched";
    case Api::kCublasHgemmStridedBatched: return "cublasHgemmStridedBatched";
    case Api::kCublasLtMatmul: return "cublasLtMatmul";
    case Api::kCblasSgemm: return "cblas_sgemm";
    case Api::kCblasDgemm: return "cblas_dgemm";
    case Api::kSgemm: return "sgemm_";
    case Api::kDgemm: return "dgemm_";
    case Api::kCount: break;
  }
  return "?";
}

// What happened to one call. kServed: one of our candidates computed it. kLibraryDefault: the
// results say the library's own call is the fastest (tuned), so the call went to it untouched.
// Every other value: the call went to the library untouched, for that reason.
enum class Reason : uint8_t {
  kServed,
  kLibraryDefault,
  kNotTuned,             // no result and tuning off (--no-tune / --record)
  kTuningFailed,         // tuning failed: the library's call (recorded in the untuned file)
  kEngineUnavailable,    // libtunableop_interpose.so could not be loaded
  kForkedChild,          // this process was forked from one that had started the engine
  kCapturingUntuned,     // the stream is capturing a CUDA graph and the problem has no result yet
  kCapturingNotReady,    // capturing, and our handles/workspace were never set up outside a capture
  kPendingCudaError,     // a CUDA error was pending: left for the program to see
  kDevicePointerMode,    // alpha/beta in device memory
  kMathMode,             // pedantic, emulated, fp16 down-conversion, no reduced-precision reduction
  kComputeType,          // fp16 accumulation, fast-16F/16BF, integer, emulated compute types
  kDataType,             // mixed, fp8, integer or complex data types
  kLayout,               // a layout we cannot express: row-major with a bias, COL32, planes, pointer arrays
  kBroadcastStride,      // batch stride 0 (one matrix reused by every batch) or negative
  kEpilogue,             // epilogues other than bias (+ ReLU/GELU), or a bias we cannot map
  kDescriptorAttribute,  // a cuBLASLt descriptor attribute we do not reproduce (scales, SM target, ...)
  kOutOfPlace,           // cuBLASLt C != D with beta != 0, or different C and D layouts
  kTrivial,              // m, n or k is 0, or alpha is 0: nothing for a GEMM kernel to do
  kInvalidArguments,     // arguments the library rejects itself (it reports them)
  kSmCountTarget,        // the handle limits the SMs cuBLAS may use
  kCandidateDeclined,    // the tuned candidate declined these operands (e.g. alignment)
  kCandidateFailed,      // the tuned candidate failed before writing anything
  kInternalError,        // an exception inside the engine (reported once)
  kExiting,              // the process has begun to exit: our libraries may be torn down (exit_drain.cc)
  kTooLargeToTune,       // tuning copies would not fit the memory free now: recorded for `tunableop tune`
  kCount
};

inline const char* reason_text(Reason r) {
  switch (r) {
    case Reason::kServed: return "served by a tuned candidate";
    case Reason::kLibraryDefault: return "library default is fastest (tuned)";
    case Reason::kNotTuned: return "no result, tuning off";
    case Reason::kTuningFailed: return "tuning failed";
    case Reason::kEngineUnavailable: return "engine unavailable";
    case Reason::kForkedChild: return "forked child";
    case Reason::kCapturingUntuned: return "capturing a CUDA graph, problem not tuned yet (recorded)";
    case Reason::kCapturingNotReady: return "capturing a CUDA graph before any call outside one";
    case Reason::kPendingCudaError: return "CUDA error pending";
    case Reason::kDevicePointerMode: return "alpha/beta in device memory";
    case Reason::kMathMode: return "math mode not reproduced";
    case Reason::kComputeType: return "compute type not reproduced";
    case Reason::kDataType: return "data types not supported";
    case Reason::kLayout: return "layout not supported";
    case Reason::kBroadcastStride: return "batch stride 0 or negative";
    case Reason::kEpilogue: return "epilogue not supported";
    case Reason::kDescriptorAttribute: return "descriptor attribute not reproduced";
    case Reason::kOutOfPlace: return "C and D differ";
    case Reason::kTrivial: return "m, n, k or alpha is 0";
    case Reason::kInvalidArguments: return "invalid arguments";
    case Reason::kSmCountTarget: return "SM count target set";
    case Reason::kCandidateDeclined: return "tuned candidate declined the operands";
    case Reason::kCandidateFailed: return "tuned candidate failed";
    case Reason::kInternalError: return "internal error";
    case Reason::kExiting: return "process exiting";
    case Reason::kTooLargeToTune: return "too large to tune in the memory free (recorded for offline tuning)";
    case Reason::kCount: break;
  }
  return "?";
}

struct Outcome {
  Reason reason = Reason::kEngineUnavailable;
  int status = 0;  // served cuBLAS calls: the cublasStatus_t to return
  bool served() const { return reason == Reason::kServed; }
};

// CBLAS (order 101 row-major / 102 column-major, anything else invalid; trans 111 N, 112 T,
// 113 C) and Fortran BLAS (api kSgemm / kDgemm: order unused, 0; trans the character 'N', 'T',
// 'C' in either case).
struct BlasCall {
  Api api = Api::kCblasSgemm;
  int order = 0;
  int transa = 0, transb = 0;
  int m = 0, n = 0, k = 0;
  double alpha = 0, beta = 0;
  const void* a = nullptr;
  int lda = 0;
  const void* b = nullptr;
  int ldb = 0;
  void* c = nullptr;
  int ldc = 0;
};

// Every cuBLAS (not Lt) GEMM entry point in one shape. The typed entry points fill in their
// implied types: Sgemm = 32F data, COMPUTE_32F (the handle's math mode may allow tf32); Dgemm =
// 64F; Hgemm = 16F data, COMPUTE_16F.
struct CublasCall {
  Api api = Api::kCublasGemmEx;
  void* handle = nullptr;
  int transa = 0, transb = 0;  // cublasOperation_t
  int m = 0, n = 0, k = 0;
  const void* alpha = nullptr;
  const void* beta = nullptr;
  const void* a = nullptr;
  int a_type = 0, lda = 0;
  long long stride_a = 0;
  const void* b = nullptr;
  int b_type = 0, ldb = 0;
  long long stride_b = 0;
  void* c = nullptr;
  int c_type = 0, ldc = 0;
  long long stride_c = 0;
  int batch = 1;
  bool strided = false;  // a *StridedBatched* entry point (strides meaningful when batch > 1)
  int compute_type = 0;  // cublasComputeType_t
  int algo = -1;         // cublasGemmAlgo_t of the *Ex entry points (CUBLAS_GEMM_DEFAULT otherwise)
  // The workspace the program gave this handle with cublasSetWorkspace (tracked by the preload
  // library, since cuBLAS has no getter); 0 bytes when none or unknown.
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

struct LtCall {
  void* handle = nullptr;
  const void* desc = nullptr;  // cublasLtMatmulDesc_t
  const void* alpha = nullptr;
  const void* a = nullptr;
  const void* adesc = nullptr;  // cublasLtMatrixLayout_t
  const void* b = nullptr;
  const void* bdesc = nullptr;
  const void* beta = nullptr;
  const void* c = nullptr;
  const void* cdesc = nullptr;
  void* d = nullptr;
  const void* ddesc = nullptr;
  const void* algo = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  void* stream = nullptr;
};

// Libraries whose real functions the preload library finds in the process.
enum class Library : uint8_t { kBlas, kCublas, kCublasLt };

// What the preload library gives the engine.
struct PreloadApi {
  uint32_t version = kAbiVersion;
  // The program's own definition of `name` (never the hook), or null.
  void* (*real_symbol)(Library lib, const char* name) = nullptr;
};

// What the engine gives back. Each call returns the outcome; a non-served call is then made by
// the preload library to the program's library, untouched.
struct EngineApi {
  uint32_t version = kAbiVersion;
  Outcome (*blas)(const BlasCall& call) = nullptr;
  Outcome (*cublas)(const CublasCall& call) = nullptr;
  Outcome (*cublaslt)(const LtCall& call) = nullptr;
  // The engine's own cuBLAS/cuBLASLt definition of `name`: where our candidates' calls, which
  // land in the hooks like everybody's, must go (the program's cuBLAS may be another version).
  void* (*own_symbol)(Library lib, const char* name) = nullptr;
};

// Exported by the preload library for benchmarks and tests (C linkage, plain ints): the program's
// real definition of `name` exactly as the hooks reach it (Library as int), and the number of
// calls of an entry point (Api as int) that ended for a reason (Reason as int) so far.
using RealSymbolQuery = void* (*)(int library, const char* name);
using CallCountQuery = unsigned long long (*)(int api, int reason);
inline constexpr const char* kRealSymbolQueryName = "tunableop_interpose_real_symbol";
inline constexpr const char* kCallCountQueryName = "tunableop_interpose_calls";
// Interception off (0) or on (1) for the whole process from now on, as TUNABLEOP_ENABLED.
using SetEnabledSwitch = void (*)(int on);
inline constexpr const char* kSetEnabledSwitchName = "tunableop_interpose_set_enabled";

// Exported by the engine; null when the ABI versions differ.
using EngineEntry = const EngineApi* (*)(const PreloadApi* preload);
inline constexpr const char* kEngineEntryName = "tunableop_interpose_engine";

}  // namespace tunableop::interpose
