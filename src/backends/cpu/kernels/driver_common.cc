#include "backends/cpu/kernels/driver_common.h"

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace tunableop::cpu_kernels {

namespace {

Status bad(const std::string& what) { return Status::invalid_argument("cpu kernels: " + what); }

template <class T>
void scale_typed(const GemmParams& p, T* c) {
  using Acc = AccOf<T>;
  const Acc beta = Acc(p.beta);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t j = 0; j < p.n; ++j) {
      T* cj = c + b * p.stride_c + j * p.ldc;
      for (int64_t i = 0; i < p.m; ++i) cj[i] = beta == 0 ? from_acc<T>(Acc(0)) : from_acc<T>(beta * to_acc(cj[i]));
    }
  }
}

struct ScratchBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  ~ScratchBuffer() { std::free(ptr); }
};

}  // namespace

StatusOr<GemmParams> check_gemm_args(const GemmParams& in, const GemmOperands& ops) {
  GemmParams p = in;
  auto upper = [](char t) { return t == 'n' ? 'N' : t == 't' ? 'T' : t; };
  p.transa = upper(p.transa);
  p.transb = upper(p.transb);
  if (p.transa != 'N' && p.transa != 'T') return bad("transa must be 'N' or 'T'");
  if (p.transb != 'N' && p.transb != 'T') return bad("transb must be 'N' or 'T'");
  if (p.m < 0 || p.n < 0 || p.k < 0)
    return bad("m, n, k must be >= 0 (got " + std::to_string(p.m) + ", " + std::to_string(p.n) + ", " +
               std::to_string(p.k) + ")");
  if (p.batch < 1) return bad("batch must be >= 1 (got " + std::to_string(p.batch) + ")");
  if (p.widens() && !(p.c_dtype() == DType::kF32 && (p.dtype == DType::kBF16 || p.dtype == DType::kF16)))
    return bad("a C wider than A and B is fp32, for bf16 or fp16 inputs");
  if (p.lda < 0 || p.ldb < 0 || p.ldc < 0 || p.stride_a < 0 || p.stride_b < 0 || p.stride_c < 0)
    return bad("leading dimensions and strides must be >= 0");
  // Leading dimensions and strides as GemmParams::with_defaults() fills them (dense where 0;
  // stride 0 for an operand without elements; saturating), so that a caller that skipped it
  // still gets a defined answer, and the two never disagree.
  p = p.with_defaults();
  if (p.lda < std::max<int64_t>(1, p.a_rows()))
    return bad("lda (" + std::to_string(p.lda) + ") must be >= " + std::to_string(p.a_rows()));
  if (p.ldb < std::max<int64_t>(1, p.b_rows()))
    return bad("ldb (" + std::to_string(p.ldb) + ") must be >= " + std::to_string(p.b_rows()));
  if (p.ldc < std::max<int64_t>(1, p.m))
    return bad("ldc (" + std::to_string(p.ldc) + ") must be >= " + std::to_string(p.m));
  // Overlapping C matrices would be written by several threads at once.
  if (p.batch > 1 && p.m > 0 && p.n > 0 && p.stride_c < p.ldc * (p.n - 1) + p.m)
    return bad("stride_c (" + std::to_string(p.stride_c) + ") makes the C matrices of the batch overlap");
  const bool writes_c = p.m > 0 && p.n > 0;
  const bool reads_ab = writes_c && p.k > 0 && p.alpha != 0.0;
  if (writes_c && ops.c == nullptr) return bad("C is null");
  if (reads_ab && (ops.a == nullptr || ops.b == nullptr)) return bad("A or B is null");
  return p;
}

int resolve_threads(int threads) {
  if (threads > 0) return threads;
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : int(hw);
}

void* thread_scratch(ScratchSlot slot, size_t bytes) {
  thread_local ScratchBuffer buffers[size_t(ScratchSlot::kCount)];
  ScratchBuffer& s = buffers[size_t(slot)];
  if (bytes <= s.bytes && s.ptr != nullptr) return s.ptr;
  std::free(s.ptr);
  // Round up to whole 4 KiB pages (aligned_alloc wants a multiple of the alignment anyway) and
  // leave room for the micro-kernel's prefetches past the last sliver.
  size_t want = (bytes + 4096 + 4095) / 4096 * 4096;
  s.ptr = std::aligned_alloc(64, want);
  s.bytes = s.ptr ? want : 0;
  return s.ptr;
}

void parallel_for(int64_t items, int threads, const std::function<void(int64_t)>& body) {
  const int64_t nt = std::min<int64_t>(std::max(threads, 1), items);
  if (nt <= 1) {
    for (int64_t i = 0; i < items; ++i) body(i);
    return;
  }
#ifdef _OPENMP
#pragma omp parallel for num_threads(int(nt)) schedule(dynamic, 1)
  for (int64_t i = 0; i < items; ++i) body(i);
#else
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    for (int64_t i = next++; i < items; i = next++) body(i);
  };
  std::vector<std::thread> pool;
  try {
    for (int64_t t = 1; t < nt; ++t) pool.emplace_back(worker);
  } catch (...) {
    // No more threads to be had: the ones started and this one finish the work.
  }
  worker();
  for (auto& t : pool) t.join();
#endif
}

void scale_c(const GemmParams& p, void* c) {
  switch (p.c_dtype()) {
    case DType::kF32: scale_typed(p, static_cast<float*>(c)); break;
    case DType::kF64: scale_typed(p, static_cast<double*>(c)); break;
    case DType::kBF16: scale_typed(p, static_cast<bf16*>(c)); break;
    case DType::kF16: scale_typed(p, static_cast<fp16*>(c)); break;
    case DType::kF8E4M3:
    case DType::kF8E5M2: break;  // never a GEMM's C (validate refuses fp8)
  }
}

}  // namespace tunableop::cpu_kernels
