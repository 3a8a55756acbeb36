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

enum class PeerAlgo { kOneShot, kTwoShot };

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
};

// Launches one chunk on `stream` (of this rank's device, which must be current).
cudaError_t peer_all_reduce(PeerAlgo algo, const PeerCall& call, cudaStream_t stream);

}  // namespace tunableop::cuda
