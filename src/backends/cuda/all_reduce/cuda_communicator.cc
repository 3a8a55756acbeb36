#include "backends/cuda/all_reduce/cuda_communicator.h"

#include <fmt/format.h>

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <set>

#include "cuda_common/cuda_check.h"
#include "cuda_common/event_timer.h"

namespace tunableop::cuda {

DeviceScope::DeviceScope(int device) {
  status_ = cuda_status(cudaGetDevice(&previous_), "cudaGetDevice");
  if (status_.is_ok() && previous_ != device) status_ = cuda_status(cudaSetDevice(device), "cudaSetDevice");
}

DeviceScope::~DeviceScope() {
  int now = -1;
  if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
}

namespace {

// Times a group-mode collective: an event timer on every held rank's stream (made on its
// device; in process mode this process's rank only: the slowest rank is found over the group);
// a region lasts as long as its slowest rank. Every rank's stop is queued before any is waited
// for. Errors read as +inf (a broken candidate never looks fast).
class GroupEventTimer final : public Timer {
 public:
  GroupEventTimer(Communicator& comm) : comm_(comm) {
    for (int r = 0; r < comm.world_size(); ++r) {
      if (!comm.holds(r)) continue;
      DeviceScope d(comm.device(r));
      ranks_.push_back(r);
      timers_.push_back(std::make_unique<EventTimer>(static_cast<cudaStream_t>(comm.stream(r))));
      if (timers_.back()->last_error() != cudaSuccess) broken_ = true;
    }
  }
  ~GroupEventTimer() override {
    for (size_t i = 0; i < timers_.size(); ++i) {
      DeviceScope d(comm_.device(ranks_[i]));
      timers_[i].reset();
    }
  }
  void start() override {
    for (size_t i = 0; i < timers_.size(); ++i) {
      DeviceScope d(comm_.device(ranks_[i]));
      timers_[i]->start();
    }
  }
  double stop_ms() override {
    for (size_t i = 0; i < timers_.size(); ++i) {
      DeviceScope d(comm_.device(ranks_[i]));
      timers_[i]->record_stop();
    }
    double worst = 0;
    for (size_t i = 0; i < timers_.size(); ++i) {
      DeviceScope d(comm_.device(ranks_[i]));
      worst = std::max(worst, timers_[i]->elapsed_ms());
    }
    if (broken_ || !std::isfinite(worst)) {
      (void)cudaGetLastError();
      return std::numeric_limits<double>::infinity();
    }
    return worst;
  }
  double now_ms() override {
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
  }
  double min_sample_ms() const override { return 0.03; }

 private:
  Communicator& comm_;
  std::vector<int> ranks_;
  std::vector<std::unique_ptr<EventTimer>> timers_;
  bool broken_ = false;
};

#ifdef TUNABLEOP_HAVE_NCCL
StatusOr<ncclDataType_t> nccl_type(DType t) {
  switch (t) {
    case DType::kF32: return ncclFloat32;
    case DType::kF64: return ncclFloat64;
    case DType::kF16: return ncclFloat16;
    case DType::kBF16: return ncclBfloat16;
    case DType::kF8E4M3:
    case DType::kF8E5M2: break;  // the all-reduce refuses fp8 (AllReduceParams::validate)
  }
  return Status::unsupported("no NCCL type for this dtype");
}

// Sets (or, for null, removes) an environment variable for the scope, then restores it.
class EnvScope {
 public:
  EnvScope(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~EnvScope() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};
#endif

}  // namespace

StatusOr<std::unique_ptr<Communicator>> CudaCommunicator::create(const std::vector<int>& devices, Logger& log) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    count = 0;
  }
  std::set<int> seen;
  for (int d : devices) {
    if (d < 0 || d >= count)
      return Status::invalid_argument(fmt::format("no CUDA device {} on this machine ({} GPUs)", d, count));
    if (!seen.insert(d).second)
      return Status::invalid_argument(fmt::format("a CUDA communicator needs distinct GPUs; cuda:{} appears twice", d));
  }
  std::unique_ptr<CudaCommunicator> c(new CudaCommunicator(devices));
  TUNABLEOP_RETURN_IF_ERROR(c->init(log));
  return std::unique_ptr<Communicator>(std::move(c));
}

