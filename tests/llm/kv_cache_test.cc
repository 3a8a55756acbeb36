// The paged KV cache's bookkeeping on host memory: pages handed out as sequences grow, only the
// new block-table entries uploaded, pages taken back when a sequence ends and reused in the
// order they came back, the pool's limits named in errors, and the memory it reports.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "llm/kv_cache.h"

namespace tunableop::llm {
namespace {

Buffer host(size_t bytes) {
  return Buffer(std::calloc(1, bytes), bytes, [](void* p) { std::free(p); });
}

struct Upload {
  int32_t* dst;
  std::vector<int32_t> values;
};

struct Paged {
  std::vector<Upload> uploads;
  std::unique_ptr<PagedKvCache> cache;
  Paged(int64_t pages, int64_t max_batch = 3, int64_t max_seq = 40) {
    PagedKvCache::Geometry g;
    g.n_kv_heads = 2, g.head_dim = 8, g.page_size = 16, g.pages = pages, g.layers = 3;
    g.max_batch = max_batch, g.max_seq = max_seq, g.elem_bytes = 2;
    const size_t table = size_t(max_batch * g.pages_per_seq()) * 4;
    cache = std::make_unique<PagedKvCache>(g, host(PagedKvCache::pool_bytes(g)), host(PagedKvCache::pool_bytes(g)),
                                           host(table), host(table), [this](void* dst, const void* src, size_t bytes) {
                                             const auto* s = static_cast<const int32_t*>(src);
                                             uploads.push_back({static_cast<int32_t*>(dst), {s, s + bytes / 4}});
                                             std::memcpy(dst, src, bytes);
                                             return Status::ok();
                                           });
  }
  int32_t entry(int64_t seq, int64_t j) const { return cache->block_table()[seq * 3 + j]; }
};

TEST(PagedKvCache, HandsOutPagesAsSequencesGrowAndTakesThemBack) {
  Paged p(9);
  EXPECT_EQ(PagedKvCache::pool_bytes(p.cache->geometry()), size_t(3 * 9 * 2 * 16 * 8 * 2));
  ASSERT_TRUE(p.cache->reserve(0, 17).is_ok());  // 2 pages
  ASSERT_TRUE(p.cache->reserve(1, 5).is_ok());   // 1 page
  EXPECT_EQ(p.cache->pages_held(0), 2);
  EXPECT_EQ(p.cache->pages_held(1), 1);
  EXPECT_EQ(p.cache->free_pages(), 6);
  ASSERT_EQ(p.uploads.size(), 2u);
  EXPECT_EQ(p.uploads[0].values, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(p.uploads[1].values, (std::vector<int32_t>{2}));
  // Growing inside a page uploads nothing; crossing into the next uploads that entry alone.
  ASSERT_TRUE(p.cache->reserve(1, 16).is_ok());
  EXPECT_EQ(p.uploads.size(), 2u);
  ASSERT_TRUE(p.cache->reserve(1, 17).is_ok());
  ASSERT_EQ(p.uploads.size(), 3u);
  EXPECT_EQ(p.uploads[2].values, (std::vector<int32_t>{3}));
  EXPECT_EQ(p.entry(1, 1), 3);
  const KvCacheStats s = p.cache->stats();
  const int64_t page_bytes = 2 * 3 * 2 * 16 * 8 * 2;  // K and V, 3 layers
  EXPECT_EQ(s.in_use, 4 * page_bytes);
  EXPECT_EQ(s.bytes_per_position * 16, page_bytes);
  EXPECT_EQ(s.allocated, 9 * page_bytes);
  EXPECT_EQ(s.static_bytes, 3 * 40 * s.bytes_per_position);

  // Sequence 0 ends: its pages come back and go to the next sequence that needs some first, so
  // a sequence's pages need not be neighbours in memory (here 0, 1, then 4: 2 and 3 are held).
  p.cache->release(0);
  EXPECT_EQ(p.cache->free_pages(), 7);
  ASSERT_TRUE(p.cache->reserve(2, 40).is_ok());  // 3 pages
  EXPECT_EQ(p.entry(2, 0), 0);
  EXPECT_EQ(p.entry(2, 1), 1);
  EXPECT_EQ(p.entry(2, 2), 4);
  EXPECT_EQ(p.cache->stats().peak_in_use, 5 * page_bytes);
  EXPECT_EQ(p.cache->stats().in_use, 5 * page_bytes);
}

TEST(PagedKvCache, LimitsAreErrorsThatSayWhat) {
  Paged p(3);
  Status st = p.cache->reserve(0, 41);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("41 positions"), std::string::npos) << st.message();
  EXPECT_FALSE(p.cache->reserve(3, 1).is_ok());  // outside the batch
  EXPECT_FALSE(p.cache->reserve(-1, 1).is_ok());
  ASSERT_TRUE(p.cache->reserve(0, 33).is_ok());  // 3 pages: the whole pool
  st = p.cache->reserve(1, 1);
  EXPECT_NE(st.message().find("out of pages"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("0 of 3 are free"), std::string::npos) << st.message();
  EXPECT_EQ(p.cache->pages_held(1), 0) << "a failed reserve takes nothing";
  p.cache->release(0);
  EXPECT_TRUE(p.cache->reserve(1, 1).is_ok());
}

TEST(KvCacheOptions, Validate) {
  KvCacheOptions o;
  EXPECT_TRUE(o.validate().is_ok());
  o.kind = KvCacheKind::kPaged;
  EXPECT_TRUE(o.validate().is_ok());
  o.page_size = 0;
  EXPECT_FALSE(o.validate().is_ok());
  o.page_size = 4097;
  EXPECT_FALSE(o.validate().is_ok());
  o.page_size = 16, o.pages = -1;
  EXPECT_FALSE(o.validate().is_ok());
  EXPECT_STREQ(kv_cache_kind_name(KvCacheKind::kPaged), "paged");
}

}  // namespace
}  // namespace tunableop::llm
