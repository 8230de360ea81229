// Page bookkeeping of the paged KV cache.
#include <gtest/gtest.h>

#include "hal/error.h"
#include "model/kv_cache.h"
#include "test_util.h"

namespace msa::model {
namespace {

TEST(ModelKvCache, PagesExactlyAsNeeded) {
  auto dev = testing::cpu_ref();
  const Config c = preset_config("tiny");  // Bs = 64
  KvCache kv(*dev, c, hal::DType::bf16, hal::DType::bf16, 6);
  const size_t page = 2 * 64 * 64 * 2;                      // Hkv * Bs * D * bf16
  EXPECT_EQ(kv.bytes(), 6 * (2 * 2 * page + 64 * 64 * 2));  // 2 layers of K+V, 1 of ki
  const int a = kv.add_sequence(), b = kv.add_sequence();
  EXPECT_EQ(kv.append(a, 1), 1);
  EXPECT_EQ(kv.pages(a).size(), 1u);
  EXPECT_EQ(kv.append(a, 63), 64);
  EXPECT_EQ(kv.pages(a).size(), 1u);
  EXPECT_EQ(kv.append(a, 1), 65);
  EXPECT_EQ(kv.pages(a).size(), 2u);
  kv.append(b, 130);
  EXPECT_EQ(kv.pages(b).size(), 3u);
  EXPECT_EQ(kv.free_pages(), 1);
  const int ab[] = {a, b};
  const hal::HostTensor bt = kv.block_table(ab);
  ASSERT_EQ(bt.shape, (std::vector<int64_t>{2, 3}));
  for (int i = 0; i < 2; ++i) EXPECT_EQ(bt.data<int32_t>()[i], kv.pages(a)[i]);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bt.data<int32_t>()[3 + i], kv.pages(b)[i]);
  // Every page is owned once.
  std::vector<int32_t> all(kv.pages(a));
  all.insert(all.end(), kv.pages(b).begin(), kv.pages(b).end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
  EXPECT_THROW(kv.append(b, 200), Error);  // needs 3 more pages, 1 free
  kv.release(a);
  EXPECT_EQ(kv.free_pages(), 3);
  EXPECT_THROW(kv.append(a, 1), Error);  // released
  const int d = kv.add_sequence();
  kv.append(d, 192);
  EXPECT_EQ(kv.free_pages(), 0);
}

TEST(ModelKvCache, SessionTakesExactlyThePagesItsTokensNeed) {
  auto dev = testing::cpu_ref();
  Model m(*dev, testing::tiny_weights());
  SessionOptions o;
  o.decode_steps = 2;
  // 64 + 2 and 10 + 2 tokens: 2 + 1 pages.
  Session s(m, {random_tokens(m.config(), 64, 1), random_tokens(m.config(), 10, 2)}, {}, o);
  EXPECT_EQ(s.cache().num_pages(), 3);
  s.prefill();
  EXPECT_EQ(s.cache().free_pages(), 1);  // 64 and 10 tokens: one page each
  const int32_t next[] = {1, 2};
  s.decode(next);
  EXPECT_EQ(s.cache().free_pages(), 0);  // the first sequence's 65th token opened a page
  EXPECT_EQ(s.cache().pages(0).size(), 2u);
  EXPECT_EQ(s.cache().pages(1).size(), 1u);
}

}  // namespace
}  // namespace msa::model
