// Sparse decode attention with K/V read through buffer device addresses (the BDA=1
// variant of paged_attention.gqa.comp): forced on small caches (force_bda=1) it must
// give the binding variant's bits; caches larger than maxStorageBufferRange take it by
// themselves and must match cpu-ref (built cheaply: a cache filled with NaN bytes where
// only the attended pages are written, some of them past the binding limit); with
// MSA_VK_BDA=0 such caches are refused; supports() accepts the reference B = 8, 1M shape.
// A layer case past the binding limit runs with its dense baseline (by address too).
// kv_append writes such caches, and indexer_score reads such key caches, the same way.
#include <cmath>
#include <cstdlib>
#include <optional>
#include <random>
#include <tuple>
#include <utility>

#include "ops/ops.h"
#include "tests/vulkan/vk_test_util.h"
#if MSA_TEST_VULKAN_INTERNALS
#include "backends/vulkan/device.h"
#include "backends/vulkan/stream.h"
#include "check/case.h"

namespace msa::vulkan_test {
namespace {

const vulkan::Caps& caps_of(hal::Device& d) { return static_cast<vulkan::VulkanDevice&>(d).caps(); }
uint64_t address_binds(hal::Device& d) { return static_cast<vulkan::VulkanStream&>(d.stream()).address_binds(); }

// Decode batch (one token per sequence, Qb = 1, per-KV-head selection) at bf16.
struct Decode {
  std::vector<int32_t> kv_len;
  int64_t Hq = 8, Hkv = 2, D = 128, Bs = 64, k = 6;
  int64_t B() const { return static_cast<int64_t>(kv_len.size()); }
  int64_t MB() const {
    int64_t m = 0;
    for (int32_t l : kv_len) m = std::max<int64_t>(m, (l + Bs - 1) / Bs);
    return m;
  }
  int64_t page_bytes() const { return Hkv * Bs * D * 2; }
};

struct Result {
  std::vector<float> out, lse;
};

class AddressPath : public VulkanTest {
 protected:
  void SetUp() override {
    VulkanTest::SetUp();
    if (IsSkipped()) return;
    if (!caps_of(dev()).buffer_address) GTEST_SKIP() << "device without buffer device addresses";
  }

  // Runs the batch on `d`. Logical block blk of sequence b lives in page page(b, blk) of
  // caches with P pages; every other page holds 0xFF bytes (NaN at bf16).
  template <typename PageOf>
  Result run(hal::Device& d, const Decode& x, int64_t P, const PageOf& page) {
    const int64_t B = x.B(), MB = x.MB(), pb = x.page_bytes();
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    hal::HostTensor q(DType::bf16, {B, x.Hq, x.D}), bt(DType::i32, {B, MB}), kvl(DType::i32, {B}),
        cuq(DType::i32, {B + 1}), idx(DType::i32, {B, x.Hkv, x.k}), page_data(DType::bf16, {x.Hkv, x.Bs, x.D});
    for (int64_t i = 0; i < q.numel(); ++i) q.set(i, u(rng));
    for (int64_t b = 0; b <= B; ++b) cuq.data<int32_t>()[b] = static_cast<int32_t>(b);
    std::copy(x.kv_len.begin(), x.kv_len.end(), kvl.data<int32_t>());
    for (int64_t b = 0; b < B; ++b) {
      const int64_t last = (x.kv_len[b] - 1) / x.Bs;
      for (int64_t blk = 0; blk < MB; ++blk) bt.data<int32_t>()[b * MB + blk] = static_cast<int32_t>(page(b, blk));
      for (int64_t g = 0; g < x.Hkv; ++g)
        for (int64_t j = 0; j < x.k; ++j) {
          const int64_t c = last - j * (g + 1);
          idx.data<int32_t>()[(b * x.Hkv + g) * x.k + j] = c >= 0 ? static_cast<int32_t>(c) : -1;
        }
    }
    auto kbuf = d.alloc(static_cast<size_t>(P * pb)), vbuf = d.alloc(static_cast<size_t>(P * pb));
    const hal::Tensor kc(kbuf.get(), DType::bf16, {P, x.Hkv, x.Bs, x.D}),
        vc(vbuf.get(), DType::bf16, {P, x.Hkv, x.Bs, x.D});
    d.stream().fill_bytes(kc, 0xFF);
    d.stream().fill_bytes(vc, 0xFF);
    std::mt19937 data_rng(9);  // the same page contents on every device
    for (int64_t b = 0; b < B; ++b)
      for (int64_t blk = 0; blk < MB; ++blk)
        for (hal::Buffer* buf : {kbuf.get(), vbuf.get()}) {
          for (int64_t i = 0; i < page_data.numel(); ++i) page_data.set(i, u(data_rng));
          const hal::Tensor dst(buf, DType::bf16, {x.Hkv, x.Bs, x.D}, static_cast<size_t>(page(b, blk) * pb));
          d.stream().upload(dst, page_data.bytes.data());
        }
    auto tq = hal::to_device(d, q), tb = hal::to_device(d, bt), tl = hal::to_device(d, kvl),
         tc = hal::to_device(d, cuq), ti = hal::to_device(d, idx);
    auto o = d.alloc_tensor(DType::bf16, {B, x.Hq, x.D});
    auto l = d.alloc_tensor(DType::f32, {B, x.Hq});
    ops::SparseAttentionArgs a;
    a.q = tq.tensor, a.k_cache = kc, a.v_cache = vc, a.block_table = tb.tensor, a.kv_len = tl.tensor;
    a.cu_q = tc.tensor, a.Qb = 1, a.NQ = B, a.block_idx = ti.tensor, a.out = o.tensor, a.lse = l.tensor;
    ops::sparse_block_attention(d, a);
    d.stream().synchronize();
    return {hal::to_host(d, o.tensor).to_f32(), hal::to_host(d, l.tensor).to_f32()};
  }

