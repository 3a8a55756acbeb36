#include "llm/device_kernels.h"

namespace tunableop::llm {

StatusOr<std::unique_ptr<KvCache>> DeviceKernels::make_kv_cache(const KvCacheOptions& o, int64_t max_batch,
                                                                int64_t max_seq) {
  TUNABLEOP_RETURN_IF_ERROR(o.validate());
  const size_t elem = dtype_size(dtype());
  if (o.kind == KvCacheKind::kPaged) {
    PagedKvCache::Geometry g;
    g.n_kv_heads = config_.num_kv_heads, g.head_dim = config_.head_dim, g.page_size = o.page_size;
    g.layers = config_.num_layers, g.max_batch = max_batch, g.max_seq = max_seq, g.elem_bytes = elem;
    g.pages = o.pages > 0 ? o.pages : max_batch * g.pages_per_seq();
    auto k = alloc(PagedKvCache::pool_bytes(g));
    if (!k.is_ok()) return k.status();
    auto v = alloc(PagedKvCache::pool_bytes(g));
    if (!v.is_ok()) return v.status();
    const size_t table_bytes = size_t(max_batch * g.pages_per_seq()) * sizeof(int32_t);
    auto table = alloc(table_bytes);
    if (!table.is_ok()) return table.status();
    auto host = alloc_host(table_bytes);
    if (!host.is_ok()) return host.status();
    auto upload = [this](void* dst, const void* src, size_t bytes) { return this->upload(dst, src, bytes); };
    return std::unique_ptr<KvCache>(new PagedKvCache(g, std::move(k.value()), std::move(v.value()),
                                                     std::move(table.value()), std::move(host.value()), upload));
  }
  const KvLayout layout{config_.num_kv_heads, config_.head_dim, max_seq};
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
