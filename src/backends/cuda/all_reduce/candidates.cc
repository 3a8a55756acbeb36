// The CUDA all-reduce candidates and the communicator factory (cuda_communicator.h).
#include <fmt/format.h>

#include "backends/cuda/all_reduce/cuda_communicator.h"

namespace tunableop::cuda {
namespace {

CudaCommunicator* cuda_comm(const AllReduceOperands& o) {
  return o.comm && o.comm->device_kind() == DeviceKind::kCuda ? static_cast<CudaCommunicator*>(o.comm) : nullptr;
}

AllReduceCandidate candidate(
    std::string name, int min_effort, std::string library, std::string algorithm,
    std::function<Status(CudaCommunicator&, const AllReduceParams&, const AllReduceOperands&)> run) {
  AllReduceCandidate c;
  c.name = std::move(name);
  c.device = DeviceKind::kCuda;
  c.min_effort = min_effort;
  c.supports = [](const AllReduceParams& p) { return p.validate(); };
  c.run = [run = std::move(run)](const AllReduceParams& p, const AllReduceOperands& o) -> Status {
    CudaCommunicator* comm = cuda_comm(o);
    if (!comm) return Status::unsupported("not a CUDA communicator");
    return run(*comm, p, o);
  };
  c.info.library = std::move(library);
  c.info.algorithm = std::move(algorithm);
  return c;
}

}  // namespace

void register_cuda_all_reduce(Registry& r) {
  CommunicatorFactory f;
  f.device = DeviceKind::kCuda;
  f.make = [](const std::vector<int>& devices, Logger& log) { return CudaCommunicator::create(devices, log); };
  f.make_process = [](int device, ProcessGroup& group, Logger& log) {
    return CudaCommunicator::create_process(device, group, log);
  };
  r.list<CommunicatorFactory>().push_back(std::move(f));

  auto& list = r.list<AllReduceCandidate>();
  // Default: NCCL's own choice of algorithm and protocol; our two-shot kernel without NCCL.
  list.push_back(candidate("Default", 0, "NCCL", "default",
                           [](CudaCommunicator& c, const AllReduceParams& p, const AllReduceOperands& o) -> Status {
#ifdef TUNABLEOP_HAVE_NCCL
                             Status st = c.nccl_all_reduce("", p, o);
                             if (!st.is_unsupported()) return st;
#endif
                             return c.peer_all_reduce(PeerAlgo::kTwoShot, p, o);
                           }));
  list.push_back(candidate("Peer_OneShot", 0, "tunableop", "one-shot",
                           [](CudaCommunicator& c, const AllReduceParams& p, const AllReduceOperands& o) {
                             return c.peer_all_reduce(PeerAlgo::kOneShot, p, o);
                           }));
  list.push_back(candidate("Peer_TwoShot", 0, "tunableop", "two-shot",
                           [](CudaCommunicator& c, const AllReduceParams& p, const AllReduceOperands& o) {
                             return c.peer_all_reduce(PeerAlgo::kTwoShot, p, o);
                           }));
  // Stores into the peers' memory with the flag beside the data: no staging copy, no barrier.
  AllReduceCandidate ll = candidate("Peer_OneShotLL", 0, "tunableop", "one-shot LL",
                                    [](CudaCommunicator& c, const AllReduceParams& p, const AllReduceOperands& o) {
                                      return c.peer_all_reduce(PeerAlgo::kOneShotLL, p, o);
                                    });
  ll.supports = [](const AllReduceParams& p) -> Status {
    TUNABLEOP_RETURN_IF_ERROR(p.validate());
    if (p.dtype == DType::kF64 || p.bytes() > kPeerLLMaxBytes)
      return Status::unsupported(
          fmt::format("Peer_OneShotLL: fp32, bf16 or fp16 messages of at most {} bytes", kPeerLLMaxBytes));
    return Status::ok();
  };
  list.push_back(std::move(ll));
#ifdef TUNABLEOP_HAVE_NCCL
  // NCCL per algorithm and protocol (one communicator each, made when first tried). Tree is
  // meant for many nodes; on one machine it is only worth a look at search effort 2.
  for (const char* algo : {"Ring", "Tree"}) {
    for (const char* proto : {"LL", "LL128", "Simple"}) {
      const std::string variant = fmt::format("{}/{}", algo, proto);
      AllReduceCandidate c =
          candidate(fmt::format("Nccl_{}_{}", algo, proto), std::string(algo) == "Ring" ? 1 : 2, "NCCL", variant,
                    [variant](CudaCommunicator& comm, const AllReduceParams& p, const AllReduceOperands& o) {
                      return comm.nccl_all_reduce(variant, p, o);
                    });
      c.info.add("NCCL_ALGO", algo).add("NCCL_PROTO", proto);
      list.push_back(std::move(c));
    }
  }
#endif
}

}  // namespace tunableop::cuda
