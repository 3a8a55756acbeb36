// Attention kernel lab (the llm.c way: every CUDA candidate on the shapes, timed with
// events, checked against each other): prefill of Llama-2-7B (32 heads, d128) and Gemma-2B
// (8 heads, 1 kv head, d256) at 512/2048/8192 tokens, decode against 1k/4k/16k caches
// (contiguous and paged), batch 1 and 8, and against short caches (130 and 251 positions).
//
//   attention_lab [--only SUBSTR] [--cands SUBSTR[,SUBSTR...]] [--csv FILE] [--list] [--samples N]
//
// Besides the event-timed loop (what the tuner measures: a candidate whose host work per call
// exceeds its GPU time is host-bound there), each candidate's host time per call and its GPU time
// replayed from a CUDA graph of one call per input copy (what the engine's prefill and decode
// graphs run) are printed.
//
// Per shape and candidate: median time per call over `samples` event-timed batches, TFLOP/s
// (causal: visible keys only, about half the square) and KV-bytes bandwidth (decode's floor:
// every visible key and value read once) against the device-to-device copy bandwidth measured
// at start. Inputs rotate through copies larger than the L2 so no run reads a warm cache.
// Every candidate's output is compared with the first one's (the tests hold each to the fp64
// reference; here a large difference flags a broken run).
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/attention/candidates.h"
#include "backends/cuda/runtime.h"
#include "ops/attention/params.h"
#include "tunableop/half.h"

namespace {

using tunableop::AttentionCandidate;
using tunableop::AttentionOperands;
using tunableop::AttentionParams;
using tunableop::DType;

#define CK(expr)                                                                                 \
  do {                                                                                           \
    cudaError_t _e = (expr);                                                                     \
    if (_e != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(_e)); \
      std::exit(2);                                                                              \
    }                                                                                            \
  } while (0)

struct Shape {
  std::string name;
  AttentionParams p;
};

AttentionParams make(int64_t b, int64_t q, int64_t k, int64_t h, int64_t kvh, int64_t d, int64_t page = 0) {
  AttentionParams p;
  p.dtype = DType::kBF16, p.causal = true, p.batch = b, p.q_len = q, p.kv_len = k;
  p.heads = h, p.kv_heads = kvh, p.head_dim = d, p.page_size = page;
  return p.with_defaults();
}

std::vector<Shape> shapes() {
  std::vector<Shape> v;
  for (int64_t t : {512, 2048, 8192}) v.push_back({fmt::format("llama2-7b.prefill{}", t), make(1, t, t, 32, 32, 128)});
  for (int64_t t : {512, 2048, 8192}) v.push_back({fmt::format("gemma-2b.prefill{}", t), make(1, t, t, 8, 1, 256)});
  // The parts Attn_Cudnn_SdpaSplit makes of Gemma's 2048-token prefill: the causal halves and
  // the rows past the split against the keys before it (not causal); and the square unmasked.
  v.push_back({"gemma-2b.part-causal1024", make(1, 1024, 1024, 8, 1, 256)});
  for (int64_t t : {1024, 2048}) {
    AttentionParams full = make(1, t, t, 8, 1, 256);
    full.causal = false;
    v.push_back({fmt::format("gemma-2b.part-full{}", t), full});
  }
  for (int64_t c : {1024, 4096, 16384}) v.push_back({fmt::format("llama2-7b.decode{}", c), make(1, 1, c, 32, 32, 128)});
  for (int64_t c : {4096, 16384})
    v.push_back({fmt::format("llama2-7b.decode{}.paged64", c), make(1, 1, c, 32, 32, 128, 64)});
  for (int64_t page : {16, 256})
    v.push_back({fmt::format("llama2-7b.decode16384.paged{}", page), make(1, 1, 16384, 32, 32, 128, page)});
  v.push_back({"llama2-7b.decode4096.b8", make(8, 1, 4096, 32, 32, 128)});
  for (int64_t c : {1024, 4096, 16384}) v.push_back({fmt::format("gemma-2b.decode{}", c), make(1, 1, c, 8, 1, 256)});
  v.push_back({"gemma-2b.decode16384.paged64", make(1, 1, 16384, 8, 1, 256, 64)});
  v.push_back({"gemma-2b.decode4096.b8", make(8, 1, 4096, 8, 1, 256)});
  // Short caches (the middle and the end of a 256-token decode benchmark): latency, not bytes.
  for (int64_t c : {32, 130, 251}) {
    v.push_back({fmt::format("gemma-2b.short-decode{}", c), make(1, 1, c, 8, 1, 256)});
    v.push_back({fmt::format("llama2-7b.short-decode{}", c), make(1, 1, c, 32, 32, 128)});
  }
  return v;
}

