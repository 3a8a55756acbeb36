// `tunableop bench --suite attention`: the Attention op on the shapes of issue 12 (Llama-2-7B:
// 32 heads, d128; Gemma-2B: 8 heads over 1 kv head, d256; prefill at 512, 2048 and 8192 tokens,
// decode against 1k, 4k and 16k caches, contiguous and paged), each tuned into a fresh results
// file, then every candidate timed the way the tuner times (bench_measure.h). Per shape: Default
// (the math path), the tuned choice, the best single candidate, TFLOP/s (prefill) or the share
// of the KV-bytes floor (decode: K and V read once at the measured copy bandwidth), tuning time;
// and where the device replays graphs (CUDA), the chosen candidate replayed from a CUDA graph of
// one call per input copy: how the engine's decode graph runs it, and how sdpa_bench.py times
// PyTorch's SDPA (the tuner's back-to-back loop also pays each call's launch).
// `--shapes-csv FILE` writes the shapes for bench/attention/sdpa_bench.py (PyTorch's SDPA on the
// same shapes, timed in the same device call by bench/lab/gpu-attention2.sh).
#include "bench_attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "bench_measure.h"
#include "cli_support.h"
#include "tunableop/attention.h"
#include "tunableop/op_tools.h"
#include "tunableop/safe_file.h"

