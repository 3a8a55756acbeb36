// The CUDA all-reduce candidates on two GPUs or more (skipped with fewer): every candidate
// against the host sum, every dtype, odd counts, a message longer than one staging chunk,
// misaligned buffers, in place and not, every rank the same bits; then rank mode, one thread
// per GPU, eager and captured in a CUDA graph replayed many times (the peer kernels' epochs
// and staging parity must survive replays), and the op's decision shared by every rank. The
// residual epilogue (tensor parallelism's fp32 partial sums, rounded once and added to the
// residual stream) bit for bit on every candidate, eagerly and under graph replays; the LL
// kernel's epoch wrapping past 2^32 - 1 under replays.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "ops/all_reduce/dispatch.h"
#include "ops/all_reduce/reference.h"
#include "ops/framework/elements.h"
#include "tunableop/all_reduce.h"
#include "tunableop/context.h"
#include "tunableop/half.h"

namespace tunableop {
namespace {

int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

// Every rank's random input on the host, their sum, and device buffers per rank.
struct Problem {
  AllReduceParams p;
  std::vector<std::vector<uint8_t>> host;
  std::vector<double> ref;
  std::vector<void*> in, out;  // device; `offset` elements into each allocation
  std::vector<void*> base;

  Problem(Communicator& comm, DType t, int64_t n, int64_t offset) {
    p.dtype = t;
    p.count = n;
    p.world_size = comm.world_size();
    std::vector<const void*> hosts;
    for (int r = 0; r < p.world_size; ++r) {
      std::mt19937_64 rng(uint64_t(n * 7 + r));
      std::uniform_real_distribution<double> dist(-1, 1);
      host.emplace_back(p.bytes());
      for (int64_t i = 0; i < n; ++i) store_from_double(t, host.back().data(), i, dist(rng));
      hosts.push_back(host.back().data());
      const size_t shift = size_t(offset) * dtype_size(t);
      for (int k = 0; k < 2; ++k) {
        auto m = comm.alloc(r, p.bytes() + shift + 16);
        EXPECT_TRUE(m.is_ok());
        base.push_back(*m);
        (k == 0 ? in : out).push_back(static_cast<char*>(*m) + shift);
      }
    }
    ref = ops::all_reduce_reference(p, hosts);
  }
  // Inputs uploaded, outputs poisoned with 0xff bytes (NaN in every float type).
  void reset(Communicator& comm) {
    std::vector<uint8_t> poison(p.bytes(), 0xff);
    for (int r = 0; r < p.world_size; ++r) {
      ASSERT_TRUE(comm.copy_to_device(r, in[size_t(r)], host[size_t(r)].data(), p.bytes()).is_ok());
      ASSERT_TRUE(comm.copy_to_device(r, out[size_t(r)], poison.data(), p.bytes()).is_ok());
    }
  }
  AllReduceOperands operands(Communicator& comm, bool in_place) const {
    AllReduceOperands o;
    o.comm = &comm;
    for (int r = 0; r < p.world_size; ++r) {
      o.input[size_t(r)] = in_place ? out[size_t(r)] : in[size_t(r)];
      o.output[size_t(r)] = out[size_t(r)];
    }
    return o;
  }
  // In place, the outputs start as the inputs.
  void load_outputs_with_inputs(Communicator& comm) {
    for (int r = 0; r < p.world_size; ++r)
      ASSERT_TRUE(comm.copy_to_device(r, out[size_t(r)], host[size_t(r)].data(), p.bytes()).is_ok());
  }
  void expect_sums(Communicator& comm, const std::string& what) {
    std::vector<uint8_t> first(p.bytes()), got(p.bytes());
    for (int r = 0; r < p.world_size; ++r) {
      ASSERT_TRUE(comm.synchronize(r, nullptr).is_ok());
      std::vector<uint8_t>& h = r == 0 ? first : got;
      ASSERT_TRUE(comm.copy_to_host(r, h.data(), out[size_t(r)], p.bytes()).is_ok());
      EXPECT_LE(ops::all_reduce_error(p, h.data(), ref), ops::all_reduce_tolerance(p)) << what << ", rank " << r;
      if (r > 0) EXPECT_EQ(std::memcmp(first.data(), got.data(), p.bytes()), 0) << what << ": ranks 0 and " << r;
    }
  }
  void release(Communicator& comm) {
    for (size_t i = 0; i < base.size(); ++i) comm.free(int(i / 2), base[i]);
  }
};

class AllReduceCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs, this machine has " << gpu_count();
    Config c = Config::defaults_only();
    ASSERT_TRUE(c.set(Setting::kSearchEffort, 2).is_ok());
    ctx_ = std::make_unique<Context>(Device::cuda(0), std::move(c));
    auto comm = make_communicator(*ctx_, {0, 1});
    ASSERT_TRUE(comm.is_ok()) << comm.status().to_string();
    comm_ = std::move(comm.value());
    std::printf("communicator: %s\n", comm_->describe().c_str());
  }
  std::vector<AllReduceCandidate> candidates() {
    return all_reduce_candidates_for(*ctx_, AllReduceParams{DType::kBF16, 8, 2}, 2);
  }
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<Communicator> comm_;
};

