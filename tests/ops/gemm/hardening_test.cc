// GEMM parameters and dispatch against hostile sizes (issue 9): products that overflow 64 bits
// are refused by validate() before any buffer is sized from them, sizes beyond this machine's
// memory are refused before any allocation, and results that cannot be saved are reported.
// Real CPU backends; also the many-threads dispatch test the TSan job runs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <thread>

#include "core/results_stats.h"
#include "core/results_test_util.h"
#include "ops/gemm/dispatch.h"
#include "support/file_faults.h"
#include "support/gemm_testing.h"
#include "tunableop/checked_size.h"
#include "tunableop/gemm.h"
#include "tunableop/gemm_and_bias.h"

namespace tunableop {
namespace {

namespace fs = std::filesystem;
using testing::HostGemmProblem;
using testing::matches_reference;
using testing::TempDir;

constexpr int64_t k2to62 = int64_t(1) << 62;

GemmParams square(int64_t n) {
  GemmParams p;
  p.m = p.n = p.k = n;
  return p;
}

void expect_refused(const GemmParams& p, const std::string& why) {
  Status st = p.with_defaults().validate();
  ASSERT_FALSE(st.is_ok()) << testing::describe(p);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find(why), std::string::npos) << st.message();
}

// The issue's `bench -m 64 -n 64 -k 64 --ldc 4611686018427387904`: ldc * 63 wrapped, C's buffer
// was sized from the wrapped span and the kernel wrote far past it.
TEST(GemmParamsOverflow, HugeLeadingDimensionIsRefused) {
  GemmParams p = square(64);
  p.ldc = k2to62;
  expect_refused(p, "C spans more bytes than a 64-bit size can hold");
  p = square(64);
  p.lda = k2to62;
  expect_refused(p, "A spans");
  p = square(64);
  p.transb = 'T';
  p.ldb = k2to62 + 1;
  expect_refused(p, "B spans");
}

TEST(GemmParamsOverflow, HugeBatchAndStridesAreRefused) {
  GemmParams p = square(4);
  p.batch = int64_t(1) << 58;  // dense strides 16: 2^62 elements, 2^64 bytes
  expect_refused(p, "spans more bytes");
  p = square(4);
  p.batch = 3;
  p.stride_a = int64_t(1) << 62;
  expect_refused(p, "A spans");
  p = square(4);
  p.batch = 2;
  p.stride_c = INT64_MAX;
  expect_refused(p, "C spans");
  p = square(int64_t(1) << 40);  // dense, but ld * cols = 2^80
  p.batch = 2;
  expect_refused(p, "stride_c");
}

TEST(GemmParamsOverflow, ByteCountsMustFitNotOnlyElementCounts) {
  GemmParams p;
  p.dtype = DType::kF64;
  p.m = int64_t(1) << 61;  // 2^61 elements fit int64; 2^64 bytes do not
  p.n = 1;
  p.k = 1;
  expect_refused(p, "A spans");
  p.dtype = DType::kF16;  // 2^62 bytes: representable, so valid (memory is checked at allocation)
  EXPECT_TRUE(p.with_defaults().validate().is_ok());
}

TEST(GemmParamsOverflow, SignaturesRefuseWhatValidateRefuses) {
  // One untuned-file line gave `tune` a batch of 2^58 and a SIGSEGV.
  auto p = parse_gemm_signature("GemmStridedBatchedTunableOp_float_NN", "nn_4_4_4_B_288230376151711744");
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("spans more bytes"), std::string::npos) << p.status().message();
  auto q = parse_gemm_signature("GemmTunableOp_float_NN", "nn_64_64_64_ld_64_64_4611686018427387904");
  ASSERT_FALSE(q.is_ok());
  EXPECT_NE(q.status().message().find("C spans"), std::string::npos) << q.status().message();
  auto r = parse_gemm_signature("GemmTunableOp_float_NN", "nn_1_1_9223372036854775808");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("below 2^63"), std::string::npos) << r.status().message();
  auto gb = parse_gemm_and_bias_signature("GemmAndBiasTunableOp_float_NN", "nn_8_8_8_ld_4611686018427387904_8_8_act_1");
  ASSERT_FALSE(gb.is_ok());
  EXPECT_NE(gb.status().message().find("A spans"), std::string::npos) << gb.status().message();
}

