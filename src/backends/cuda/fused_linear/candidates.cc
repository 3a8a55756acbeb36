#include "backends/cuda/fused_linear/candidates.h"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <utility>

#include "backends/cuda/common/cuda_util.h"
#include "backends/cuda/fused_linear/fused_gemv.h"
#include "tunableop/fused_linear.h"

namespace tunableop::cuda {

namespace {

GemvOut out_kind(FusedOutput o) {
  switch (o) {
    case FusedOutput::kStore: return GemvOut::kStore;
    case FusedOutput::kAddResidual: return GemvOut::kAddResidual;
    case FusedOutput::kArgmax: return GemvOut::kArgmax;
    case FusedOutput::kStoreF32: return GemvOut::kStoreF32;
    default: return GemvOut::kGated;
  }
}

GatedAct act_of(FusedOutput o) {
  return o == FusedOutput::kGatedGeluTanh  ? GatedAct::kGeluTanh
         : o == FusedOutput::kGatedGeluErf ? GatedAct::kGeluErf
                                           : GatedAct::kSilu;
}

// The argmax's keys and block counter: zero before each launch, and each launch's last block
// leaves them zero. One per (device, stream), since launches on one stream never overlap;
// allocated and zeroed at first use (a graph capture follows an eager first call), never freed
// (512 bytes, and freeing after the CUDA runtime shut down is not safe).
StatusOr<unsigned long long*> argmax_scratch(void* stream) {
  static std::mutex mu;
  static std::map<std::pair<int, void*>, void*> buffers;
  int dev = 0;
  TUNABLEOP_CUDA_TRY(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  void*& p = buffers[{dev, stream}];
  if (!p) {
    TUNABLEOP_CUDA_TRY(cudaMalloc(&p, 64 * sizeof(unsigned long long)));
    // On the stream its kernels run on: cudaMemset runs on the legacy stream, which does not order
    // a non-blocking stream's next kernel after it.
    TUNABLEOP_CUDA_TRY(cudaMemsetAsync(p, 0, 64 * sizeof(unsigned long long), static_cast<cudaStream_t>(stream)));
  }
  return static_cast<unsigned long long*>(p);
}

bool pdl_capable() {
  auto info = current_device_info();
  return info.is_ok() && info->cc_major >= 9;
}

// The RoPE epilogue pairs rows: a shape of one row per group runs as two (the same k split).
FusedGemvShape rope_shape(FusedGemvShape s) {
  if (s.rows == 1) s.rows = 2;
  return s;
}

Status run_shape(FusedGemvShape s, const FusedLinearParams& p, const FusedLinearOperands& o) {
  if (o.rows > 0) s = FusedGemvShape{o.rows, o.k_split};  // the caller's shape for this call
  FusedGemvArgs a;
  a.e = p.dtype == DType::kF32 ? Elem::kF32 : Elem::kBF16;
  a.in_kind = p.norm() ? GemvIn::kNorm : GemvIn::kInput;
  a.out_kind = out_kind(p.output);
  a.w = o.w;
  a.m = p.out;
  a.k = p.in;
  a.n = int(p.tokens);
  a.input = o.input;
  a.x = o.x;
  a.norm_w = o.norm;
  a.eps = float(p.eps);
  a.add_one = p.input == FusedInput::kRmsNormPlusOne;
  a.y = o.y;
  a.residual = o.residual;
  a.gated = o.gated;
  a.act = act_of(p.output);
  a.ids = o.ids;
  if (o.rope) {
    if (p.output != FusedOutput::kStore || !p.norm())
      return Status::unsupported("FusedLinear: RoPE applies to a stored output with a normalised input (qkv)");
    const FusedLinearRope& r = *o.rope;
    a.out_kind = GemvOut::kRope;
    a.rope.n_heads = r.n_heads;
    a.rope.n_kv_heads = r.n_kv_heads;
    a.rope.head_dim = r.head_dim;
    a.rope.seqs = r.seqs;
    a.rope.positions = r.positions;
    a.rope.cos = r.cos;
    a.rope.sin = r.sin;
    a.rope.k_cache = r.k_cache;
    a.rope.v_cache = r.v_cache;
    a.rope.max_seq = r.max_seq;
    a.rope.block_table = r.block_table;
    a.rope.page_size = r.page_size;
    a.rope.pages_per_seq = r.pages_per_seq;
    a.rope.seq_lens = r.seq_lens;
    s = r.rows > 0 ? FusedGemvShape{r.rows, r.k_split} : rope_shape(s);
  }
  if (a.out_kind == GemvOut::kArgmax) {
    auto keys = argmax_scratch(o.stream);
    if (!keys.is_ok()) return keys.status();
    a.keys = *keys;
    a.counter = reinterpret_cast<unsigned*>(*keys + 32);
  }
  a.pdl = o.pdl > 0 && pdl_capable();
  a.pdl_late = o.pdl == 2;
  for (int i = 0; i < 2; ++i) {
    a.prefetch[i] = o.prefetch[i];
    a.prefetch_bytes[i] = o.prefetch[i] ? o.prefetch_bytes[i] : 0;
  }
  if (const char* why = fused_gemv_unsupported(a, s)) return Status::unsupported(fmt::format("FusedLinear: {}", why));
  return cuda_status(fused_gemv(a, s, static_cast<cudaStream_t>(o.stream)), "FusedLinear kernel launch");
}

FusedLinearCandidate make(const std::string& name, FusedGemvShape s) {
  FusedLinearCandidate c;
  c.name = name;
  c.device = DeviceKind::kCuda;
  c.info.library = "tunableop";
  c.info.algorithm = "fused gemv";
  c.info.add("rows", std::to_string(s.rows)).add("k_split", std::to_string(s.k_split));
  c.supports = [s, name](const FusedLinearParams& p) -> Status {
    TUNABLEOP_RETURN_IF_ERROR(p.validate());
    if (!fused_gemv_offered(out_kind(p.output), s)) return Status::unsupported(name + ": not a shape for this output");
    return Status::ok();
  };
  c.run = [s](const FusedLinearParams& p, const FusedLinearOperands& o) { return run_shape(s, p, o); };
  return c;
}

}  // namespace

void register_cuda_fused_linear(Registry& r) {
  auto& list = r.list<FusedLinearCandidate>();
  list.push_back(make("Default", {2, 1}));  // offered for every output kind
  std::vector<std::pair<int, int>> seen;
  for (GemvOut out : {GemvOut::kStore, GemvOut::kGated}) {
    const FusedGemvShape* shapes = nullptr;
    const int count = fused_gemv_shapes(out, &shapes);
    for (int i = 0; i < count; ++i) {
      const std::pair<int, int> key{shapes[i].rows, shapes[i].k_split};
      bool dup = false;
      for (const auto& k : seen) dup = dup || k == key;
      if (dup) continue;
      seen.push_back(key);
      list.push_back(make(fmt::format("FusedLinear_r{}_sk{}", key.first, key.second), shapes[i]));
    }
  }
}

}  // namespace tunableop::cuda
