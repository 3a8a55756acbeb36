// The CUDA all-reduce candidates on two GPUs or more (skipped with fewer): every candidate
// against the host sum, every dtype, odd counts, a message longer than one staging chunk,
// misaligned buffers, in place and not, every rank the same bits; then rank mode, one thread
// per GPU, eager and captured in a CUDA graph replayed many times (the peer kernels' epochs
// and staging parity must survive replays), and the op's decision shared by every rank.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

#include "ops/all_reduce/dispatch.h"
#include "ops/all_reduce/reference.h"
#include "ops/framework/elements.h"
#include "tunableop/all_reduce.h"

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

// Rank mode: one thread per GPU calls candidate `c` on its own stream, eagerly and in a graph.
void rank_mode_graph_replays(Communicator& comm, const AllReduceCandidate& c) {
  Problem pr(comm, DType::kBF16, 3 * 4096 + 1, 0);
  pr.reset(comm);
  std::vector<Status> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      Status& err = errors[size_t(r)];
      cudaSetDevice(comm.device(r));
      cudaStream_t s = nullptr;
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      auto call = [&] {
        return c.run(pr.p, AllReduceOperands::for_rank(comm, r, pr.in[size_t(r)], pr.out[size_t(r)], s));
      };
      for (int i = 0; i < 3 && err.is_ok(); ++i) err = call();  // eager
      cudaGraph_t g = nullptr;
      cudaGraphExec_t exec = nullptr;
      if (err.is_ok() && cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
        Status a = call(), b = call();  // two calls: both staging parities in one graph
        if (cudaStreamEndCapture(s, &g) != cudaSuccess || cudaGraphInstantiate(&exec, g, 0) != cudaSuccess)
          err = Status::device_error("capture failed");
        if (!a.is_ok()) err = a;
        if (!b.is_ok()) err = b;
      }
      for (int i = 0; i < 7 && err.is_ok(); ++i) {  // replays, with an eager call between some
        if (cudaGraphLaunch(exec, s) != cudaSuccess) err = Status::device_error("graph launch failed");
        if (i % 3 == 1 && err.is_ok()) err = call();
      }
      if (cudaStreamSynchronize(s) != cudaSuccess) err = Status::device_error("stream failed");
      if (exec) cudaGraphExecDestroy(exec);
      if (g) cudaGraphDestroy(g);
      cudaStreamDestroy(s);
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& e : errors) ASSERT_TRUE(e.is_ok()) << c.name << ": " << e.to_string();
  pr.expect_sums(comm, c.name + " after graph replays");
  pr.release(comm);
}

TEST_F(AllReduceCuda, RankModeSurvivesGraphReplays) {
  for (const auto& c : candidates()) {
    if (c.name != "Default" && c.name.rfind("Peer_", 0) != 0 && c.name != "Nccl_Ring_LL") continue;
    // NCCL communicators are made in group mode: one group-mode call first.
    Problem warm(*comm_, DType::kBF16, 64, 0);
    warm.reset(*comm_);
    Status st = c.run(warm.p, warm.operands(*comm_, false));
    warm.release(*comm_);
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

}  // namespace
}  // namespace tunableop
