// Launchers for the non-GEMM kernels of the CUDA forward pass. Plain C++17 with no library
// headers, so that kernels.cu compiles under any CMake/nvcc dialect; every launcher returns the
// launch's cudaError_t for the engine to check. `pdl`: launched with programmatic dependent
// launch (sm_90; cuda_common/pdl.cuh): every kernel here waits for the previous kernel of the
// stream first, so the flag only lets its launch overlap that kernel's tail.
//
// Element type E of the GEMM operands (weights, normalised activations, q/k/v, KV cache,
// logits) is fp32 or bf16; the residual stream stays fp32 in both (more accurate than keeping
// it in bf16, at the cost of one fp32 vector per token). Layouts match the CPU engine:
//   qkv row [q heads | k heads | v heads]; gate_up row [gate | up];
//   KV cache per layer [seq][kv_head][max_seq][head_dim].
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_common/gated_act.h"

namespace tunableop::llm::cuda {

enum class Elem { kF32, kBF16 };
using Act = ::tunableop::cuda::GatedAct;  // kSilu, kGeluTanh, kGeluErf

// dst[i] = E(offset + scale * random_uniform(seed, stream_id, i)): the host generator's values.
cudaError_t fill_random(Elem e, void* dst, int64_t n, uint64_t seed, uint64_t stream_id, float scale, float offset,
                        cudaStream_t s);
// dst (E) = src (fp32, device), rounded to nearest even for bf16.
cudaError_t convert_f32(Elem e, const float* src, void* dst, int64_t n, cudaStream_t s);

// x[r] = E(table[ids[r]] * scale) widened to fp32 (transformers rounds Gemma's scaled
// embedding to the model dtype before the first layer).
cudaError_t embedding(Elem e, const int32_t* ids, int64_t rows, const void* table, int64_t width, float scale, float* x,
                      cudaStream_t s, bool pdl = false);
// out (E) = x / sqrt(mean(x^2) + eps) * w  (or * (1 + w) when add_one)
cudaError_t rmsnorm(Elem e, const float* x, const void* w, int64_t rows, int64_t width, float eps, bool add_one,
                    void* out, cudaStream_t s, bool pdl = false);
// x (fp32) += y (E)
cudaError_t add_residual(Elem e, float* x, const void* y, int64_t n, cudaStream_t s, bool pdl = false);
// The two above as one pass over the rows (prefill: the residual add of o and down, then the next
// projection's norm): x (fp32) += y (E), then out (E) = rmsnorm(x, w). The same bits as
// add_residual followed by rmsnorm, with one read of x and y and one write of x and out.
cudaError_t add_rmsnorm(Elem e, float* x, const void* y, const void* w, int64_t rows, int64_t width, float eps,
                        bool add_one, void* out, cudaStream_t s, bool pdl = false);

struct RopeStoreArgs {
  void* qkv = nullptr;  // [rows, row_stride]
  int64_t rows = 0, row_stride = 0;
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  const int32_t* seqs = nullptr;       // device, [rows]
  const int32_t* positions = nullptr;  // device, [rows]
  const float* cos = nullptr;          // device, [max_seq][head_dim / 2]
  const float* sin = nullptr;
  void* k_cache = nullptr;  // this layer's
  void* v_cache = nullptr;
  int64_t max_seq = 0;  // static cache: [seq][kv_head][max_seq][head_dim]
  // Paged cache (kv_cache.h; block_table non-null): pools [page][kv_head][page_size][head_dim],
  // rows at or past their sequence's length (seq_lens) not written.
  const int32_t* block_table = nullptr;  // device, [seq][pages_per_seq]
  int64_t page_size = 0, pages_per_seq = 0;
  const int32_t* seq_lens = nullptr;  // device, [seq]
  // Qwen2's q/k/v biases (null: none), [q_dim + 2 kv_dim]: each value is E(value + bias) before
  // the rotation and the store, the bits of add_bias (family_kernels.h) followed by rope_store.
  const void* qkv_bias = nullptr;
};
// Rotate-half RoPE on q (in place) and k, k and v into the cache at (seqs[r], positions[r]).
cudaError_t rope_store(Elem e, const RopeStoreArgs& a, cudaStream_t s, bool pdl = false);

// out[r, i] = act(gate_up[r, i]) * gate_up[r, inter + i]
cudaError_t gated_activation(Elem e, const void* gate_up, int64_t rows, int64_t inter, Act act, void* out,
                             cudaStream_t s, bool pdl = false);
// out[i] = x[rows[i]] (fp32 rows of `width`; rows on the device)
// out[i] = x[rows[i]], rows of row_bytes bytes (a multiple of 4; cudaErrorInvalidValue else).
cudaError_t gather_rows(const void* x, int64_t row_bytes, const int64_t* rows, int64_t count, void* out, cudaStream_t s,
                        bool pdl = false);
// First index of each row's maximum (torch.argmax's tie rule).
cudaError_t argmax_rows(Elem e, const void* x, int64_t rows, int64_t width, int32_t* out, cudaStream_t s,
                        bool pdl = false);

// For b < batch: ids[b] = next[b], positions[b] += 1, lens[b] += 1 (the next decode step's
// inputs from this one's argmax; one block), and host_next[b] = next[b] where host_next is given
// (pinned host memory: a store through unified addressing, visible to the host once the kernel
// is complete). With `pdl` it launches during the step's last kernel and waits for it
// (pdl_wait): that kernel's completion implies the whole step's (pdl.cuh), so it still writes
// after every kernel of the step has read ids, positions and lengths.
cudaError_t advance_decode(const int32_t* next, int32_t* ids, int32_t* positions, int32_t* lens, int64_t batch,
                           int32_t* host_next, cudaStream_t s, bool pdl = false);

// Keeps the stream busy for `ns` nanoseconds: a profile queues a whole step behind it, so the
// step's event timings are the GPU's, not the rate at which the host launches.
cudaError_t spin(int64_t ns, cudaStream_t s);
// Reads `bytes` (a multiple of 16) of buf, writing nothing: evicts the L2 before timing a
// kernel on weights that decode streams from memory.
cudaError_t touch(const void* buf, int64_t bytes, float* sink, cudaStream_t s);

}  // namespace tunableop::llm::cuda
