#include "backends/cuda/kernels/split_m.h"

#include <fmt/format.h>

#include "backends/cuda/common/cublas_gemm.h"
#include "backends/cuda/common/cuda_util.h"
#include "backends/cuda/kernels/matrix_copy.h"
#include "backends/cuda/kernels/pad_ld.h"

namespace tunableop::cuda {

namespace {

int64_t round_up(int64_t x, int64_t g) { return (x + g - 1) / g * g; }

size_t padded_c_bytes(const SplitMVariant& v, const GemmParams& p) {
  if (!v.pad_c) return 0;
  size_t bytes = size_t(round_up(p.m, v.granule) * p.n * p.batch) * dtype_size(p.dtype);
  return (bytes + 255) / 256 * 256;
}

Status supports(const SplitMVariant& v, const GemmParams& p) {
  TUNABLEOP_RETURN_IF_ERROR(check_blas_shape(p));
  if (p.widens()) return Status::unsupported("split-m: C in the inputs' dtype only");
  if (p.m % v.granule == 0) return Status::unsupported(fmt::format("split-m: m is a multiple of {}", v.granule));
  if (p.m < v.granule) return Status::unsupported(fmt::format("split-m: m < {}", v.granule));
  if (p.n == 0) return Status::unsupported("split-m: empty problem");
  if (v.pad_c && p.ldc % v.granule == 0)
    return Status::unsupported("split-m: ldc already aligned (plain variant covers this)");
  if (padded_c_bytes(v, p) > kPadLdMaxWorkspaceBytes) return Status::unsupported("split-m: padded C too large");
  return Status::ok();
}

Status run(const SplitMVariant& v, const GemmParams& p, const GemmOperands& o) {
  TUNABLEOP_RETURN_IF_ERROR(supports(v, p));
  const size_t es = dtype_size(p.dtype);
  const int64_t m1 = p.m / v.granule * v.granule;
  auto stream = static_cast<cudaStream_t>(o.stream);
  GemmParams q = p;  // the problem as computed: same, or with a padded C
  void* c = o.c;
  if (v.pad_c) {
    auto ws = workspace_for(o, padded_c_bytes(v, p));
    if (!ws.is_ok()) return ws.status();
    c = *ws;
    q.ldc = round_up(p.m, v.granule);
    q.stride_c = q.ldc * p.n;
    if (p.beta != 0.0) {  // beta == 0 must not read C (it may hold NaN)
      TUNABLEOP_RETURN_IF_ERROR(
          copy_matrices(c, q.ldc, q.stride_c, o.c, p.ldc, p.stride_c, p.m, p.n, p.batch, es, stream));
    }
  }
  // Rows [0, m1): op(A)'s first m1 rows are a sub-matrix of A with the same ld and strides.
  GemmParams top = q;
  top.m = m1;
  TUNABLEOP_RETURN_IF_ERROR(cublas_gemm(top, o.a, o.b, c, o.stream));
  // Rows [m1, m): A's rows m1.. (N) or columns m1.. (T), C's rows m1..
  GemmParams rest = q;
  rest.m = p.m - m1;
  const int64_t a_off = p.transa == 'N' ? m1 : m1 * p.lda;
  TUNABLEOP_RETURN_IF_ERROR(cublas_gemm(rest, static_cast<const char*>(o.a) + size_t(a_off) * es, o.b,
                                        static_cast<char*>(c) + size_t(m1) * es, o.stream));
  if (!v.pad_c) return Status::ok();
  return copy_matrices(o.c, p.ldc, p.stride_c, c, q.ldc, q.stride_c, p.m, p.n, p.batch, es, stream);
}

}  // namespace

std::string split_m_name(const SplitMVariant& v) {
  return fmt::format("Gemm_SplitM_{}g{}", v.pad_c ? "PadC_" : "", v.granule);
}

std::vector<GemmCandidate> make_split_m_candidates() {
  std::vector<GemmCandidate> out;
  for (SplitMVariant v : {SplitMVariant{false, 64}, SplitMVariant{true, 64}}) {
    GemmCandidate c;
    c.name = split_m_name(v);
    c.device = DeviceKind::kCuda;
    c.min_effort = 0;
    c.supports = [v](const GemmParams& p) { return supports(v, p); };
    c.run = [v](const GemmParams& p, const GemmOperands& o) { return run(v, p, o); };
    c.info = {"cuBLAS", "split m", {}};
    c.info.add("pad_c", v.pad_c ? "1" : "0").add("granule", std::to_string(v.granule));
    c.workspace_bytes = [v](const GemmParams& p) -> size_t {
      return supports(v, p).is_ok() ? padded_c_bytes(v, p) : 0;
    };
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace tunableop::cuda
