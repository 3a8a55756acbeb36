// The CUDA device's weights (the weight loader of the CUDA device's split, issue 26): a model's
// tensors in the device's element type, generated on the GPU for built-in models (the
// real-shaped ones never exist on the host), copied from a Hugging Face directory's host
// weights otherwise, or, for a tensor-parallel rank, only that rank's blocks of each tensor
// (parallel/tp_layout.h).
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cuda_common/cuda_memory.h"
#include "llm/config.h"
#include "llm/cuda/kernels.h"
#include "llm/device_kernels.h"
#include "llm/engine.h"
#include "llm/parallel/tp_layout.h"
#include "llm/random_model.h"
#include "llm/weights.h"

namespace tunableop::llm::cuda {

class CudaWeights {
 public:
  // The whole model: built-in (spec.builtin, random weights from `seed` on the GPU) or spec.dir.
  // `fp8` (EngineOptions::fp8): the projections (and the lm_head, when asked) quantized to e4m3
  // per output channel on the GPU (fp8_kernels.h), from the checkpoint's fp32 values or from the
  // built-in model's E ones; a non-finite weight is refused, named.
  Status load(const ModelSpec& spec, uint64_t seed, const ModelConfig& c, Elem e, cudaStream_t s,
              EngineOptions::Fp8 fp8 = {});
  // One tensor-parallel rank's shard: generated (built-in) or from `host`: a directory's whole
  // weights (loaded once for every rank, cut here) or this rank's shard alone (load_model_shard).
  Status load_shard(const ModelSpec& spec, uint64_t seed, const TensorParallelLayout& tp, int rank,
                    const ModelWeights* host, Elem e, cudaStream_t s);
  // What the forward pass reads (pointers into the buffers held here).
  const DeviceWeights& view() const { return view_; }
  // The per-output-channel scales of an e4m3 weight of view(); null for a weight in E.
  const float* fp8_scales(const void* w) const;

 private:
  struct Layer {
    ::tunableop::cuda::DeviceBuffer attn_norm, wqkv, wo, mlp_norm, w_gate_up, w_down;
    // The families' tensors (config.h), empty when the model has none.
    ::tunableop::cuda::DeviceBuffer qkv_bias, q_norm, k_norm, post_attn_norm, post_mlp_norm;
  };
  // The family tensors of layer l: generated (built-in) or copied from `host` (a directory's).
  Status load_family(const ModelConfig& c, int64_t l, uint64_t seed, const LayerWeights* host,
                     ::tunableop::cuda::DeviceBuffer& staging);
  Status copy_weight(::tunableop::cuda::DeviceBuffer& dst, const std::vector<float>& src,
                     ::tunableop::cuda::DeviceBuffer& staging);
  Status random_weight(::tunableop::cuda::DeviceBuffer& dst, const ModelConfig& c, int64_t n, uint64_t seed,
                       RandomTensor t, int64_t layer);
  void make_view(const ModelConfig& c, bool sharded);
  // One weight [rows, cols] into dst: E, or e4m3 with its scales when `fp8`. From `host` (fp32
  // on the host, through staging) or generated (random tensor t of `layer`).
  Status put_weight(::tunableop::cuda::DeviceBuffer& dst, bool fp8, const char* name, int64_t rows, int64_t cols,
                    const std::vector<float>* host, const ModelConfig& c, uint64_t seed, RandomTensor t, int64_t layer,
                    ::tunableop::cuda::DeviceBuffer& staging);
  Status quantize(::tunableop::cuda::DeviceBuffer& dst, const char* name, int64_t rows, int64_t cols, const void* src,
                  bool f32);

  Elem e_ = Elem::kBF16;
  size_t esize_ = 2;
  cudaStream_t stream_ = nullptr;
  ::tunableop::cuda::DeviceBuffer embed_, final_norm_, lm_head_;
  std::vector<Layer> layers_;
  // e4m3 weights' scales, by the weight's buffer (fp8 only); a list: a model has a few hundred.
  // Looked up on every projection (project()): a hash map, not a scan of every layer's weights.
  std::unordered_map<const void*, ::tunableop::cuda::DeviceBuffer> scales_;
  DeviceWeights view_;
};

}  // namespace tunableop::llm::cuda
