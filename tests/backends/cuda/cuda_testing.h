// Helpers for the CUDA backend tests: GPU presence, device copies of a HostGemmProblem (with an
// optional byte offset to make pointers misaligned), and running one candidate end to end.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/gemm_testing.h"
#include "tunableop/gemm.h"

namespace tunableop::testing {

// Empty when a GPU is usable, else why not (the message every GPU test skips with).
std::string no_gpu_reason();

#define TUNABLEOP_REQUIRE_GPU()                                                 \
  do {                                                                          \
    std::string _why = ::tunableop::testing::no_gpu_reason();                   \
    if (!_why.empty()) GTEST_SKIP() << "no CUDA GPU on this machine: " << _why; \
  } while (0)

// Device memory freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  char* data() const { return static_cast<char*>(ptr_); }
  size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// A problem's operands on the device. Each operand starts `offset` bytes into its allocation
// (0: 256-byte aligned; the element size: misaligned for 16-byte vector loads); `guard` bytes
// of a known pattern surround C to catch writes outside it.
struct DeviceGemm {
  DeviceGemm(const HostGemmProblem& prob, size_t offset = 0, size_t guard = 0);
  GemmOperands operands(void* stream = nullptr) const;
  void reset_c(const HostGemmProblem& prob);  // C back to its initial contents (and guards)
  std::vector<uint8_t> read_c() const;        // C only (c_span elements)
  bool guards_intact() const;

  DeviceBuffer a, b, c;
  size_t offset, guard, c_bytes;
};

// Runs `cand` on `prob` (fresh C) and returns C. Status of the run in *status.
std::vector<uint8_t> run_candidate(const GemmCandidate& cand, const HostGemmProblem& prob, DeviceGemm& dev,
                                   Status* status, bool give_workspace = true);

// Static CUDA candidates of a registry plus the family expansion for p at `effort`, Default first.
std::vector<GemmCandidate> cuda_candidates(const GemmParams& p, int effort);

}  // namespace tunableop::testing
