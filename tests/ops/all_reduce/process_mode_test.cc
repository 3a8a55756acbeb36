// The all-reduce op in process mode on the CPU: each rank a "process" (a thread with a context
// and a communicator of its own, joined by a test ProcessGroup, as MPI ranks are joined), every
// candidate against the host sum and bit for bit against the one-process communicator, rank 0
// deciding for all (tuning carried out on every rank, the choice in rank 0's results file), a
// stored choice served to every rank, and the misuses refused with a message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

#include "backends/cpu/all_reduce/host_all_reduce.h"
#include "ops/all_reduce/dispatch.h"
#include "ops/all_reduce/reference.h"
#include "ops/framework/elements.h"
#include "support/thread_process_group.h"
#include "tunableop/all_reduce.h"
#include "tunableop/context.h"

namespace tunableop {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> random_input(const AllReduceParams& p, int rank, uint64_t seed) {
  std::vector<uint8_t> in(std::max<size_t>(p.bytes(), 1));
  std::mt19937_64 rng(seed * 131 + uint64_t(rank));
  std::uniform_real_distribution<double> dist(-2.0, 2.0);
  for (int64_t i = 0; i < p.count; ++i) store_from_double(p.dtype, in.data(), i, dist(rng));
  return in;
}

class ProcessModeTest : public ::testing::Test {
 protected:
  ProcessModeTest() {
    dir_ = fs::temp_directory_path() / ("tunableop-ar-process-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(dir_);
  }
  ~ProcessModeTest() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // Rank r's context: TunableOp `enabled`, results file rank<r>_results0.csv (only rank 0's is
  // written).
  std::unique_ptr<Context> context(int rank, bool enabled) {
    Config c = Config::defaults_only();
    EXPECT_TRUE(c.set(Setting::kEnabled, enabled).is_ok());
    EXPECT_TRUE(
        c.set(Setting::kFilename, (dir_ / ("rank" + std::to_string(rank) + "_results%d.csv")).string()).is_ok());
    EXPECT_TRUE(c.set(Setting::kMaxTuningIterations, 3).is_ok());
    EXPECT_TRUE(c.set(Setting::kMaxWarmupIterations, 1).is_ok());
    EXPECT_TRUE(c.set(Setting::kVerbose, 1).is_ok());
    auto ctx =
        std::make_unique<Context>(Device::cpu(), std::move(c), [](Registry& r) { cpu::register_host_all_reduce(r); });
    ctx->log().set_sink([this](const std::string& l) {
      std::lock_guard<std::mutex> lock(mu_);
      log_ += l + "\n";
    });
    return ctx;
  }
  // Runs body(rank, ctx, comm) on `world` threads, each a "process" with its own context and
  // process-mode communicator.
  void on_ranks(int world, bool enabled, const std::function<void(int, Context&, Communicator&)>& body) {
    testing::ThreadGroupHub hub(world);
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        auto ctx = context(r, enabled);
        auto comm = make_process_communicator(*ctx, hub.group(r));
        ASSERT_TRUE(comm.is_ok()) << comm.status().to_string();
        EXPECT_EQ((*comm)->own_rank(), r);
        body(r, *ctx, **comm);
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_TRUE(hub.broken().is_ok()) << hub.broken().to_string();
  }
  std::string file(const std::string& name) {
    std::ifstream in(dir_ / name);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::string log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }

  fs::path dir_;
  std::mutex mu_;
  std::string log_;
};

TEST_F(ProcessModeTest, EveryCandidateSumsAndMatchesTheOneProcessCommunicatorBitForBit) {
  for (int world : {2, 3, 8}) {
    for (DType t : {DType::kBF16, DType::kF32, DType::kF64}) {
      for (int64_t n : {int64_t(1), int64_t(7), int64_t(4099)}) {
        const AllReduceParams p{t, n, world};
        // The one-process answer: the thread communicator in group mode.
        auto one_ctx = context(0, false);
        auto one = make_communicator(*one_ctx, std::vector<int>(size_t(world), 0));
        ASSERT_TRUE(one.is_ok());
        std::vector<std::vector<uint8_t>> in, want;
        AllReduceOperands o;
        o.comm = one->get();
        for (int r = 0; r < world; ++r) {
          in.push_back(random_input(p, r, uint64_t(n)));
          want.emplace_back(in.back().size());
        }
        for (int r = 0; r < world; ++r)
          o.input[size_t(r)] = in[size_t(r)].data(), o.output[size_t(r)] = want[size_t(r)].data();
        auto def = find_all_reduce_candidate(*one_ctx, p, "Default");
        ASSERT_TRUE(def.is_ok());
        ASSERT_TRUE(def->run(p, o).is_ok());
        std::vector<const void*> ins;
        for (const auto& b : in) ins.push_back(b.data());
        const std::vector<double> ref = ops::all_reduce_reference(p, ins);

        on_ranks(world, false, [&](int r, Context& ctx, Communicator& comm) {
          for (const std::string name : {"Default", "Host_Blocked", "Host_TwoShot"}) {
            auto cand = find_all_reduce_candidate(ctx, p, name);
            ASSERT_TRUE(cand.is_ok()) << name;
            for (bool in_place : {false, true}) {
              std::vector<uint8_t> mine = in[size_t(r)], out(mine.size(), 0xff);
              void* dst = in_place ? mine.data() : out.data();
              ASSERT_TRUE(cand->run(p, AllReduceOperands::for_rank(comm, r, mine.data(), dst, nullptr)).is_ok());
              EXPECT_LE(ops::all_reduce_error(p, dst, ref), ops::all_reduce_tolerance(p)) << name;
              EXPECT_EQ(std::memcmp(dst, want[0].data(), p.bytes()), 0)
                  << name << " rank " << r << " of " << world << ", " << dtype_name(t) << " n " << n
                  << (in_place ? " in place" : "");
            }
          }
        });
      }
    }
  }
}

TEST_F(ProcessModeTest, RankZeroTunesWithEveryRankAndAllRunItsChoice) {
  constexpr int kRanks = 4;
  const AllReduceParams p{DType::kF32, 3000, kRanks};
  std::vector<std::string> chosen(kRanks);
  on_ranks(kRanks, true, [&](int r, Context& ctx, Communicator& comm) {
    for (int call = 0; call < 3; ++call) {  // the first decides, the others are served
      std::vector<uint8_t> in = random_input(p, r, 9), out(in.size());
      ASSERT_TRUE(all_reduce(ctx, p, AllReduceOperands::for_rank(comm, r, in.data(), out.data(), nullptr)).is_ok());
    }
    chosen[size_t(r)] = all_reduce_solution(comm, p);
  });
  ASSERT_FALSE(chosen[0].empty());
  for (int r = 1; r < kRanks; ++r) EXPECT_EQ(chosen[size_t(r)], chosen[0]) << "rank " << r;
  EXPECT_NE(file("rank0_results0.csv").find("AllReduceTunableOp_float_sum,n_3000_ranks_4," + chosen[0] + ","),
            std::string::npos)
      << file("rank0_results0.csv");
  EXPECT_EQ(file("rank1_results0.csv").find("AllReduceTunableOp"), std::string::npos) << "only rank 0 decides";
  EXPECT_NE(log().find("finding fastest for AllReduceTunableOp_float_sum(n_3000_ranks_4)"), std::string::npos) << log();
}

TEST_F(ProcessModeTest, AStoredChoiceIsServedToEveryRank) {
  constexpr int kRanks = 3;
  std::ofstream(dir_ / "rank0_results0.csv") << "AllReduceTunableOp_BFloat16_sum,n_1000_ranks_3,Host_TwoShot,0.01\n";
  const AllReduceParams p{DType::kBF16, 1000, kRanks};
  std::vector<std::string> chosen(kRanks);
  on_ranks(kRanks, true, [&](int r, Context& ctx, Communicator& comm) {
    std::vector<uint8_t> in = random_input(p, r, 4);
    ASSERT_TRUE(all_reduce(ctx, p, AllReduceOperands::for_rank(comm, r, in.data(), in.data(), nullptr)).is_ok());
    chosen[size_t(r)] = all_reduce_solution(comm, p);
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(chosen[size_t(r)], "Host_TwoShot") << "rank " << r;
  EXPECT_EQ(log().find("finding fastest"), std::string::npos) << log();
}

TEST_F(ProcessModeTest, GroupModeAndAnotherRanksCallAreRefused) {
  on_ranks(2, false, [&](int r, Context& ctx, Communicator& comm) {
    const AllReduceParams p{DType::kF32, 8, 2};
    std::vector<float> a(8, 1.f), b(8, 1.f);
    AllReduceOperands group;
    group.comm = &comm;
    for (int q = 0; q < 2; ++q) group.input[size_t(q)] = a.data(), group.output[size_t(q)] = b.data();
    Status st = all_reduce(ctx, p, group);
    EXPECT_NE(st.message().find("each process calls for its own rank"), std::string::npos) << st.to_string();
    st = all_reduce(ctx, p, AllReduceOperands::for_rank(comm, 1 - r, a.data(), b.data(), nullptr));
    EXPECT_NE(st.message().find("on the process holding rank " + std::to_string(r)), std::string::npos)
        << st.to_string();
  });
}

}  // namespace
}  // namespace tunableop
