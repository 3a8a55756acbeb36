// A results file tuned on one GPU kind is not served on another (issue 31): the file carries the
// GPU's name among its validators (src/backends/cuda/validators.cc), and a context whose GPU is
// named otherwise leaves that file alone and tunes into its own ".env-" sibling. On the CPU, with
// the CUDA backend's validator keys and two real device names faked.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "backends/cpu_runtime.h"
#include "fake_problem.h"
#include "results_test_util.h"
#include "tunableop/context.h"

namespace tunableop {
namespace {

const std::string kOp = "GemmTunableOp_float_NN";  // the fake problem's signatures
const std::string kParams = "nn_8_8_8";

// What the CUDA backend's validators say on each machine kind, but for its name alone.
RegisterFn gpu_named(std::string name) {
  return [name](Registry& r) {
    register_cpu_runtime(r);
    auto add = [&](const char* key, std::string value) {
      r.add_validator({key, [value] { return value; }, DeviceKind::kCpu});
    };
    add("CUDA_RUNTIME_VERSION", "13.0");
    add("CUBLAS_VERSION", "13.0.0");
    add("GPU_NAME", name);
    add("GPU_COMPUTE_CAPABILITY", "9.0");
    add("GPU_SM_COUNT", "132");
  };
}
const char* kH100 = "NVIDIA H100 80GB HBM3";
const char* kH200 = "NVIDIA H200";

Config config(const testing::TempDir& dir, bool tuning) {
  Config c = Config::defaults_only();
  EXPECT_TRUE(c.set(Setting::kEnabled, true).is_ok());
  EXPECT_TRUE(c.set(Setting::kTuning, tuning).is_ok());
  EXPECT_TRUE(c.set(Setting::kFilename, dir.file("results%d.csv")).is_ok());
  return c;
}

// "Fast" beats Default by 2x on every kind here: what differs is only which file says so.
std::vector<testing::FakeCandidate> candidates() { return {{"Default", 1.0}, {"Fast", 0.5}}; }

// What the context serves for the fake problem (tuning it when it may).
std::string serve(Context& ctx) {
  auto chosen = ctx.choose(
      kOp, kParams, [](const std::string&) { return true; },
      [] { return StatusOr<std::unique_ptr<TuningProblem>>(std::make_unique<testing::FakeProblem>(candidates())); });
  EXPECT_TRUE(chosen.is_ok()) << chosen.status().to_string();
  return chosen.is_ok() ? *chosen : "(error)";
}

TEST(ResultsGpuKind, AFileTunedOnAnH100IsNotServedOnAnH200) {
  testing::TempDir dir;
  const std::string path = dir.file("results0.csv");

  // Tuned on the H100: the file names it.
  Context h100(Device::cpu(), config(dir, true), gpu_named(kH100));
  testing::FakeProblem pr(candidates());
  auto tuned = h100.tune(pr);
  ASSERT_TRUE(tuned.is_ok()) << tuned.status().to_string();
  ASSERT_EQ(tuned->winner.solution, "Fast");
  const std::string h100_text = testing::read_text(path);
  EXPECT_NE(h100_text.find(std::string("Validator,GPU_NAME,") + kH100 + "\n"), std::string::npos) << h100_text;
  EXPECT_NE(h100_text.find(kOp + "," + kParams + ",Fast,"), std::string::npos) << h100_text;

  // The same file pattern on an H200, tuning off: the H100's choice is not served.
  Context h200(Device::cpu(), config(dir, false), gpu_named(kH200));
  ASSERT_TRUE(h200.load_results().is_ok());
  EXPECT_FALSE(h200.results().lookup(kOp, kParams).has_value());
  EXPECT_EQ(serve(h200), "Default");
  EXPECT_NE(h200.results_path(), path) << "the H200 reads and writes a sibling of its own";
  EXPECT_NE(h200.results_path().find(".env-"), std::string::npos) << h200.results_path();

  // Tuning on, the H200 tunes the problem itself, into its sibling; the H100's file is untouched.
  Context h200_tuning(Device::cpu(), config(dir, true), gpu_named(kH200));
  EXPECT_EQ(serve(h200_tuning), "Fast");
  EXPECT_EQ(testing::read_text(path), h100_text);
  const std::string h200_text = testing::read_text(h200_tuning.results_path());
  EXPECT_NE(h200_text.find(std::string("Validator,GPU_NAME,") + kH200 + "\n"), std::string::npos) << h200_text;
  EXPECT_EQ(h200_tuning.results_path(), h200.results_path());

  // Back on an H100, the H100's own file serves, tuning off.
  Context h100_again(Device::cpu(), config(dir, false), gpu_named(kH100));
  EXPECT_EQ(serve(h100_again), "Fast");
  EXPECT_EQ(h100_again.results_path(), path);
}

TEST(ResultsGpuKind, AnH200FileIsNotServedOnAnH100Either) {
  testing::TempDir dir;
  Context h200(Device::cpu(), config(dir, true), gpu_named(kH200));
  EXPECT_EQ(serve(h200), "Fast");
  const std::string h200_file = h200.results_path();
  EXPECT_EQ(h200_file, dir.file("results0.csv")) << "the first kind to tune owns the requested name";

  Context h100(Device::cpu(), config(dir, false), gpu_named(kH100));
  EXPECT_EQ(serve(h100), "Default");
  EXPECT_NE(h100.results_path(), h200_file);
}

}  // namespace
}  // namespace tunableop
