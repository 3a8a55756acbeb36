// Fused decode projections (issue 13): one kernel computes a projection y = in W^T for a few
// tokens (n <= 8) together with the element-wise work around it in a layer, so a decode step
// runs 6 kernels per layer instead of 11 (5 with RoPE and the KV-cache write in qkv's epilogue)
// and no intermediate goes through memory:
//
//   input     kInput: in (E) as given | kNorm: rmsnorm(x, norm_w) of the fp32 residual stream,
//             computed by every block into shared memory (x is a few KB, read from L2)
//   output    kStore: y (E) | kAddResidual: residual += float(E(y)) | kGated: act(E(gate)) *
//             E(up) (rows i and m/2 + i of W) | kArgmax: y (the logits) and each column's argmax |
//             kStoreF32: y in fp32, unrounded (tensor parallelism's partial sums) | kRope: y
//             (the qkv rows) with RoPE on its q and k heads, k and v also written into the KV
//             cache (GemvRope; decode's rope_kv fused away)
//
// Each output element is rounded to E exactly where the unfused kernels round it (the GEMM's
// output, then the element-wise op), so fused and unfused differ only by summation order.
//
// Design: W [m, k] row-major (the engine's [out, in]) is streamed once with 16-byte
// `ld.global.cs` loads; a warp group of SK warps owns R rows at a time and splits k; 8 warps per
// block; a persistent grid (as many blocks as fit at once) walks the row groups, so the prologue
// runs once per block. Launched with programmatic dependent launch (two trigger points, see
// FusedGemvArgs::pdl_late), optionally prefetching the next projections' weights into the L2.
// The launch interface is plain C++17 (nvcc compiles the .cu files under any dialect); the op
// FusedLinear (include/tunableop/fused_linear.h) offers each shape as a candidate (candidates.cc).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_common/gated_act.h"

namespace tunableop::cuda {

enum class Elem { kF32, kBF16 };
enum class GemvIn { kInput, kNorm };
enum class GemvOut { kStore, kAddResidual, kGated, kArgmax, kStoreF32, kRope };

// kRope (tunableop::FusedLinearRope, as plain C++17): y [n, m] holds the qkv rows, m =
// (n_heads + 2 n_kv_heads) x head_dim. A unit of R rows is R/2 rotation pairs (rows i and
// i + head_dim/2 of a head, as kGated pairs gate and up rows), so the epilogue has both halves of
// a pair in registers: q and k rotated at positions[j], v as is, all stored to y; k and v also
// into the cache at (seqs[j], positions[j]) (static, or paged through block_table: positions at or
// past seq_lens[seq] not stored).
struct GemvRope {
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  const int32_t* seqs = nullptr;       // [n]
  const int32_t* positions = nullptr;  // [n]
  const float* cos = nullptr;          // [position][head_dim / 2]
  const float* sin = nullptr;
  void* k_cache = nullptr;  // E
  void* v_cache = nullptr;
  int64_t max_seq = 0;                   // static: [seq][kv_head][max_seq][head_dim]
  const int32_t* block_table = nullptr;  // paged: pools [page][kv_head][page_size][head_dim]
  int64_t page_size = 0, pages_per_seq = 0;
  const int32_t* seq_lens = nullptr;
};

struct FusedGemvShape {
  int rows = 1;     // R: rows per warp group (kGated: R/2 gate rows and their R/2 up rows)
  int k_split = 1;  // SK: warps of a group splitting k (1, 2, 4, 8)
};

struct FusedGemvArgs {
  Elem e = Elem::kBF16;
  GemvIn in_kind = GemvIn::kInput;
  GemvOut out_kind = GemvOut::kStore;
  const void* w = nullptr;       // [m, k] E
  int64_t m = 0, k = 0;          // kGated: m = 2 * inter
  int n = 1;                     // tokens, 1..8
  const void* input = nullptr;   // kInput: [n, k] E
  const float* x = nullptr;      // kNorm: [n, k] fp32
  const void* norm_w = nullptr;  // kNorm: [k] E
  float eps = 1e-6f;
  bool add_one = false;            // kNorm: Gemma's (1 + w)
  void* y = nullptr;               // kStore, kArgmax: [n, m] E; kStoreF32: [n, m] fp32
  float* residual = nullptr;       // kAddResidual: [n, m] fp32
  void* gated = nullptr;           // kGated: [n, m / 2] E
  GatedAct act = GatedAct::kSilu;  // kGated
  int32_t* ids = nullptr;          // kArgmax: [n]
  // kArgmax scratch, zero before the launch and left zero after it: one key per column, one
  // counter of finished blocks (the last block turns the keys into ids).
  unsigned long long* keys = nullptr;  // [n]
  unsigned* counter = nullptr;         // [1]
  // Programmatic dependent launch (sm_90). Early (pdl_late false): the first weight loads are
  // issued before griddepcontrol.wait and the next kernel may launch as soon as we start. Late:
  // nothing is loaded before the wait and the next kernel launches once our last loads are in
  // flight (its blocks then fill the SMs ours leave, instead of competing with a latency-bound
  // kernel before us for memory).
  bool pdl = false;
  bool pdl_late = false;
  // Weights of the projections after this one (16-byte aligned), fetched into the L2 when this
  // kernel's work is done, so that they stream while latency-bound kernels (RoPE, attention)
  // leave the memory idle. 0 bytes: none.
  const void* prefetch[2] = {nullptr, nullptr};
  int64_t prefetch_bytes[2] = {0, 0};
  GemvRope rope;  // kRope
};

inline constexpr int kFusedGemvMaxN = 8;

// The shapes offered for an epilogue (kGated, kRope: R even), Default-ish ones first.
int fused_gemv_shapes(GemvOut out, const FusedGemvShape** shapes);
bool fused_gemv_offered(GemvOut out, const FusedGemvShape& s);

// Why this shape cannot run these arguments (k not a multiple of 16 bytes, n out of range,
// misaligned pointers, a missing buffer, ...), or nullptr when it can.
const char* fused_gemv_unsupported(const FusedGemvArgs& a, const FusedGemvShape& s);

// Queues the kernel on `stream`. Call once outside stream capture first for each (shape,
// argument kinds): the first call sets the kernel's shared-memory limit and reads its occupancy.
cudaError_t fused_gemv(const FusedGemvArgs& a, const FusedGemvShape& s, cudaStream_t stream);

}  // namespace tunableop::cuda
