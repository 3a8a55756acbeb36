#include "llm/device_kernels.h"

namespace tunableop::llm {

StatusOr<std::unique_ptr<KvCache>> DeviceKernels::make_kv_cache(int64_t max_batch, int64_t max_seq) {
  const KvLayout layout{config_.num_kv_heads, config_.head_dim, max_seq};
  const size_t elem = dtype_size(dtype());
  const size_t bytes = StaticKvCache::bytes_needed(layout, max_batch, config_.num_layers, elem);
  auto k = alloc(bytes);
  if (!k.is_ok()) return k.status();
  auto v = alloc(bytes);
  if (!v.is_ok()) return v.status();
  return std::unique_ptr<KvCache>(
      new StaticKvCache(layout, max_batch, elem, std::move(k.value()), std::move(v.value())));
}

Status DeviceKernels::residual_add_rmsnorm(float* x, const void* y, const void* w, int64_t rows, void* out) {
  TUNABLEOP_RETURN_IF_ERROR(add_residual(x, y, rows));
  return rmsnorm(x, w, rows, out);
}

Status DeviceKernels::after_row_parallel_linear(void*, int64_t, int64_t) { return Status::ok(); }

Status DeviceKernels::run_decode_step(int64_t, LinearOp&, const std::function<Status()>& step) { return step(); }

}  // namespace tunableop::llm
