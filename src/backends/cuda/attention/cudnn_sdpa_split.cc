// See cudnn_sdpa_split.h.
#include "backends/cuda/attention/cudnn_sdpa_split.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <map>

#include "backends/cuda/attention/attention_merge.h"
#include "backends/cuda/attention/cudnn_sdpa.h"
#include "backends/cuda/attention/workspace.h"
#include "backends/cuda/common/cuda_util.h"

namespace tunableop::cuda {

namespace {

constexpr int64_t kMinQueries = 512;  // below, the parts' launches cost more than balance saves
constexpr size_t kAlign = 256;

size_t round_up(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

struct Parts {
  AttentionParams a, c, b;  // see the header
  int64_t h = 0, rest = 0;  // rows of A; rows of C and B
};

Parts parts_of(const AttentionParams& p) {
  Parts s;
  s.h = cudnn_sdpa_split_row(p.q_len), s.rest = p.q_len - s.h;
  s.a = p, s.a.q_len = s.a.kv_len = s.h;
  s.c = p, s.c.q_len = s.c.kv_len = s.rest;
  s.b = p, s.b.causal = false, s.b.q_len = s.rest, s.b.kv_len = s.h;
  s.b.o_row_stride = p.heads * p.head_dim;  // the scratch rows
  return s;
}

// Byte offsets into the workspace: the three plans' workspaces (the calls run at once), B's
// output rows and both log-sum-exps.
struct Layout {
  size_t ws_a = 0, ws_c = 0, ws_b = 0, part = 0, lse_c = 0, lse_b = 0, total = 0;
};

StatusOr<Layout> layout_of(const AttentionParams& p, const Parts& s) {
  auto wa = cudnn_sdpa_workspace(s.a, false);
  if (!wa.is_ok()) return wa.status();
  auto wc = cudnn_sdpa_workspace(s.c, true);
  if (!wc.is_ok()) return wc.status();
  auto wb = cudnn_sdpa_workspace(s.b, true);
  if (!wb.is_ok()) return wb.status();
  Layout l;
  l.ws_c = l.ws_a + round_up(*wa);
  l.ws_b = l.ws_c + round_up(*wc);
  l.part = l.ws_b + round_up(*wb);
  l.lse_c = l.part + round_up(size_t(s.rest * p.heads * p.head_dim) * dtype_size(p.dtype));
  l.lse_b = l.lse_c + round_up(size_t(s.rest * p.heads) * sizeof(float));
  l.total = l.lse_b + round_up(size_t(s.rest * p.heads) * sizeof(float));
  return l;
}

Status supports(const AttentionParams& p) {
  TUNABLEOP_RETURN_IF_ERROR(p.validate());
  if (!p.causal) return Status::unsupported("causal attention only (the split balances the causal triangle)");
  if (p.batch != 1) return Status::unsupported("one sequence only");
  if (p.q_len != p.kv_len) return Status::unsupported("a prefill without a cached prefix only (q_len == kv_len)");
  if (p.q_len < kMinQueries) return Status::unsupported(fmt::format("{} queries or more", kMinQueries));
  return cudnn_sdpa_supports(p);
}

// Two side streams and the events that fork them from the caller's stream and join them back,
// per (thread, device), made on first use and kept for the process (a captured graph records
// the fork and join as its edges). Never destroyed: a thread's exit may come after the runtime's.
struct SideStreams {
  cudaStream_t side[2] = {};
  cudaEvent_t fork = nullptr, join[2] = {};
};

StatusOr<SideStreams*> side_streams() {
  thread_local std::map<int, SideStreams> per_device;
  int dev = 0;
  TUNABLEOP_CUDA_TRY(cudaGetDevice(&dev));
  auto it = per_device.find(dev);
  if (it != per_device.end()) return &it->second;
  SideStreams s;
  for (auto& st : s.side) TUNABLEOP_CUDA_TRY(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  TUNABLEOP_CUDA_TRY(cudaEventCreateWithFlags(&s.fork, cudaEventDisableTiming));
  for (auto& e : s.join) TUNABLEOP_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return &per_device.emplace(dev, s).first->second;
}

// The parts and the workspace layout of the last problem run on this thread and device: a
// tuner loop repeats one, and working them out asks cuDNN's plan cache three times.
struct Prepared {
  int dev = -1;
  AttentionParams p;
  Parts s;
  Layout lay;
};

StatusOr<const Prepared*> prepare(const AttentionParams& p) {
  thread_local Prepared last;
  int dev = 0;
  TUNABLEOP_CUDA_TRY(cudaGetDevice(&dev));
  if (last.dev == dev && last.p == p) return &last;
  TUNABLEOP_RETURN_IF_ERROR(supports(p));
  Parts s = parts_of(p);
  auto lay = layout_of(p, s);
  if (!lay.is_ok()) return lay.status();
  last.dev = dev, last.p = p, last.s = s, last.lay = *lay;
  return &last;
}

Status run(const AttentionParams& p, const AttentionOperands& o) {
  auto prep = prepare(p);
  if (!prep.is_ok()) return prep.status();
  const Parts& s = (*prep)->s;
  const Layout& lay = (*prep)->lay;
  auto ws_or = operand_workspace(o, lay.total);
  if (!ws_or.is_ok()) return ws_or.status();
  auto* ws = static_cast<char*>(*ws_or);
  auto sides_or = side_streams();
  if (!sides_or.is_ok()) return sides_or.status();
  const SideStreams& sides = **sides_or;
  auto main = static_cast<cudaStream_t>(o.stream);

  const size_t elem = dtype_size(p.dtype);
  const auto* q = static_cast<const char*>(o.q);
  const auto* k = static_cast<const char*>(o.k);
  const auto* v = static_cast<const char*>(o.v);
  auto* out = static_cast<char*>(o.out);
  const size_t q_off = size_t(s.h * p.q_row_stride) * elem, o_off = size_t(s.h * p.o_row_stride) * elem;
  const size_t kv_off = size_t(s.h * p.head_dim) * elem;  // h positions into each kv head's rows
  auto* lse_c = reinterpret_cast<float*>(ws + lay.lse_c);
  auto* lse_b = reinterpret_cast<float*>(ws + lay.lse_b);

  TUNABLEOP_CUDA_TRY(cudaEventRecord(sides.fork, main));
  TUNABLEOP_CUDA_TRY(cudaStreamWaitEvent(sides.side[0], sides.fork, 0));
  TUNABLEOP_CUDA_TRY(cudaStreamWaitEvent(sides.side[1], sides.fork, 0));
  // B first: its tiles all read h keys, the longest, so they should take SMs first.
  Status st = cudnn_sdpa_run(s.b, CudnnSdpaCall{q + q_off, k, v, ws + lay.part, lse_b, ws + lay.ws_b, sides.side[0]});
  if (st.is_ok())
    st = cudnn_sdpa_run(
        s.c, CudnnSdpaCall{q + q_off, k + kv_off, v + kv_off, out + o_off, lse_c, ws + lay.ws_c, sides.side[1]});
  if (st.is_ok()) st = cudnn_sdpa_run(s.a, CudnnSdpaCall{q, k, v, out, nullptr, ws + lay.ws_a, main});
  // The side streams join back even after a failure: a capture in progress must not be left
  // with dangling forks.
  for (int i = 0; i < 2; ++i) {
    const cudaError_t rec = cudaEventRecord(sides.join[i], sides.side[i]);
    const cudaError_t wait = rec == cudaSuccess ? cudaStreamWaitEvent(main, sides.join[i], 0) : rec;
    if (st.is_ok() && wait != cudaSuccess) st = cuda_status(wait, "joining the split's side stream");
  }
  TUNABLEOP_RETURN_IF_ERROR(st);
  AttentionMergeArgs m;
  m.bf16 = p.dtype == DType::kBF16;
  m.rows = s.rest, m.heads = p.heads, m.head_dim = p.head_dim;
  m.out = out + o_off, m.out_row_stride = p.o_row_stride;
  m.part = ws + lay.part, m.part_row_stride = s.b.o_row_stride;
  m.lse_out = lse_c, m.lse_part = lse_b;
  TUNABLEOP_CUDA_TRY(attention_merge(m, main));
  return Status::ok();
}

}  // namespace

int64_t cudnn_sdpa_split_row(int64_t q_len) {
  const int64_t half = (q_len + 1) / 2;
  return std::min<int64_t>((half + 63) / 64 * 64, q_len - 1);
}

std::vector<AttentionCandidate> cudnn_sdpa_split_candidates() {
  AttentionCandidate c;
  c.name = "Attn_Cudnn_SdpaSplit";
  c.device = DeviceKind::kCuda;
  c.info = CandidateInfo{"cuDNN", "sdpa", {}};
  c.info.add("split", "rows");
  c.supports = supports;
  c.workspace_bytes = [](const AttentionParams& p) -> size_t {
    if (!supports(p).is_ok()) return 0;
    auto lay = layout_of(p, parts_of(p));
    return lay.is_ok() ? lay->total : 0;
  };
  c.run = run;
  return {c};
}

}  // namespace tunableop::cuda