  // cpu-ref on compact caches (page = b * MB + blk).
  Result reference(const Decode& x) {
    auto ref = hal::create_device("cpu-ref");
    const int64_t MB = x.MB();
    return run(*ref, x, x.B() * MB, [&](int64_t b, int64_t blk) { return b * MB + blk; });
  }

  static void expect_close(const Result& got, const Result& want) {
    EXPECT_LE(nmse(got.out, want.out), 2e-5);
    ASSERT_EQ(got.lse.size(), want.lse.size());
    for (size_t i = 0; i < want.lse.size(); ++i)
      ASSERT_NEAR(got.lse[i], want.lse[i], 1e-3 * std::max(1.0f, std::fabs(want.lse[i]))) << "row " << i;
  }
};

// Small caches, the address variant forced: the same bits as the binding variant, and
// cpu-ref's results (split over the key set: 2 tokens x 2 KV heads).
TEST_F(AddressPath, ForcedOnSmallCachesMatchesBindingsAndReference) {
  const Decode x{{1000, 333}};
  const int64_t MB = x.MB(), P = 3 * x.B() * MB;
  auto page = [&](int64_t b, int64_t blk) { return (b * MB + blk) * 3 + 1; };
  const uint64_t before = address_binds(dev());
  Result bound;
  {
    ScopedTuning plain(dev(), "force_bda", "0");
    bound = run(dev(), x, P, page);
  }
  EXPECT_EQ(address_binds(dev()), before) << "K/V fit a binding: the address variant must not run by default";
  Result forced;
  {
    ScopedTuning force(dev(), "force_bda", "1");
    forced = run(dev(), x, P, page);
  }
  EXPECT_EQ(address_binds(dev()), before + 2) << "force_bda=1 did not take K/V by address";
  EXPECT_EQ(forced.out, bound.out);
  EXPECT_EQ(forced.lse, bound.lse);
  expect_close(forced, reference(x));
}

// K and V larger than maxStorageBufferRange: the address variant runs by itself. The
// attended pages sit on both sides of the binding limit and at the last page.
TEST_F(AddressPath, CachesPastTheBindingLimitMatchReference) {
  const Decode x{{1000, 333, 7 * 64 + 1}};
  const uint64_t range = caps_of(dev()).max_storage_range;
  if (range > (uint64_t{4} << 30))
    GTEST_SKIP() << "maxStorageBufferRange " << range << " B: caches past it too large for a test";
  const int64_t MB = x.MB(), n = x.B() * MB;
  const int64_t limit_page = static_cast<int64_t>(range) / x.page_bytes();
  const int64_t P = limit_page + n;  // pages [P - 2n, P) straddle the limit
  ASSERT_GT(static_cast<uint64_t>(P * x.page_bytes()), range);
  auto page = [&](int64_t b, int64_t blk) { return P - 1 - 2 * (b * MB + blk); };
  const uint64_t before = address_binds(dev());
  const Result got = run(dev(), x, P, page);
  EXPECT_EQ(address_binds(dev()), before + 2) << "the caches did not go by address";
  expect_close(got, reference(x));
}

// kv_append into caches of P pages: tokens 0..3 of two sequences (q_len 3 and 1, kv_len
// 130 and 64 after the append, Bs = 64) land in pages page(b, blk). Returns the written
// pages of K then V, in order of (b, blk), as bytes.
template <typename PageOf>
std::vector<uint8_t> append(hal::Device& d, int64_t P, const PageOf& page) {
  const int64_t Hkv = 2, D = 128, Bs = 64, MB = 3, T = 4, pb = Hkv * Bs * D * 2;
  hal::HostTensor k(DType::bf16, {T, Hkv, D}), v(DType::bf16, {T, Hkv, D}), bt(DType::i32, {2, MB});
  for (int64_t i = 0; i < k.numel(); ++i) {
    k.set(i, static_cast<float>(i % 251) - 125.0f);
    v.set(i, static_cast<float>(i % 127) * 0.5f);
  }
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t blk = 0; blk < MB; ++blk) bt.data<int32_t>()[b * MB + blk] = static_cast<int32_t>(page(b, blk));
  hal::HostTensor kvl(DType::i32, {2}), cuq(DType::i32, {3});
  kvl.data<int32_t>()[0] = 130, kvl.data<int32_t>()[1] = 64;
  cuq.data<int32_t>()[0] = 0, cuq.data<int32_t>()[1] = 3, cuq.data<int32_t>()[2] = 4;
  auto kbuf = d.alloc(static_cast<size_t>(P * pb)), vbuf = d.alloc(static_cast<size_t>(P * pb));
  ops::KvAppendArgs a;
  a.k_cache = hal::Tensor(kbuf.get(), DType::bf16, {P, Hkv, Bs, D});
  a.v_cache = hal::Tensor(vbuf.get(), DType::bf16, {P, Hkv, Bs, D});
  d.stream().fill_bytes(a.k_cache, 0x5A);
  d.stream().fill_bytes(a.v_cache, 0xA5);
  auto tk = hal::to_device(d, k), tv = hal::to_device(d, v), tb = hal::to_device(d, bt), tl = hal::to_device(d, kvl),
       tc = hal::to_device(d, cuq);
  a.k = tk.tensor, a.v = tv.tensor, a.block_table = tb.tensor, a.kv_len = tl.tensor, a.cu_q = tc.tensor;
  ops::kv_append(d, a);
  d.stream().synchronize();
  std::vector<uint8_t> got;
  for (hal::Buffer* buf : {kbuf.get(), vbuf.get()})
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t blk = 0; blk < MB; ++blk) {
        std::vector<uint8_t> bytes(static_cast<size_t>(pb));
        d.stream().download(bytes.data(),
                            hal::Tensor(buf, DType::fp8_e4m3, {pb}, static_cast<size_t>(page(b, blk) * pb)));
        got.insert(got.end(), bytes.begin(), bytes.end());
      }
  return got;
}

