// The all-reduce op end to end on the CPU's host-thread communicator: every candidate against
// the host sum (odd sizes, every dtype, in place and not, 1 to 4 ranks), group mode and rank
// mode (one thread per rank, sizes met for the first time as a rendezvous), tuning kept in the
// results file and served from it, candidates that compute a wrong sum or different bits on
// different ranks rejected, a candidate that cannot run replaced by Default, and a rank that
// fails releasing the others instead of leaving them waiting.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "backends/cpu/all_reduce/host_all_reduce.h"
#include "ops/all_reduce/dispatch.h"
#include "ops/all_reduce/reference.h"
#include "ops/all_reduce/tuning_problem.h"
#include "ops/framework/elements.h"
#include "tunableop/all_reduce.h"
#include "tunableop/context.h"

namespace tunableop {
namespace {

namespace fs = std::filesystem;

// Host buffers of every rank: random inputs, outputs poisoned.
struct RankBuffers {
  AllReduceParams p;
  std::vector<std::vector<uint8_t>> in, out;
  std::vector<double> ref;

  RankBuffers(const AllReduceParams& params, uint64_t seed) : p(params) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> dist(-2.0, 2.0);
    std::vector<const void*> ins;
    for (int r = 0; r < p.world_size; ++r) {
      in.emplace_back(std::max<size_t>(p.bytes(), 1));
      out.emplace_back(std::max<size_t>(p.bytes(), 1));
      for (int64_t i = 0; i < p.count; ++i) {
        store_from_double(p.dtype, in.back().data(), i, dist(rng));
        store_from_double(p.dtype, out.back().data(), i, std::nan(""));
      }
      ins.push_back(in.back().data());
    }
    ref = ops::all_reduce_reference(p, ins);
  }
  AllReduceOperands operands(Communicator& comm, bool in_place) {
    AllReduceOperands o;
    o.comm = &comm;
    for (int r = 0; r < p.world_size; ++r) {
      if (in_place) out[size_t(r)] = in[size_t(r)];
      o.input[size_t(r)] = in_place ? out[size_t(r)].data() : in[size_t(r)].data();
      o.output[size_t(r)] = out[size_t(r)].data();
    }
    return o;
  }
  void expect_sums() {
    for (int r = 0; r < p.world_size; ++r) {
      EXPECT_LE(ops::all_reduce_error(p, out[size_t(r)].data(), ref), ops::all_reduce_tolerance(p))
          << "rank " << r << " of " << p.world_size << ", " << dtype_name(p.dtype) << ", n " << p.count;
      EXPECT_EQ(std::memcmp(out[size_t(r)].data(), out[0].data(), p.bytes()), 0) << "rank " << r;
    }
  }
};

class AllReduceTest : public ::testing::Test {
 protected:
  AllReduceTest() {
    dir_ = fs::temp_directory_path() / ("tunableop-all-reduce-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(dir_);
  }
  ~AllReduceTest() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // A CPU context with the host communicator, its candidates and `extra` ones.
  std::unique_ptr<Context> context(bool enabled, std::vector<AllReduceCandidate> extra = {}) {
    Config c = Config::defaults_only();
    EXPECT_TRUE(c.set(Setting::kEnabled, enabled).is_ok());
    EXPECT_TRUE(c.set(Setting::kFilename, (dir_ / "results%d.csv").string()).is_ok());
    EXPECT_TRUE(c.set(Setting::kMaxTuningIterations, 3).is_ok());
    EXPECT_TRUE(c.set(Setting::kMaxWarmupIterations, 1).is_ok());
    EXPECT_TRUE(c.set(Setting::kVerbose, 1).is_ok());
    auto ctx = std::make_unique<Context>(Device::cpu(), std::move(c), [extra](Registry& r) {
      cpu::register_host_all_reduce(r);
      for (const auto& e : extra) r.list<AllReduceCandidate>().push_back(e);
    });
    ctx->log().set_sink([this](const std::string& l) {
      std::lock_guard<std::mutex> lock(mu_);
      log_ += l + "\n";
    });
    return ctx;
  }
  std::unique_ptr<Communicator> comm(Context& ctx, int ranks) {
    auto c = make_communicator(ctx, std::vector<int>(size_t(ranks), 0));
    EXPECT_TRUE(c.is_ok()) << c.status().to_string();
    return c.is_ok() ? std::move(c.value()) : nullptr;
  }
  std::string results() {
    std::ifstream in(dir_ / "results0.csv");
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

// A candidate that sums like Default, then spoils the result: `bias` on rank `rank` (one wrong
// element), so the sum is wrong there or the ranks disagree.
AllReduceCandidate spoiled(const std::string& name, int rank, double bias) {
  AllReduceCandidate c;
  c.name = name;
  c.device = DeviceKind::kCpu;
  c.supports = [](const AllReduceParams&) { return Status::ok(); };
  c.run = [rank, bias](const AllReduceParams& p, const AllReduceOperands& o) -> Status {
    std::vector<double> sum(size_t(p.count), 0);
    for (int r = 0; r < p.world_size; ++r)
      for (int64_t i = 0; i < p.count; ++i) sum[size_t(i)] += load_as_double(p.dtype, o.input[size_t(r)], i);
    for (int r = 0; r < p.world_size; ++r)
      for (int64_t i = 0; i < p.count; ++i)
        store_from_double(p.dtype, o.output[size_t(r)], i, sum[size_t(i)] + (r == rank && i == 0 ? bias : 0));
    return Status::ok();
  };
  c.info.library = "test";
  return c;
}

TEST_F(AllReduceTest, EveryCandidateSumsInGroupMode) {
  auto ctx = context(false);
  for (const std::string name : {"Default", "Host_Blocked", "Host_TwoShot"}) {
    auto cand = find_all_reduce_candidate(*ctx, AllReduceParams{}, name);
    ASSERT_TRUE(cand.is_ok()) << name;
    for (int world : {1, 2, 3, 4}) {
      auto c = comm(*ctx, world);
      for (DType t : {DType::kBF16, DType::kF16, DType::kF32, DType::kF64}) {
        for (int64_t n : {1, 7, 4099, 10000}) {
          for (bool in_place : {false, true}) {
            AllReduceParams p{t, n, world};
            RankBuffers b(p, uint64_t(n * 31 + world));
            ASSERT_TRUE(cand->run(p, b.operands(*c, in_place)).is_ok());
            b.expect_sums();
          }
        }
      }
    }
  }
}

TEST_F(AllReduceTest, RankModeOneThreadPerRankAgreesOnOneCandidatePerSize) {
  auto ctx = context(false);
  constexpr int kRanks = 3;
  auto c = comm(*ctx, kRanks);
  const std::vector<int64_t> sizes = {4096, 5, 4096, 12345, 5};  // repeats are served
  std::vector<std::vector<RankBuffers>> bufs(sizes.size());
  for (size_t s = 0; s < sizes.size(); ++s) bufs[s].emplace_back(AllReduceParams{DType::kF32, sizes[s], kRanks}, s);
  std::vector<Status> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      for (size_t s = 0; s < sizes.size() && errors[size_t(r)].is_ok(); ++s) {
        RankBuffers& b = bufs[s][0];
        auto o = AllReduceOperands::for_rank(*c, r, b.in[size_t(r)].data(), b.out[size_t(r)].data(), nullptr);
        errors[size_t(r)] = all_reduce(*ctx, b.p, o);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& e : errors) ASSERT_TRUE(e.is_ok()) << e.to_string();
  for (auto& b : bufs) b[0].expect_sums();
  EXPECT_EQ(all_reduce_solution(*c, AllReduceParams{DType::kF32, 4096, kRanks}), "Default");  // TunableOp off
  EXPECT_EQ(all_reduce_solution(*c, AllReduceParams{DType::kF32, 77, kRanks}), "");
}

TEST_F(AllReduceTest, TuningKeepsTheWinnerInTheResultsFileAndALaterCommunicatorServesIt) {
  auto ctx = context(true);
  auto c = comm(*ctx, 2);
  AllReduceParams p{DType::kBF16, 8192, 2};
  RankBuffers b(p, 1);
  ASSERT_TRUE(all_reduce(*ctx, p, b.operands(*c, false)).is_ok());
  b.expect_sums();
  const std::string chosen = all_reduce_solution(*c, p);
  EXPECT_TRUE(chosen == "Default" || chosen == "Host_Blocked" || chosen == "Host_TwoShot") << chosen;
  const std::string file = results();
  EXPECT_NE(file.find("AllReduceTunableOp_BFloat16_sum,n_8192_ranks_2," + chosen + ","), std::string::npos) << file;
  EXPECT_NE(log().find("finding fastest for AllReduceTunableOp_BFloat16_sum(n_8192_ranks_2)"), std::string::npos)
      << log();

  // A new context and communicator read the file: the same answer, no tuning.
  log_.clear();
  auto ctx2 = context(true);
  auto c2 = comm(*ctx2, 2);
  RankBuffers b2(p, 2);
  ASSERT_TRUE(all_reduce(*ctx2, p, b2.operands(*c2, true)).is_ok());
  b2.expect_sums();
  EXPECT_EQ(all_reduce_solution(*c2, p), chosen);
  EXPECT_EQ(log().find("finding fastest"), std::string::npos) << log();
  EXPECT_EQ(results(), file);
}

TEST_F(AllReduceTest, WrongSumsAndRanksThatDisagreeNeverWin) {
  auto ctx = context(true, {spoiled("Wrong_Sum", 0, 1.0), spoiled("Ranks_Disagree", 1, 1e-6)});
  // No screening: the spoiled candidates are slow, and must meet the numerics check anyway.
  ASSERT_TRUE(ctx->config().set(Setting::kScreenRatio1, 100.0).is_ok());
  ASSERT_TRUE(ctx->config().set(Setting::kScreenRatio2, 100.0).is_ok());
  auto c = comm(*ctx, 2);
  AllReduceParams p{DType::kF32, 3000, 2};
  auto cands = all_reduce_candidates_for(*ctx, p, 1);
  ASSERT_EQ(cands.size(), 5u);
  auto pr = ops::AllReduceTuningProblem::create(*c, p, cands);
  ASSERT_TRUE(pr.is_ok()) << pr.status().to_string();
  auto rep = ctx->tune(**pr);
  ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
  EXPECT_NE(rep->winner.solution, "Wrong_Sum");
  EXPECT_NE(rep->winner.solution, "Ranks_Disagree");
  // Whether the tuner reached a spoiled candidate's numerics check depends on the machine: a
  // first run that lost a time slice on a busy machine is cut as slow before it (the cold cut,
  // which screen ratios do not turn off; CI's ctest -j2 saw it once). So: where the tuner
  // checked, it said why; and the check itself, asked directly, fails with the right reason.
  const std::map<std::string, std::string> expected = {{"Wrong_Sum", "relative error"},
                                                       {"Ranks_Disagree", "ranks 0 and 1 hold different sums"}};
  for (const auto& cr : rep->candidates)
    if (cr.outcome == CandidateReport::Outcome::kNumericsFailed) {
      ASSERT_TRUE(expected.count(cr.name)) << cr.name << ": " << cr.detail;
      EXPECT_NE(cr.detail.find(expected.at(cr.name)), std::string::npos) << cr.detail;
    }
  for (size_t i = 0; i < (*pr)->candidate_count(); ++i) {
    const std::string name = (*pr)->candidate_name(i);
    Status st = (*pr)->check_numerics(i);
    if (!expected.count(name)) {
      EXPECT_TRUE(st.is_ok()) << name << ": " << st.to_string();
      continue;
    }
    ASSERT_FALSE(st.is_ok()) << name;
    EXPECT_NE(st.message().find(expected.at(name)), std::string::npos) << st.message();
  }
}

TEST_F(AllReduceTest, AStoredCandidateThatCannotRunHereIsReplacedByDefault) {
  AllReduceCandidate gone = spoiled("Needs_A_Library", 0, 0);
  gone.run = [](const AllReduceParams&, const AllReduceOperands&) {
    return Status::unsupported("the library is not loaded");
  };
  auto ctx = context(true, {gone});
  std::ofstream(dir_ / "results0.csv") << "AllReduceTunableOp_float_sum,n_64_ranks_2,Needs_A_Library,0.001\n";
  auto c = comm(*ctx, 2);
  AllReduceParams p{DType::kF32, 64, 2};
  RankBuffers b(p, 3);
  ASSERT_TRUE(all_reduce(*ctx, p, b.operands(*c, false)).is_ok());
  b.expect_sums();
  EXPECT_EQ(all_reduce_solution(*c, p), "Default");
  EXPECT_NE(log().find("Needs_A_Library does not run on 2 host-thread ranks: the library is not loaded"),
            std::string::npos)
      << log();
}

TEST_F(AllReduceTest, AFailingRankReleasesTheOthers) {
  auto ctx = context(false);
  auto c = comm(*ctx, 3);
  AllReduceParams p{DType::kF32, 100, 3};
  RankBuffers b(p, 4);
  std::vector<Status> errors(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      // Rank 2 passes no output: it fails its check while ranks 0 and 1 wait for it.
      void* out = r == 2 ? nullptr : b.out[size_t(r)].data();
      errors[size_t(r)] = all_reduce(*ctx, p, AllReduceOperands::for_rank(*c, r, b.in[size_t(r)].data(), out, nullptr));
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_NE(errors[2].message().find("rank 2's input or output is null"), std::string::npos) << errors[2].to_string();
  for (int r : {0, 1}) EXPECT_NE(errors[size_t(r)].message().find("another rank failed"), std::string::npos) << r;
}

TEST_F(AllReduceTest, BadOperandsAreRefusedWithAMessage) {
  auto ctx = context(false);
  auto c = comm(*ctx, 2);
  AllReduceParams p{DType::kF32, 10, 3};
  RankBuffers b(AllReduceParams{DType::kF32, 10, 2}, 5);
  Status st = all_reduce(*ctx, p, b.operands(*c, false));
  EXPECT_NE(st.message().find("params say 3 ranks, the communicator has 2"), std::string::npos) << st.to_string();
  p.world_size = 2;
  AllReduceOperands none;
  EXPECT_NE(all_reduce(*ctx, p, none).message().find("no communicator"), std::string::npos);
  EXPECT_FALSE(make_communicator(*ctx, {}).is_ok());
  Context gpu(Device::cuda(0), Config::defaults_only(), [](Registry&) {});
  EXPECT_NE(make_communicator(gpu, {0, 1}).status().message().find("no all-reduce communicator for cuda:0"),
            std::string::npos);
}

}  // namespace
}  // namespace tunableop
