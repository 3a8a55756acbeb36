#include "backends/cpu/all_reduce/host_all_reduce.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "tunableop/all_reduce.h"
#include "tunableop/half.h"

namespace tunableop::cpu {
namespace {

// Host memory, host copies, the host clock: what every CPU communicator's group-mode part is.
class HostMemoryCommunicator : public Communicator {
 public:
  using Communicator::Communicator;
  DeviceKind device_kind() const override { return DeviceKind::kCpu; }
  StatusOr<void*> alloc(int, size_t bytes) override {
    void* p = std::aligned_alloc(64, (std::max<size_t>(bytes, 1) + 63) / 64 * 64);
    if (!p) return Status::device_error(fmt::format("out of host memory allocating {} bytes", bytes));
    return p;
  }
  void free(int, void* p) override { std::free(p); }
  Status copy_to_device(int, void* dst, const void* host, size_t bytes) override {
    std::memcpy(dst, host, bytes);
    return Status::ok();
  }
  Status copy_to_host(int, void* host, const void* src, size_t bytes) override {
    std::memcpy(host, src, bytes);
    return Status::ok();
  }
  void* stream(int) override { return nullptr; }
  std::unique_ptr<Timer> make_timer() override { return std::make_unique<HostTimer>(); }
  Status synchronize(int, void*) override { return Status::ok(); }
};

// Ranks that are host threads of this process.
class HostCommunicator final : public HostMemoryCommunicator {
 public:
  explicit HostCommunicator(const std::vector<int>& ranks) : HostMemoryCommunicator(ranks) {}
  std::string describe() const override { return fmt::format("{} host-thread ranks", world_size()); }

