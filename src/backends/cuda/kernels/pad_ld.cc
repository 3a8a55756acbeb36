#include "backends/cuda/kernels/pad_ld.h"

#include <fmt/format.h>

#include "backends/cuda/common/cublas_gemm.h"
#include "backends/cuda/common/cuda_util.h"
#include "backends/cuda/kernels/matrix_copy.h"

namespace tunableop::cuda {

namespace {

int64_t round_up(int64_t x, int64_t g) { return (x + g - 1) / g * g; }
size_t round_bytes(size_t x) { return (x + 255) / 256 * 256; }

// How the padded problem lays out its operands inside the workspace.
struct PadPlan {
  GemmParams padded;  // the aligned problem cuBLAS runs
  bool pad_a = false, pad_b = false, pad_c = false;
  size_t off_a = 0, off_b = 0, off_c = 0, total = 0;
};

PadPlan plan_for(const PadLdVariant& v, const GemmParams& p) {
  PadPlan pl;
  GemmParams q = p;
  const size_t es = dtype_size(p.dtype);
  auto operand_bytes = [&](int64_t ld, int64_t cols) { return round_bytes(size_t(ld * cols * p.batch) * es); };
  if (p.ldc % v.granule != 0) {
    pl.pad_c = true;
    q.ldc = round_up(p.m, v.granule);
    q.stride_c = q.ldc * p.n;
    pl.off_c = 0;
    pl.total = operand_bytes(q.ldc, p.n);
  }
  if (v.pad_inputs && p.lda % v.granule != 0) {
    pl.pad_a = true;
    q.lda = round_up(p.a_rows(), v.granule);
    q.stride_a = q.lda * p.a_cols();
    pl.off_a = pl.total;
    pl.total += operand_bytes(q.lda, p.a_cols());
  }
  if (v.pad_inputs && p.ldb % v.granule != 0) {
    pl.pad_b = true;
    q.ldb = round_up(p.b_rows(), v.granule);
    q.stride_b = q.ldb * p.b_cols();
    pl.off_b = pl.total;
    pl.total += operand_bytes(q.ldb, p.b_cols());
  }
  pl.padded = q;
  return pl;
}

Status supports(const PadLdVariant& v, const GemmParams& p) {
  TUNABLEOP_RETURN_IF_ERROR(check_blas_shape(p));
  if (p.widens()) return Status::unsupported("pad-ld: C in the inputs' dtype only");
  if (p.m == 0 || p.n == 0) return Status::unsupported("pad-ld: empty problem");
  bool c_unaligned = p.ldc % v.granule != 0;
  bool in_unaligned = p.lda % v.granule != 0 || p.ldb % v.granule != 0;
  if (!c_unaligned && !(v.pad_inputs && in_unaligned)) {
    return Status::unsupported(fmt::format("pad-ld: leading dimensions already multiples of {}", v.granule));
  }
  if (v.pad_inputs && !in_unaligned)
    return Status::unsupported("pad-ld: A and B already aligned (C-only variant covers this)");
  PadPlan pl = plan_for(v, p);
  if (pl.total > kPadLdMaxWorkspaceBytes) {
    return Status::unsupported(
        fmt::format("pad-ld: needs {} MiB of workspace (limit {} MiB)", pl.total >> 20, kPadLdMaxWorkspaceBytes >> 20));
  }
  return check_blas_shape(pl.padded);
}

Status run(const PadLdVariant& v, const GemmParams& p, const GemmOperands& o) {
  TUNABLEOP_RETURN_IF_ERROR(supports(v, p));
  PadPlan pl = plan_for(v, p);
  auto workspace = workspace_for(o, pl.total);
  if (!workspace.is_ok()) return workspace.status();
  const GemmParams& q = pl.padded;
  const size_t es = dtype_size(p.dtype);
  auto stream = static_cast<cudaStream_t>(o.stream);
  auto* ws = static_cast<char*>(*workspace);
  const void* a = o.a;
  const void* b = o.b;
  void* c = pl.pad_c ? ws + pl.off_c : o.c;
  if (pl.pad_a) {
    TUNABLEOP_RETURN_IF_ERROR(copy_matrices(ws + pl.off_a, q.lda, q.stride_a, o.a, p.lda, p.stride_a, p.a_rows(),
                                            p.a_cols(), p.batch, es, stream));
    a = ws + pl.off_a;
  }
  if (pl.pad_b) {
    TUNABLEOP_RETURN_IF_ERROR(copy_matrices(ws + pl.off_b, q.ldb, q.stride_b, o.b, p.ldb, p.stride_b, p.b_rows(),
                                            p.b_cols(), p.batch, es, stream));
    b = ws + pl.off_b;
  }
  if (pl.pad_c && p.beta != 0.0) {  // beta == 0 must not read C (it may hold NaN)
    TUNABLEOP_RETURN_IF_ERROR(
        copy_matrices(c, q.ldc, q.stride_c, o.c, p.ldc, p.stride_c, p.m, p.n, p.batch, es, stream));
  }
  TUNABLEOP_RETURN_IF_ERROR(cublas_gemm(q, a, b, c, o.stream));
  if (!pl.pad_c) return Status::ok();
  return copy_matrices(o.c, p.ldc, p.stride_c, c, q.ldc, q.stride_c, p.m, p.n, p.batch, es, stream);
}

}  // namespace

std::string pad_ld_name(const PadLdVariant& v) {
  return fmt::format("Gemm_PadLd_{}_g{}", v.pad_inputs ? "ABC" : "C", v.granule);
}

std::vector<GemmCandidate> make_pad_ld_candidates() {
  std::vector<GemmCandidate> out;
  for (PadLdVariant v : {PadLdVariant{false, 64}, PadLdVariant{true, 64}, PadLdVariant{false, 8}}) {
    GemmCandidate c;
    c.name = pad_ld_name(v);
    c.device = DeviceKind::kCuda;
    c.min_effort = v.granule == 64 ? 0 : 1;
    c.supports = [v](const GemmParams& p) { return supports(v, p); };
    c.run = [v](const GemmParams& p, const GemmOperands& o) { return run(v, p, o); };
    c.info = {"cuBLAS", "padded ld", {}};
    c.info.add("padded", v.pad_inputs ? "A, B, C" : "C").add("granule", std::to_string(v.granule));
    c.workspace_bytes = [v](const GemmParams& p) -> size_t {
      return supports(v, p).is_ok() ? plan_for(v, p).total : 0;
    };
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace tunableop::cuda