float bf16_to_float(uint16_t bits) { return tunableop::to_float(tunableop::bf16{bits}); }

// Device buffer filled with random bf16 in [-1, 1] (a random block tiled over the buffer).
void* random_buffer(size_t elems, std::mt19937_64& rng) {
  void* d = nullptr;
  CK(cudaMalloc(&d, std::max<size_t>(elems, 1) * 2));
  const size_t block = std::min<size_t>(elems, size_t(1) << 22);
  std::vector<uint16_t> host(block);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  for (auto& x : host) x = tunableop::to_bf16(uni(rng)).bits;
  for (size_t off = 0; off < elems; off += block)
    CK(cudaMemcpy(static_cast<uint16_t*>(d) + off, host.data(), std::min(block, elems - off) * 2,
                  cudaMemcpyHostToDevice));
  return d;
}

// Device-to-device copy bandwidth (bytes read + written per second), the decode ceiling.
double copy_bandwidth() {
  const size_t bytes = size_t(1) << 30;
  void *a = nullptr, *b = nullptr;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMemset(a, 1, bytes));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < 7; ++i) {
    CK(cudaEventRecord(e0));
    CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float t = 0;
    CK(cudaEventElapsedTime(&t, e0, e1));
    if (i > 0) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  CK(cudaFree(a));
  CK(cudaFree(b));
  return 2.0 * double(bytes) / (ms[ms.size() / 2] * 1e-3);
}

struct Result {
  std::string shape, cand;
  double ms = 0, tflops = 0, gbps = 0, pct_bw = 0, diff = 0, first_ms = 0;
  double host_us = 0;   // host time per call in the timed loop
  double graph_ms = 0;  // per call, replayed from a CUDA graph (0: the capture failed)
};

// GPU time per call with the host out of the way: `calls` calls captured once, the graph
// replayed (the runtime's replay, as `bench --suite attention` times it); 0 where the candidate
// cannot be captured.
double graph_ms_per_call(const AttentionCandidate& c, const AttentionParams& p, int calls,
                         const std::function<AttentionOperands(int)>& ops, cudaStream_t stream) {
  auto ms = tunableop::cuda::replay_graph_ms(
      [&]() -> tunableop::Status {
        for (int i = 0; i < calls; ++i) TUNABLEOP_RETURN_IF_ERROR(c.run(p, ops(i)));
        return tunableop::Status::ok();
      },
      stream);
  return ms.is_ok() ? *ms / calls : 0;
}

