// All-reduce (sum) across the ranks of a communicator: after it, every rank's output holds the
// element-wise sum of every rank's input, the same bits on every rank. It is the collective of
// tensor parallelism (after each row-parallel projection) and a tunable op like GEMM: its
// candidates (NCCL and its algorithms, our one-shot and two-shot kernels over CUDA peer memory,
// host threads on the CPU) are measured per message size and rank count, and the winner is
// kept in the results file. docs/parallel.md explains the process model.
//
// A communicator is one process driving `world_size` devices (GPUs, or CPU "ranks" that are
// host threads), or, in process mode (make_process_communicator), one rank of a group of
// processes that each drive one device (tunableop/process_group.h: MPI ranks). It is used in
// one of two ways:
//   group mode  (operands.rank = -1): one thread runs the collective for every rank (tuning,
//               benchmarks, `tunableop allreduce`);
//   rank mode   (operands.rank = r): each rank's own thread calls with its own buffers, every
//               rank at once and in the same order (the tensor-parallel engine, one thread per
//               GPU). The first call of a message size is a rendezvous: rank 0's context
//               decides (results file, or tuning on the communicator's own buffers while the
//               other ranks wait), and every rank runs that one candidate from then on.
// Group-mode and rank-mode calls on one communicator must not run at the same time. In process
// mode only rank mode exists (each process calls for its own rank); the first call of a size
// is a rendezvous of the processes, where rank 0 decides and the others carry out its
// measurements (src/ops/all_reduce/process_tuning.h) and then run the candidate it chose.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tunableop/log.h"
#include "tunableop/op.h"
#include "tunableop/process_group.h"
#include "tunableop/timer.h"

namespace tunableop {

class Context;  // tunableop/context.h

enum class ReduceOp { kSum = 0 };
const char* reduce_op_name(ReduceOp op);  // "sum"

// What becomes of the sum. kAddResidual is tensor parallelism's row-parallel epilogue: the
// inputs are the ranks' fp32 partial sums of a projection, and each rank's output is its copy of
// the fp32 residual stream, which receives residual[i] += float(round_to(sum[i])), sum[i] being
// what a plain all-reduce of dtype gives: the sum is rounded where one device rounds its GEMM
// output, so TP=N differs from one device only by the fp32 summation order. A candidate may
// fuse the add into its kernel.
enum class AllReduceEpilogue { kNone = 0, kAddResidual = 1 };

struct AllReduceOp;

struct AllReduceParams {
  using Op = AllReduceOp;
  DType dtype = DType::kBF16;  // sums are accumulated in fp32 (fp64 for kF64) and rounded once
  int64_t count = 0;           // elements per rank
  int world_size = 2;          // ranks of the communicator
  ReduceOp op = ReduceOp::kSum;
  AllReduceEpilogue epilogue = AllReduceEpilogue::kNone;
  DType round_to = DType::kF32;  // kAddResidual: the sum's rounding before the add (fp32, bf16, fp16)

  bool operator==(const AllReduceParams&) const = default;
  size_t bytes() const { return size_t(count) * dtype_size(dtype); }  // input per rank
  bool adds_residual() const { return epilogue == AllReduceEpilogue::kAddResidual; }
  DType output_dtype() const { return adds_residual() ? DType::kF32 : dtype; }
  size_t output_bytes() const { return size_t(count) * dtype_size(output_dtype()); }
  // Names the first bad field.
  Status validate() const;
};

// Op "AllReduceTunableOp_<dtype>_<op>" (AllReduceTunableOp_BFloat16_sum); params
// "n_<count>_ranks_<world_size>", with "_residual_<round_to>" for kAddResidual
// (n_4096_ranks_2_residual_BFloat16).
std::string all_reduce_op_signature(const AllReduceParams& p);
std::string all_reduce_params_signature(const AllReduceParams& p);
StatusOr<AllReduceParams> parse_all_reduce_signature(const std::string& op, const std::string& params);

class Communicator;
constexpr int kMaxRanks = 8;

struct AllReduceOperands {
  Communicator* comm = nullptr;
  int rank = -1;  // -1: group mode (every rank's entry below is used); r: rank mode (entry r)
  // Per rank, memory of that rank's device; input may equal output (in place; not with
  // kAddResidual, whose output is the fp32 residual stream).
  std::array<const void*, kMaxRanks> input{};
  std::array<void*, kMaxRanks> output{};
  std::array<void*, kMaxRanks> stream{};  // cudaStream_t on CUDA; null: the communicator's stream
  // A hint, no effect on the result: memory rank r reads next (the next projection's weights),
  // which a candidate that waits on its peers may fetch into the L2 meanwhile (Peer_OneShotLL).
  std::array<const void*, kMaxRanks> prefetch{};
  std::array<int64_t, kMaxRanks> prefetch_bytes{};

