// Loop nest, per thread and per (batch, m range, n range) region:
//   for jc over n step nc         B panel kc x nc packed once per (jc, pc): lives in L3 / L2
//     for pc over k step kc
//       for ic over m step mc     A block mc x kc packed: lives in L2
//         for jr over nc step nr  B sliver kc x nr: stays in L1 across the ir loop
//           for ir over mc step mr  micro-kernel on one mr x nr tile of C
// Threads take independent regions of C (whole batch entries, or a 2D split of one product)
// with private packing buffers and no barriers. That packs the operand the split does not divide
// once per thread (O(k * rows) extra against O(k * rows * cols) flops), but every thread's B
// panel stays in its own L2. A GotoBLAS-style team sharing one B panel (rows split, two barriers
// per panel) measured 15% slower on the 2-core Xeon this was tuned on, and far slower when
// another process holds one of the cores (a barrier waits for the descheduled thread).
#include "backends/cpu/kernels/blocked_gemm.h"

#include <atomic>

#include "backends/cpu/kernels/driver_common.h"
#include "backends/cpu/kernels/kernel_table.h"

namespace tunableop::cpu_kernels {

namespace {

// Largest micro-tile (mr * nr elements) a kernel table may declare: edge tiles go through a
// stack buffer of this size.
constexpr int kMaxTileElems = 2048;
// Half-precision C is accumulated in an fp32 buffer (one rounding at the end instead of one per
// k block); nc shrinks so the buffer stays under this many bytes per thread.
constexpr int64_t kAccumBytes = int64_t(8) << 20;

// All tiles of one mb x nb block of C from a packed A block and B panel.
template <class Tc>
void macro_kernel(const MicroKernel<Tc>& uk, int64_t mb, int64_t nb, int64_t kb, const Tc* apack, const Tc* bpack,
                  Tc* c, int64_t ldc, Tc alpha, Tc beta) {
  const int mr = uk.mr, nr = uk.nr;
  for (int64_t jr = 0; jr < nb; jr += nr) {
    const int64_t cols = std::min<int64_t>(nr, nb - jr);
    const Tc* bp = bpack + jr * kb;
    for (int64_t ir = 0; ir < mb; ir += mr) {
      const int64_t rows = std::min<int64_t>(mr, mb - ir);
      const Tc* ap = apack + ir * kb;
      Tc* cp = c + ir + jr * ldc;
      if (rows == mr && cols == nr) {
        uk.fn(kb, ap, bp, cp, ldc, alpha, beta);
        continue;
      }
      // Edge tile: compute the full padded tile off to the side, then merge the valid part, so
      // the micro-kernel never needs masks and nothing outside C is touched.
      alignas(64) Tc tile[kMaxTileElems];
      uk.fn(kb, ap, bp, tile, mr, alpha, Tc(0));
      for (int64_t j = 0; j < cols; ++j) {
        Tc* cj = cp + j * ldc;
        const Tc* tj = tile + j * mr;
        if (beta == Tc(0)) {
          for (int64_t i = 0; i < rows; ++i) cj[i] = tj[i];
        } else {
          for (int64_t i = 0; i < rows; ++i) cj[i] = tj[i] + beta * cj[i];
        }
      }
    }
  }
}

template <class Tin>
struct BlockedJob {
  using Tc = AccOf<Tin>;
  const GemmParams* p = nullptr;
  const Tin* a = nullptr;
  const Tin* b = nullptr;
  void* c = nullptr;   // Tin, or Tc when C is the accumulation's type (GemmParams::out_dtype)
  bool c_acc = false;  // C holds Tc: accumulate straight into it, as fp32 and fp64 do
  TypeKernels<Tin> kernels;
  int64_t mc = 0, nc = 0, kc = 0;
};

// The block size at most `limit` (a multiple of `grain`) that splits `len` into equal blocks.
int64_t balanced_block(int64_t len, int64_t limit, int64_t grain) {
  if (len <= 0) return grain;
  return std::min(round_up(ceil_div(len, ceil_div(len, limit)), grain), round_up(len, grain));
}

// One region of C: batch entry `batch`, rows [m0, m1), columns [n0, n1). False when scratch
// memory could not be had.
template <class Tin>
bool run_region(const BlockedJob<Tin>& job, int64_t batch, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  using Tc = AccOf<Tin>;
  // fp32 and fp64 accumulate straight into C, and so do bf16 and fp16 into an fp32 C; into a C of
  // their own type they go through an fp32 buffer.
  const bool direct = std::is_same_v<Tin, Tc> || job.c_acc;
  const GemmParams& p = *job.p;
  const MicroKernel<Tc>& uk = job.kernels.uk;
  const int mr = uk.mr, nr = uk.nr;
  const Tin* a = job.a + batch * p.stride_a;
  const Tin* b = job.b + batch * p.stride_b;
  Tin* c = static_cast<Tin*>(job.c) + batch * p.stride_c;    // C of the inputs' type
  Tc* c_acc = static_cast<Tc*>(job.c) + batch * p.stride_c;  // or of the accumulation's
  const int64_t mlen = m1 - m0, nlen = n1 - n0;
  // Blocks of equal size rather than full ones plus a thin remainder: a thin last block reuses
  // each B sliver (or A block) too few times to pay for loading it.
  const int64_t mc = balanced_block(mlen, job.mc, mr);
  const int64_t kc = balanced_block(p.k, job.kc, 1);
  int64_t nc = balanced_block(nlen, job.nc, nr);
  if (!direct) nc = std::max<int64_t>(nr, std::min(nc, kAccumBytes / int64_t(sizeof(Tc)) / mlen / nr * nr));

  Tc* apack = static_cast<Tc*>(thread_scratch(ScratchSlot::kPackA, size_t(mc * kc) * sizeof(Tc)));
  Tc* bpack = static_cast<Tc*>(thread_scratch(ScratchSlot::kPackB, size_t(kc * nc) * sizeof(Tc)));
  Tc* accum = direct ? nullptr : static_cast<Tc*>(thread_scratch(ScratchSlot::kAccum, size_t(mlen * nc) * sizeof(Tc)));
  if (apack == nullptr || bpack == nullptr || (!direct && accum == nullptr)) return false;

  const Tc alpha = Tc(p.alpha), beta = Tc(p.beta);
  for (int64_t jc = n0; jc < n1; jc += nc) {
    const int64_t nb = std::min(nc, n1 - jc);
    Tc* cblk;
    int64_t ldcb;
    if (direct) {
      cblk = c_acc + m0 + jc * p.ldc;
      ldcb = p.ldc;
    } else {
      cblk = accum;
      ldcb = mlen;
    }
    for (int64_t pc = 0; pc < p.k; pc += kc) {
      const int64_t kb = std::min(kc, p.k - pc);
      // Only the first k block sees the caller's beta; later ones add to what it left.
      const Tc beta_blk = pc > 0 ? Tc(1) : direct ? beta : Tc(0);
      // op(B)(l, j) is b[l + j*ldb] ('N') or b[j + l*ldb] ('T'); packed by columns j.
      const Tin* bsrc = p.transb == 'N' ? b + pc + jc * p.ldb : b + jc + pc * p.ldb;
      job.kernels.pack_b(bsrc, p.ldb, p.transb == 'T', nb, kb, bpack);
      for (int64_t ic = 0; ic < mlen; ic += mc) {
        const int64_t mb = std::min(mc, mlen - ic);
        const int64_t i0 = m0 + ic;
        const Tin* asrc = p.transa == 'N' ? a + i0 + pc * p.lda : a + pc + i0 * p.lda;
        job.kernels.pack_a(asrc, p.lda, p.transa == 'N', mb, kb, apack);
        macro_kernel(uk, mb, nb, kb, apack, bpack, cblk + ic, ldcb, alpha, beta_blk);
      }
    }
    if constexpr (!std::is_same_v<Tin, Tc>) {
      if (!direct) store_block<Tin>(mlen, nb, accum, ldcb, Tc(1), beta, c + m0 + jc * p.ldc, p.ldc);
    }
  }
  return true;
}

// Splits one m x n product over `threads` as a tm x tn grid, minimising the rows of A plus
// columns of B each thread reads (each piece at least one micro-tile).
void choose_grid(int64_t m, int64_t n, int threads, int mr, int nr, int64_t* tm, int64_t* tn) {
  *tm = 1;
  *tn = 1;
  for (int t = threads; t >= 1; --t) {
    double best = -1;
    for (int64_t x = 1; x <= t; ++x) {
      if (t % x != 0) continue;
      const int64_t y = t / x;
      if (ceil_div(m, mr) < x || ceil_div(n, nr) < y) continue;
      const double cost = double(ceil_div(m, x)) + double(ceil_div(n, y));
      if (best < 0 || cost < best) {
        best = cost;
        *tm = x;
        *tn = y;
      }
    }
    if (best >= 0) return;
  }
}

template <class Tin>
Status run_typed(const GemmParams& p, const GemmOperands& ops, const BlockedConfig& cfg, const IsaKernels& kt) {
  BlockedJob<Tin> job;
  job.p = &p;
  job.a = static_cast<const Tin*>(ops.a);
  job.b = static_cast<const Tin*>(ops.b);
  job.c = ops.c;
  job.c_acc = p.widens();  // validated: an fp32 C for bf16 or fp16 inputs
  job.kernels = kt.get<Tin>();
  const int mr = job.kernels.uk.mr, nr = job.kernels.uk.nr;
  if (job.kernels.uk.fn == nullptr || job.kernels.pack_a == nullptr || job.kernels.pack_b == nullptr ||
      mr * nr > kMaxTileElems)
    return Status::internal("cpu kernels: incomplete kernel table");
  job.mc = std::max<int64_t>(mr, cfg.mc / mr * mr);
  job.nc = std::max<int64_t>(nr, cfg.nc / nr * nr);
  job.kc = std::max<int64_t>(1, cfg.kc);

  const int threads = resolve_threads(cfg.threads);
  std::atomic<bool> failed{false};
  // Whole batch entries per thread when there are enough of them, else a 2D split of each
  // product.
  int64_t tm = 1, tn = 1;
  if (p.batch < threads) choose_grid(p.m, p.n, int(std::max<int64_t>(1, threads / p.batch)), mr, nr, &tm, &tn);
  const int64_t mstep = round_up(ceil_div(p.m, tm), mr);
  const int64_t nstep = round_up(ceil_div(p.n, tn), nr);
  parallel_for(p.batch * tm * tn, threads, [&](int64_t item) {
    const int64_t batch = item / (tm * tn), r = item % (tm * tn);
    const int64_t m0 = (r / tn) * mstep, n0 = (r % tn) * nstep;
    const int64_t m1 = std::min(p.m, m0 + mstep), n1 = std::min(p.n, n0 + nstep);
    if (m0 >= m1 || n0 >= n1) return;
    if (!run_region(job, batch, m0, m1, n0, n1)) failed = true;
  });
  if (failed) return Status::internal("cpu kernels: out of memory for packing buffers");
  return Status::ok();
}

}  // namespace

Status blocked_gemm(const GemmParams& params, const GemmOperands& ops, const BlockedConfig& cfg) {
  return run_gemm_entry(params, ops, cfg.isa, "cpu kernels", [&](auto zero, const GemmParams& p, const IsaKernels& kt) {
    return run_typed<decltype(zero)>(p, ops, cfg, kt);
  });
}

}  // namespace tunableop::cpu_kernels