double rel_diff(const std::vector<uint16_t>& a, const std::vector<uint16_t>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = bf16_to_float(a[i]), y = bf16_to_float(ref[i]);
    if (!std::isfinite(x)) return INFINITY;
    num += (x - y) * (x - y);
    den += y * y;
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

std::vector<Result> run_shape(const Shape& s, const std::vector<AttentionCandidate>& cands, double bw, int samples,
                              size_t l2_bytes, const std::string& wanted) {
  const AttentionParams& p = s.p;
  std::mt19937_64 rng(42);
  const size_t q_el = size_t(p.q_span()), kv_el = size_t(p.kv_span()), o_el = size_t(p.o_span());
  const size_t set_bytes = (q_el + 2 * kv_el) * 2;
  const int copies = int(std::clamp<size_t>((4 * l2_bytes + set_bytes - 1) / set_bytes, 1, 8));
  std::vector<void*> qs, ks, vs;
  for (int c = 0; c < copies; ++c) {
    qs.push_back(random_buffer(q_el, rng));
    ks.push_back(random_buffer(kv_el, rng));
    vs.push_back(random_buffer(kv_el, rng));
  }
  void* out = nullptr;
  CK(cudaMalloc(&out, o_el * 2));
  int32_t* table = nullptr;
  if (p.paged()) {  // every sequence's pages shuffled through the pool
    std::vector<int32_t> t(size_t(p.batch * p.pages_per_seq));
    std::iota(t.begin(), t.end(), 0);
    std::shuffle(t.begin(), t.end(), rng);
    CK(cudaMalloc(&table, t.size() * sizeof(int32_t)));
    CK(cudaMemcpy(table, t.data(), t.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  }
  cudaStream_t stream;
  CK(cudaStreamCreate(&stream));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  void* ws = nullptr;
  size_t ws_bytes = 0;

  std::vector<Result> results;
  std::vector<uint16_t> first_out, cur(o_el);
  for (const auto& c : cands) {
    if (!c.supports(p).is_ok()) continue;
    if (!wanted.empty()) {  // comma-separated substrings of the names to run
      bool hit = false;
      for (size_t at = 0; at <= wanted.size();) {
        const size_t end = std::min(wanted.find(',', at), wanted.size());
        hit = hit || (end > at && c.name.find(wanted.substr(at, end - at)) != std::string::npos);
        at = end + 1;
      }
      if (!hit) continue;
    }
    const size_t need = c.workspace_bytes ? c.workspace_bytes(p) : 0;
    if (need > ws_bytes) {
      if (ws) CK(cudaFree(ws));
      CK(cudaMalloc(&ws, need));
      ws_bytes = need;
    }
    auto ops = [&](int r) {
      AttentionOperands o;
      o.q = qs[size_t(r % copies)], o.k = ks[size_t(r % copies)], o.v = vs[size_t(r % copies)], o.out = out;
      o.block_table = table, o.stream = stream, o.workspace = ws, o.workspace_bytes = ws_bytes;
      return o;
    };
    CK(cudaMemsetAsync(out, 0xFF, o_el * 2, stream));
    CK(cudaEventRecord(e0, stream));
    tunableop::Status st = c.run(p, ops(0));  // first call: includes any plan building
    CK(cudaEventRecord(e1, stream));
    if (!st.is_ok()) {
      std::fprintf(stderr, "  %-44s refused: %s\n", c.name.c_str(), st.to_string().c_str());
      CK(cudaStreamSynchronize(stream));
      continue;
    }
    CK(cudaStreamSynchronize(stream));
    CK(cudaGetLastError());
    Result r;
    r.shape = s.name, r.cand = c.name;
    float first = 0;
    CK(cudaEventElapsedTime(&first, e0, e1));
    r.first_ms = first;
    CK(cudaMemcpy(cur.data(), out, o_el * 2, cudaMemcpyDeviceToHost));
    if (first_out.empty()) first_out = cur;
    r.diff = rel_diff(cur, first_out);
    // Calls per sample: about 5 ms of work, at least one.
    float est = 0;
    CK(cudaEventRecord(e0, stream));
    for (int i = 0; i < 3; ++i) (void)c.run(p, ops(i + 1));
    CK(cudaEventRecord(e1, stream));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&est, e0, e1));
    const int reps = std::clamp(int(5.0 / std::max(est / 3.0, 1e-3)), 1, 2000);
    std::vector<double> per_call, host_per_call;
    for (int smp = 0; smp < samples; ++smp) {
      CK(cudaEventRecord(e0, stream));
      const auto h0 = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) (void)c.run(p, ops(smp * reps + i));
      host_per_call.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - h0).count() /
                              reps);
      CK(cudaEventRecord(e1, stream));
      CK(cudaEventSynchronize(e1));
      float t = 0;
      CK(cudaEventElapsedTime(&t, e0, e1));
      per_call.push_back(double(t) / reps);
    }
    CK(cudaGetLastError());
    std::sort(per_call.begin(), per_call.end());
    r.ms = per_call[per_call.size() / 2];
    std::sort(host_per_call.begin(), host_per_call.end());
    r.host_us = host_per_call[host_per_call.size() / 2];
    r.graph_ms = graph_ms_per_call(c, p, copies, ops, stream);
    r.tflops = p.flops() / (r.ms * 1e-3) / 1e12;
    r.gbps = p.kv_bytes() / (r.ms * 1e-3) / 1e9;
    r.pct_bw = 100.0 * p.kv_bytes() / (r.ms * 1e-3) / bw;
    std::fprintf(
        stderr,
        "  %-44s %9.4f ms %7.1f TFLOP/s %7.0f GB/s (%5.1f%% of copy bw) diff %.1e first %.1f ms; host %.1f us/call; "
        "graph %.4f ms (%.1f TFLOP/s)\n",
        c.name.c_str(), r.ms, r.tflops, r.gbps, r.pct_bw, r.diff, r.first_ms, r.host_us, r.graph_ms,
        r.graph_ms > 0 ? p.flops() / (r.graph_ms * 1e-3) / 1e12 : 0.0);
    results.push_back(r);
  }
  for (int c = 0; c < copies; ++c) {
    CK(cudaFree(qs[size_t(c)]));
    CK(cudaFree(ks[size_t(c)]));
    CK(cudaFree(vs[size_t(c)]));
  }
  CK(cudaFree(out));
  if (table) CK(cudaFree(table));
  if (ws) CK(cudaFree(ws));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaStreamDestroy(stream));
  return results;
}

}  // namespace

