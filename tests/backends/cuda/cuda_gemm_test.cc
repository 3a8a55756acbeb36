// Every CUDA candidate against the fp64 host reference and against Default, on random problems:
// odd sizes, all transposes, ld > rows, misaligned pointers, beta != 0, batches, each dtype.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "backends/cuda/common/cuda_util.h"
#include "backends/cuda/common/lt_plan.h"
#include "backends/cuda/cuda_testing.h"
#include "backends/cuda/register.h"
#include "ops/gemm/reference.h"

namespace tunableop::testing {
namespace {

struct RunCounts {
  std::map<std::string, int> ran;  // by name prefix
  int total = 0;
  // "Gemm_Lt_a66_..." -> "Gemm_Lt", "Gemv_bf16_r4_sk1" -> "Gemv", "Default" -> "Default".
  void add(const std::string& name) {
    ++total;
    ++ran[name.substr(0, name.find('_', name.rfind("Gemm_", 0) == 0 ? 5 : 0))];
  }
};

// Runs every supported candidate on prob; each must match the fp64 reference and Default.
void check_all_candidates(const HostGemmProblem& prob, int effort, size_t offset, RunCounts& counts) {
  const GemmParams& p = prob.p;
  DeviceGemm dev(prob, offset);
  std::vector<GemmCandidate> cands = cuda_candidates(p, effort);
  ASSERT_FALSE(cands.empty());
  ASSERT_EQ(cands.front().name, "Default");
  std::vector<double> default_out;
  for (const GemmCandidate& c : cands) {
    if (!c.supports(p).is_ok()) continue;
    Status st;
    std::vector<uint8_t> out = run_candidate(c, prob, dev, &st);
    if (st.is_unsupported()) continue;  // e.g. misaligned pointers: a normal answer
    ASSERT_TRUE(st.is_ok()) << c.name << " on " << describe(p) << ": " << st.to_string();
    EXPECT_TRUE(matches_reference(prob, out)) << c.name;
    if (c.name == "Default") {
      default_out.resize(size_t(p.c_span()));
      for (int64_t i = 0; i < p.c_span(); ++i) default_out[size_t(i)] = load_as_double(p.c_dtype(), out.data(), i);
    } else {
      ASSERT_FALSE(default_out.empty());
      double err = relative_error(p, out.data(), default_out);
      EXPECT_LE(err, 2 * gemm_tolerance(p)) << c.name << " vs Default on " << describe(p);
    }
    counts.add(c.name);
  }
}

// TN problems with n <= 16 and 16-byte-aligned leading dimensions: what the gemv family takes.
std::vector<GemmParams> skinny_shapes(DType dt, uint64_t seed) {
  std::vector<GemmParams> out;
  std::mt19937_64 rng(seed);
  auto dim = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const int64_t vec = 16 / int64_t(dtype_size(dt));
  for (int t = 0; t < 10; ++t) {
    GemmParams p;
    p.dtype = dt;
    p.transa = 'T';
    p.transb = 'N';
    p.m = dim(1, 300);
    p.n = t < 3 ? 1 : dim(1, 16);
    p.k = t == 9 ? 4096 + dim(0, 7) : dim(1, 700);  // odd k: the scalar tail path
    p.lda = (p.k + vec - 1) / vec * vec + (t % 2 ? vec : 0);
    p.ldb = (p.k + vec - 1) / vec * vec;
    p.ldc = p.m + (t % 3 == 0 ? dim(1, 5) : 0);
    p.alpha = t % 2 ? 1.0 : -0.75;
    p.beta = t % 4 == 1 ? 0.5 : 0.0;
    if (t == 7) p.batch = 3;
    out.push_back(p.with_defaults());
  }
  return out;
}

class CudaGemm : public ::testing::TestWithParam<DType> {};

TEST_P(CudaGemm, EveryCandidateMatchesReferenceAndDefault) {
  TUNABLEOP_REQUIRE_GPU();
  const DType dt = GetParam();
  RunCounts counts;
  uint64_t seed = 100 + uint64_t(dt);
  for (const GemmParams& p : random_gemm_shapes(dt, seed, 24)) {
    check_all_candidates(HostGemmProblem::random(p, seed++), 1, 0, counts);
  }
  if (dt != DType::kF64) {
    for (const GemmParams& p : skinny_shapes(dt, seed))
      check_all_candidates(HostGemmProblem::random(p, seed++), 1, 0, counts);
    EXPECT_GT(counts.ran["Gemv"], 0) << "no gemv candidate ran";
  }
  EXPECT_GT(counts.ran["Gemm_Lt"], 0) << "no cuBLASLt candidate ran";
  EXPECT_GT(counts.ran["Gemm_PadLd"], 0) << "no padded-ld candidate ran";
  EXPECT_GT(counts.ran["Gemm_SplitM"], 0) << "no split-m candidate ran";
  for (auto& [k, v] : counts.ran) std::printf("  %-12s ran %d times\n", k.c_str(), v);
}

TEST_P(CudaGemm, MisalignedPointersAreRefusedOrCorrect) {
  TUNABLEOP_REQUIRE_GPU();
  const DType dt = GetParam();
  RunCounts counts;
  uint64_t seed = 300 + uint64_t(dt);
  std::vector<GemmParams> shapes = random_gemm_shapes(dt, seed, 8);
  if (dt != DType::kF64)
    for (const GemmParams& p : skinny_shapes(dt, seed)) shapes.push_back(p);
  for (const GemmParams& p : shapes)
    check_all_candidates(HostGemmProblem::random(p, seed++), 1, dtype_size(dt), counts);
  EXPECT_GT(counts.ran["Default"], 0);
}

// A C wider than A and B (bf16 and fp16 inputs, fp32 C: GemmParams::out_dtype, the engine's
// row-parallel partial sums): cuBLAS's Default and the cuBLASLt family take it and match the
// fp64 reference and each other on odd, gapped, batched, NaN-poisoned problems; gemv, padded-ld
// and split-m decline it.
TEST(CudaGemmWiderC, DefaultAndLtMatchReference) {
  TUNABLEOP_REQUIRE_GPU();
  RunCounts counts;
  uint64_t seed = 900;
  for (DType dt : {DType::kBF16, DType::kF16}) {
    for (GemmParams p : random_gemm_shapes(dt, seed, 12)) {
      p.out_dtype = DType::kF32;
      check_all_candidates(HostGemmProblem::random(p.with_defaults(), seed++), 1, 0, counts);
    }
  }
  EXPECT_GT(counts.ran["Default"], 0);
  EXPECT_GT(counts.ran["Gemm_Lt"], 0) << "no cuBLASLt candidate ran";
  EXPECT_EQ(counts.ran["Gemv"] + counts.ran["Gemm_PadLd"] + counts.ran["Gemm_SplitM"], 0);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaGemm, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16, DType::kF64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(CudaGemmExhaustive, EffortTwoConfigsAreCorrect) {
  TUNABLEOP_REQUIRE_GPU();
  RunCounts counts;
  GemmParams p;
  p.dtype = DType::kBF16;
  p.transa = 'T';
  p.m = 136;
  p.n = 72;
  p.k = 264;
  p.beta = 1.0;
  check_all_candidates(HostGemmProblem::random(p.with_defaults(), 7), 2, 0, counts);
  std::printf("  effort 2: %d candidates ran\n", counts.total);
  EXPECT_GT(counts.ran["Gemm_Lt"], 8);
}

// The padded-ld and split-m candidates on the shape class they exist for (odd m = ldc), with
// guard bytes around C and sentinels in the ld gaps: nothing outside C may change.
TEST(CudaPadLd, WritesNothingOutsideC) {
  TUNABLEOP_REQUIRE_GPU();
  std::vector<GemmParams> shapes;
  for (DType dt : {DType::kBF16, DType::kF32}) {
    for (double beta : {0.0, 1.5}) {
      GemmParams p;
      p.dtype = dt;
      p.transa = 'T';
      p.m = 1001;
      p.n = 37;
      p.k = 64;
      p.beta = beta;
      shapes.push_back(p.with_defaults());
      p.transa = 'N';  // lda = m odd too: the ABC variant pads A
      p.batch = 2;
      shapes.push_back(p.with_defaults());
      p.ldc = p.m + 3;  // gaps between columns must keep their sentinels
      p.stride_c = 0;
      shapes.push_back(p.with_defaults());
    }
  }
  int ran = 0;
  uint64_t seed = 11;
  for (const GemmParams& p : shapes) {
    HostGemmProblem prob = HostGemmProblem::random(p, seed++);
    DeviceGemm dev(prob, 0, 4096);
    for (const GemmCandidate& c : cuda_candidates(p, 1)) {
      bool ours = c.name.rfind("Gemm_PadLd", 0) == 0 || c.name.rfind("Gemm_SplitM", 0) == 0;
      if (!ours || !c.supports(p).is_ok()) continue;
      for (bool own_ws : {true, false}) {  // op-given workspace, then the backend's scratch
        Status st;
        std::vector<uint8_t> out = run_candidate(c, prob, dev, &st, own_ws);
        ASSERT_TRUE(st.is_ok()) << c.name << ": " << st.to_string();
        EXPECT_TRUE(matches_reference(prob, out)) << c.name;
        EXPECT_TRUE(dev.guards_intact()) << c.name << " wrote outside C on " << describe(p);
        ++ran;
      }
    }
  }
  EXPECT_GE(ran, 24);
}

// LLM decode shapes at their real size: the gemv family must agree with the reference there too.
TEST(CudaGemv, DecodeShapes) {
  TUNABLEOP_REQUIRE_GPU();
  struct Shape {
    int64_t m, n, k;
  };
  for (Shape s : {Shape{2048, 1, 16384}, Shape{2560, 8, 2048}, Shape{4096, 1, 4096}, Shape{50257, 1, 512}}) {
    GemmParams p = linear_params(DType::kBF16, s.n, s.k, s.m).with_defaults();
    HostGemmProblem prob = HostGemmProblem::random(p, uint64_t(s.m));
    DeviceGemm dev(prob);
    int ran = 0;
    for (const GemmCandidate& c : cuda_candidates(p, 1)) {
      if (c.name.rfind("Gemv_", 0) != 0 || !c.supports(p).is_ok()) continue;
      Status st;
      std::vector<uint8_t> out = run_candidate(c, prob, dev, &st);
      ASSERT_TRUE(st.is_ok()) << c.name << ": " << st.to_string();
      EXPECT_TRUE(matches_reference(prob, out)) << c.name << " on " << describe(p);
      ++ran;
    }
    EXPECT_GT(ran, 0);
  }
}

TEST(CudaLt, NameRoundTrip) {  // no GPU needed
  cuda::LtConfig c{66, 23, 33, 4, 2, 1, 3, 0, 2};
  std::string name = cuda::lt_name(c);
  EXPECT_EQ(name, "Gemm_Lt_a66_t23_s33_k4_r2_w1_c3_i0_cl2");
  auto back = cuda::parse_lt_name(name);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(*back, c);
  for (const char* bad : {"Gemm_Lt_a66", "Gemm_Lt_a66_t23_s33_k4_r2_w1_c3_i0_cl2x",
                          "Gemm_Lt_a-1_t0_s0_k1_r0_w0_c0_i0_cl0", "Gemm_Lt_a01_t0_s0_k1_r0_w0_c0_i0_cl0", "Default"}) {
    EXPECT_FALSE(cuda::parse_lt_name(bad).is_ok()) << bad;
  }
}

// Every expanded cuBLASLt candidate rebuilds from its name alone and gives the same result; a
// name that no longer validates fails resolve (the dispatcher then re-tunes).
TEST(CudaLt, ResolveRebuildsFromName) {
  TUNABLEOP_REQUIRE_GPU();
  GemmParams p;
  p.dtype = DType::kF16;
  p.transa = 'T';
  p.m = 512;
  p.n = 96;
  p.k = 320;
  p = p.with_defaults();
  Registry r;
  register_cuda(r);
  ASSERT_EQ(r.list<GemmCandidateFamily>().size(), 1u);
  const GemmCandidateFamily& f = r.list<GemmCandidateFamily>()[0];
  HostGemmProblem prob = HostGemmProblem::random(p, 5);
  DeviceGemm dev(prob);
  auto expanded = f.expand(p, 1);
  ASSERT_FALSE(expanded.empty());
  std::set<std::string> names;
  for (const GemmCandidate& c : expanded) {
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate " << c.name;
    auto again = f.resolve(p, c.name);
    ASSERT_TRUE(again.is_ok()) << c.name << ": " << again.status().to_string();
    Status s1, s2;
    auto o1 = run_candidate(c, prob, dev, &s1);
    auto o2 = run_candidate(*again, prob, dev, &s2);
    ASSERT_TRUE(s1.is_ok() && s2.is_ok()) << c.name;
    EXPECT_EQ(o1, o2) << c.name << " differs when rebuilt from its name";
  }
  EXPECT_FALSE(f.resolve(p, "Gemm_Lt_a9999_t0_s0_k1_r0_w0_c0_i0_cl0").is_ok());
  EXPECT_FALSE(f.resolve(p, "Gemm_Lt_garbage").is_ok());
}

TEST(CudaRegister, WithoutGpuAddsOnlyANote) {
  if (no_gpu_reason().empty()) GTEST_SKIP() << "a GPU is present: this test covers machines without one";
  Registry r;
  register_cuda(r);
  EXPECT_EQ(r.runtime(DeviceKind::kCuda), nullptr);
  EXPECT_TRUE(r.list<GemmCandidate>().empty());
  ASSERT_EQ(r.notes().size(), 1u);
  EXPECT_NE(r.notes()[0].find("no usable GPU"), std::string::npos) << r.notes()[0];
}

// A captured graph keeps the scratch pointer it was captured with: growing the scratch must
// leave the outgrown block allocated (it used to free it).
TEST(CudaScratch, GrowingKeepsTheOutgrownBlock) {
  TUNABLEOP_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  auto small = cuda::scratch_workspace(1 << 20, stream);
  ASSERT_TRUE(small.is_ok()) << small.status().to_string();
  auto same = cuda::scratch_workspace(1 << 19, stream);
  ASSERT_TRUE(same.is_ok());
  EXPECT_EQ(*same, *small) << "a smaller request reuses the current block";
  auto big = cuda::scratch_workspace(3 << 20, stream);
  ASSERT_TRUE(big.is_ok());
  EXPECT_NE(*big, *small);
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, *small), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice) << "the outgrown block was freed";
  EXPECT_EQ(cudaMemsetAsync(*small, 0, 1 << 20, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

}  // namespace
}  // namespace tunableop::testing
