#include "interpose/gpu_state.h"

#include <cstdint>

#ifdef TUNABLEOP_INTERPOSE_CUDA
#include <cublas_api.h>
#include <cuda_runtime.h>

#include "backends/cuda/common/cuda_util.h"
#endif

namespace tunableop::interpose::gpu {

#ifdef TUNABLEOP_INTERPOSE_CUDA

namespace {
thread_local uint64_t t_ready = 0;  // bit per ordinal < 64
}

bool stream_capturing(void* stream) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  cudaError_t e = cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &st);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return true;
  }
  return st != cudaStreamCaptureStatusNone;
}

bool thread_ready(int ordinal) { return ordinal >= 0 && ordinal < 64 && ((t_ready >> ordinal) & 1u); }

void make_thread_ready(int ordinal) {
  if (thread_ready(ordinal) || ordinal < 0 || ordinal >= 64) return;
  if (cuda::current_handles().is_ok())
    t_ready |= uint64_t(1) << ordinal;
  else
    (void)cudaGetLastError();
}

void clear_our_error() { (void)cudaGetLastError(); }

void* device_alloc(size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return p;
}

int execution_failed_status() { return CUBLAS_STATUS_EXECUTION_FAILED; }

#else  // CPU-only build: no stream ever captures

bool stream_capturing(void*) { return false; }
bool thread_ready(int) { return true; }
void make_thread_ready(int) {}
void clear_our_error() {}
void* device_alloc(size_t) { return nullptr; }
int execution_failed_status() { return 13; }

#endif

}  // namespace tunableop::interpose::gpu