StatusOr<std::unique_ptr<Communicator>> CudaCommunicator::create_process(int device, ProcessGroup& group, Logger& log) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    count = 0;
  }
  TUNABLEOP_RETURN_IF_ERROR(agree(group, device >= 0 && device < count
                                             ? Status::ok()
                                             : Status::invalid_argument(fmt::format(
                                                   "no CUDA device {} on this machine ({} GPUs)", device, count))));
  const int32_t mine = device;
  std::vector<int32_t> all(size_t(group.size()), 0);
  TUNABLEOP_RETURN_IF_ERROR(group.all_gather(&mine, all.data(), sizeof(mine)));
  std::unique_ptr<CudaCommunicator> c(new CudaCommunicator(std::vector<int>(all.begin(), all.end()), &group));
  TUNABLEOP_RETURN_IF_ERROR(c->init(log));
  return std::unique_ptr<Communicator>(std::move(c));
}

namespace {

// In process mode every rank's answer agreed (the first failing rank's on every rank); in one
// process the answer as is.
Status agreed(ProcessGroup* group, const Status& mine) { return group ? agree(*group, mine) : mine; }

// Where the parts of one rank's peer allocation lie: 4 staging buffers, flags and counters,
// then the LL receive areas ([parity][sender] slots) and the LL epoch word.
struct PeerLayout {
  size_t ll_offset, state_offset, bytes;
  explicit PeerLayout(int world) {
    ll_offset =
        (4 * CudaCommunicator::kPeerChunkBytes + (kPeerFlagWords + kPeerCounterWords) * sizeof(uint32_t) + 255) / 256 *
        256;
    state_offset = ll_offset + 2 * size_t(world) * kPeerLLSlotBytes;
    bytes = state_offset + 256;
  }
};

}  // namespace

Status CudaCommunicator::init(Logger& log) {
  const int W = world_size();
  streams_.assign(size_t(W), nullptr);
  Status st;
  for (int r = 0; r < W && st.is_ok(); ++r) {
    if (!holds(r)) continue;
    DeviceScope d(device(r));
    st = d.status();
    if (st.is_ok())
      st = cuda_status(cudaStreamCreateWithFlags(&streams_[size_t(r)], cudaStreamNonBlocking), "cudaStreamCreate");
  }
  TUNABLEOP_RETURN_IF_ERROR(agreed(group(), st));
#ifdef TUNABLEOP_HAVE_NCCL
  auto lib = nccl_library();
  Status have_nccl = lib.is_ok() ? Status::ok() : Status::unsupported(lib.status().message());
  if (group()) have_nccl = agree(*group(), have_nccl);  // every rank, or none
  if (have_nccl.is_ok()) {
    nccl_ = *lib;
  } else {
    nccl_why_not_ = have_nccl.message();
  }
#else
  nccl_why_not_ = "this build has no NCCL (nccl.h was not found at configure time)";
#endif

  peer_ = true;
  peer_mem_.assign(size_t(W), nullptr);
  peer_opened_.assign(size_t(W), nullptr);
  peer_counters_.assign(size_t(W), nullptr);
  ll_state_.assign(size_t(W), nullptr);
  if (group()) {
    share_across_processes();
  } else {
    enable_peer_access();
    if (peer_) allocate_peer_memory();
  }
  // The sums of epilogues a candidate cannot fuse (NCCL's).
  sum_scratch_.assign(size_t(W), nullptr);
  st = Status::ok();
  for (int r = 0; r < W && st.is_ok(); ++r) {
    if (!holds(r)) continue;
    DeviceScope d(device(r));
    if (cudaMalloc(&sum_scratch_[size_t(r)], kPeerChunkBytes) != cudaSuccess) {
      (void)cudaGetLastError();
      st = Status::device_error(fmt::format("all-reduce scratch of {} bytes on cuda:{}", kPeerChunkBytes, device(r)));
    }
  }
  TUNABLEOP_RETURN_IF_ERROR(agreed(group(), st));
  if (!peer_) drop_peer_memory();
  log.log(1, "all-reduce communicator: " + describe());
  return Status::ok();
}

