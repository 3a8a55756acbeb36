#include "backends/cpu/onednn/onednn_library.h"

#include <fmt/format.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_version.h>

#include <type_traits>
#include <utility>

#include "backends/cpu/shared/strided_operands.h"
#include "tunableop/half.h"

namespace tunableop {

namespace {

using cpu_shared::at;

// C = beta * C for k == 0, which oneDNN rejects as an invalid argument (BLAS allows it);
// beta == 0 writes zeros without reading C.
template <class T>
void scale_c(const GemmParams& p, void* c) {
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t j = 0; j < p.n; ++j) {
      T* col = static_cast<T*>(c) + b * p.stride_c + j * p.ldc;
      for (int64_t i = 0; i < p.m; ++i) {
        if constexpr (std::is_same_v<T, bf16>) {
          col[i] = to_bf16(p.beta == 0.0 ? 0.0f : float(p.beta) * to_float(col[i]));
        } else {
          col[i] = p.beta == 0.0 ? T(0) : T(p.beta) * col[i];
        }
      }
    }
}

Status from_dnnl(dnnl_status_t st, const char* what) {
  if (st == dnnl_success) return Status::ok();
  if (st == dnnl_unimplemented) return Status::unsupported(fmt::format("oneDNN {}: unimplemented", what));
  return Status::internal(fmt::format("oneDNN {} failed with dnnl_status_t {}", what, int(st)));
}

}  // namespace

struct OnednnLibrary::Api {
  dnnl_status_t (*sgemm)(char, char, dnnl_dim_t, dnnl_dim_t, dnnl_dim_t, float, const float*, dnnl_dim_t, const float*,
                         dnnl_dim_t, float, float*, dnnl_dim_t) = nullptr;
  // Exported by oneDNN but not declared in its public headers (its own tests declare it the
  // same way): row-major, bf16 A and B, fp32 C.
  dnnl_status_t (*gemm_bf16bf16f32)(char, char, dnnl_dim_t, dnnl_dim_t, dnnl_dim_t, float, const uint16_t*, dnnl_dim_t,
                                    const uint16_t*, dnnl_dim_t, float, float*, dnnl_dim_t) = nullptr;
  const dnnl_version_t* (*version)() = nullptr;
  dnnl_cpu_isa_t (*effective_isa)() = nullptr;
  // From oneDNN's own dependency scope: the libgomp whose per-thread setting it reads.
  int (*omp_get_max_threads)() = nullptr;
  void (*omp_set_num_threads)(int) = nullptr;
};

OnednnLibrary::OnednnLibrary(cpu_shared::DynamicLibrary library)
    : LoadedLibrary(std::move(library)), api_(std::make_unique<Api>()) {}
OnednnLibrary::~OnednnLibrary() = default;

std::vector<std::string> OnednnLibrary::default_paths() {
  std::vector<std::string> paths = {fmt::format("libdnnl.so.{}", DNNL_VERSION_MAJOR)};
#ifdef TUNABLEOP_ONEDNN_CONFIGURED_PATH
  paths.push_back(TUNABLEOP_ONEDNN_CONFIGURED_PATH);
#endif
  return paths;
}

Status OnednnLibrary::bind_symbols() {
  TUNABLEOP_RETURN_IF_ERROR(library().bind("dnnl_sgemm", api_->sgemm));
  TUNABLEOP_RETURN_IF_ERROR(library().bind("dnnl_version", api_->version));
  TUNABLEOP_RETURN_IF_ERROR(library().bind("dnnl_get_effective_cpu_isa", api_->effective_isa));
  const dnnl_version_t* v = api_->version();
  // The C API's types and enums (those we compiled against) change only across major versions.
  if (v == nullptr || v->major != DNNL_VERSION_MAJOR)
    return Status::unsupported(fmt::format("{} is oneDNN {}.x but tunableop was built with oneDNN {} headers", path(),
                                           v ? v->major : -1, DNNL_VERSION_MAJOR));
  if (v->cpu_runtime == DNNL_RUNTIME_OMP) {
    TUNABLEOP_RETURN_IF_ERROR(library().bind("omp_get_max_threads", api_->omp_get_max_threads));
    TUNABLEOP_RETURN_IF_ERROR(library().bind("omp_set_num_threads", api_->omp_set_num_threads));
  }
  library().bind_optional("dnnl_gemm_bf16bf16f32", api_->gemm_bf16bf16f32);
  const unsigned isa = unsigned(api_->effective_isa());
  const unsigned bf16_bits = unsigned(dnnl_cpu_isa_avx512_core_bf16);
  bf16_native_ = api_->gemm_bf16bf16f32 != nullptr && (isa & bf16_bits) == bf16_bits;
  return Status::ok();
}

std::string OnednnLibrary::version() const {
  const dnnl_version_t* v = api_->version();
  return fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
}

std::string OnednnLibrary::cpu_runtime() const {
  switch (api_->version()->cpu_runtime) {
    case DNNL_RUNTIME_SEQ: return "seq";
    case DNNL_RUNTIME_OMP: return "omp";
    case DNNL_RUNTIME_TBB: return "tbb";
    case DNNL_RUNTIME_THREADPOOL: return "threadpool";
    default: return "unknown";
  }
}

