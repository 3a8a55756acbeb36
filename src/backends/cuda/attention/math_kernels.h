// The C++17 boundary of the math path's kernels (math_kernels.cu): the data movement and the
// masked softmax around its two cuBLAS GEMMs (math_attention.cc). Layouts of the dense
// intermediates, per (sequence b, kv head g) "slab" bg = b * kv_heads + g, M = q_len * group
// rows (row = query i * group + head r of the group):
//   qg [bg][M][D]  (E)     kg, vg [bg - bg0][kv_len][D]  (E; one chunk of slabs at a time)
//   s  [bg][M][kv_len] (fp32 scores)   p  same (E probabilities)   og [bg][M][D] (fp32)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tunableop::cuda {

enum class MathElem { kF32, kBF16, kF16 };

struct MathArgs {
  MathElem elem = MathElem::kBF16;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  const int32_t* block_table = nullptr;  // paged: [batch][pages_per_seq]
  const int32_t* kv_lens = nullptr;      // optional: [batch]
  const int32_t* q_lens = nullptr;       // optional: [batch]
  int64_t q_row_stride = 0, o_row_stride = 0, max_seq = 0;
  int64_t batch = 1, q_len = 1, kv_len = 1, heads = 1, kv_heads = 1, head_dim = 128;
  int64_t page_size = 0, pages_per_seq = 0;
  bool causal = true;
  int64_t window = 0;  // sliding window (0: none); keys before a sequence's first window are not read
  float softcap = 0;   // scores s become softcap * tanh(s / softcap) (0: none)
};

// qg from the operands (every slab), and kg, vg of slabs [bg0, bg0 + slabs) (kg's first row is
// slab bg0's): rows of padding queries, keys past a sequence's length and keys before its first
// query's window are zeros (so the GEMMs never read stale or NaN memory).
cudaError_t math_gather_q(const MathArgs& a, void* qg, cudaStream_t s);
cudaError_t math_gather_kv(const MathArgs& a, int64_t bg0, int64_t slabs, void* kg, void* vg, cudaStream_t s);
// p = softmax over each row's visible keys of the scores of slabs [bg0, bg0 + slabs); zeros
// elsewhere (masked keys and padding rows).
cudaError_t math_softmax(const MathArgs& a, int64_t bg0, int64_t slabs, const float* scores, void* p, cudaStream_t s);
// out rows (E) from og (fp32).
cudaError_t math_scatter(const MathArgs& a, const float* og, cudaStream_t s);

}  // namespace tunableop::cuda