TEST(GemmParamsOverflow, SignatureOfUnvalidatedParamsIsDefined) {
  GemmParams p = square(int64_t(1) << 40);
  p.batch = 2;
  p.stride_a = p.stride_b = p.stride_c = 5;
  // Called before validation (e.g. in a message): no overflow, no crash, "not dense".
  EXPECT_NE(gemm_params_signature(p).find("_S_5_5_5"), std::string::npos);
}

Context quiet_context(const std::string& results_pattern) {
  Config c = Config::defaults_only();
  EXPECT_TRUE(c.set(Setting::kEnabled, true).is_ok());
  EXPECT_TRUE(c.set(Setting::kFilename, results_pattern).is_ok());
  EXPECT_TRUE(c.set(Setting::kMaxTuningIterations, 2).is_ok());
  EXPECT_TRUE(c.set(Setting::kMaxWarmupIterations, 1).is_ok());
  EXPECT_TRUE(c.set(Setting::kRotatingBufferSize, 0).is_ok());
  return Context(Device::cpu(), std::move(c));
}

TEST(GemmDispatchHardening, OverflowingParamsNeverTouchTheBuffers) {
  TempDir dir;
  Context ctx = quiet_context(dir.file("r%d.csv"));
  ctx.log().set_sink([](const std::string&) {});
  std::vector<float> a(64 * 64, 1.f), b(64 * 64, 1.f), c(64 * 64, 7.f);
  GemmParams p = square(64);
  p.ldc = k2to62;
  Status st = gemm(ctx, p, GemmOperands{a.data(), b.data(), c.data()});
  ASSERT_FALSE(st.is_ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  for (float v : c) ASSERT_EQ(v, 7.f);
}

TEST(GemmDispatchHardening, SizesBeyondMemoryAreRefusedBeforeAllocating) {
  TempDir dir;
  Context ctx = quiet_context(dir.file("r%d.csv"));
  ctx.log().set_sink([](const std::string&) {});
  // `bench -m 1e12`: well-formed and representable, but no machine holds its operands.
  GemmParams p;
  p.m = 1000000000000;
  p.n = 512;
  p.k = 2048;
  auto rep = tune_gemm(ctx, p);
  ASSERT_FALSE(rep.is_ok());
  EXPECT_NE(rep.status().message().find("more than this machine's memory"), std::string::npos)
      << rep.status().message();
  auto bufs = GemmBuffers::make(ctx, p);
  ASSERT_FALSE(bufs.is_ok());
  EXPECT_NE(bufs.status().message().find("more than this machine's memory"), std::string::npos);
}

TEST(GemmDispatchHardening, UnsavedResultsAreReportedWithTheReason) {
  TempDir dir;
  fs::create_directories(dir.file("dir0.csv"));
  ASSERT_TRUE(testing::make_fifo(dir.file("fifo0.csv")));
  const std::pair<std::string, std::string> cases[] = {
      {dir.file("dir%d.csv"), "is a directory"},
      {dir.file("fifo%d.csv"), "is a FIFO"},
      {dir.file("sub/"), "names a directory, not a file"},  // TUNABLEOP_FILENAME=dir/
  };
  for (const auto& [pattern, why] : cases) {
    Context ctx = quiet_context(pattern);
    ctx.log().set_sink([](const std::string&) {});
    auto rep = tune_gemm(ctx, square(5));
    ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();  // tuned, in memory
    auto unsaved = ctx.unsaved_results();
    ASSERT_EQ(unsaved.size(), 1u) << pattern;
    EXPECT_EQ(unsaved[0].entry.params, "nn_5_5_5");
    EXPECT_NE(unsaved[0].why.message().find(why), std::string::npos) << unsaved[0].why.message();
  }
  EXPECT_FALSE(fs::exists(dir.file("sub/0"))) << "no file invented inside the directory";
  EXPECT_TRUE(fs::is_fifo(dir.file("fifo0.csv")));
}

TEST(GemmDispatchHardening, FullDiskResultsAreUnsavedAndTheFileStaysWhole) {
  TempDir dir;
  Context ctx = quiet_context(dir.file("r%d.csv"));
  ctx.log().set_sink([](const std::string&) {});
  ASSERT_TRUE(tune_gemm(ctx, square(3)).is_ok());
  const std::string path = dir.file("r0.csv");
  const std::string before = testing::read_text(path);
  {
    testing::ScopedFileSizeLimit limit(before.size() + 8);
    ASSERT_TRUE(tune_gemm(ctx, square(4)).is_ok());
    ASSERT_TRUE(tune_gemm(ctx, square(6)).is_ok());
  }
  auto unsaved = ctx.unsaved_results();
  ASSERT_EQ(unsaved.size(), 2u);
  EXPECT_NE(unsaved[0].why.message().find("File too large"), std::string::npos) << unsaved[0].why.message();
  EXPECT_EQ(testing::read_text(path), before);
  // Space again: re-tuning a problem saves it and it leaves the unsaved list.
  ASSERT_TRUE(tune_gemm(ctx, square(4), /*retune=*/true).is_ok());
  EXPECT_EQ(ctx.unsaved_results().size(), 1u);
}

TEST(GemmDispatchHardening, UntunedFileNameEndingInSlashIsRefusedOnce) {
  TempDir dir;
  fs::create_directories(dir.file("u"));
  Context ctx = quiet_context(dir.file("r%d.csv"));
  std::vector<std::string> log;
  ctx.log().set_sink([&](const std::string& l) { log.push_back(l); });
  ASSERT_TRUE(ctx.config().set(Setting::kTuning, false).is_ok());
  ASSERT_TRUE(ctx.config().set(Setting::kRecordUntuned, true).is_ok());
  ASSERT_TRUE(ctx.config().set(Setting::kUntunedFilename, dir.file("u") + "/").is_ok());
  for (int64_t n : {3, 4, 5}) {
    HostGemmProblem prob = HostGemmProblem::random(square(n).with_defaults(), 1);
    ASSERT_TRUE(gemm(ctx, prob.p, GemmOperands{prob.a.data(), prob.b.data(), prob.c.data()}).is_ok());
  }
  EXPECT_TRUE(fs::is_empty(dir.file("u"))) << "no 'u/0' invented";
  int warnings = 0;
  for (const auto& l : log) warnings += l.find("untuned file name") != std::string::npos;
  EXPECT_EQ(warnings, 1) << "said once, not per problem";
}

// Many threads dispatch distinct and shared problems through one context into one results file
// (real CPU candidates, tuning on). Run under TSan by scripts/ci-hardening.sh tsan.
TEST(GemmDispatchHardening, ManyThreadsDispatchIntoOneResultsFile) {
  TempDir dir;
  Context ctx = quiet_context(dir.file("r%d.csv"));
  ctx.log().set_sink([](const std::string&) {});
  constexpr int kThreads = 6;
  std::vector<HostGemmProblem> probs;
  for (int t = 0; t < kThreads; ++t) {
    GemmParams p = square(3 + t % 3);  // three distinct problems, each from two threads
    p.transa = t % 3 == 1 ? 'T' : 'N';
    probs.push_back(HostGemmProblem::random(p.with_defaults(), 40 + uint64_t(t)));
  }
  std::vector<Status> st(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 3 && st[size_t(t)].is_ok(); ++rep) {
        probs[size_t(t)].reset_c();
        st[size_t(t)] =
            gemm(ctx, probs[size_t(t)].p,
                 GemmOperands{probs[size_t(t)].a.data(), probs[size_t(t)].b.data(), probs[size_t(t)].c.data()});
      }
    });
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_TRUE(st[size_t(t)].is_ok()) << st[size_t(t)].to_string();
    EXPECT_TRUE(matches_reference(probs[size_t(t)], probs[size_t(t)].c));
  }
  LoadReport r = parse_results(testing::read_text(dir.file("r0.csv")), "r0.csv");
  std::set<std::string> keys;
  for (const auto& e : r.entries) keys.insert(e.op + "," + e.params);
  EXPECT_EQ(keys.size(), 3u) << "each problem tuned and stored once";
  EXPECT_EQ(r.entries.size(), 3u);
  EXPECT_TRUE(r.malformed.empty());
  EXPECT_TRUE(ctx.unsaved_results().empty());
}

