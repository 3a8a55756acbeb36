#include "llm/device_kernels.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "llm/cpu/family_kernels.h"
#include "llm/cpu/kernels.h"
#include "tunableop/half.h"

namespace tunableop::llm {

namespace {
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// n elements of the device's E at `src` as fp32 on the host (the family ops' defaults).
StatusOr<std::vector<float>> fetch(DeviceKernels& d, const void* src, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  if (d.dtype() == DType::kF32) {
    TUNABLEOP_RETURN_IF_ERROR(d.download(out.data(), src, out.size() * 4));
    return out;
  }
  if (d.dtype() != DType::kBF16 && d.dtype() != DType::kF16)
    return Status::unsupported(d.name() + ": no host fallback for dtype " + dtype_name(d.dtype()));
  std::vector<uint16_t> raw(static_cast<size_t>(n));
  TUNABLEOP_RETURN_IF_ERROR(d.download(raw.data(), src, raw.size() * 2));
  for (size_t i = 0; i < raw.size(); ++i)
    out[i] = d.dtype() == DType::kBF16 ? to_float(bf16{raw[i]}) : to_float(fp16{raw[i]});
  return out;
}

// The values rounded to E (kept in `v`, as the device holds them), then uploaded to `dst`.
Status put(DeviceKernels& d, void* dst, std::vector<float>& v) {
  if (d.dtype() == DType::kF32) {
    TUNABLEOP_RETURN_IF_ERROR(d.upload(dst, v.data(), v.size() * 4));
    float sink = 0;
    return d.download(&sink, dst, sizeof(sink));  // done before `v` goes
  }
  std::vector<uint16_t> raw(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    raw[i] = d.dtype() == DType::kBF16 ? to_bf16(v[i]).bits : to_fp16(v[i]).bits;
    v[i] = d.dtype() == DType::kBF16 ? to_float(bf16{raw[i]}) : to_float(fp16{raw[i]});
  }
  TUNABLEOP_RETURN_IF_ERROR(d.upload(dst, raw.data(), raw.size() * 2));
  uint16_t sink = 0;
  return d.download(&sink, dst, sizeof(sink));  // a device with asynchronous uploads: done before `raw` goes
}
}  // namespace

Status DeviceKernels::add_bias(void* y, const void* bias, int64_t rows, int64_t width) {
  auto host = fetch(*this, y, rows * width);
  auto b = fetch(*this, bias, width);
  if (!host.is_ok() || !b.is_ok()) return host.is_ok() ? b.status() : host.status();
  cpu::add_bias(host->data(), b->data(), rows, width);
  return put(*this, y, *host);
}

Status DeviceKernels::qk_norm(void* qkv, int64_t rows, const void* q_norm, const void* k_norm) {
  const ModelConfig& c = config_;
  auto host = fetch(*this, qkv, rows * c.qkv_dim());
  auto wq = fetch(*this, q_norm, c.head_dim);
  auto wk = fetch(*this, k_norm, c.head_dim);
  if (!host.is_ok()) return host.status();
  if (!wq.is_ok() || !wk.is_ok()) return wq.is_ok() ? wk.status() : wq.status();
  const float eps = float(c.rms_norm_eps);
  cpu::head_rmsnorm(host->data(), rows, c.qkv_dim(), 0, c.num_heads, c.head_dim, wq->data(), eps);
  cpu::head_rmsnorm(host->data(), rows, c.qkv_dim(), c.num_heads, c.num_kv_heads, c.head_dim, wk->data(), eps);
  return put(*this, qkv, *host);
}

Status DeviceKernels::add_normed_residual(float* x, const void* y, const void* w, int64_t rows) {
  const ModelConfig& c = config_;
  const int64_t n = rows * c.hidden_size;
  auto yh = fetch(*this, y, n);
  auto wh = fetch(*this, w, c.hidden_size);
  if (!yh.is_ok() || !wh.is_ok()) return yh.is_ok() ? wh.status() : yh.status();
  std::vector<float> normed(static_cast<size_t>(n)), xh(static_cast<size_t>(n));
  cpu::rmsnorm(yh->data(), wh->data(), rows, c.hidden_size, float(c.rms_norm_eps), c.norm_adds_one(), normed.data());
  std::vector<float> rounded = normed;
  if (dtype() != DType::kF32) {  // as a device rounds its normed output to E before the add
    for (float& v : rounded) v = dtype() == DType::kBF16 ? to_float(to_bf16(v)) : to_float(to_fp16(v));
  }
  TUNABLEOP_RETURN_IF_ERROR(download(xh.data(), x, xh.size() * 4));
  for (size_t i = 0; i < xh.size(); ++i) xh[i] += rounded[i];
  TUNABLEOP_RETURN_IF_ERROR(upload(x, xh.data(), xh.size() * 4));
  float sink = 0;
  return download(&sink, x, sizeof(sink));  // done before `xh` goes
}

Status DeviceKernels::softcap(void* x, int64_t rows, int64_t width, float cap) {
  auto host = fetch(*this, x, rows * width);
  if (!host.is_ok()) return host.status();
  cpu::softcap(host->data(), rows * width, cap);
  return put(*this, x, *host);
}

StatusOr<std::unique_ptr<KvCache>> DeviceKernels::make_kv_cache(const KvCacheOptions& o, int64_t max_batch,
                                                                int64_t max_seq) {
  TUNABLEOP_RETURN_IF_ERROR(o.validate());
  const size_t elem = dtype_size(dtype());
  if (o.kind == KvCacheKind::kPaged) {
    PagedKvCache::Geometry g;
    g.n_kv_heads = config_.num_kv_heads, g.head_dim = config_.head_dim, g.page_size = o.page_size;
    g.layers = config_.num_layers, g.max_batch = max_batch, g.max_seq = max_seq, g.elem_bytes = elem;
    // Default: every sequence at full length, and the page a continuous batch's padding rows
    // write (PagedKvCache::scratch_page).
    g.pages = o.pages > 0 ? o.pages : max_batch * g.pages_per_seq() + 1;
    if (o.pages == 0 && o.fill_free_memory_less > 0) {
      const int64_t page_bytes = 2 * g.layers * g.page_elems() * int64_t(elem);
      auto free = free_memory_bytes();
      if (!free.is_ok()) return free.status();
      const int64_t fit = (*free - o.fill_free_memory_less) / page_bytes;
      if (fit < g.pages_per_seq() + 1) {
        return Status::invalid_argument("the KV cache does not fit: " + std::to_string(*free >> 20) + " MiB free, " +
                                        std::to_string(o.fill_free_memory_less >> 20) +
                                        " MiB kept for the passes, one sequence of " + std::to_string(max_seq) +
                                        " positions needs " +
                                        std::to_string(((g.pages_per_seq() + 1) * page_bytes) >> 20) +
                                        " MiB (a shorter --max-seq, or fewer layers)");
      }
      g.pages = std::min(g.pages, fit);
    }
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

Status DeviceKernels::project(const Projection& p, LinearOp& linear) {
  using E = Projection::Epilogue;
  // The element-wise calls take their widths from the config: the shapes must be the layer's.
  const int64_t want_out = p.epilogue == E::kAddResidual ? config_.hidden_size
                           : p.epilogue == E::kGated     ? 2 * config_.intermediate_size
                           : p.epilogue == E::kArgmax    ? config_.vocab_size
                                                         : p.out;
  if (p.out != want_out || (p.norm && p.in != config_.hidden_size)) {
    return Status::invalid_argument(std::string("project ") + p.name + ": shape " + std::to_string(p.in) + " -> " +
                                    std::to_string(p.out) + " does not fit its epilogue");
  }
  // Prefill's element-wise spans carry the activation bytes they move at least (for the
  // breakdown's GB/s); decode's carry none (its table reports the weights' bytes).
  const int64_t e = int64_t(dtype_size(dtype())), act_bytes = p.phase == Phase::kPrefill ? p.rows : 0;
  const void* in = p.input;
  if (p.norm) {
    TUNABLEOP_RETURN_IF_ERROR(rmsnorm(p.x, p.norm, p.rows, p.normed));
    mark(p.name, "norm", act_bytes * p.in * (4 + e));
    in = p.normed;
  }
  TUNABLEOP_RETURN_IF_ERROR(linear(p.phase, dtype(), p.rows, p.in, p.out, in, p.w, p.y, stream()));
  if (p.row_parallel) TUNABLEOP_RETURN_IF_ERROR(after_row_parallel_linear(p.y, p.rows, p.out));
  mark(p.name, "gemm", p.weight_bytes(dtype_size(dtype())), true, p.flops());
  switch (p.epilogue) {
    case E::kStore: return Status::ok();
    case E::kAddResidual:
      TUNABLEOP_RETURN_IF_ERROR(add_residual(p.residual, p.y, p.rows));
      mark(p.name, "residual", act_bytes * p.out * (8 + e));
      if (p.next_norm) {
        TUNABLEOP_RETURN_IF_ERROR(rmsnorm(p.residual, p.next_norm, p.rows, p.next_normed));
        mark(p.name, "next_norm", act_bytes * p.out * (4 + e));
      }
      return Status::ok();
    case E::kGated:
      TUNABLEOP_RETURN_IF_ERROR(gated_activation(p.y, p.rows, p.gated));
      mark(p.name, "act", act_bytes * (p.out / 2) * 3 * e);
      return Status::ok();
    case E::kArgmax:
      TUNABLEOP_RETURN_IF_ERROR(argmax(p.y, p.rows, p.ids));
      mark(p.name, "argmax");
      return Status::ok();
  }
  return Status::invalid_argument("project: unknown epilogue");
}

Status DeviceKernels::after_row_parallel_linear(void* y, int64_t rows, int64_t width) {
  return tp_.world > 1 ? tp_.all_reduce(y, y, rows * width) : Status::ok();
}

StatusOr<int64_t> DeviceKernels::free_memory_bytes() {
  return Status::unsupported("this device does not report its free memory");
}

Status DeviceKernels::sample(const void* logits, int64_t rows, const SamplingRow* params, int32_t* out) {
  const int64_t V = config_.vocab_size;
  std::vector<SamplingRow> host_params(static_cast<size_t>(rows));
  TUNABLEOP_RETURN_IF_ERROR(download(host_params.data(), params, host_params.size() * sizeof(SamplingRow)));
  std::vector<float> row(static_cast<size_t>(V));
  std::vector<uint16_t> raw(dtype() == DType::kF32 ? 0 : size_t(V));
  std::vector<int32_t> next(static_cast<size_t>(rows));
  const size_t esize = dtype_size(dtype());
  for (int64_t r = 0; r < rows; ++r) {
    const char* src = static_cast<const char*>(logits) + size_t(r * V) * esize;
    if (dtype() == DType::kF32) {
      TUNABLEOP_RETURN_IF_ERROR(download(row.data(), src, size_t(V) * 4));
    } else {
      TUNABLEOP_RETURN_IF_ERROR(download(raw.data(), src, size_t(V) * 2));
      for (size_t i = 0; i < raw.size(); ++i)
        row[i] = dtype() == DType::kBF16 ? to_float(bf16{raw[i]}) : to_float(fp16{raw[i]});
    }
    auto t = sample_row(row, host_params[size_t(r)]);
    if (!t.is_ok()) return t.status();
    next[size_t(r)] = *t;
  }
  return upload(out, next.data(), next.size() * sizeof(int32_t));
}

Status DeviceKernels::run_decode_step(int64_t, LinearOp&, const std::function<Status()>& step, bool) { return step(); }

Status DeviceKernels::run_prefill(const Pass&, LinearOp&, const std::function<Status()>& pass) { return pass(); }

Status DeviceKernels::run_decode_step_ahead(int64_t batch, LinearOp& linear, const std::function<Status()>& step,
                                            const std::function<Status()>& advance, int) {
  return run_decode_step(batch, linear, [&]() -> Status {
    TUNABLEOP_RETURN_IF_ERROR(step());
    return advance();
  });
}

Status DeviceKernels::advance_decode(const int32_t* next, int32_t* ids, int32_t* positions, int32_t* lens,
                                     int64_t batch, int32_t* host_next) {
  const size_t n = size_t(batch), bytes = n * sizeof(int32_t);
  std::vector<int32_t> tok(n), pos(n), len(n);
  TUNABLEOP_RETURN_IF_ERROR(download(tok.data(), next, bytes));
  TUNABLEOP_RETURN_IF_ERROR(download(pos.data(), positions, bytes));
  TUNABLEOP_RETURN_IF_ERROR(download(len.data(), lens, bytes));
  for (size_t b = 0; b < n; ++b) ++pos[b], ++len[b];
  if (host_next) std::copy(tok.begin(), tok.end(), host_next);
  TUNABLEOP_RETURN_IF_ERROR(upload(ids, tok.data(), bytes));
  TUNABLEOP_RETURN_IF_ERROR(upload(positions, pos.data(), bytes));
  TUNABLEOP_RETURN_IF_ERROR(upload(lens, len.data(), bytes));
  int32_t sink = 0;
  return download(&sink, ids, sizeof(sink));  // a device with asynchronous uploads: done before the vectors go
}

Status DeviceKernels::download_async(void* dst, const void* src, size_t bytes, int) {
  return bytes ? download(dst, src, bytes) : Status::ok();
}

Status DeviceKernels::wait_download(int) { return Status::ok(); }

Status DeviceKernels::begin_profile() {
  profiling_ = true;
  spans_.clear();
  last_mark_s_ = now_s();
  return Status::ok();
}

void DeviceKernels::record_mark(std::string label, int64_t bytes, bool matmul, double flops) {
  const double t = now_s();
  spans_.push_back({std::move(label), (t - last_mark_s_) * 1e3, bytes, matmul, flops});
  last_mark_s_ = t;
}

StatusOr<std::vector<ProfileSpan>> DeviceKernels::end_profile() {
  profiling_ = false;
  return std::move(spans_);
}

StatusOr<double> DeviceKernels::copy_bandwidth_gbps() {
  return Status::unsupported(name() + " does not measure its copy bandwidth");
}

}  // namespace tunableop::llm