// One process: peer access between every pair of its GPUs.
void CudaCommunicator::enable_peer_access() {
  const int W = world_size();
  for (int i = 0; i < W && peer_; ++i) {
    for (int j = 0; j < W && peer_; ++j) {
      if (i == j) continue;
      int can = 0;
      if (cudaDeviceCanAccessPeer(&can, device(i), device(j)) != cudaSuccess || !can) {
        (void)cudaGetLastError();
        peer_ = false;
        peer_why_not_ = fmt::format("cuda:{} cannot access cuda:{}'s memory (no peer access)", device(i), device(j));
        break;
      }
      DeviceScope d(device(i));
      cudaError_t e = cudaDeviceEnablePeerAccess(device(j), 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
      } else if (e != cudaSuccess) {
        (void)cudaGetLastError();
        peer_ = false;
        peer_why_not_ = fmt::format("cudaDeviceEnablePeerAccess(cuda:{} -> cuda:{}): {}", device(i), device(j),
                                    cudaGetErrorString(e));
      }
    }
  }
}

// Each held rank's zeroed allocation. The LL epochs start at 1 (0 never appears as a flag, so
// zeroed areas hold nothing), or where TUNABLEOP_TEST_LL_EPOCH says (the tests start near 2^32
// to see the epoch wrap).
void CudaCommunicator::allocate_peer_memory() {
  const int W = world_size();
  const PeerLayout L(W);
  uint32_t epoch = 1;
  if (const char* e = std::getenv("TUNABLEOP_TEST_LL_EPOCH"); e && uint32_t(std::strtoull(e, nullptr, 0)) != 0)
    epoch = uint32_t(std::strtoull(e, nullptr, 0));
  bool first = true;
  for (int r = 0; r < W && peer_; ++r) {
    if (!holds(r)) continue;
    DeviceScope d(device(r));
    void* m = nullptr;
    cudaError_t e = cudaMalloc(&m, L.bytes);
    if (e == cudaSuccess) e = cudaMemset(m, 0, L.bytes);
    if (e == cudaSuccess) e = cudaMemcpy(static_cast<char*>(m) + L.state_offset, &epoch, 4, cudaMemcpyHostToDevice);
    // cudaMemset and a small pageable cudaMemcpy may still be in flight on return, on the legacy
    // stream, which does not order the non-blocking streams the peer kernels run on.
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      if (m) cudaFree(m);
      peer_ = false;
      peer_why_not_ = fmt::format("staging for the peer kernels on cuda:{}: {}", device(r), cudaGetErrorString(e));
      break;
    }
    peer_mem_[size_t(r)] = m;
    peer_template_.staging[r] = m;
    peer_template_.flags[r] = reinterpret_cast<uint32_t*>(static_cast<char*>(m) + 4 * kPeerChunkBytes);
    peer_counters_[size_t(r)] = peer_template_.flags[r] + kPeerFlagWords;
    peer_template_.ll_recv[r] = static_cast<char*>(m) + L.ll_offset;
    ll_state_[size_t(r)] = reinterpret_cast<uint32_t*>(static_cast<char*>(m) + L.state_offset);
    cudaDeviceProp prop{};
    pdl_ = (first || pdl_) && cudaGetDeviceProperties(&prop, device(r)) == cudaSuccess && prop.major >= 9;
    first = false;
  }
}

