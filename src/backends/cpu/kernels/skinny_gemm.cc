// Threads split the rows of C (and batch entries); every thread gets op(B) as a dense k x n
// block in the accumulation type (copied only when B is transposed or needs conversion),
// computes its rows into an accumulation buffer with the ISA's dot or axpy kernel, and applies
// alpha, beta and the output conversion on the way to C.
#include "backends/cpu/kernels/skinny_gemm.h"

#include <atomic>

#include "backends/cpu/kernels/driver_common.h"
#include "backends/cpu/kernels/kernel_table.h"

namespace tunableop::cpu_kernels {

namespace {

// Rows per thread are a multiple of this, so threads rarely share a cache line of C.
constexpr int64_t kRowGrain = 64;

template <class Tin>
Status run_typed(const GemmParams& p, const GemmOperands& ops, const SkinnyConfig& cfg, const IsaKernels& kt) {
  using Acc = AccOf<Tin>;
  const SkinnyFn<Tin, Acc> fn = p.transa == 'T' ? kt.get<Tin>().skinny_dot : kt.get<Tin>().skinny_axpy;
  if (fn == nullptr) return Status::internal("cpu kernels: missing skinny kernel");
  const Tin* a_all = static_cast<const Tin*>(ops.a);
  const Tin* b_all = static_cast<const Tin*>(ops.b);
  Tin* c_all = static_cast<Tin*>(ops.c);

  const int threads = resolve_threads(cfg.threads);
  const int64_t per_batch = p.batch >= threads ? 1 : threads / p.batch;
  const int64_t tm = std::max<int64_t>(1, std::min(per_batch, ceil_div(p.m, kRowGrain)));
  const int64_t mstep = round_up(ceil_div(p.m, tm), kRowGrain);
  // B can be used in place when it already is a dense-enough k x n block of Acc.
  constexpr bool kSameType = std::is_same_v<Tin, Acc>;
  const bool b_in_place = kSameType && p.transb == 'N';

  std::atomic<bool> failed{false};
  parallel_for(p.batch * tm, threads, [&](int64_t item) {
    const int64_t batch = item / tm;
    const int64_t i0 = (item % tm) * mstep, i1 = std::min(p.m, i0 + mstep);
    if (i0 >= i1) return;
    const Tin* a = a_all + batch * p.stride_a;
    const Tin* b = b_all + batch * p.stride_b;
    const Acc* x;
    int64_t ldx;
    if (b_in_place) {
      x = reinterpret_cast<const Acc*>(b);
      ldx = p.ldb;
    } else {
      Acc* xp = static_cast<Acc*>(thread_scratch(ScratchSlot::kPackB, size_t(p.k * p.n) * sizeof(Acc)));
      if (xp == nullptr) {
        failed = true;
        return;
      }
      for (int64_t j = 0; j < p.n; ++j)
        for (int64_t l = 0; l < p.k; ++l)
          xp[l + j * p.k] = to_acc(p.transb == 'N' ? b[l + j * p.ldb] : b[j + l * p.ldb]);
      x = xp;
      ldx = p.k;
    }
    const int64_t rows = i1 - i0;
    Acc* y = static_cast<Acc*>(thread_scratch(ScratchSlot::kAccum, size_t(rows * p.n) * sizeof(Acc)));
    if (y == nullptr) {
      failed = true;
      return;
    }
    const Tin* a_rows = p.transa == 'T' ? a + i0 * p.lda : a + i0;
    fn(rows, p.n, p.k, a_rows, p.lda, x, ldx, y, rows);
    store_block<Tin>(rows, p.n, y, rows, Acc(p.alpha), Acc(p.beta), c_all + batch * p.stride_c + i0, p.ldc);
  });
  if (failed) return Status::internal("cpu kernels: out of memory for skinny buffers");
  return Status::ok();
}

}  // namespace

Status skinny_gemm(const GemmParams& params, const GemmOperands& ops, const SkinnyConfig& cfg) {
  return run_gemm_entry(params, ops, cfg.isa, "cpu kernels", [&](auto zero, const GemmParams& p, const IsaKernels& kt) {
    return run_typed<decltype(zero)>(p, ops, cfg, kt);
  });
}

}  // namespace tunableop::cpu_kernels
