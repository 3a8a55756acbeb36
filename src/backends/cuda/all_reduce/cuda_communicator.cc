#include "backends/cuda/all_reduce/cuda_communicator.h"

#include <fmt/format.h>

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

// Times a group-mode collective: an event timer on every rank's stream (made on its device);
// a region lasts as long as its slowest rank. Every rank's stop is queued before any is waited
// for. Errors read as +inf (a broken candidate never looks fast).
class GroupEventTimer final : public Timer {
 public:
  GroupEventTimer(Communicator& comm) : comm_(comm) {
    for (int r = 0; r < comm.world_size(); ++r) {
      DeviceScope d(comm.device(r));
      timers_.push_back(std::make_unique<EventTimer>(static_cast<cudaStream_t>(comm.stream(r))));
      if (timers_.back()->last_error() != cudaSuccess) broken_ = true;
    }
  }
  ~GroupEventTimer() override {
    for (size_t r = 0; r < timers_.size(); ++r) {
      DeviceScope d(comm_.device(int(r)));
      timers_[r].reset();
    }
  }
  void start() override {
    for (size_t r = 0; r < timers_.size(); ++r) {
      DeviceScope d(comm_.device(int(r)));
      timers_[r]->start();
    }
  }
  double stop_ms() override {
    for (size_t r = 0; r < timers_.size(); ++r) {
      DeviceScope d(comm_.device(int(r)));
      timers_[r]->record_stop();
    }
    double worst = 0;
    for (size_t r = 0; r < timers_.size(); ++r) {
      DeviceScope d(comm_.device(int(r)));
      worst = std::max(worst, timers_[r]->elapsed_ms());
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

Status CudaCommunicator::init(Logger& log) {
  const int W = world_size();
  for (int r = 0; r < W; ++r) {
    DeviceScope d(device(r));
    TUNABLEOP_RETURN_IF_ERROR(d.status());
    cudaStream_t s = nullptr;
    TUNABLEOP_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    streams_.push_back(s);
  }
#ifdef TUNABLEOP_HAVE_NCCL
  if (auto lib = nccl_library(); lib.is_ok()) {
    nccl_ = *lib;
  } else {
    nccl_why_not_ = lib.status().message();
  }
#else
  nccl_why_not_ = "this build has no NCCL (nccl.h was not found at configure time)";
#endif

  // Peer access between every pair, then each rank's staging, flags and counters.
  peer_ = true;
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
  // Per rank one zeroed allocation: 4 staging buffers, flags and counters, then the LL receive
  // areas ([parity][sender] slots) and the LL epoch word. The epochs start at 1 (0 never appears
  // as a flag, so zeroed areas hold nothing), or where TUNABLEOP_TEST_LL_EPOCH says (the tests
  // start near 2^32 to see the epoch wrap).
  const size_t ll_offset =
      (4 * kPeerChunkBytes + (kPeerFlagWords + kPeerCounterWords) * sizeof(uint32_t) + 255) / 256 * 256;
  const size_t state_offset = ll_offset + 2 * size_t(W) * kPeerLLSlotBytes, bytes = state_offset + 256;
  uint32_t epoch = 1;
  if (const char* e = std::getenv("TUNABLEOP_TEST_LL_EPOCH"); e && uint32_t(std::strtoull(e, nullptr, 0)) != 0)
    epoch = uint32_t(std::strtoull(e, nullptr, 0));
  for (int r = 0; r < W && peer_; ++r) {
    DeviceScope d(device(r));
    void* m = nullptr;
    cudaError_t e = cudaMalloc(&m, bytes);
    if (e == cudaSuccess) e = cudaMemset(m, 0, bytes);
    if (e == cudaSuccess) e = cudaMemcpy(static_cast<char*>(m) + state_offset, &epoch, 4, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      if (m) cudaFree(m);
      peer_ = false;
      peer_why_not_ = fmt::format("staging for the peer kernels on cuda:{}: {}", device(r), cudaGetErrorString(e));
      break;
    }
    peer_mem_.push_back(m);
    peer_template_.staging[r] = m;
    peer_template_.flags[r] = reinterpret_cast<uint32_t*>(static_cast<char*>(m) + 4 * kPeerChunkBytes);
    peer_counters_.push_back(peer_template_.flags[r] + kPeerFlagWords);
    peer_template_.ll_recv[r] = static_cast<char*>(m) + ll_offset;
    ll_state_.push_back(reinterpret_cast<uint32_t*>(static_cast<char*>(m) + state_offset));
    cudaDeviceProp prop{};
    pdl_ = (r == 0 || pdl_) && cudaGetDeviceProperties(&prop, device(r)) == cudaSuccess && prop.major >= 9;
  }
  // The sums of epilogues a candidate cannot fuse (NCCL's).
  for (int r = 0; r < W; ++r) {
    DeviceScope d(device(r));
    void* m = nullptr;
    if (cudaMalloc(&m, kPeerChunkBytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return Status::device_error(fmt::format("all-reduce scratch of {} bytes on cuda:{}", kPeerChunkBytes, device(r)));
    }
    sum_scratch_.push_back(m);
  }
  if (!peer_) {
    ll_state_.clear();
    for (size_t r = 0; r < peer_mem_.size(); ++r) {
      DeviceScope d(device(int(r)));
      cudaFree(peer_mem_[r]);
    }
    peer_mem_.clear();
  }
  log.log(1, "all-reduce communicator: " + describe());
  return Status::ok();
}

CudaCommunicator::~CudaCommunicator() {
  for (int r = 0; r < int(streams_.size()); ++r) (void)synchronize(r, nullptr);
#ifdef TUNABLEOP_HAVE_NCCL
  for (auto& [variant, comms] : nccl_comms_)
    for (ncclComm_t c : comms) nccl_->comm_destroy(c);
#endif
  for (size_t r = 0; r < peer_mem_.size(); ++r) {
    DeviceScope d(device(int(r)));
    cudaFree(peer_mem_[r]);
  }
  for (size_t r = 0; r < sum_scratch_.size(); ++r) {
    DeviceScope d(device(int(r)));
    cudaFree(sum_scratch_[r]);
  }
  for (size_t r = 0; r < streams_.size(); ++r) {
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
  return fmt::format("{} GPUs (cuda:{}): {}; {}", world_size(), gpus, nccl,
                     peer_ ? "peer access (one-shot, two-shot, one-shot LL kernels)" : peer_why_not_);
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
      if (o.rank >= 0)
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
      std::vector<int> devs;
      for (int r = 0; r < world_size(); ++r) devs.push_back(device(r));
      DeviceScope keep(device(0));
      Status st =
          nccl_status(*nccl_, nccl_->comm_init_all(made.data(), world_size(), devs.data()),
                      variant.empty() ? "ncclCommInitAll"
                                      : ("ncclCommInitAll with NCCL_ALGO=" + algo + " NCCL_PROTO=" + proto).c_str());
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
