// Our all-reduce over CUDA peer memory (one process, peer access enabled between every pair of
// GPUs): each rank copies its input into its own staging buffer, then
//   one-shot  every rank reads every rank's staging buffer and sums (one barrier; each rank
//             reads (W - 1) x the message over NVLink: the fastest for small messages);
//   two-shot  rank r sums slice r of the message from every rank's staging and keeps it in its
//             result buffer, then every rank gathers the other slices from their owners (two
//             barriers; each rank reads 2 (W - 1) / W x the message: better for large ones).
// Sums accumulate in fp32 (fp64 for fp64) over ranks in rank order and are rounded once, and a
// slice is summed by one rank only, so every rank ends with the same bits.
//
// Synchronisation is per block: block b of rank r writes epoch e into flag [b][r] of every
// rank (st.release.sys) and waits until its own flags [b][q] reach e (ld.acquire.sys). Every
// launch uses the same grid, so block b's counters (barrier epoch, call count) advance alike on
// every rank, graph replays included (nothing comes from the host). Staging buffers alternate by
// call parity: a rank writes a buffer again two calls later, after a barrier of the call in
// between, by which time every peer has finished reading it.
//
// One-shot LL ("low latency", for small messages): no staging copy and no barrier. Each rank
// stores its input straight into every peer's receive area as 16-byte lines {data, flag, data,
// flag} (8-byte halves are written atomically, so a reader that sees the flag in both halves has
// the data), then waits on its own receive area for the peers' lines and sums. The flag is the
// call's epoch: one per rank in device memory, read by every block after the previous kernel of
// the stream finished and advanced by the last block to finish (so message sizes and grids may
// vary between calls), never 0 (the areas start zeroed). Receive areas alternate by epoch
// parity: a rank writes an area again two calls later, when every peer has finished reading it
// (a peer's line of the call in between came from a kernel that started after its previous
// one ended).
//
// Epilogue (any algorithm): with `residual` set, the output is an fp32 residual stream that
// receives residual[i] += float(round_to(sum[i])) (AllReduceEpilogue::kAddResidual).
//
// Plain C++17 with the CUDA runtime only (kernels.h style); the launcher returns the launch's
// error.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace tunableop::cuda {

constexpr int kPeerMaxRanks = 8;
constexpr int kPeerBlocks = 64;    // fixed grid (see above)
constexpr int kPeerThreads = 512;  // per block
// Flags: [kPeerBlocks][kPeerMaxRanks] uint32; counters: [kPeerBlocks][2] uint32 (epoch, calls).
constexpr size_t kPeerFlagWords = size_t(kPeerBlocks) * kPeerMaxRanks;
constexpr size_t kPeerCounterWords = size_t(kPeerBlocks) * 2;

// LL: the largest message (bytes of input per rank) and each receive slot's size (2x: flags).
constexpr size_t kPeerLLMaxBytes = size_t(1) << 20;
constexpr size_t kPeerLLSlotBytes = 2 * kPeerLLMaxBytes;
constexpr int kPeerLLThreads = 256;
constexpr int kPeerLLMaxBlocks = 64;

enum class PeerAlgo { kOneShot, kTwoShot, kOneShotLL };

// One chunk of an all-reduce on one rank. Staging layout of every rank (chunk_bytes each, 16-byte
// multiple): [input parity 0][input parity 1][result parity 0][result parity 1].
struct PeerCall {
  const void* input = nullptr;  // this rank's, count elements (any alignment)
  void* output = nullptr;       // may equal input
  int64_t count = 0;            // elements; count * element size <= chunk_bytes
  int dtype = 0;                // tunableop::DType order: fp32 0, fp64 1, bf16 2, fp16 3
  int rank = 0, world = 1;
  size_t chunk_bytes = 0;
  void* staging[kPeerMaxRanks] = {};    // every rank's staging base (peer pointers)
  uint32_t* flags[kPeerMaxRanks] = {};  // every rank's flag array
  uint32_t* counters = nullptr;         // this rank's
  // Epilogue: the fp32 residual stream (instead of output) and the sum's rounding before the add.
  float* residual = nullptr;
  int round_to = 0;  // DType order as dtype
  // LL: every rank's receive area ([parity][sender][kPeerLLSlotBytes]) and this rank's
  // {epoch, finished blocks} words.
  void* ll_recv[kPeerMaxRanks] = {};
  uint32_t* ll_state = nullptr;
  bool pdl = false;  // launched with programmatic dependent launch (sm_90)
  // LL: memory to fetch into the L2 while waiting for the peers (a 16-byte aligned start; no
  // effect on the result).
  const void* prefetch = nullptr;
  int64_t prefetch_bytes = 0;
};

// Launches one chunk on `stream` (of this rank's device, which must be current). LL: the whole
// message (at most kPeerLLMaxBytes; fp32, bf16 or fp16).
cudaError_t peer_all_reduce(PeerAlgo algo, const PeerCall& call, cudaStream_t stream);

// residual[i] += float(round_to(sum[i])) for `count` elements of `dtype` (the epilogue of a
// collective that has none of its own: NCCL's sum in a scratch buffer).
cudaError_t add_sum_to_residual(int dtype, const void* sum, int64_t count, int round_to, float* residual,
                                cudaStream_t stream);

}  // namespace tunableop::cuda
