// Launchers for the CUDA kernels of the families' extra ops (config.h; DeviceKernels' add_bias,
// qk_norm, add_normed_residual, softcap): Qwen2's q/k/v biases, Qwen3's per-head q/k RMSNorm,
// Gemma-2's post-norm residual adds and final logit softcapping. Plain C++17 like kernels.h;
// every launcher returns the launch's cudaError_t. Math in fp32, storage in E (kernels.h's Elem),
// rounded as the CPU device and transformers round: each op's result once to E.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "llm/cuda/kernels.h"

namespace tunableop::llm::cuda {

// y[r, i] = E(y[r, i] + bias[i]), rows x width.
cudaError_t add_bias(Elem e, void* y, const void* bias, int64_t rows, int64_t width, cudaStream_t s, bool pdl = false);

// In each qkv row (row_stride apart), every q head = E(rmsnorm(head) * wq) and every k head with
// wk, over head_dim, in place; v untouched. One warp per head.
cudaError_t qk_norm(Elem e, void* qkv, int64_t rows, int64_t row_stride, int64_t n_heads, int64_t n_kv_heads,
                    int64_t head_dim, const void* wq, const void* wk, float eps, cudaStream_t s, bool pdl = false);

// x[r] += float(E(rmsnorm(y[r]) * (1 + w)))  (* w unless add_one), rows of `width`: an output
// normed before its residual add. One block per row.
cudaError_t add_normed_residual(Elem e, float* x, const void* y, const void* w, int64_t rows, int64_t width, float eps,
                                bool add_one, cudaStream_t s, bool pdl = false);

// x = E(cap * tanh(x / cap)), n elements.
cudaError_t softcap(Elem e, void* x, int64_t n, float cap, cudaStream_t s, bool pdl = false);

}  // namespace tunableop::llm::cuda