// Candidate c on every dtype, count, alignment and placement; false when it cannot run here
// (NCCL not loaded, say).
bool check_group_mode(Communicator& comm, const AllReduceCandidate& c) {
  for (DType t : {DType::kBF16, DType::kF16, DType::kF32, DType::kF64}) {
    // 4M + 5 fp32 elements are more than one 16 MiB staging chunk.
    for (int64_t n : {int64_t(1), int64_t(7), int64_t(4096 + 3), int64_t(4 << 20) + 5}) {
      if (n > 4096 + 3 && t != DType::kF32) continue;
      for (int64_t offset : {0, 1}) {
        for (bool in_place : {false, true}) {
          Problem pr(comm, t, n, offset);
          if (!c.supports(pr.p).is_ok()) {  // Peer_OneShotLL: small fp32/bf16/fp16 messages only
            pr.release(comm);
            continue;
          }
          pr.reset(comm);
          if (in_place) pr.load_outputs_with_inputs(comm);
          Status st = c.run(pr.p, pr.operands(comm, in_place));
          if (st.is_unsupported()) {
            std::printf("%s: unsupported here: %s\n", c.name.c_str(), st.message().c_str());
            pr.release(comm);
            return false;
          }
          EXPECT_TRUE(st.is_ok()) << c.name << ": " << st.to_string();
          pr.expect_sums(comm, c.name + " " + dtype_name(t) + " n " + std::to_string(n) + " offset " +
                                   std::to_string(offset) + (in_place ? " in place" : ""));
          pr.release(comm);
        }
      }
    }
  }
  return true;
}

TEST_F(AllReduceCuda, EveryCandidateSumsInGroupMode) {
  const auto cands = candidates();
  ASSERT_GE(cands.size(), 3u);
  for (const auto& c : cands) {
    const bool ran = check_group_mode(*comm_, c);
    if (c.name.rfind("Peer_", 0) == 0 || c.name == "Default") EXPECT_TRUE(ran) << c.name << " must run on 2 GPUs";
  }
}

