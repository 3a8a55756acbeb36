// Not a correctness test (disabled by default; run with --gtest_also_run_disabled_tests
// --gtest_filter='DecodeTiming.*'): where the time of a decode call goes, for a few candidates on
// the suite's long-cache decode shapes. Per candidate, three ways of timing the same calls over
// rotating input copies larger than the L2:
//   eager  - calls queued back to back (what the tuner and `bench --suite attention` time);
//   graph  - the same calls captured once into a CUDA graph and replayed (no host launch cost);
//   single - one call at a time, the stream synchronised after each (the latency of one call).
// eager >> graph says the host (launch, dispatch) sets the pace; single - graph is what one call
// waits for that back-to-back calls overlap. TUNABLEOP_DECODE_TIMING_ONLY=<name>[,<name>...]
// picks the candidates (default: a fixed list below).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cuda/attention/candidates.h"
#include "backends/cuda/cuda_testing.h"
#include "support/attention_testing.h"

namespace tunableop {
namespace {

using testing::DeviceBuffer;

AttentionParams shape(int64_t kv, int64_t heads, int64_t kv_heads, int64_t d, int64_t page = 0) {
  AttentionParams p;
  p.dtype = DType::kBF16, p.batch = 1, p.q_len = 1, p.kv_len = kv, p.heads = heads, p.kv_heads = kv_heads;
  p.head_dim = d, p.page_size = page;
  return p;
}

TEST(DecodeTiming, DISABLED_LongCacheDecode) {
  TUNABLEOP_REQUIRE_GPU();
  const char* env = std::getenv("TUNABLEOP_DECODE_TIMING_ONLY");
  const std::string only = std::string(",") +
                           (env ? env
                                : "Attn_DecodeCluster_c8_w4_sp16,Attn_DecodeCluster_c16_w2_sp16_s2,"
                                  "Attn_DecodeCluster_c16_w4,Attn_SplitKv_q64_k64_w4_s2_sp64,"
                                  "Attn_SplitKv_q64_k64_w4_s3_sp8,Attn_DecodeOneLaunch_w8_sp8,"
                                  "Attn_DecodeCluster_c2_w4_sp2_s2") +
                           ",";
  const auto cands = cuda::cuda_attention_candidates();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t e0, e1;
  ASSERT_EQ(cudaEventCreate(&e0), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&e1), cudaSuccess);
  for (const AttentionParams& s :
       {shape(16384, 8, 1, 256), shape(4096, 8, 1, 256), shape(16384, 8, 1, 256, 64), shape(4096, 32, 32, 128)}) {
    testing::HostAttention h = testing::make_attention_problem(s, 5);
    constexpr int kCopies = 6;  // Gemma 16k: 6 x 16.8 MB, past the 50 MB L2
    std::vector<DeviceBuffer> q, k, v;
    for (int c = 0; c < kCopies; ++c) {
      q.emplace_back(h.q.size()), k.emplace_back(h.k.size()), v.emplace_back(h.v.size());
      ASSERT_EQ(cudaMemcpy(q.back().data(), h.q.data(), h.q.size(), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(k.back().data(), h.k.data(), h.k.size(), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(v.back().data(), h.v.data(), h.v.size(), cudaMemcpyHostToDevice), cudaSuccess);
    }
    DeviceBuffer table;
    if (h.p.paged()) {
      table = DeviceBuffer(h.block_table.size() * sizeof(int32_t));
      ASSERT_EQ(cudaMemcpy(table.data(), h.block_table.data(), table.size(), cudaMemcpyHostToDevice), cudaSuccess);
    }
    DeviceBuffer out(h.out.size());
    for (const auto& c : cands) {
      if (only.find("," + c.name + ",") == std::string::npos || !c.supports(h.p).is_ok()) continue;
      DeviceBuffer ws(std::max<size_t>(c.workspace_bytes ? c.workspace_bytes(h.p) : 0, 16));
      auto ops = [&](int i) {
        AttentionOperands o;
        o.q = q[size_t(i % kCopies)].data(), o.k = k[size_t(i % kCopies)].data();
        o.v = v[size_t(i % kCopies)].data(), o.out = out.data(), o.stream = stream;
        o.block_table = h.p.paged() ? reinterpret_cast<const int32_t*>(table.data()) : nullptr;
        o.workspace = ws.data(), o.workspace_bytes = ws.size();
        return o;
      };
      for (int i = 0; i < 8; ++i) ASSERT_TRUE(c.run(h.p, ops(i)).is_ok()) << c.name;  // warm: plans, tickets
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      constexpr int kCalls = 120;
      float ms = 0;
      // eager
      ASSERT_EQ(cudaEventRecord(e0, stream), cudaSuccess);
      for (int i = 0; i < kCalls; ++i) (void)c.run(h.p, ops(i));
      ASSERT_EQ(cudaEventRecord(e1, stream), cudaSuccess);
      ASSERT_EQ(cudaEventSynchronize(e1), cudaSuccess);
      ASSERT_EQ(cudaEventElapsedTime(&ms, e0, e1), cudaSuccess);
      const double eager_us = 1e3 * ms / kCalls;
      // graph
      double graph_us = -1;
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
        bool ok = true;
        for (int i = 0; i < kCalls; ++i) ok = ok && c.run(h.p, ops(i)).is_ok();
        if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && ok &&
            cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
          (void)cudaGraphLaunch(exec, stream);  // upload
          ASSERT_EQ(cudaEventRecord(e0, stream), cudaSuccess);
          for (int rep = 0; rep < 3; ++rep) (void)cudaGraphLaunch(exec, stream);
          ASSERT_EQ(cudaEventRecord(e1, stream), cudaSuccess);
          ASSERT_EQ(cudaEventSynchronize(e1), cudaSuccess);
          ASSERT_EQ(cudaEventElapsedTime(&ms, e0, e1), cudaSuccess);
          graph_us = 1e3 * ms / (3 * kCalls);
        }
        if (exec) cudaGraphExecDestroy(exec);
        if (graph) cudaGraphDestroy(graph);
        (void)cudaGetLastError();
      }
      // single
      std::vector<double> one;
      for (int i = 0; i < 40; ++i) {
        ASSERT_EQ(cudaEventRecord(e0, stream), cudaSuccess);
        (void)c.run(h.p, ops(i));
        ASSERT_EQ(cudaEventRecord(e1, stream), cudaSuccess);
        ASSERT_EQ(cudaEventSynchronize(e1), cudaSuccess);
        ASSERT_EQ(cudaEventElapsedTime(&ms, e0, e1), cudaSuccess);
        one.push_back(1e3 * ms);
      }
      std::sort(one.begin(), one.end());
      std::printf("timing %-34s %-40s eager %6.1f us  graph %6.1f us  single %6.1f us\n",
                  testing::describe(h.p).substr(testing::describe(h.p).find(',') + 1).c_str(), c.name.c_str(), eager_us,
                  graph_us, one[one.size() / 2]);
      std::fflush(stdout);
    }
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace tunableop