// Process mode: every rank on this host with peer access to every other rank's GPU (found by
// its PCI bus id), then each rank's allocation shared as an IPC handle and opened by the others.
// Every step agreed, so the peer kernels run on every rank or on none.
void CudaCommunicator::share_across_processes() {
  ProcessGroup& g = *group();
  const int W = world_size(), me = own_rank();
  constexpr size_t kName = 64, kBus = 32;
  char host[kName] = {}, bus[kBus] = {};
  (void)gethostname(host, kName - 1);
  std::string why;
  if (cudaDeviceGetPCIBusId(bus, int(kBus), device(me)) != cudaSuccess) {
    (void)cudaGetLastError();
    why = fmt::format("no PCI bus id for cuda:{}", device(me));
  }
  std::vector<char> hosts(kName * size_t(W)), buses(kBus * size_t(W));
  Status st = g.all_gather(host, hosts.data(), kName);
  if (st.is_ok()) st = g.all_gather(bus, buses.data(), kBus);
  if (!st.is_ok()) {
    peer_ = false;
    peer_why_not_ = st.message();
    return;
  }
  for (int q = 0; q < W && why.empty(); ++q) {
    if (q == me) continue;
    const std::string their_host(&hosts[kName * size_t(q)]), their_bus(&buses[kBus * size_t(q)]);
    int dev = -1, can = 0;
    if (their_host != host) {
      why = fmt::format("rank {} is on host {}, rank {} on {} (peer memory is one host's)", q, their_host, me, host);
    } else if (cudaDeviceGetByPCIBusId(&dev, their_bus.c_str()) != cudaSuccess) {
      (void)cudaGetLastError();
      why = fmt::format("rank {}'s GPU (PCI {}) is not visible to rank {} (CUDA_VISIBLE_DEVICES)", q, their_bus, me);
    } else if (cudaDeviceCanAccessPeer(&can, device(me), dev) != cudaSuccess || !can) {
      (void)cudaGetLastError();
      why = fmt::format("cuda:{} cannot access rank {}'s GPU (PCI {}) (no peer access)", device(me), q, their_bus);
    }
  }
  if (why.empty()) allocate_peer_memory();
  if (!peer_ && why.empty()) why = peer_why_not_;
  cudaIpcMemHandle_t handle{};
  if (why.empty() && cudaIpcGetMemHandle(&handle, peer_mem_[size_t(me)]) != cudaSuccess) {
    (void)cudaGetLastError();
    why = fmt::format("cudaIpcGetMemHandle on cuda:{}", device(me));
  }
  st = agree(g, why.empty() ? Status::ok() : Status::unsupported(why));
  std::vector<cudaIpcMemHandle_t> handles(static_cast<size_t>(W));
  if (st.is_ok()) st = g.all_gather(&handle, handles.data(), sizeof(handle));
  // Every other rank's allocation mapped here; the kernels address it as in one process.
  const PeerLayout L(W);
  std::string opened;
  for (int q = 0; q < W && st.is_ok() && opened.empty(); ++q) {
    if (q == me) continue;
    DeviceScope d(device(me));
    void* m = nullptr;
    const cudaError_t e = cudaIpcOpenMemHandle(&m, handles[size_t(q)], cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      opened =
          fmt::format("cudaIpcOpenMemHandle of rank {}'s staging on cuda:{}: {}", q, device(me), cudaGetErrorString(e));
      break;
    }
    peer_opened_[size_t(q)] = m;
    peer_template_.staging[q] = m;
    peer_template_.flags[q] = reinterpret_cast<uint32_t*>(static_cast<char*>(m) + 4 * kPeerChunkBytes);
    peer_template_.ll_recv[q] = static_cast<char*>(m) + L.ll_offset;
  }
  if (st.is_ok()) st = agree(g, opened.empty() ? Status::ok() : Status::unsupported(opened));
  // PDL where every rank's GPU has it (the LL kernel is launched alike everywhere).
  const int32_t mine = peer_ && pdl_ ? 1 : 0;
  std::vector<int32_t> all(size_t(W), 0);
  if (st.is_ok()) st = g.all_gather(&mine, all.data(), sizeof(mine));
  for (int32_t a : all) pdl_ = pdl_ && a != 0;
  if (!st.is_ok()) {
    peer_ = false;
    peer_why_not_ = st.message();
  }
}

void CudaCommunicator::drop_peer_memory() {
  for (size_t r = 0; r < peer_opened_.size(); ++r) {
    if (!peer_opened_[r]) continue;
    DeviceScope d(device(own_rank()));
    cudaIpcCloseMemHandle(peer_opened_[r]);
    peer_opened_[r] = nullptr;
  }
  for (size_t r = 0; r < peer_mem_.size(); ++r) {
    if (!peer_mem_[r]) continue;
    DeviceScope d(device(int(r)));
    cudaFree(peer_mem_[r]);
    peer_mem_[r] = nullptr;
  }
  ll_state_.assign(ll_state_.size(), nullptr);
}