// Rank mode: one thread per GPU runs `call(rank, stream)` on its own stream, eagerly and in a
// graph replayed many times with eager calls between some replays; the number of calls each
// rank made (every rank makes the same), or -1 after an error.
int replay_in_rank_mode(Communicator& comm, const std::string& what,
                        const std::function<Status(int rank, cudaStream_t s)>& call) {
  std::vector<Status> errors(2);
  std::vector<int> calls(2, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      Status& err = errors[size_t(r)];
      cudaSetDevice(comm.device(r));
      cudaStream_t s = nullptr;
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      auto once = [&] {
        ++calls[size_t(r)];
        return call(r, s);
      };
      for (int i = 0; i < 3 && err.is_ok(); ++i) err = once();  // eager
      cudaGraph_t g = nullptr;
      cudaGraphExec_t exec = nullptr;
      if (err.is_ok() && cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
        Status a = call(r, s), b = call(r, s);  // two calls: both staging parities in one graph
        if (cudaStreamEndCapture(s, &g) != cudaSuccess || cudaGraphInstantiate(&exec, g, 0) != cudaSuccess)
          err = Status::device_error("capture failed");
        if (!a.is_ok()) err = a;
        if (!b.is_ok()) err = b;
      }
      for (int i = 0; i < 9 && err.is_ok(); ++i) {  // replays, with an eager call between some
        if (cudaGraphLaunch(exec, s) != cudaSuccess) err = Status::device_error("graph launch failed");
        calls[size_t(r)] += 2;
        if (i % 3 == 1 && err.is_ok()) err = once();
      }
      if (cudaStreamSynchronize(s) != cudaSuccess) err = Status::device_error("stream failed");
      if (exec) cudaGraphExecDestroy(exec);
      if (g) cudaGraphDestroy(g);
      cudaStreamDestroy(s);
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& e : errors) {
    EXPECT_TRUE(e.is_ok()) << what << ": " << e.to_string();
    if (!e.is_ok()) return -1;
  }
  EXPECT_EQ(calls[0], calls[1]);
  return calls[0];
}

// NCCL communicators are made in group mode: one group-mode call before rank mode.
Status warm_up_in_group_mode(Communicator& comm, const AllReduceCandidate& c, DType t) {
  Problem warm(comm, t, 64, 0);
  warm.reset(comm);
  Status st = c.run(warm.p, warm.operands(comm, false));
  warm.release(comm);
  return st;
}

void rank_mode_graph_replays(Communicator& comm, const AllReduceCandidate& c) {
  Problem pr(comm, DType::kBF16, 3 * 4096 + 1, 0);
  pr.reset(comm);
  const int calls = replay_in_rank_mode(comm, c.name, [&](int r, cudaStream_t s) {
    return c.run(pr.p, AllReduceOperands::for_rank(comm, r, pr.in[size_t(r)], pr.out[size_t(r)], s));
  });
  if (calls > 0) pr.expect_sums(comm, c.name + " after graph replays");
  pr.release(comm);
}

TEST_F(AllReduceCuda, RankModeSurvivesGraphReplays) {
  for (const auto& c : candidates()) {
    if (c.name != "Default" && c.name.rfind("Peer_", 0) != 0 && c.name != "Nccl_Ring_LL") continue;
    Status st = warm_up_in_group_mode(*comm_, c, DType::kBF16);
    if (st.is_unsupported()) continue;
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    rank_mode_graph_replays(*comm_, c);
  }
}

TEST_F(AllReduceCuda, EveryRankRunsTheCandidateRankZeroDecided) {
  Config c = Config::defaults_only();
  ASSERT_TRUE(c.set(Setting::kEnabled, true).is_ok());
  ASSERT_TRUE(c.set(Setting::kFilename, ::testing::TempDir() + "/all_reduce_cuda_%d.csv").is_ok());
  Context ctx0(Device::cuda(0), std::move(c));
  Context ctx1(Device::cuda(1), Config::defaults_only());  // its settings must not matter
  Problem pr(*comm_, DType::kBF16, 8192, 0);
  pr.reset(*comm_);
  std::vector<Status> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(r);
      errors[size_t(r)] =
          all_reduce(r == 0 ? ctx0 : ctx1, pr.p,
                     AllReduceOperands::for_rank(*comm_, r, pr.in[size_t(r)], pr.out[size_t(r)], comm_->stream(r)));
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& e : errors) ASSERT_TRUE(e.is_ok()) << e.to_string();
  pr.expect_sums(*comm_, "rank mode, tuned");
  std::printf("8192 bf16 on 2 GPUs: %s\n", all_reduce_solution(*comm_, pr.p).c_str());
  EXPECT_NE(all_reduce_solution(*comm_, pr.p), "");
  pr.release(*comm_);
}