// kv_append: forced onto addresses on small caches, and by itself on caches past the
// binding limit, it writes what cpu-ref writes (and nothing else in those pages).
TEST_F(AddressPath, KvAppendByAddressMatchesReference) {
  auto ref = hal::create_device("cpu-ref");
  auto compact = [](int64_t b, int64_t blk) { return b * 3 + blk; };
  const std::vector<uint8_t> want = append(*ref, 6, compact);
  const uint64_t before = address_binds(dev());
  {
    ScopedTuning plain(dev(), "force_bda", "0");
    EXPECT_EQ(append(dev(), 6, compact), want);
  }
  EXPECT_EQ(address_binds(dev()), before) << "small caches must stay on bindings by default";
  {
    ScopedTuning force(dev(), "force_bda", "1");
    EXPECT_EQ(append(dev(), 6, compact), want);
  }
  EXPECT_EQ(address_binds(dev()), before + 2) << "force_bda=1 did not take the caches by address";
  const uint64_t range = caps_of(dev()).max_storage_range;
  if (range > (uint64_t{4} << 30))
    GTEST_SKIP() << "maxStorageBufferRange " << range << " B: caches past it too large for a test";
  const int64_t limit_page = static_cast<int64_t>(range) / (2 * 64 * 128 * 2), P = limit_page + 4;
  EXPECT_EQ(append(dev(), P, [&](int64_t b, int64_t blk) { return P - 1 - 2 * (b * 3 + blk); }), want);
  EXPECT_EQ(address_binds(dev()), before + 4) << "caches past the binding limit did not go by address";
}