CudaCommunicator::~CudaCommunicator() {
  for (int r = 0; r < int(streams_.size()); ++r)
    if (streams_[size_t(r)]) (void)synchronize(r, nullptr);
  // Process mode: no rank unmaps or frees its staging while a peer's kernel may still read it.
  if (group() && peer_) {
    uint8_t one = 1;
    std::vector<uint8_t> all(static_cast<size_t>(world_size()));
    (void)group()->all_gather(&one, all.data(), 1, /*timeout_s=*/10);
  }
#ifdef TUNABLEOP_HAVE_NCCL
  for (auto& [variant, comms] : nccl_comms_)
    for (ncclComm_t c : comms)
      if (c) nccl_->comm_destroy(c);
#endif
  drop_peer_memory();
  for (size_t r = 0; r < sum_scratch_.size(); ++r) {
    if (!sum_scratch_[r]) continue;
    DeviceScope d(device(int(r)));
    cudaFree(sum_scratch_[r]);
  }
  for (size_t r = 0; r < streams_.size(); ++r) {
    if (!streams_[r]) continue;
    DeviceScope d(device(int(r)));
    cudaStreamDestroy(streams_[r]);
  }
}

std::string CudaCommunicator::describe() const {
  std::string gpus;
  for (int r = 0; r < world_size(); ++r) gpus += (r ? "," : "") + std::to_string(device(r));
#ifdef TUNABLEOP_HAVE_NCCL
  const std::string nccl = nccl_ ? fmt::format("NCCL {} ({})", nccl_->version, nccl_->path) : nccl_why_not_;
#else
  const std::string nccl = nccl_why_not_;
#endif
  const std::string peer = peer_ ? (group() ? "peer memory over CUDA IPC (one-shot, two-shot, one-shot LL kernels)"
                                            : "peer access (one-shot, two-shot, one-shot LL kernels)")
                                 : peer_why_not_;
  if (group())
    return fmt::format("{} processes ({}; GPUs of the ranks cuda:{}): {}; {}", world_size(), group()->describe(), gpus,
                       nccl, peer);
  return fmt::format("{} GPUs (cuda:{}): {}; {}", world_size(), gpus, nccl, peer);
}

bool CudaCommunicator::has_nccl() const {
#ifdef TUNABLEOP_HAVE_NCCL
  return nccl_ != nullptr;
#else
  return false;
#endif
}

StatusOr<void*> CudaCommunicator::alloc(int rank, size_t bytes) {
  DeviceScope d(device(rank));
  TUNABLEOP_RETURN_IF_ERROR(d.status());
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 1));
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::device_error(
        fmt::format("cudaMalloc of {} bytes on cuda:{}: {}", bytes, device(rank), cudaGetErrorString(e)));
  }
  return p;
}

void CudaCommunicator::free(int rank, void* p) {
  DeviceScope d(device(rank));
  cudaFree(p);
}

Status CudaCommunicator::copy_to_device(int rank, void* dst, const void* host, size_t bytes) {
  DeviceScope d(device(rank));
  TUNABLEOP_CUDA_TRY(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, streams_[size_t(rank)]));
  TUNABLEOP_CUDA_TRY(cudaStreamSynchronize(streams_[size_t(rank)]));
  return Status::ok();
}

Status CudaCommunicator::copy_to_host(int rank, void* host, const void* src, size_t bytes) {
  DeviceScope d(device(rank));
  TUNABLEOP_CUDA_TRY(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, streams_[size_t(rank)]));
  TUNABLEOP_CUDA_TRY(cudaStreamSynchronize(streams_[size_t(rank)]));
  return Status::ok();
}

std::unique_ptr<Timer> CudaCommunicator::make_timer() { return std::make_unique<GroupEventTimer>(*this); }

Status CudaCommunicator::synchronize(int rank, void* s) {
  DeviceScope d(device(rank));
  TUNABLEOP_CUDA_TRY(cudaStreamSynchronize(s ? static_cast<cudaStream_t>(s) : streams_[size_t(rank)]));
  return Status::ok();
}

bool CudaCommunicator::capturing(int rank, void* s) const {
  if (!s) return false;
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(static_cast<cudaStream_t>(s), &st) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return st != cudaStreamCaptureStatusNone;
}