// The residual epilogue: fp32 (or bf16) partial sums per rank, summed, rounded to `round_to`
// once and added to an fp32 residual stream that starts the same on every rank. With 2 ranks
// the fp32 sum a + b is one rounding whatever the order, so the expected residual is exact:
// float(residual + round_to(dtype(a + b))), bit for bit; after `calls` calls, that add repeated.
struct ResidualProblem {
  AllReduceParams p;
  std::vector<std::vector<uint8_t>> host;
  std::vector<float> residual0;
  std::vector<void*> in, out, base;

  ResidualProblem(Communicator& comm, DType t, DType round_to, int64_t n, int64_t offset) {
    p.dtype = t;
    p.count = n;
    p.world_size = comm.world_size();
    p.epilogue = AllReduceEpilogue::kAddResidual;
    p.round_to = round_to;
    std::mt19937_64 rng(uint64_t(n * 13 + 5));
    std::uniform_real_distribution<double> dist(-3, 3);
    for (int64_t i = 0; i < n; ++i) residual0.push_back(float(dist(rng)));
    for (int r = 0; r < p.world_size; ++r) {
      host.emplace_back(p.bytes());
      for (int64_t i = 0; i < n; ++i) store_from_double(t, host.back().data(), i, dist(rng));
      const size_t shift = size_t(offset) * dtype_size(t);
      auto a = comm.alloc(r, p.bytes() + shift + 16), b = comm.alloc(r, p.output_bytes() + 4 * size_t(offset) + 16);
      EXPECT_TRUE(a.is_ok() && b.is_ok());
      base.push_back(*a);
      base.push_back(*b);
      in.push_back(static_cast<char*>(*a) + shift);
      out.push_back(static_cast<char*>(*b) + 4 * size_t(offset));
    }
  }
  void reset(Communicator& comm) {
    for (int r = 0; r < p.world_size; ++r) {
      ASSERT_TRUE(comm.copy_to_device(r, in[size_t(r)], host[size_t(r)].data(), p.bytes()).is_ok());
      ASSERT_TRUE(comm.copy_to_device(r, out[size_t(r)], residual0.data(), p.output_bytes()).is_ok());
    }
  }
  AllReduceOperands operands(Communicator& comm) const {
    AllReduceOperands o;
    o.comm = &comm;
    for (int r = 0; r < p.world_size; ++r) {
      o.input[size_t(r)] = in[size_t(r)];
      o.output[size_t(r)] = out[size_t(r)];
    }
    return o;
  }
  static float round_as(DType t, float v) {
    if (t == DType::kBF16) return to_float(to_bf16(v));
    if (t == DType::kF16) return to_float(to_fp16(v));
    return v;
  }
  void expect(Communicator& comm, const std::string& what, int calls = 1) {
    ASSERT_EQ(p.world_size, 2);
    std::vector<float> got(size_t(p.count));
    int64_t wrong = 0, first_wrong = -1;
    for (int r = 0; r < 2; ++r) {
      ASSERT_TRUE(comm.synchronize(r, nullptr).is_ok());
      ASSERT_TRUE(comm.copy_to_host(r, got.data(), out[size_t(r)], p.output_bytes()).is_ok());
      for (int64_t i = 0; i < p.count; ++i) {
        const float a = float(load_as_double(p.dtype, host[0].data(), i));
        const float b = float(load_as_double(p.dtype, host[1].data(), i));
        float want = residual0[size_t(i)];
        // The sum in the inputs' dtype (as a plain all-reduce gives it), then round_to.
        for (int k = 0; k < calls; ++k) want += round_as(p.round_to, round_as(p.dtype, a + b));
        if (std::memcmp(&want, &got[size_t(i)], 4) != 0 && wrong++ == 0) first_wrong = i;
      }
      EXPECT_EQ(wrong, 0) << what << ", rank " << r << ": first at " << first_wrong << " (of " << p.count << ")";
    }
  }
  void release(Communicator& comm) {
    for (size_t i = 0; i < base.size(); ++i) comm.free(int(i / 2), base[i]);
  }
};