int main(int argc, char** argv) {
  std::string only, csv_path, wanted;
  bool list = false;
  int samples = 7;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--cands" && i + 1 < argc) {
      wanted = argv[++i];
    } else if (a == "--csv" && i + 1 < argc) {
      csv_path = argv[++i];
    } else if (a == "--samples" && i + 1 < argc) {
      samples = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--list") {
      list = true;
    } else {
      std::fprintf(stderr,
                   "usage: attention_lab [--only SUBSTR] [--cands SUBSTR,...] [--csv FILE] [--samples N] [--list]\n");
      return 1;
    }
  }
  if (list) {  // the shapes, for the PyTorch side of the comparison
    std::printf("name,batch,q_len,kv_len,heads,kv_heads,head_dim,causal,page_size\n");
    for (const auto& s : shapes())
      std::printf("%s,%lld,%lld,%lld,%lld,%lld,%lld,%d,%lld\n", s.name.c_str(), (long long)s.p.batch,
                  (long long)s.p.q_len, (long long)s.p.kv_len, (long long)s.p.heads, (long long)s.p.kv_heads,
                  (long long)s.p.head_dim, s.p.causal ? 1 : 0, (long long)s.p.page_size);
    return 0;
  }
  int dev_count = 0;
  if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count == 0) {
    std::fprintf(stderr, "attention_lab: no CUDA GPU\n");
    return 3;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const double bw = copy_bandwidth();
  std::fprintf(stderr, "%s, %d SMs, L2 %d MB; copy bandwidth %.0f GB/s (read + write)\n", prop.name,
               prop.multiProcessorCount, prop.l2CacheSize >> 20, bw / 1e9);
  for (const auto& n : tunableop::cuda::cuda_attention_notes()) std::fprintf(stderr, "%s\n", n.c_str());
  const auto cands = tunableop::cuda::cuda_attention_candidates();

  std::FILE* csv = csv_path.empty() ? nullptr : std::fopen(csv_path.c_str(), "w");
  if (csv) std::fprintf(csv, "shape,candidate,ms,tflops,kv_gbps,pct_copy_bw,rel_diff,first_call_ms,host_us,graph_ms\n");
  std::printf("| shape | best candidate | ms | TFLOP/s | KV GB/s | %% copy bw | best Attn_Flash | ms |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const auto& s : shapes()) {
    if (!only.empty() && s.name.find(only) == std::string::npos) continue;
    std::fprintf(stderr, "%s (%s,%s)\n", s.name.c_str(), tunableop::attention_op_signature(s.p).c_str(),
                 tunableop::attention_params_signature(s.p).c_str());
    auto res = run_shape(s, cands, bw, samples, size_t(prop.l2CacheSize), wanted);
    if (res.empty()) continue;
    const Result* best = nullptr;
    const Result* flash = nullptr;
    for (const auto& r : res) {
      if (csv)
        std::fprintf(csv, "%s,%s,%.6f,%.2f,%.1f,%.2f,%.3e,%.3f,%.2f,%.6f\n", r.shape.c_str(), r.cand.c_str(), r.ms,
                     r.tflops, r.gbps, r.pct_bw, r.diff, r.first_ms, r.host_us, r.graph_ms);
      if (r.diff > 2e-2) continue;  // a disagreeing output never counts as best
      if (!best || r.ms < best->ms) best = &r;
      if (r.cand.rfind("Attn_Cudnn", 0) != 0 && (!flash || r.ms < flash->ms)) flash = &r;
    }
    if (best)
      std::printf("| %s | %s | %.4f | %.1f | %.0f | %.1f | %s | %.4f |\n", s.name.c_str(), best->cand.c_str(), best->ms,
                  best->tflops, best->gbps, best->pct_bw, flash ? flash->cand.c_str() : "-", flash ? flash->ms : 0.0);
    std::fflush(stdout);
  }
  if (csv) std::fclose(csv);
  return 0;
}