// indexer_score at decode (B = 2, one query each) on a key cache of P pages, sequence b's
// block blk in page page(b, blk), every other page NaN bytes. Returns block_score.
template <typename PageOf>
std::vector<float> index(hal::Device& d, int64_t P, const PageOf& page) {
  const int64_t B = 2, Hi = 4, Di = 128, Bs = 64, MB = 16, pb = Bs * Di * 2;
  const std::vector<int32_t> lens{1000, 333};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  hal::HostTensor qi(DType::bf16, {B, Hi, Di}), bt(DType::i32, {B, MB}), kvl(DType::i32, {B}), cuq(DType::i32, {B + 1}),
      page_data(DType::bf16, {Bs, Di});
  for (int64_t i = 0; i < qi.numel(); ++i) qi.set(i, u(rng));
  for (int64_t b = 0; b < B; ++b) {
    kvl.data<int32_t>()[b] = lens[b];
    for (int64_t blk = 0; blk < MB; ++blk) bt.data<int32_t>()[b * MB + blk] = static_cast<int32_t>(page(b, blk));
  }
  for (int64_t b = 0; b <= B; ++b) cuq.data<int32_t>()[b] = static_cast<int32_t>(b);
  auto kbuf = d.alloc(static_cast<size_t>(P * pb));
  ops::IndexerScoreArgs a;
  a.ki_cache = hal::Tensor(kbuf.get(), DType::bf16, {P, Bs, Di});
  d.stream().fill_bytes(a.ki_cache, 0xFF);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t blk = 0; blk < MB; ++blk) {
      for (int64_t i = 0; i < page_data.numel(); ++i) page_data.set(i, u(rng));
      d.stream().upload(hal::Tensor(kbuf.get(), DType::bf16, {Bs, Di}, static_cast<size_t>(page(b, blk) * pb)),
                        page_data.bytes.data());
    }
  auto tq = hal::to_device(d, qi), tb = hal::to_device(d, bt), tl = hal::to_device(d, kvl), tc = hal::to_device(d, cuq);
  auto out = d.alloc_tensor(DType::f32, {B, Hi, MB});
  a.qi = tq.tensor, a.block_table = tb.tensor, a.kv_len = tl.tensor, a.cu_q = tc.tensor, a.Qb = 1, a.NQ = B;
  a.block_score = out.tensor;
  ops::indexer_score(d, a);
  d.stream().synchronize();
  return hal::to_host(d, out.tensor).to_f32();
}

// indexer_score: the key cache forced onto its address, and past the binding limit by
// itself, scores as cpu-ref does.
TEST_F(AddressPath, IndexerByAddressMatchesReference) {
  auto ref = hal::create_device("cpu-ref");
  auto compact = [](int64_t b, int64_t blk) { return b * 16 + blk; };
  const std::vector<float> want = index(*ref, 32, compact);
  auto expect_scores = [&](const std::vector<float>& got) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::isinf(want[i]))
        EXPECT_EQ(got[i], want[i]) << "score " << i;
      else
        EXPECT_NEAR(got[i], want[i], 1e-4 * std::max(1.0f, std::fabs(want[i]))) << "score " << i;
    }
  };
  const uint64_t before = address_binds(dev());
  {
    ScopedTuning force(dev(), "force_bda", "1");
    expect_scores(index(dev(), 32, compact));
  }
  EXPECT_EQ(address_binds(dev()), before + 1) << "force_bda=1 did not take the keys by address";
  const uint64_t range = caps_of(dev()).max_storage_range;
  if (range > (uint64_t{4} << 30))
    GTEST_SKIP() << "maxStorageBufferRange " << range << " B: caches past it too large for a test";
  const int64_t limit_page = static_cast<int64_t>(range) / (64 * 128 * 2), P = limit_page + 32;
  expect_scores(index(dev(), P, [&](int64_t b, int64_t blk) { return P - 1 - 2 * (b * 16 + blk); }));
  EXPECT_EQ(address_binds(dev()), before + 2) << "a key cache past the binding limit did not go by address";
}