TEST_F(AllReduceCuda, EveryCandidateAddsTheRoundedSumToTheResidual) {
  for (const auto& c : candidates()) {
    int ran = 0;
    for (DType t : {DType::kF32, DType::kBF16}) {
      for (DType round_to : {DType::kBF16, DType::kF32}) {
        // Counts that are not multiples of any vector width, and one past a staging chunk.
        for (int64_t n : {int64_t(1), int64_t(5), int64_t(4096 + 3), int64_t(4 << 20) + 3}) {
          if (n > 4099 && (t != DType::kF32 || round_to != DType::kBF16)) continue;
          for (int64_t offset : {0, 1}) {
            ResidualProblem pr(*comm_, t, round_to, n, offset);
            if (!c.supports(pr.p).is_ok()) {
              pr.release(*comm_);
              continue;
            }
            pr.reset(*comm_);
            Status st = c.run(pr.p, pr.operands(*comm_));
            if (!st.is_unsupported()) {
              EXPECT_TRUE(st.is_ok()) << c.name << ": " << st.to_string();
              pr.expect(*comm_, c.name + " " + dtype_name(t) + " -> " + dtype_name(round_to) + " n " +
                                    std::to_string(n) + " offset " + std::to_string(offset));
              ++ran;
            }
            pr.release(*comm_);
          }
        }
      }
    }
    if (c.name.rfind("Peer_", 0) == 0 || c.name == "Default") {
      EXPECT_GT(ran, 0) << c.name << " must run on 2 GPUs";
    }
  }
}

void residual_graph_replays(Communicator& comm, const AllReduceCandidate& c) {
  ResidualProblem pr(comm, DType::kF32, DType::kBF16, 4096 + 3, 0);
  pr.reset(comm);
  const int calls = replay_in_rank_mode(comm, c.name + " (residual)", [&](int r, cudaStream_t s) {
    return c.run(pr.p, AllReduceOperands::for_rank(comm, r, pr.in[size_t(r)], pr.out[size_t(r)], s));
  });
  if (calls > 0) pr.expect(comm, c.name + " into the residual after graph replays", calls);
  pr.release(comm);
}

TEST_F(AllReduceCuda, ResidualEpilogueSurvivesGraphReplays) {
  for (const auto& c : candidates()) {
    if (c.name != "Default" && c.name.rfind("Peer_", 0) != 0) continue;
    Status st = warm_up_in_group_mode(*comm_, c, DType::kF32);
    if (st.is_unsupported()) continue;
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    residual_graph_replays(*comm_, c);
  }
}

// The LL kernel's epoch starts 16 calls before 2^32 - 1: the replays take it past the wrap (0
// is skipped, the receive areas' parities keep alternating), with and without the epilogue.
TEST_F(AllReduceCuda, OneShotLLEpochWrapsUnderGraphReplays) {
  setenv("TUNABLEOP_TEST_LL_EPOCH", "0xfffffff0", 1);
  auto comm = make_communicator(*ctx_, {0, 1});
  unsetenv("TUNABLEOP_TEST_LL_EPOCH");
  ASSERT_TRUE(comm.is_ok()) << comm.status().to_string();
  for (const auto& c : candidates()) {
    if (c.name != "Peer_OneShotLL") continue;
    rank_mode_graph_replays(**comm, c);  // 24 calls
    residual_graph_replays(**comm, c);   // 24 more
    return;
  }
  FAIL() << "no Peer_OneShotLL candidate";
}
}  // namespace
}  // namespace tunableop
