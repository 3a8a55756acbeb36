// The engine's process state: one tunableop::Context per device (the CPU, each CUDA ordinal, so
// one results file per device; its plans hold the decisions), and what the serve path keeps per
// device between calls.
// Nothing here is ever destroyed: hooked calls may arrive while the process exits.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "interpose/abi.h"
#include "tunableop/context.h"
#include "tunableop/gemm_and_bias.h"

namespace tunableop::interpose {

// Device memory for candidates that run while a stream captures a CUDA graph and need more
// workspace than the program gave: grown only outside a capture (allocating while capturing
// is not allowed) and never freed, since captured graphs keep pointing at it.
class GraphWorkspace {
 public:
  // The workspace when it holds at least `bytes`, else null.
  void* get(size_t bytes) const;
  // Outside a capture: makes it hold at least `bytes` (the old block stays allocated).
  void reserve(size_t bytes);

 private:
  struct Block {
    void* ptr;
    size_t bytes;
  };
  std::atomic<const Block*> current_{nullptr};
  std::mutex mu_;
  std::vector<std::unique_ptr<Block>> blocks_;
};

struct DeviceEngine {
  Device device;
  Context* ctx = nullptr;  // leaked on purpose (see above)
  Options options;         // the settings, read once
  // Decisions live in the context's plans (one per problem, found by its ops::ProblemKey).
  GraphWorkspace graph_workspace;
  // Where problems first met while capturing are written (the op framework tunes them at the
  // next call outside a capture).
  std::mutex untuned_mu;
  std::unique_ptr<UntunedFile> untuned;
};

class Engine {
 public:
  static Engine& get();
  void init(const PreloadApi* preload);
  const PreloadApi& preload() const { return *preload_; }
  void* program_symbol(Library lib, const char* name) const { return preload_->real_symbol(lib, name); }

  DeviceEngine& cpu();
  // The engine of a CUDA ordinal, created on first use (nullptr if out of range).
  DeviceEngine* cuda(int ordinal);

 private:
  static constexpr int kMaxDevices = 64;
  const PreloadApi* preload_ = nullptr;
  std::mutex mu_;
  std::atomic<DeviceEngine*> cpu_{nullptr};
  std::atomic<DeviceEngine*> cuda_[kMaxDevices] = {};
};

// The name under which the program's own BLAS competes on the CPU (see program_blas.h).
inline constexpr const char* kProgramBlasName = "Gemm_ProgramBlas";

}  // namespace tunableop::interpose
