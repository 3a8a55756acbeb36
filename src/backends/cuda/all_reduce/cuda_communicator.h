// The CUDA communicator: one process driving N GPUs. Per rank it holds a stream (group-mode
// work), the staging buffers and flags of our peer-memory kernels (peer_kernels.h; only when
// every pair of GPUs has peer access, which it enables), and NCCL communicators made with
// ncclCommInitAll, one per NCCL variant a candidate asked for ("" is NCCL's own choice;
// "Ring/LL" sets NCCL_ALGO=Ring NCCL_PROTO=LL while it is made, since NCCL reads those when a
// communicator is created and has no per-communicator setting for them). NVLink multicast
// (NVLS) stays off: NCCL_NVLS_ENABLE=0 is set when the environment does not say otherwise.
//
// Process mode (create_process: one process per GPU, joined by a ProcessGroup, issue 30): it
// holds its own rank's entries only. The peer kernels work across processes when every rank is
// on this host and every pair of GPUs has peer access: each rank's staging allocation is shared
// as a CUDA IPC handle (cudaIpcGetMemHandle, gathered over the group, cudaIpcOpenMemHandle), so
// the kernels see the same pointers as in one process. NCCL communicators are made with
// ncclCommInitRank from rank 0's unique id, broadcast over the group, when every rank first runs
// a variant (ranks on other hosts: NCCL only).
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cuda/all_reduce/peer_kernels.h"
#include "tunableop/all_reduce.h"
#include "tunableop/registry.h"

#ifdef TUNABLEOP_HAVE_NCCL
#include "backends/cuda/all_reduce/nccl_library.h"
#endif

namespace tunableop::cuda {

// Makes `device` current for the scope, restoring the previous one after.
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  Status status() const { return status_; }

 private:
  int previous_ = -1;
  Status status_;
};

class CudaCommunicator final : public Communicator {
 public:
  // Staging per parity buffer: the largest chunk one peer-kernel launch moves; longer messages
  // are moved in several launches.
  static constexpr size_t kPeerChunkBytes = size_t(16) << 20;

  static StatusOr<std::unique_ptr<Communicator>> create(const std::vector<int>& devices, Logger& log);
  // Process mode: this process's rank of `group` on GPU `device`. Collective.
  static StatusOr<std::unique_ptr<Communicator>> create_process(int device, ProcessGroup& group, Logger& log);
  ~CudaCommunicator() override;

  DeviceKind device_kind() const override { return DeviceKind::kCuda; }
  std::string describe() const override;
  StatusOr<void*> alloc(int rank, size_t bytes) override;
  void free(int rank, void* p) override;
  Status copy_to_device(int rank, void* dst, const void* host, size_t bytes) override;
  Status copy_to_host(int rank, void* host, const void* src, size_t bytes) override;
  void* stream(int rank) override { return streams_[size_t(rank)]; }
  std::unique_ptr<Timer> make_timer() override;
  Status synchronize(int rank, void* stream) override;
  bool capturing(int rank, void* stream) const override;
  Status recover() override;

  // Our kernels over peer memory: Unsupported (with the reason) without peer access (LL: also
  // past kPeerLLMaxBytes and for fp64). They do the kAddResidual epilogue in the kernel.
  Status peer_all_reduce(PeerAlgo algo, const AllReduceParams& p, const AllReduceOperands& o);

#ifdef TUNABLEOP_HAVE_NCCL
  // NCCL's all-reduce with the communicators of `variant` ("" or "ALGO/PROTO"), made on first
  // use (group mode only: ncclCommInitAll needs every rank at once).
  Status nccl_all_reduce(const std::string& variant, const AllReduceParams& p, const AllReduceOperands& o);
#endif
  bool has_nccl() const;

 private:
  explicit CudaCommunicator(std::vector<int> devices, ProcessGroup* group = nullptr)
      : Communicator(std::move(devices), group) {}
  Status init(Logger& log);
  // The peer kernels' memory: every rank's in this process (enable_peer_access) or this rank's,
  // shared with the others as IPC handles (share_across_processes).
  void enable_peer_access();
  void allocate_peer_memory();
  void share_across_processes();
  void drop_peer_memory();
  void* rank_stream(const AllReduceOperands& o, int r) { return o.stream[size_t(r)] ? o.stream[size_t(r)] : stream(r); }

  std::vector<cudaStream_t> streams_;
  // Peer kernels: per rank one allocation holding 4 staging buffers, flags and counters, the LL
  // receive areas and LL state.
  bool peer_ = false;
  std::string peer_why_not_;
  std::vector<void*> peer_mem_;     // per rank held here (others null)
  std::vector<void*> peer_opened_;  // process mode: the other ranks' allocations, opened from IPC handles
  PeerCall peer_template_;          // staging and flag pointers of every rank
  std::vector<uint32_t*> peer_counters_;
  std::vector<uint32_t*> ll_state_;  // per rank: LL {epoch, finished blocks}, in peer_mem_
  std::vector<void*> sum_scratch_;   // per rank: a kPeerChunkBytes sum for epilogues NCCL lacks
  bool pdl_ = false;                 // every GPU is sm_90 or newer: LL launches with PDL
#ifdef TUNABLEOP_HAVE_NCCL
  const NcclLibrary* nccl_ = nullptr;
  std::mutex nccl_mu_;
  std::map<std::string, std::vector<ncclComm_t>> nccl_comms_;
  std::map<std::string, Status> nccl_failed_;
#endif
  std::string nccl_why_not_;
};

// The CUDA CommunicatorFactory and the all-reduce candidates: Default (NCCL's own choice, or
// our two-shot kernel where NCCL is missing), NCCL per algorithm and protocol, our one-shot,
// two-shot and one-shot LL kernels.
void register_cuda_all_reduce(Registry& r);

}  // namespace tunableop::cuda