// The reference decode shape at B = 8, 1M (K and V 8 GiB each) is supported by sparse
// attention, kv_append and dense attention, and with
// MSA_VK_BDA=0 refused naming maxStorageBufferRange. supports() looks at sizes only:
// the views lie on a small buffer that is never touched.
TEST_F(AddressPath, SupportsReferenceB8At1MUnlessTurnedOff) {
  const int64_t B = 8, Hq = 64, Hkv = 4, D = 128, Bs = 128, MB = (int64_t{1} << 20) / Bs, k = 16;
  auto check = [&](hal::Device& d) {
    hal::BufferPtr buf = d.alloc(64);
    ops::SparseAttentionArgs a;
    a.q = hal::Tensor(buf.get(), DType::bf16, {B, Hq, D});
    a.k_cache = hal::Tensor(buf.get(), DType::bf16, {B * MB, Hkv, Bs, D});
    a.v_cache = a.k_cache;
    a.block_table = hal::Tensor(buf.get(), DType::i32, {B, MB});
    a.kv_len = hal::Tensor(buf.get(), DType::i32, {B});
    a.cu_q = hal::Tensor(buf.get(), DType::i32, {B + 1});
    a.block_idx = hal::Tensor(buf.get(), DType::i32, {B, Hkv, k});
    a.out = a.q;
    a.lse = hal::Tensor(buf.get(), DType::f32, {B, Hq});
    a.Qb = 1;
    a.NQ = B;
    ops::KvAppendArgs kv;  // the decode step's append into the same caches
    kv.k = hal::Tensor(buf.get(), DType::bf16, {B, Hkv, D});
    kv.v = kv.k;
    kv.block_table = a.block_table, kv.kv_len = a.kv_len, kv.cu_q = a.cu_q;
    kv.k_cache = a.k_cache, kv.v_cache = a.v_cache;
    ops::DenseAttentionArgs dense;  // the layer's dense baseline over the same caches
    dense.q = a.q, dense.k_cache = a.k_cache, dense.v_cache = a.v_cache, dense.block_table = a.block_table;
    dense.kv_len = a.kv_len, dense.cu_q = a.cu_q, dense.out = a.out, dense.lse = a.lse;
    return std::make_tuple(d.supports(hal::OpId::sparse_block_attention, &a), d.supports(hal::OpId::kv_append, &kv),
                           d.supports(hal::OpId::dense_attention, &dense));
  };
  EXPECT_EQ(check(dev()), std::make_tuple(std::string(), std::string(), std::string()));
  ScopedEnv off("MSA_VK_BDA", "0");
  auto plain = hal::create_device("vulkan");
  EXPECT_FALSE(caps_of(*plain).buffer_address);
  const auto [sparse, kv, dense] = check(*plain);
  EXPECT_NE(sparse.find("maxStorageBufferRange"), std::string::npos) << sparse;
  EXPECT_NE(kv.find("maxStorageBufferRange"), std::string::npos) << kv;
  EXPECT_NE(dense.find("maxStorageBufferRange"), std::string::npos) << dense;
}

// A prepared msa_layer case whose K/V exceed one binding runs, sparse attention and its
// dense baseline both by address (the GQA kernel); with gqa_dense=0 the baseline, on
// paged_attention.comp, which has no address variant, refuses by itself.
TEST_F(AddressPath, LayerCasePastTheBindingLimitRunsWithItsBaseline) {
  const uint64_t range = caps_of(dev()).max_storage_range;
  if (range > (uint64_t{256} << 20))
    GTEST_SKIP() << "maxStorageBufferRange " << range << " B: a case past it is too large for a test";
  std::unique_ptr<cases::Case> big;
  for (auto& c : cases::make_cases("perf", "msa_layer", 1.0))
    if (c->vars().find("kv=[8 x 32768..32768]") != std::string::npos &&
        c->vars().find("ki=bf16") != std::string::npos) {
      big = std::move(c);  // K and V 256 MiB each
      break;
    }
  ASSERT_NE(big, nullptr) << "no B=8 32K msa_layer perf case";
  ASSERT_TRUE(big->has_baseline());
  {
    auto p = big->prepare(dev(), 1);
    ASSERT_EQ(p->unsupported(), "") << big->vars();
    p->run();
    const uint64_t before = address_binds(dev());
    p->run_baseline();
    EXPECT_EQ(address_binds(dev()), before + 2) << "the dense baseline did not take K/V by address";
    EXPECT_NO_THROW(dev().stream().synchronize());
  }
  ScopedTuning scalar(dev(), "gqa_dense", "0");
  auto p = big->prepare(dev(), 1);
  ASSERT_EQ(p->unsupported(), "") << big->vars();
  try {
    p->run_baseline();
    FAIL() << "paged_attention.comp ran over K/V past maxStorageBufferRange";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported: baseline"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace msa::vulkan_test
#endif
