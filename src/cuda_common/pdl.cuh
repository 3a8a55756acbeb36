// Programmatic dependent launch (PDL, sm_90) for the kernels of one stream, shared by the LLM
// engine's kernels (and open to the CUDA backend's). A kernel launched with `pdl` may be
// scheduled while the previous kernel of the stream is still running, once that kernel has
// executed pdl_launch_dependents() in every block (or finished). It must then call pdl_wait()
// before it reads anything an earlier kernel wrote or writes anything an earlier kernel reads:
// pdl_wait() returns when the previous grid has completed and its writes are visible. What it
// may do before: read memory no kernel of the stream writes (weights), compute, allocate.
//
// Rules that keep a chain of such kernels correct:
//   - every kernel launched with `pdl` calls pdl_wait() on every path before it touches
//     activations (and before it exits): its completion then implies its predecessors', so
//     completion stays transitive along the stream;
//   - pdl_launch_dependents() may come anywhere (even first): it only lets the next kernel
//     launch early, never run past its own pdl_wait();
//   - both are no-ops when the kernel was launched without the attribute, and compile to
//     nothing below sm_90.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace tunableop::cuda {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), with the programmatic-stream-serialization
// attribute when `pdl` (the caller checks the device is sm_90 or newer). Returns the launch's
// error (or the last error it left).
template <class... Params, class... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                   Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = pdl ? attr : nullptr;
  cfg.numAttrs = pdl ? 1 : 0;
  cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
  return e != cudaSuccess ? e : cudaGetLastError();
}

}  // namespace tunableop::cuda