  // Rank r's own call (rank mode).
  static AllReduceOperands for_rank(Communicator& comm, int rank, const void* input, void* output, void* stream);
};

struct AllReduceOp {
  using Params = AllReduceParams;
  using Operands = AllReduceOperands;
};
// Backends register these into Registry::list<AllReduceCandidate>() (Default first). A
// candidate runs both modes; one that needs something the communicator lacks (NCCL not
// loaded, no peer access) answers Unsupported when run.
using AllReduceCandidate = Candidate<AllReduceOp>;

// One process driving the devices of a tensor-parallel group. Device backends implement the
// virtual part (memory, copies and streams per rank, a timer over every rank); the rank
// barrier and the per-size decisions are common to all (src/ops/all_reduce/dispatch.cc).
class Communicator {
 public:
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual DeviceKind device_kind() const = 0;
  int world_size() const { return int(devices_.size()); }
  int device(int rank) const { return devices_[size_t(rank)]; }  // ordinal of rank r's device (in its process)
  virtual std::string describe() const = 0;                      // for logs and tables
  // Process mode: the group whose processes hold the other ranks; null when every rank is in
  // this process.
  ProcessGroup* group() const { return group_; }
  // The rank this process holds in process mode; -1 when it holds every rank.
  int own_rank() const { return group_ ? group_->rank() : -1; }
  bool holds(int rank) const { return !group_ || rank == group_->rank(); }

  // --- For group-mode work from one thread (tuning, benchmarks): memory on rank r's device,
  // synchronous copies to and from it, the communicator's own stream of rank r, and a timer
  // whose regions cover a collective on every rank (the slowest rank's time). In process mode:
  // this process's rank only, and a timer of its own device.
  virtual StatusOr<void*> alloc(int rank, size_t bytes) = 0;
  virtual void free(int rank, void* p) = 0;
  virtual Status copy_to_device(int rank, void* dst, const void* host, size_t bytes) = 0;
  virtual Status copy_to_host(int rank, void* host, const void* src, size_t bytes) = 0;
  virtual void* stream(int rank) = 0;
  virtual std::unique_ptr<Timer> make_timer() = 0;
  // Waits for the work queued on `stream` of rank r (null: the communicator's own stream).
  virtual Status synchronize(int rank, void* stream) = 0;
  // Whether `stream` of rank r is capturing a CUDA graph (no decision can be made then).
  virtual bool capturing(int rank, void* stream) const { return false; }
  virtual Status recover() { return Status::ok(); }

  // --- Rank mode.
  // Blocks until every rank's thread has called it (generation barrier); an error once
  // abort() was called, so that no rank waits forever for one that failed.
  Status barrier();
  // Ends every barrier, now and later, with `why` (a rank failed).
  void abort(const Status& why);
  // Makes the barrier usable again after abort(); only while no rank's thread is inside it.
  void clear_abort();

  struct State;  // barrier and decisions (dispatch.cc)
  State& state() { return *state_; }

 protected:
  explicit Communicator(std::vector<int> devices, ProcessGroup* group = nullptr);

 private:
  std::vector<int> devices_;
  ProcessGroup* group_ = nullptr;
  std::unique_ptr<State> state_;
};

// How a backend makes communicators for its device kind (Registry::list<CommunicatorFactory>()).
struct CommunicatorFactory {
  DeviceKind device = DeviceKind::kCpu;
  std::function<StatusOr<std::unique_ptr<Communicator>>(const std::vector<int>& devices, Logger& log)> make;
  // Process mode: this process's rank of `group` on its device `device`. Collective. Null when
  // the backend has no process mode.
  std::function<StatusOr<std::unique_ptr<Communicator>>(int device, ProcessGroup& group, Logger& log)> make_process;
};

// A communicator over `devices` (CUDA ordinals; for the CPU, one entry per host-thread rank,
// all 0) of ctx's device kind, from the backend that registered one.
StatusOr<std::unique_ptr<Communicator>> make_communicator(Context& ctx, const std::vector<int>& devices);

// Process mode: a communicator whose ranks are the processes of `group`, this one holding rank
// group.rank() on ctx's device (every rank's context of the same device kind). Collective: every
// rank gets a communicator or every rank an error. `group` must outlive it.
StatusOr<std::unique_ptr<Communicator>> make_process_communicator(Context& ctx, ProcessGroup& group);

// The all-reduce through the op: the candidate this communicator decided on for p (a lookup
// after the first call of this size), deciding first when it has not (see above). In rank mode
// `ctx` matters only for rank 0, whose context decides and keeps the result.
Status all_reduce(Context& ctx, const AllReduceParams& p, const AllReduceOperands& ops);

// The candidate a communicator runs for p ("" before its first call of that size).
std::string all_reduce_solution(Communicator& comm, const AllReduceParams& p);

// Process mode, for tables (`mpirun -np N tunableop allreduce`): every candidate of p at this
// search effort checked against the host sum (every rank the same bits) and timed as the
// slowest rank's microseconds per call (median of `rounds` samples of `iterations` calls back
// to back), every rank taking part as when rank 0 decides. Collective; rank 0 gets a row per
// candidate, the others none.
struct AllReduceCandidateTime {
  std::string name;
  Status status;  // why it did not run or failed its check
  double us = 0;
};
StatusOr<std::vector<AllReduceCandidateTime>> time_all_reduce_candidates(Context& ctx, Communicator& comm,
                                                                         const AllReduceParams& p, int effort,
                                                                         int iterations, int rounds);

}  // namespace tunableop