namespace tunableop::cli {

namespace {

struct AttentionShape {
  std::string name;
  AttentionParams p;
};

AttentionParams shape(DType dt, int64_t b, int64_t q, int64_t k, int64_t h, int64_t kvh, int64_t d, int64_t page = 0) {
  AttentionParams p;
  p.dtype = dt, p.causal = true, p.batch = b, p.q_len = q, p.kv_len = k;
  p.heads = h, p.kv_heads = kvh, p.head_dim = d, p.page_size = page;
  return p.with_defaults();
}

std::vector<AttentionShape> attention_shapes(DeviceKind kind) {
  std::vector<AttentionShape> v;
  if (kind == DeviceKind::kCpu) {  // fp32, the built-in tiny models' heads (minutes, not hours, on a CPU)
    for (int64_t t : {128, 512}) v.push_back({fmt::format("tiny.prefill{}", t), shape(DType::kF32, 1, t, t, 8, 2, 64)});
    for (int64_t c : {1024, 4096})
      v.push_back({fmt::format("tiny.decode{}", c), shape(DType::kF32, 1, 1, c, 8, 2, 64)});
    v.push_back({"tiny.decode4096.paged64", shape(DType::kF32, 1, 1, 4096, 8, 2, 64, 64)});
    v.push_back({"tiny-gemma.prefill512", shape(DType::kF32, 1, 512, 512, 4, 1, 128)});
    return v;
  }
  const DType bf = DType::kBF16;
  for (int64_t t : {512, 2048, 8192})
    v.push_back({fmt::format("llama2-7b.prefill{}", t), shape(bf, 1, t, t, 32, 32, 128)});
  for (int64_t t : {512, 2048, 8192})
    v.push_back({fmt::format("gemma-2b.prefill{}", t), shape(bf, 1, t, t, 8, 1, 256)});
  for (int64_t c : {1024, 4096, 16384})
    v.push_back({fmt::format("llama2-7b.decode{}", c), shape(bf, 1, 1, c, 32, 32, 128)});
  for (int64_t c : {4096, 16384})
    v.push_back({fmt::format("llama2-7b.decode{}.paged64", c), shape(bf, 1, 1, c, 32, 32, 128, 64)});
  for (int64_t c : {1024, 4096, 16384})
    v.push_back({fmt::format("gemma-2b.decode{}", c), shape(bf, 1, 1, c, 8, 1, 256)});
  v.push_back({"gemma-2b.decode16384.paged64", shape(bf, 1, 1, 16384, 8, 1, 256, 64)});
  v.push_back({"llama2-7b.decode4096.b8", shape(bf, 8, 1, 4096, 32, 32, 128)});
  return v;
}

bool is_decode(const AttentionParams& p) { return p.q_len <= 16; }

// The time per call of candidate `name` on p, replayed from a graph of at least 32 calls cycling
// through input copies that together hold at least four times the last-level cache (at most 8
// copies), so no call finds operands another left in it, and the gap between two graph launches
// is spread over many calls: as sdpa_bench.py times PyTorch and attention_lab our kernels, and as
// the engine's decode graph runs. Before 2026-11-24 (stage 11) this was one call per copy and
// copies spanning twice the cache: a 4k-token Llama decode (two 67 MB copies, 60 MB of L2)
// carried half a launch gap per call.
StatusOr<double> replay_ms_per_call(Context& ctx, const AttentionParams& p, const std::string& name, void* stream) {
  const DeviceRuntime* rt = ctx.runtime();
  if (!rt || !rt->replay_ms) return Status::unsupported("this device has no graph replay");
  auto cands = OpTools<AttentionOp>::candidates(ctx, p, ctx.options().policy.search_effort);
  const AttentionCandidate* c = nullptr;
  for (const auto& cand : cands)
    if (cand.name == name) c = &cand;
  if (!c) return Status::unsupported(name + " is not a candidate here");
  const size_t set_bytes = size_t(p.q_span() + 2 * p.kv_span() + p.o_span()) * dtype_size(p.dtype) + 1;
  const size_t copies = std::clamp<size_t>((4 * rt->last_level_cache_bytes() + set_bytes - 1) / set_bytes, 1, 8);
  std::vector<std::unique_ptr<RandomOperands<AttentionOp>>> sets;
  for (size_t i = 0; i < copies; ++i) {
    auto b = RandomOperands<AttentionOp>::make(ctx, p, 11 + i, stream);
    if (!b.is_ok()) return b.status();
    sets.push_back(std::move(*b));
  }
  const size_t ws_bytes = c->workspace_bytes ? c->workspace_bytes(p) : 0;
  void* ws = nullptr;
  if (ws_bytes) {
    auto m = rt->alloc(ws_bytes);
    if (!m.is_ok()) return m.status();
    ws = *m;
  }
  const size_t rounds = (32 + copies - 1) / copies;
  auto body = [&](size_t n) -> Status {
    for (size_t r = 0; r < n; ++r) {
      for (const auto& set : sets) {
        AttentionOperands o = set->operands();
        o.stream = stream, o.workspace = ws, o.workspace_bytes = ws_bytes;
        TUNABLEOP_RETURN_IF_ERROR(c->run(p, o));
      }
    }
    return Status::ok();
  };
  // One round outside the capture first: plans, counters and scratch are made there.
  Status st = body(1);
  if (st.is_ok()) st = rt->synchronize(stream);
  StatusOr<double> ms = st.is_ok() ? rt->replay_ms([&] { return body(rounds); }, stream) : StatusOr<double>(st);
  if (ws) rt->free(ws);
  if (!ms.is_ok()) return ms.status();
  return *ms / double(copies * rounds);
}

}  // namespace

int bench_attention_suite(Context& ctx, const AttentionSuiteArgs& a, void* stream) {
  auto fail = [](const Status& st) {
    fmt::print(stderr, "tunableop bench: {}\n", st.to_string());
    return 2;
  };
  std::vector<AttentionShape> shapes;
  for (auto& s : attention_shapes(ctx.device().kind))
    if (a.only.empty() || s.name.find(a.only) != std::string::npos) shapes.push_back(s);
  if (shapes.empty()) return fail(Status::invalid_argument("no attention shape matches --only " + printable(a.only)));
  // Outputs are checked before any work: a FIFO, a directory or a device is refused, not written.
  for (const std::string* out : {&a.shapes_csv, &a.csv}) {
    if (out->empty()) continue;
    if (Status st = check_replaceable(*out); !st.is_ok()) return fail(st);
  }
  if (!a.shapes_csv.empty()) {
    std::string out = "name,batch,q_len,kv_len,heads,kv_heads,head_dim,causal,page_size\n";
    for (const auto& s : shapes)
      out += fmt::format("{},{},{},{},{},{},{},{},{}\n", s.name, s.p.batch, s.p.q_len, s.p.kv_len, s.p.heads,
                         s.p.kv_heads, s.p.head_dim, s.p.causal ? 1 : 0, s.p.page_size);
    if (Status st = replace_regular_file(a.shapes_csv, out); !st.is_ok()) return fail(st);
  }
  const std::string temp = tune_into_results(ctx, a.results);
  auto ceil = measure_ceilings(ctx, shapes.front().p.dtype, stream);
  if (!ceil.is_ok()) return fail(ceil.status());
  fmt::print("# device: {}; copy {:.1f} GB/s (read + write); GEMM {:.1f} TFLOP/s ({} by {})\n",
             ctx.device().to_string(), ceil->copy_gbs, ceil->gemm_gflops / 1e3, ceil->gemm_shape, ceil->gemm_solution);
  fmt::print(
      "| shape | signature | Default ms | tuned ms | chosen | speedup | TFLOP/s | % KV-bytes floor | best single | "
      "tuning s | chosen, graph ms | graph: TFLOP/s or % floor |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::string csv =
      "shape,params,default_ms,tuned_ms,chosen,best_ms,best_name,tflops,pct_kv_floor,tuning_ms,graph_ms,graph_tflops,"
      "graph_pct_kv_floor\n";
  for (const auto& s : shapes) {
    auto rep = OpTools<AttentionOp>::tune(ctx, s.p, /*retune=*/true, stream);
    if (!rep.is_ok()) return fail(rep.status());
    const std::string chosen = rep->winner.solution;
    const bool cpu = ctx.device().kind == DeviceKind::kCpu;
    auto t = measure_op_candidates<AttentionOp>(ctx, s.p, a.rounds, cpu ? 40 : 5, stream);
    if (!t.is_ok()) return fail(t.status());
    double def = 0, tuned = 0, best = 0;
    std::string best_name;
    for (const auto& ct : *t) {
      if (ct.median_ms <= 0) continue;
      if (ct.name == "Default") def = ct.median_ms;
      if (ct.name == chosen) tuned = ct.median_ms;
      if (best == 0 || ct.median_ms < best) best = ct.median_ms, best_name = ct.name;
    }
    const double tflops = tuned > 0 ? s.p.flops() / (tuned * 1e-3) / 1e12 : 0;
    // Decode's floor: K and V read once at the device's memory bandwidth (the copy's bytes read
    // plus written per second).
    const double kv_floor_ms = s.p.kv_bytes() / (ceil->copy_gbs * 1e9) * 1e3;
    const double pct = tuned > 0 ? 100 * kv_floor_ms / tuned : 0;
    // Skipped quietly where the device has no graphs; a candidate that cannot be captured says why.
    double graph = 0;
    std::string graph_cell = "-";
    if (ctx.runtime() && ctx.runtime()->replay_ms) {
      auto g = replay_ms_per_call(ctx, s.p, chosen, stream);
      if (g.is_ok() && *g > 0) {
        graph = *g;
        graph_cell = is_decode(s.p) ? fmt::format("{:.0f}%", 100 * kv_floor_ms / graph)
                                    : fmt::format("{:.1f}", s.p.flops() / (graph * 1e-3) / 1e12);
      } else if (!g.is_ok()) {
        graph_cell = "not captured: " + g.status().message();
      }
    }
    fmt::print("| {} | {} | {:.4f} | {:.4f} | {} | {:.2f}x | {:.1f} | {} | {:.4f} ({}) | {:.2f} | {} | {} |\n", s.name,
               attention_params_signature(s.p), def, tuned, chosen, tuned > 0 ? def / tuned : 0, tflops,
               is_decode(s.p) ? fmt::format("{:.0f}%", pct) : "-", best, best_name, rep->winner.tuning_ms / 1e3,
               graph > 0 ? fmt::format("{:.4f}", graph) : "-", graph_cell);
    std::fflush(stdout);
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}\n", s.name, attention_params_signature(s.p), def, tuned,
                       chosen, best, best_name, tflops, pct, rep->winner.tuning_ms, graph,
                       graph > 0 ? s.p.flops() / (graph * 1e-3) / 1e12 : 0, graph > 0 ? 100 * kv_floor_ms / graph : 0);
    // Written after every shape (replaced whole, never half-written): a shape that fails later
    // keeps the rows before it.
    if (!a.csv.empty()) {
      if (Status st = replace_regular_file(a.csv, csv); !st.is_ok()) return fail(st);
    }
  }
  if (!temp.empty()) {
    remove_temp_results(temp);
    return 0;
  }
  return report_unsaved(ctx, "bench") ? 1 : 0;
}

}  // namespace tunableop::cli