Status CudaCommunicator::recover() {
  for (int r = 0; r < world_size(); ++r) {
    if (!holds(r)) continue;
    DeviceScope d(device(r));
    (void)cudaGetLastError();
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return Status::device_error(fmt::format("cuda:{} is unusable after a failed all-reduce ({}); restart the process",
                                              device(r), cudaGetErrorString(e)));
    }
  }
  return Status::ok();
}

Status CudaCommunicator::peer_all_reduce(PeerAlgo algo, const AllReduceParams& p, const AllReduceOperands& o) {
  if (!peer_) return Status::unsupported(peer_why_not_);
  const size_t esize = dtype_size(p.dtype);
  if (algo == PeerAlgo::kOneShotLL && (p.dtype == DType::kF64 || p.bytes() > kPeerLLMaxBytes))
    return Status::unsupported(
        fmt::format("one-shot LL: fp32, bf16 or fp16 messages of at most {} bytes", kPeerLLMaxBytes));
  const int64_t chunk = algo == PeerAlgo::kOneShotLL ? p.count : int64_t(kPeerChunkBytes / esize);
  const int first = o.rank < 0 ? 0 : o.rank, last = o.rank < 0 ? world_size() : o.rank + 1;
  // Chunk by chunk, every rank's launch of a chunk before the next chunk (group mode).
  for (int64_t at = 0; at < p.count; at += chunk) {
    for (int r = first; r < last; ++r) {
      DeviceScope d(device(r));
      TUNABLEOP_RETURN_IF_ERROR(d.status());
      PeerCall c = peer_template_;
      c.input = static_cast<const char*>(o.input[size_t(r)]) + size_t(at) * esize;
      c.output = static_cast<char*>(o.output[size_t(r)]) + size_t(at) * dtype_size(p.output_dtype());
      if (p.adds_residual()) c.residual = static_cast<float*>(c.output);
      c.round_to = int(p.round_to);
      c.ll_state = algo == PeerAlgo::kOneShotLL ? ll_state_[size_t(r)] : nullptr;
      c.pdl = pdl_;
      const bool aligned = (reinterpret_cast<uintptr_t>(o.prefetch[size_t(r)]) & 15u) == 0;
      c.prefetch = aligned && at == 0 ? o.prefetch[size_t(r)] : nullptr;
      c.prefetch_bytes = c.prefetch ? o.prefetch_bytes[size_t(r)] : 0;
      c.count = std::min(chunk, p.count - at);
      c.dtype = int(p.dtype);
      c.rank = r;
      c.world = world_size();
      c.chunk_bytes = kPeerChunkBytes;
      c.counters = peer_counters_[size_t(r)];
      TUNABLEOP_CUDA_TRY(cuda::peer_all_reduce(algo, c, static_cast<cudaStream_t>(rank_stream(o, r))));
    }
  }
  return Status::ok();
}

