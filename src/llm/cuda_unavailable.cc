// make_cuda_engine for builds without a CUDA toolkit: a clear answer instead of a link error.
#include "llm/engine.h"
#include "llm/parallel/tp_engine.h"

namespace tunableop::llm {

StatusOr<std::unique_ptr<Engine>> make_cuda_engine(const ModelSpec&, uint64_t, int64_t, EngineOptions, Context&) {
  return Status::unsupported("this build has no CUDA support (no CUDA toolkit was found at configure time)");
}

StatusOr<std::unique_ptr<DeviceKernels>> make_cuda_tp_device(const ModelSpec&, uint64_t, const EngineOptions&, Context&,
                                                             std::shared_ptr<const TensorParallelLayout>, int,
                                                             std::shared_ptr<const ModelWeights>) {
  return Status::unsupported("this build has no CUDA support (no CUDA toolkit was found at configure time)");
}

}  // namespace tunableop::llm