// An operand without elements may carry any stride (validate() cannot bound what spans
// nothing), but every kernel computes batch * stride for its pointer: with k = 0 and stride_b
// 2^63 - 1 (a gemm_params fuzz finding) that overflowed. with_defaults() zeroes those strides,
// and every CPU candidate then computes C = beta * C for each batch.
TEST(GemmParamsOverflow, EmptyOperandsHugeStridesAreHarmless) {
  GemmParams p;
  p.dtype = DType::kF64;
  p.m = 2, p.n = 3, p.k = 0;
  p.batch = 27;
  p.stride_a = INT64_MAX, p.stride_b = INT64_MAX;
  p.beta = 0.5;
  const GemmParams q = p.with_defaults();
  ASSERT_TRUE(q.validate().is_ok()) << q.validate().message();
  EXPECT_EQ(q.stride_a, 0);
  EXPECT_EQ(q.stride_b, 0);
  EXPECT_EQ(q.stride_c, 6);
  EXPECT_EQ(q.a_span(), 0);
  EXPECT_EQ(q.b_span(), 0);
  // An empty C (m == 0) with a huge stride likewise, and its stride is not checked against ldc * n.
  GemmParams e = p;
  e.m = 0, e.k = 4, e.stride_b = 0, e.stride_c = INT64_MAX;  // B is not empty now: dense
  ASSERT_TRUE(e.with_defaults().validate().is_ok());
  EXPECT_EQ(e.with_defaults().stride_c, 0);

  // The walk's second finding: A empty (m = n = 0) with lda 2^63 - 1, whose dense stride our
  // kernels' own argument check recomputed as lda x k and overflowed.
  GemmParams f;
  f.dtype = DType::kF64;
  f.m = 0, f.n = 0, f.k = 4;
  f.lda = INT64_MAX;
  ASSERT_TRUE(f.with_defaults().validate().is_ok());

  TempDir dir;
  Context ctx = quiet_context(dir.file("r%d.csv"));
  for (const GemmParams& problem : {q, f.with_defaults()}) {
    HostGemmProblem prob = HostGemmProblem::random(problem, 11);
    // A and B may be empty, but real buffers (as the fuzzer's were): a null one would hide the
    // pointer arithmetic.
    std::vector<double> empty_a(1), empty_b(1);
    int ran = 0;
    for (const GemmCandidate& cand : gemm_candidates_for(ctx, problem, 2)) {
      if (!cand.supports(problem).is_ok()) continue;
      prob.reset_c();
      std::vector<uint8_t> ws(cand.workspace_bytes ? cand.workspace_bytes(problem) : 0);
      GemmOperands ops{empty_a.data(),
                       empty_b.data(),
                       prob.c.empty() ? nullptr : prob.c.data(),
                       nullptr,
                       ws.empty() ? nullptr : ws.data(),
                       ws.size()};
      if (!cand.run(problem, ops).is_ok()) continue;
      ++ran;
      EXPECT_TRUE(matches_reference(prob, prob.c)) << cand.name << " " << testing::describe(problem);
    }
    EXPECT_GT(ran, 0) << testing::describe(problem);
  }
}

}  // namespace
}  // namespace tunableop
