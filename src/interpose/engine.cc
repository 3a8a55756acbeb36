#include "interpose/engine.h"

#include <fmt/format.h>

#include "backends/register_all.h"
#include "interpose/gpu_state.h"
#include "interpose/program_blas.h"

namespace tunableop::interpose {

void* GraphWorkspace::get(size_t bytes) const {
  const Block* b = current_.load(std::memory_order_acquire);
  return b != nullptr && b->bytes >= bytes ? b->ptr : nullptr;
}

void GraphWorkspace::reserve(size_t bytes) {
  if (get(bytes) != nullptr) return;
  std::lock_guard lock(mu_);
  if (get(bytes) != nullptr) return;
  const size_t rounded = (bytes + (size_t(2) << 20) - 1) / (size_t(2) << 20) * (size_t(2) << 20);
  void* p = gpu::device_alloc(rounded);
  if (p == nullptr) return;  // a later capture passes the call through
  blocks_.push_back(std::make_unique<Block>(Block{p, rounded}));
  current_.store(blocks_.back().get(), std::memory_order_release);
}

Engine& Engine::get() {
  static auto* e = new Engine();  // never destroyed
  return *e;
}

void Engine::init(const PreloadApi* preload) { preload_ = preload; }

namespace {

DeviceEngine* make_device(Device device, RegisterFn reg) {
  auto* e = new DeviceEngine();
  e->device = device;
  e->ctx = new Context(device, Config(), std::move(reg));
  e->options = e->ctx->config().snapshot();
  // Load now: a call made while a CUDA graph is being captured can only look results up.
  (void)e->ctx->load_results();
  return e;
}

}  // namespace

DeviceEngine& Engine::cpu() {
  DeviceEngine* d = cpu_.load(std::memory_order_acquire);
  if (d != nullptr) return *d;
  std::lock_guard lock(mu_);
  d = cpu_.load();
  if (d == nullptr) {
    ProgramBlas fns;
    fns.cblas_sgemm = program_symbol(Library::kBlas, "cblas_sgemm");
    fns.cblas_dgemm = program_symbol(Library::kBlas, "cblas_dgemm");
    fns.sgemm = program_symbol(Library::kBlas, "sgemm_");
    fns.dgemm = program_symbol(Library::kBlas, "dgemm_");
    d = make_device(Device::cpu(), [fns](Registry& r) {
      register_all_backends(r);
      r.list<GemmCandidate>().push_back(make_program_blas_candidate(fns));
    });
    cpu_.store(d, std::memory_order_release);
  }
  return *d;
}

DeviceEngine* Engine::cuda(int ordinal) {
  if (ordinal < 0 || ordinal >= kMaxDevices) return nullptr;
  DeviceEngine* d = cuda_[ordinal].load(std::memory_order_acquire);
  if (d != nullptr) return d;
  std::lock_guard lock(mu_);
  d = cuda_[ordinal].load();
  if (d == nullptr) {
    d = make_device(Device::cuda(ordinal), register_all_backends);
    cuda_[ordinal].store(d, std::memory_order_release);
  }
  return d;
}

}  // namespace tunableop::interpose
