// The decode candidates (Attn_DecodeOneLaunch_*, Attn_DecodeCluster_*, Attn_DecodeStream_*) beyond the all-candidates
// check of flash_attention_test.cc: their support rules, and that a captured CUDA graph replays
// them correctly again and again (the one-launch kernel's last block of each kv head and the
// split cluster kernel's last block of each (kv head, rank) reset their ticket counters: a
// counter left non-zero would make the next replay combine too early or never; the cluster
// kernel of one split and the streaming kernel keep nothing between launches, but the streaming
// kernel's ring barriers must start each launch afresh).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/attention/decode_candidates.h"
#include "backends/cuda/attention/decode_cluster_candidates.h"
#include "backends/cuda/attention/decode_cluster_launch.h"
#include "backends/cuda/attention/decode_stream_candidates.h"
#include "backends/cuda/attention/decode_stream_launch.h"
#include "backends/cuda/cuda_testing.h"
#include "support/attention_testing.h"

namespace tunableop {
namespace {

using testing::DeviceBuffer;
using testing::HostAttention;

AttentionParams decode_params(int64_t head_dim) {
  AttentionParams p;
  p.dtype = DType::kBF16, p.batch = 1, p.q_len = 1, p.kv_len = 256, p.heads = 8, p.kv_heads = 1;
  p.head_dim = head_dim;
  return p.with_defaults();
}

TEST(DecodeOneLaunch, SupportRules) {
  const auto cands = cuda::decode_attention_candidates();
  ASSERT_FALSE(cands.empty());
  for (size_t i = 0; i < cands.size(); ++i) {
    EXPECT_EQ(cands[i].name.rfind("Attn_DecodeOneLaunch_w", 0), 0u) << cands[i].name;
    for (size_t j = i + 1; j < cands.size(); ++j) EXPECT_NE(cands[i].name, cands[j].name);
  }
  // Query rows per kv head: up to 32 at d64, 16 at d128, 8 at d256.
  for (auto [d, max_rows] : {std::pair{64, 32}, {128, 16}, {256, 8}}) {
    AttentionParams ok = decode_params(d);
    ok.heads = max_rows, ok.q_row_stride = 0, ok.o_row_stride = 0;
    ok = ok.with_defaults();
    AttentionParams too_many = ok;
    too_many.q_len = 2;
    for (const auto& c : cands) {
      EXPECT_TRUE(c.supports(ok).is_ok()) << c.name << " d" << d;
      EXPECT_TRUE(c.supports(too_many).is_unsupported()) << c.name << " d" << d;
    }
  }
  AttentionParams p = decode_params(128);
  p.dtype = DType::kF32;
  for (const auto& c : cands) EXPECT_TRUE(c.supports(p).is_unsupported()) << c.name;
  p = decode_params(96);
  for (const auto& c : cands) EXPECT_TRUE(c.supports(p).is_unsupported()) << c.name;
  p = decode_params(128);
  p.kv_len = 3;  // fewer than 2 keys per split for every split count above 1
  for (const auto& c : cands)
    EXPECT_EQ(c.supports(p).is_ok(), c.name.size() > 4 && c.name.substr(c.name.size() - 4) == "_sp1") << c.name;
}

// Eager run, then the same run captured once and replayed: every replay must match the eager
// output bit for bit (and the reference). Lengths read on the device change between replays,
// as the engine's decode graph sees them grow.
void check_graph_replay(const std::vector<AttentionCandidate>& cands, const AttentionParams& shape, uint64_t seed) {
  HostAttention h = testing::make_attention_problem(shape, seed);
  ASSERT_TRUE(h.p.var_kv_len);
  auto upload = [](const void* src, size_t bytes) {
    DeviceBuffer d(bytes);
    EXPECT_EQ(cudaMemcpy(d.data(), src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return d;
  };
  DeviceBuffer q = upload(h.q.data(), h.q.size()), k = upload(h.k.data(), h.k.size());
  DeviceBuffer v = upload(h.v.data(), h.v.size());
  DeviceBuffer lens = upload(h.kv_lens.data(), h.kv_lens.size() * sizeof(int32_t));
  DeviceBuffer table;
  if (h.p.paged()) table = upload(h.block_table.data(), h.block_table.size() * sizeof(int32_t));
  DeviceBuffer out(h.out.size());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the uploads (legacy stream) are done
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  AttentionOperands o;
  o.q = q.data(), o.k = k.data(), o.v = v.data(), o.out = out.data(), o.stream = stream;
  o.kv_lens = reinterpret_cast<const int32_t*>(lens.data());
  o.block_table = h.p.paged() ? reinterpret_cast<const int32_t*>(table.data()) : nullptr;
  auto read_out = [&] {
    std::vector<uint8_t> host(h.out.size());
    EXPECT_EQ(cudaMemcpy(host.data(), out.data(), host.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  };
  int ran = 0;
  for (const auto& c : cands) {
    if (!c.supports(h.p).is_ok()) continue;
    ++ran;
    SCOPED_TRACE(c.name + " " + testing::describe(h.p));
    // Shorter lengths first (the eager run and the capture), then the real ones for the replays.
    std::vector<int32_t> shorter = h.kv_lens;
    for (auto& n : shorter) n = std::max(1, n / 2);
    // Copies and fills on `stream` itself (non-blocking: it does not wait for the legacy stream).
    ASSERT_EQ(
        cudaMemcpyAsync(lens.data(), shorter.data(), shorter.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream),
        cudaSuccess);
    ASSERT_TRUE(c.run(h.p, o).is_ok());
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(lens.data(), h.kv_lens.data(), shorter.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                              stream),
              cudaSuccess);
    ASSERT_TRUE(c.run(h.p, o).is_ok());
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const std::vector<uint8_t> eager = read_out();
    EXPECT_TRUE(testing::attention_output_ok(h, eager));

    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    const Status st = c.run(h.p, o);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int rep = 0; rep < 3; ++rep) {
      ASSERT_EQ(cudaMemsetAsync(out.data(), 0xFF, out.size(), stream), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      EXPECT_TRUE(read_out() == eager) << "replay " << rep << " differs from the eager run";
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  EXPECT_GT(ran, 0) << "no candidate took " << testing::describe(h.p);
  cudaStreamDestroy(stream);
}

// Gemma-2B's decode: 8 heads on one kv head, q read from the fused qkv row, a static cache
// longer than the longest sequence.
AttentionParams gemma_decode_for_replay() {
  AttentionParams p;
  p.batch = 2, p.q_len = 1, p.kv_len = 251, p.max_seq = 256, p.heads = 8, p.kv_heads = 1, p.head_dim = 256;
  p.var_kv_len = true, p.q_row_stride = 10 * 256;
  return p;
}

TEST(DecodeOneLaunch, GraphReplaysMatchTheEagerRun) {
  TUNABLEOP_REQUIRE_GPU();
  const auto cands = cuda::decode_attention_candidates();
  check_graph_replay(cands, gemma_decode_for_replay(), 7);
  // GQA 4, fp16, pages of 16 out of order.
  AttentionParams paged;
  paged.dtype = DType::kF16, paged.batch = 3, paged.q_len = 1, paged.kv_len = 300, paged.heads = 16;
  paged.kv_heads = 4, paged.head_dim = 128, paged.page_size = 16, paged.var_kv_len = true;
  check_graph_replay(cands, paged, 8);
}

TEST(DecodeCluster, SupportRules) {
  const auto cands = cuda::decode_cluster_candidates();
  ASSERT_FALSE(cands.empty());
  for (size_t i = 0; i < cands.size(); ++i) {
    EXPECT_EQ(cands[i].name.rfind("Attn_DecodeCluster_c", 0), 0u) << cands[i].name;
    for (size_t j = i + 1; j < cands.size(); ++j) EXPECT_NE(cands[i].name, cands[j].name);
  }
  // Without an sm_90 device (CI) every problem is refused as unsupported, never an error.
  const bool device = cuda::decode_cluster_available();
  auto splits_of = [](const std::string& name) {
    const size_t at = name.find("_sp");
    return at == std::string::npos ? 1 : std::stoi(name.substr(at + 3));
  };
  for (int d : {64, 128, 256}) {
    AttentionParams ok = decode_params(d);  // 8 rows on one kv head
    ok.kv_len = ok.max_seq = 2048;          // 128 tiles of 16 keys: 2 per split for up to 64 splits
    AttentionParams too_many = ok;
    too_many.q_len = 2;  // 16 rows
    for (const auto& c : cands) {
      ASSERT_LE(splits_of(c.name), 64) << c.name;
      EXPECT_EQ(c.supports(ok).is_ok(), device) << c.name << " d" << d;
      if (!device) {
        EXPECT_TRUE(c.supports(ok).is_unsupported()) << c.name;
      }
      EXPECT_TRUE(c.supports(too_many).is_unsupported()) << c.name << " d" << d;
      // Split candidates (`_sp<S>`) keep their clusters' partials in the workspace.
      const bool split = c.name.find("_sp") != std::string::npos;
      EXPECT_EQ(c.workspace_bytes(ok) > 0, split) << c.name;
    }
  }
  // Split candidates want at least 2 key tiles of 16 per split.
  AttentionParams short_cache = decode_params(128);
  short_cache.kv_len = 63;  // 4 tiles: 2 splits at most
  for (const auto& c : cands) EXPECT_EQ(c.supports(short_cache).is_ok(), device && splits_of(c.name) <= 2) << c.name;
  AttentionParams p = decode_params(128);
  p.dtype = DType::kF32;
  for (const auto& c : cands) EXPECT_TRUE(c.supports(p).is_unsupported()) << c.name;
  p = decode_params(96);
  for (const auto& c : cands) EXPECT_TRUE(c.supports(p).is_unsupported()) << c.name;
}

TEST(DecodeCluster, GraphReplaysMatchTheEagerRun) {
  TUNABLEOP_REQUIRE_GPU();
  if (!cuda::decode_cluster_available()) GTEST_SKIP() << "thread-block clusters need an sm_90 device";
  const auto cands = cuda::decode_cluster_candidates();
  check_graph_replay(cands, gemma_decode_for_replay(), 9);
  // Llama-2-7B's decode (32 kv heads, one row each), fp16, pages of 16 out of order.
  AttentionParams paged;
  paged.dtype = DType::kF16, paged.batch = 2, paged.q_len = 1, paged.kv_len = 300, paged.heads = 32;
  paged.kv_heads = 32, paged.head_dim = 128, paged.page_size = 16, paged.var_kv_len = true;
  check_graph_replay(cands, paged, 10);
  // Gemma-2B against a long cache (every split count: 2 x 64 tiles of 16 keys), ragged lengths
  // (the replays' lengths are twice the eager run's).
  AttentionParams long_cache = gemma_decode_for_replay();
  long_cache.kv_len = 4200, long_cache.max_seq = 4224;
  check_graph_replay(cands, long_cache, 11);
}

// One sequence's decode: q_len queries on heads / kv_heads query heads per kv head, a contiguous cache.
AttentionParams stream_params(int64_t head_dim, int64_t heads, int64_t kv_heads, int64_t kv_len, int64_t q_len = 1) {
  AttentionParams p;
  p.dtype = DType::kBF16, p.batch = 1, p.q_len = q_len, p.kv_len = kv_len, p.heads = heads, p.kv_heads = kv_heads;
  p.head_dim = head_dim;
  return p.with_defaults();
}

// The configuration a streaming candidate's name spells: Attn_DecodeStream_c<C>_k<K>_s<S>_w<W>[_sp<P>].
cuda::DecodeStreamConfig stream_config(const std::string& name) {
  auto field = [&](const char* tag) { return std::stoi(name.substr(name.find(tag) + std::strlen(tag))); };
  cuda::DecodeStreamConfig c;
  c.cluster = field("_c"), c.keys = field("_k"), c.stages = field("_s"), c.warps = field("_w");
  c.splits = name.find("_sp") == std::string::npos ? 1 : field("_sp");
  return c;
}

TEST(DecodeStream, SupportRules) {
  const auto cands = cuda::decode_stream_candidates();
  ASSERT_FALSE(cands.empty());
  for (size_t i = 0; i < cands.size(); ++i) {
    EXPECT_EQ(cands[i].name.rfind("Attn_DecodeStream_c", 0), 0u) << cands[i].name;
    for (size_t j = i + 1; j < cands.size(); ++j) EXPECT_NE(cands[i].name, cands[j].name);
  }
  // Without an sm_90 device (CI) every problem is refused as unsupported, never an error.
  const bool device = cuda::decode_cluster_available();
  for (int d : {64, 128, 256}) {
    const AttentionParams ok = stream_params(d, 32, 32, 4096);  // Llama-2-7B's: one row per kv head
    for (const auto& c : cands) {
      // A ring of more than 227 KB (the deep ones at d256) is refused as unsupported too.
      const bool fits = cuda::decode_stream_smem_bytes(stream_config(c.name), d, 1, 2) <= 227 * 1024;
      EXPECT_EQ(c.supports(ok).is_ok(), device && fits) << c.name << " d" << d;
      if (!device || !fits) {
        EXPECT_TRUE(c.supports(ok).is_unsupported()) << c.name;
      }
      // Several clusters per kv head keep their partials in the workspace.
      EXPECT_EQ(c.workspace_bytes(ok) > 0, stream_config(c.name).splits > 1) << c.name;
    }
    // Rows (q_len x group) in registers: at most 4, and at most 512 row dims.
    const AttentionParams four = stream_params(d, 64, 16, 4096);  // group 4
    for (const auto& c : cands) {                                 // d256: 1024 row dims (d64, d128: every ring fits)
      EXPECT_EQ(c.supports(four).is_ok(), device && d <= 128) << c.name << " d" << d;
      if (d == 256) {
        EXPECT_TRUE(c.supports(four).is_unsupported()) << c.name;
      }
    }
    const AttentionParams eight = stream_params(d, 64, 16, 4096, 2);  // 8 rows
    for (const auto& c : cands) EXPECT_TRUE(c.supports(eight).is_unsupported()) << c.name << " d" << d;
  }
  // Every block of the kv head's clusters wants at least one chunk of keys.
  const AttentionParams short_cache = stream_params(128, 8, 8, 100);  // 4 chunks of 32
  for (const auto& c : cands) {
    const cuda::DecodeStreamConfig config = stream_config(c.name);
    const bool enough = (100 + config.keys - 1) / config.keys >= config.cluster * config.splits;
    EXPECT_EQ(c.supports(short_cache).is_ok(), device && enough) << c.name;
  }
  AttentionParams p = stream_params(128, 8, 8, 4096);
  p.dtype = DType::kF32;
  for (const auto& c : cands) EXPECT_TRUE(c.supports(p).is_unsupported()) << c.name;
  p = stream_params(96, 8, 8, 4096);
  for (const auto& c : cands) EXPECT_TRUE(c.supports(p).is_unsupported()) << c.name;
}

TEST(DecodeStream, GraphReplaysMatchTheEagerRun) {
  TUNABLEOP_REQUIRE_GPU();
  if (!cuda::decode_cluster_available()) GTEST_SKIP() << "bulk copies and clusters need an sm_90 device";
  const auto cands = cuda::decode_stream_candidates();
  // Llama-2-7B's decode: one row per kv head, q from the fused qkv row, a static cache longer
  // than the longest sequence, a tail chunk shorter than the rest.
  AttentionParams llama;
  llama.batch = 2, llama.q_len = 1, llama.kv_len = 1000, llama.max_seq = 1040, llama.heads = 32;
  llama.kv_heads = 32, llama.head_dim = 128, llama.var_kv_len = true, llama.q_row_stride = 3 * 32 * 128;
  check_graph_replay(cands, llama, 12);
  // fp16, two queries on GQA 2 (4 rows), pages of 16 out of order: a chunk is several copies.
  AttentionParams paged;
  paged.dtype = DType::kF16, paged.batch = 3, paged.q_len = 2, paged.kv_len = 700, paged.heads = 8;
  paged.kv_heads = 4, paged.head_dim = 128, paged.page_size = 16, paged.var_kv_len = true;
  check_graph_replay(cands, paged, 13);
  // d256 with two rows (GQA 2), pages of 64; d64 with one row, pages of 256.
  AttentionParams wide;
  wide.batch = 2, wide.q_len = 1, wide.kv_len = 1500, wide.heads = 4, wide.kv_heads = 2, wide.head_dim = 256;
  wide.page_size = 64, wide.var_kv_len = true;
  check_graph_replay(cands, wide, 14);
  AttentionParams narrow;
  narrow.batch = 2, narrow.q_len = 1, narrow.kv_len = 3000, narrow.heads = 4, narrow.kv_heads = 4;
  narrow.head_dim = 64, narrow.page_size = 256, narrow.var_kv_len = true;
  check_graph_replay(cands, narrow, 15);
}

}  // namespace
}  // namespace tunableop