  // Rank mode: what each rank published for the call in progress, and the shared sum.
  struct Published {
    const void* input = nullptr;
    void* output = nullptr;
  };
  std::vector<Published> published = std::vector<Published>(size_t(kMaxRanks));
  std::vector<double> scratch;  // resized by rank 0 before the first barrier of a call
};

// Ranks that are processes (process mode): the data moves through the group's collectives.
class ProcessHostCommunicator final : public HostMemoryCommunicator {
 public:
  explicit ProcessHostCommunicator(ProcessGroup& g)
      : HostMemoryCommunicator(std::vector<int>(size_t(g.size()), 0), &g) {}
  std::string describe() const override {
    return fmt::format("{} process ranks over {}", world_size(), group()->describe());
  }
  std::vector<uint8_t> gathered, sent, slice;  // scratch of a call
  std::vector<double> sums;
};

// Element i of a host buffer of `dtype` as float / double, and back.
template <class Acc>
Acc load(DType t, const void* p, int64_t i) {
  switch (t) {
    case DType::kF32: return Acc(static_cast<const float*>(p)[i]);
    case DType::kF64: return Acc(static_cast<const double*>(p)[i]);
    case DType::kBF16: return Acc(to_float(static_cast<const bf16*>(p)[i]));
    case DType::kF16: return Acc(to_float(static_cast<const fp16*>(p)[i]));
    case DType::kF8E4M3:
    case DType::kF8E5M2: break;  // the all-reduce refuses fp8 (AllReduceParams::validate)
  }
  return Acc(0);
}
template <class Acc>
void store(DType t, void* p, int64_t i, Acc v) {
  switch (t) {
    case DType::kF32: static_cast<float*>(p)[i] = float(v); break;
    case DType::kF64: static_cast<double*>(p)[i] = double(v); break;
    case DType::kBF16: static_cast<bf16*>(p)[i] = to_bf16(float(v)); break;
    case DType::kF16: static_cast<fp16*>(p)[i] = to_fp16(float(v)); break;
    case DType::kF8E4M3:
    case DType::kF8E5M2: break;  // the all-reduce refuses fp8 (AllReduceParams::validate)
  }
}

// scratch[i - begin] = sum over ranks (rank order) of inputs[r][i], i in [begin, end), in the
// accumulation type of the dtype (stored widened in the scratch, which is double).
void sum_range(DType t, const std::vector<const void*>& inputs, int64_t begin, int64_t end, double* scratch) {
  for (int64_t i = begin; i < end; ++i) {
    if (t == DType::kF64) {
      double s = 0;
      for (const void* in : inputs) s += load<double>(t, in, i);
      scratch[i - begin] = s;
    } else {
      float s = 0;
      for (const void* in : inputs) s += load<float>(t, in, i);
      scratch[i - begin] = double(s);
    }
  }
}

void write_range(DType t, const double* scratch, int64_t begin, int64_t end, void* out) {
  for (int64_t i = begin; i < end; ++i) store<double>(t, out, i, scratch[i - begin]);
}

HostCommunicator* host_comm(const AllReduceOperands& o) {
  return o.comm && o.comm->device_kind() == DeviceKind::kCpu && !o.comm->group()
             ? static_cast<HostCommunicator*>(o.comm)
             : nullptr;
}
ProcessHostCommunicator* process_comm(const AllReduceOperands& o) {
  return o.comm && o.comm->device_kind() == DeviceKind::kCpu && o.comm->group()
             ? static_cast<ProcessHostCommunicator*>(o.comm)
             : nullptr;
}

// `block`: elements summed before they are written out (0: all at once).
Status run_group(const AllReduceParams& p, const AllReduceOperands& o, int64_t block) {
  std::vector<const void*> inputs(o.input.begin(), o.input.begin() + p.world_size);
  const int64_t step = block > 0 ? block : std::max<int64_t>(p.count, 1);
  std::vector<double> sum(size_t(std::min(step, p.count)));
  for (int64_t b = 0; b < p.count; b += step) {
    const int64_t e = std::min(p.count, b + step);
    sum_range(p.dtype, inputs, b, e, sum.data());
    for (int r = 0; r < p.world_size; ++r) write_range(p.dtype, sum.data(), b, e, o.output[size_t(r)]);
  }
  return Status::ok();
}

Status run_rank(const AllReduceParams& p, const AllReduceOperands& o, int64_t block) {
  HostCommunicator& c = *host_comm(o);
  const int r = o.rank, W = p.world_size;
  if (r == 0 && c.scratch.size() < size_t(p.count)) c.scratch.resize(size_t(p.count));
  c.published[size_t(r)] = {o.input[size_t(r)], o.output[size_t(r)]};
  TUNABLEOP_RETURN_IF_ERROR(c.barrier());  // every rank's buffers are known, the scratch sized
  std::vector<const void*> inputs;
  for (int q = 0; q < W; ++q) inputs.push_back(c.published[size_t(q)].input);
  const int64_t begin = p.count * r / W, end = p.count * (r + 1) / W;
  const int64_t step = block > 0 ? block : std::max<int64_t>(end - begin, 1);
  for (int64_t b = begin; b < end; b += step)
    sum_range(p.dtype, inputs, b, std::min(end, b + step), c.scratch.data() + b);
  TUNABLEOP_RETURN_IF_ERROR(c.barrier());  // the whole sum is in the scratch; inputs are free
  write_range(p.dtype, c.scratch.data(), 0, p.count, o.output[size_t(r)]);
  return c.barrier();  // nobody reuses the scratch before every rank copied it
}

// Process mode, one step: every rank's input gathered on every rank, each summing all of it
// (`block` elements at a time; 0: all at once).
Status run_process_one_shot(const AllReduceParams& p, const AllReduceOperands& o, int64_t block) {
  ProcessHostCommunicator& c = *process_comm(o);
  const int r = o.rank, W = p.world_size;
  const size_t bytes = p.bytes();
  c.gathered.resize(bytes * size_t(W));
  TUNABLEOP_RETURN_IF_ERROR(c.group()->all_gather(o.input[size_t(r)], c.gathered.data(), bytes));
  std::vector<const void*> inputs;
  for (int q = 0; q < W; ++q) inputs.push_back(c.gathered.data() + size_t(q) * bytes);
  const int64_t step = block > 0 ? block : std::max<int64_t>(p.count, 1);
  c.sums.resize(size_t(std::min(step, p.count)));
  for (int64_t b = 0; b < p.count; b += step) {
    const int64_t e = std::min(p.count, b + step);
    sum_range(p.dtype, inputs, b, e, c.sums.data());
    write_range(p.dtype, c.sums.data(), b, e, o.output[size_t(r)]);
  }
  return Status::ok();
}

// Process mode, two steps: rank q sums slice q of every rank's input (an all-to-all brings it
// the slices), then every rank gathers the summed slices. Slices are padded to one length.
Status run_process_two_shot(const AllReduceParams& p, const AllReduceOperands& o) {
  ProcessHostCommunicator& c = *process_comm(o);
  const int r = o.rank, W = p.world_size;
  const size_t es = dtype_size(p.dtype);
  const int64_t width = (p.count + W - 1) / W;
  const size_t slice_bytes = size_t(width) * es;
  auto begin = [&](int q) { return p.count * q / W; };
  auto end = [&](int q) { return p.count * (q + 1) / W; };
  c.sent.assign(slice_bytes * size_t(W), 0);
  c.gathered.resize(slice_bytes * size_t(W));
  const auto* in = static_cast<const uint8_t*>(o.input[size_t(r)]);
  for (int q = 0; q < W; ++q)
    std::memcpy(c.sent.data() + size_t(q) * slice_bytes, in + size_t(begin(q)) * es, size_t(end(q) - begin(q)) * es);
  TUNABLEOP_RETURN_IF_ERROR(c.group()->all_to_all(c.sent.data(), c.gathered.data(), slice_bytes));
  std::vector<const void*> slices;
  for (int q = 0; q < W; ++q) slices.push_back(c.gathered.data() + size_t(q) * slice_bytes);
  const int64_t mine = end(r) - begin(r);
  c.sums.resize(size_t(std::max<int64_t>(mine, 1)));
  c.slice.assign(slice_bytes, 0);
  sum_range(p.dtype, slices, 0, mine, c.sums.data());
  write_range(p.dtype, c.sums.data(), 0, mine, c.slice.data());
  TUNABLEOP_RETURN_IF_ERROR(c.group()->all_gather(c.slice.data(), c.gathered.data(), slice_bytes));
  auto* out = static_cast<uint8_t*>(o.output[size_t(r)]);
  for (int q = 0; q < W; ++q)
    std::memcpy(out + size_t(begin(q)) * es, c.gathered.data() + size_t(q) * slice_bytes,
                size_t(end(q) - begin(q)) * es);
  return Status::ok();
}

enum class HostAlgo { kSlices, kBlocked, kTwoShot };

// Threads: Default and Host_TwoShot sum a slice per rank (the two-shot form, through shared
// memory), Host_Blocked a block at a time. Processes: Default and Host_Blocked gather every
// input (one-shot), Host_TwoShot exchanges slices.
Status run_host(HostAlgo algo, int64_t block, const AllReduceParams& p, const AllReduceOperands& o) {
  if (process_comm(o))
    return algo == HostAlgo::kTwoShot ? run_process_two_shot(p, o) : run_process_one_shot(p, o, block);
  if (!host_comm(o)) return Status::unsupported("not a host communicator");
  return o.rank < 0 ? run_group(p, o, block) : run_rank(p, o, block);
}

AllReduceCandidate host_candidate(std::string name, HostAlgo algo, int64_t block) {
  AllReduceCandidate c;
  c.name = std::move(name);
  c.device = DeviceKind::kCpu;
  c.supports = [](const AllReduceParams& p) -> Status {
    TUNABLEOP_RETURN_IF_ERROR(p.validate());
    // The CPU engine's partial sums are already fp32 and it adds them itself.
    if (p.adds_residual()) return Status::unsupported("host all-reduce: no residual epilogue");
    return Status::ok();
  };
  c.run = [algo, block](const AllReduceParams& p, const AllReduceOperands& o) -> Status {
    return run_host(algo, block, p, o);
  };
  c.info.library = "tunableop";
  c.info.algorithm = algo == HostAlgo::kTwoShot ? "host two-shot" : block > 0 ? "host blocked" : "host";
  if (block > 0) c.info.add("block", std::to_string(block));
  return c;
}

}  // namespace

void register_host_all_reduce(Registry& r) {
  CommunicatorFactory f;
  f.device = DeviceKind::kCpu;
  f.make = [](const std::vector<int>& devices, Logger&) -> StatusOr<std::unique_ptr<Communicator>> {
    return std::unique_ptr<Communicator>(new HostCommunicator(devices));
  };
  f.make_process = [](int, ProcessGroup& g, Logger&) -> StatusOr<std::unique_ptr<Communicator>> {
    return std::unique_ptr<Communicator>(new ProcessHostCommunicator(g));
  };
  r.list<CommunicatorFactory>().push_back(std::move(f));
  auto& list = r.list<AllReduceCandidate>();
  list.push_back(host_candidate("Default", HostAlgo::kSlices, 0));
  list.push_back(host_candidate("Host_Blocked", HostAlgo::kBlocked, 4096));
  list.push_back(host_candidate("Host_TwoShot", HostAlgo::kTwoShot, 0));
}

}  // namespace tunableop::cpu