#ifdef TUNABLEOP_HAVE_NCCL
Status CudaCommunicator::nccl_all_reduce(const std::string& variant, const AllReduceParams& p,
                                         const AllReduceOperands& o) {
  if (!nccl_) return Status::unsupported(nccl_why_not_);
  auto type = nccl_type(p.dtype);
  if (!type.is_ok()) return type.status();
  std::vector<ncclComm_t>* comms = nullptr;
  {
    std::lock_guard<std::mutex> lock(nccl_mu_);
    if (auto f = nccl_failed_.find(variant); f != nccl_failed_.end()) return f->second;
    auto it = nccl_comms_.find(variant);
    if (it == nccl_comms_.end()) {
      if (o.rank >= 0 && !group())
        return Status::internal("NCCL communicators '" + variant + "' are made in group mode (before rank mode)");
      // NCCL reads NCCL_ALGO / NCCL_PROTO when a communicator is made.
      const size_t slash = variant.find('/');
      const std::string algo = variant.substr(0, slash),
                        proto = slash == std::string::npos ? "" : variant.substr(slash + 1);
      EnvScope a("NCCL_ALGO", variant.empty() ? std::getenv("NCCL_ALGO") : algo.c_str());
      EnvScope b("NCCL_PROTO", variant.empty() ? std::getenv("NCCL_PROTO") : proto.c_str());
      // NVLink multicast (NVLS) off unless the environment says otherwise (docs/parallel.md).
      EnvScope n("NCCL_NVLS_ENABLE", std::getenv("NCCL_NVLS_ENABLE") ? std::getenv("NCCL_NVLS_ENABLE") : "0");
      std::vector<ncclComm_t> made(size_t(world_size()), nullptr);
      const std::string how = variant.empty() ? "" : " with NCCL_ALGO=" + algo + " NCCL_PROTO=" + proto;
      Status st;
      if (group()) {
        // Process mode (every rank runs this variant for the first time at once): rank 0's
        // unique id over the group, then each rank's communicator; bootstrapped by NCCL itself
        // (its own sockets), across hosts too.
        const int me = own_rank();
        ncclUniqueId id{};
        if (me == 0) st = nccl_status(*nccl_, nccl_->get_unique_id(&id), "ncclGetUniqueId");
        st = agree(*group(), st);
        if (st.is_ok()) st = group()->broadcast(&id, sizeof(id), 0);
        if (st.is_ok()) {
          DeviceScope keep(device(me));
          st = nccl_status(*nccl_, nccl_->comm_init_rank(&made[size_t(me)], world_size(), id, me),
                           ("ncclCommInitRank" + how).c_str());
        }
        st = agree(*group(), st);
      } else {
        std::vector<int> devs;
        for (int r = 0; r < world_size(); ++r) devs.push_back(device(r));
        DeviceScope keep(device(0));
        st = nccl_status(*nccl_, nccl_->comm_init_all(made.data(), world_size(), devs.data()),
                         ("ncclCommInitAll" + how).c_str());
      }
      if (!st.is_ok()) {
        (void)cudaGetLastError();
        Status unsupported = Status::unsupported(st.message());
        nccl_failed_[variant] = unsupported;
        return unsupported;
      }
      it = nccl_comms_.emplace(variant, std::move(made)).first;
    }
    comms = &it->second;
  }
  // kAddResidual: NCCL sums into this rank's scratch, chunk by chunk, and a kernel adds.
  const size_t esize = dtype_size(p.dtype);
  const int64_t chunk = p.adds_residual() ? int64_t(kPeerChunkBytes / esize) : p.count;
  const int first = o.rank < 0 ? 0 : o.rank, last = o.rank < 0 ? world_size() : o.rank + 1;
  for (int64_t at = 0; at < p.count; at += chunk) {
    const int64_t n = std::min(chunk, p.count - at);
    auto in = [&](int r) { return static_cast<const char*>(o.input[size_t(r)]) + size_t(at) * esize; };
    auto out = [&](int r) {
      return p.adds_residual() ? sum_scratch_[size_t(r)] : static_cast<char*>(o.output[size_t(r)]) + size_t(at) * esize;
    };
    DeviceScope keep(device(first));
    if (o.rank < 0) TUNABLEOP_RETURN_IF_ERROR(nccl_status(*nccl_, nccl_->group_start(), "ncclGroupStart"));
    Status st;
    for (int r = first; r < last && st.is_ok(); ++r) {
      DeviceScope d(device(r));
      st = nccl_status(*nccl_,
                       nccl_->all_reduce(in(r), out(r), size_t(n), *type, ncclSum, (*comms)[size_t(r)],
                                         static_cast<cudaStream_t>(rank_stream(o, r))),
                       "ncclAllReduce");
    }
    if (o.rank < 0) {
      Status end = nccl_status(*nccl_, nccl_->group_end(), "ncclGroupEnd");
      if (st.is_ok()) st = end;
    }
    TUNABLEOP_RETURN_IF_ERROR(st);
    for (int r = first; r < last && p.adds_residual(); ++r) {
      DeviceScope d(device(r));
      TUNABLEOP_CUDA_TRY(add_sum_to_residual(int(p.dtype), sum_scratch_[size_t(r)], n, int(p.round_to),
                                             static_cast<float*>(o.output[size_t(r)]) + at,
                                             static_cast<cudaStream_t>(rank_stream(o, r))));
    }
  }
  return Status::ok();
}
#endif

}  // namespace tunableop::cuda
