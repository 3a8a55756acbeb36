#include "backends/cuda/cuda_testing.h"

#include <algorithm>
#include <cstring>

#include "backends/cuda/register.h"
#include "tunableop/registry.h"

namespace tunableop::testing {

namespace {
constexpr uint8_t kGuardByte = 0xA5;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) ADD_FAILURE() << what << ": " << cudaGetErrorString(e);
}
}  // namespace

std::string no_gpu_reason() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return cudaGetErrorString(e);
  }
  return n > 0 ? "" : "cudaGetDeviceCount returned 0";
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  check(cudaMalloc(&ptr_, std::max<size_t>(bytes, 1)), "cudaMalloc");
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
  }
  return *this;
}

DeviceGemm::DeviceGemm(const HostGemmProblem& prob, size_t off, size_t g)
    : a(prob.a.size() + off + 16),
      b(prob.b.size() + off + 16),
      c(prob.c.size() + off + 2 * g + 16),
      offset(off),
      guard(g),
      c_bytes(prob.c.size()) {
  check(cudaMemcpy(a.data() + offset, prob.a.data(), prob.a.size(), cudaMemcpyHostToDevice), "copy A");
  check(cudaMemcpy(b.data() + offset, prob.b.data(), prob.b.size(), cudaMemcpyHostToDevice), "copy B");
  reset_c(prob);
}

void DeviceGemm::reset_c(const HostGemmProblem& prob) {
  check(cudaMemset(c.data(), kGuardByte, c.size()), "memset guards");
  check(cudaMemcpy(c.data() + offset + guard, prob.c_initial.data(), prob.c_initial.size(), cudaMemcpyHostToDevice),
        "copy C");
}

GemmOperands DeviceGemm::operands(void* stream) const {
  GemmOperands o;
  o.a = a.data() + offset;
  o.b = b.data() + offset;
  o.c = c.data() + offset + guard;
  o.stream = stream;
  return o;
}

std::vector<uint8_t> DeviceGemm::read_c() const {
  std::vector<uint8_t> out(c_bytes);
  check(cudaMemcpy(out.data(), c.data() + offset + guard, c_bytes, cudaMemcpyDeviceToHost), "read C");
  return out;
}

bool DeviceGemm::guards_intact() const {
  std::vector<uint8_t> all(c.size());
  check(cudaMemcpy(all.data(), c.data(), all.size(), cudaMemcpyDeviceToHost), "read guards");
  for (size_t i = offset; i < offset + guard; ++i)
    if (all[i] != kGuardByte) return false;
  for (size_t i = offset + guard + c_bytes; i < offset + 2 * guard + c_bytes; ++i)
    if (all[i] != kGuardByte) return false;
  return true;
}

std::vector<uint8_t> run_candidate(const GemmCandidate& cand, const HostGemmProblem& prob, DeviceGemm& dev,
                                   Status* status, bool give_workspace) {
  dev.reset_c(prob);
  GemmOperands o = dev.operands();
  DeviceBuffer ws;
  if (give_workspace && cand.workspace_bytes) {
    size_t bytes = cand.workspace_bytes(prob.p);
    if (bytes) {
      ws = DeviceBuffer(bytes);
      o.workspace = ws.data();
      o.workspace_bytes = bytes;
    }
  }
  *status = cand.run(prob.p, o);
  cudaError_t e = cudaDeviceSynchronize();
  if (status->is_ok() && e != cudaSuccess) *status = Status::device_error(cudaGetErrorString(e));
  return dev.read_c();
}

std::vector<GemmCandidate> cuda_candidates(const GemmParams& p, int effort) {
  Registry r;
  register_cuda(r);
  std::vector<GemmCandidate> out;
  for (const auto& c : r.list<GemmCandidate>())
    if (c.device == DeviceKind::kCuda && c.min_effort <= effort) out.push_back(c);
  for (const auto& f : r.list<GemmCandidateFamily>())
    if (f.device == DeviceKind::kCuda && f.min_effort <= effort)
      for (auto& c : f.expand(p, effort)) out.push_back(std::move(c));
  return out;
}

}  // namespace tunableop::testing