std::string OnednnLibrary::isa() const {
  switch (api_->effective_isa()) {
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_sse41: return "sse41";
    default: return fmt::format("isa_{:#x}", unsigned(api_->effective_isa()));
  }
}

bool OnednnLibrary::sequential() const { return api_->version()->cpu_runtime == DNNL_RUNTIME_SEQ; }
bool OnednnLibrary::controls_threads() const { return api_->omp_set_num_threads != nullptr || sequential(); }

int OnednnLibrary::num_threads() const {
  if (api_->omp_get_max_threads) return api_->omp_get_max_threads();
  return sequential() ? 1 : 0;
}

size_t OnednnLibrary::workspace_bytes(const GemmParams& p) {
  return p.dtype == DType::kBF16 ? size_t(p.m) * size_t(p.n) * sizeof(float) : 0;
}

Status OnednnLibrary::supports(const GemmParams& in) const {
  if (in.dtype == DType::kBF16 && !bf16_native_)
    return Status::unsupported("oneDNN: bf16 needs dnnl_gemm_bf16bf16f32 and a CPU with avx512_bf16 or AMX");
  if (in.dtype != DType::kF32 && in.dtype != DType::kBF16)
    return Status::unsupported(fmt::format("oneDNN: dtype {} (fp32 and bf16 only)", dtype_name(in.dtype)));
  return in.with_defaults().validate();
}

Status OnednnLibrary::gemm(const GemmParams& in, const GemmOperands& ops, int threads) const {
  TUNABLEOP_RETURN_IF_ERROR(supports(in));
  const GemmParams p = cpu_shared::with_unused_lds_tightened(in.with_defaults());
  const StatusOr<bool> call = cpu_shared::needs_call(p, ops, kName);
  if (!call.is_ok() || !*call) return call.status();
  // BLAS semantics where oneDNN differs: it rejects k == 0, and with alpha == 0 and beta == 0 it
  // left NaN from C in place (the fuzzer, seed 4: tn 256x24x35); both are C = beta C.
  if (p.k == 0 || p.alpha == 0.0) {
    p.dtype == DType::kBF16 ? scale_c<bf16>(p, ops.c) : scale_c<float>(p, ops.c);
    return Status::ok();
  }
  const int previous = api_->omp_get_max_threads ? api_->omp_get_max_threads() : 0;
  const bool change = api_->omp_set_num_threads && threads > 0 && threads != previous;
  if (change) api_->omp_set_num_threads(threads);
  Status st;
  if (p.dtype == DType::kBF16) {
    st = gemm_bf16(p, ops);
  } else {
    for (int64_t b = 0; b < p.batch && st.is_ok(); ++b) {
      // Row-major view of column-major memory: swap A and B (and m and n), keep the flags.
      st = from_dnnl(
          api_->sgemm(p.transb, p.transa, p.n, p.m, p.k, float(p.alpha), at<float>(ops.b, b * p.stride_b), p.ldb,
                      at<float>(ops.a, b * p.stride_a), p.lda, float(p.beta), at<float>(ops.c, b * p.stride_c), p.ldc),
          "dnnl_sgemm");
    }
  }
  if (change) api_->omp_set_num_threads(previous);
  return st;
}

Status OnednnLibrary::gemm_bf16(const GemmParams& p, const GemmOperands& ops) const {
  // oneDNN writes fp32: compute into a dense fp32 C (the op's workspace when it is big enough)
  // and round to bf16. C is read only when beta != 0, so a NaN-filled C stays harmless.
  thread_local std::vector<float> own;
  float* c32 = nullptr;
  if (ops.workspace != nullptr && ops.workspace_bytes >= workspace_bytes(p)) {
    c32 = static_cast<float*>(ops.workspace);
  } else {
    own.resize(size_t(p.m) * size_t(p.n));
    c32 = own.data();
  }
  for (int64_t b = 0; b < p.batch; ++b) {
    bf16* c = at<bf16>(ops.c, b * p.stride_c);
    if (p.beta != 0.0)
      for (int64_t j = 0; j < p.n; ++j)
        for (int64_t i = 0; i < p.m; ++i) c32[j * p.m + i] = to_float(c[j * p.ldc + i]);
    TUNABLEOP_RETURN_IF_ERROR(from_dnnl(
        api_->gemm_bf16bf16f32(p.transb, p.transa, p.n, p.m, p.k, float(p.alpha), at<uint16_t>(ops.b, b * p.stride_b),
                               p.ldb, at<uint16_t>(ops.a, b * p.stride_a), p.lda, float(p.beta), c32, p.m),
        "dnnl_gemm_bf16bf16f32"));
    for (int64_t j = 0; j < p.n; ++j)
      for (int64_t i = 0; i < p.m; ++i) c[j * p.ldc + i] = to_bf16(c32[j * p.m + i]);
  }
  return Status::ok();
}

}  // namespace tunableop
