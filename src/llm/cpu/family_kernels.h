// The CPU kernels of the families' extra ops (config.h), fp32, row-major: Qwen2's biases,
// Qwen3's per-head q/k norms, Gemma-2's softcapping (its post-norms are cpu::rmsnorm's). Also the host arithmetic of
// DeviceKernels' defaults for these ops (device_kernels.cc).
#pragma once

#include <cstdint>

namespace tunableop::llm::cpu {

// y[r, i] += bias[i], rows x width.
void add_bias(float* y, const float* bias, int64_t rows, int64_t width);

// In each of `rows` rows (`row_stride` apart), heads [first_head, first_head + heads) of
// head_dim elements: x = x / sqrt(mean(x^2) + eps) * w (Qwen3's q_norm / k_norm, Llama's form).
void head_rmsnorm(float* x, int64_t rows, int64_t row_stride, int64_t first_head, int64_t heads, int64_t head_dim,
                  const float* w, float eps);

// x = cap * tanh(x / cap), n elements.
void softcap(float* x, int64_t n, float cap);

}  // namespace tunableop::llm::cpu
