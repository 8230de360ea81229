// ops:: host checks: every bad argument gives msa::Error naming the argument, before any
// work. Run on cpu-ref (the checks are backend-independent).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "hal/error.h"
#include "hal/host_tensor.h"
#include "hal/nvfp4.h"
#include "hal/registry.h"
#include "ops/ops.h"

namespace {

using msa::hal::DType;
using msa::hal::HostTensor;

// A small valid decode problem: B=2, Hq=4, Hkv=2, D=16, Bs=8, 3 pages per sequence.
class Problem {
 public:
  Problem() : dev(msa::hal::create_device("cpu-ref")) {
    auto i32 = [&](std::vector<int64_t> s, std::vector<int32_t> v) {
      HostTensor h(DType::i32, std::move(s));
      std::copy(v.begin(), v.end(), h.data<int32_t>());
      return up(h);
    };
    q = up(rnd(DType::f32, {2, 4, 16}));
    k_cache = up(rnd(DType::f32, {6, 2, 8, 16}));
    v_cache = up(rnd(DType::f32, {6, 2, 8, 16}));
    qi = up(rnd(DType::f32, {2, 2, 16}));
    ki_cache = up(rnd(DType::f32, {6, 8, 16}));
    block_table = i32({2, 3}, {0, 1, 2, 3, 4, 5});
    kv_len = i32({2}, {20, 17});
    cu_q = i32({3}, {0, 1, 2});
    block_score = out(DType::f32, {2, 2, 3});
    block_idx = out(DType::i32, {2, 2, 2});
    block_cnt = out(DType::i32, {2, 2});
    o = out(DType::f32, {2, 4, 16});
    lse = out(DType::f32, {2, 4});
  }
  msa::ops::SparseAttentionArgs sparse() const {
    msa::ops::SparseAttentionArgs a;
    a.q = q, a.k_cache = k_cache, a.v_cache = v_cache, a.block_table = block_table, a.kv_len = kv_len;
    a.cu_q = cu_q, a.Qb = 1, a.NQ = 2, a.block_idx = block_idx, a.out = o, a.lse = lse;
    return a;
  }
  msa::ops::IndexerScoreArgs indexer() const {
    msa::ops::IndexerScoreArgs a;
    a.qi = qi, a.ki_cache = ki_cache, a.block_table = block_table, a.kv_len = kv_len, a.cu_q = cu_q;
    a.Qb = 1, a.NQ = 2, a.block_score = block_score;
    return a;
  }
  msa::ops::BlockTopkArgs topk() const {
    msa::ops::BlockTopkArgs a;
    a.block_score = block_score, a.kv_len = kv_len, a.cu_q = cu_q, a.Qb = 1, a.NQ = 2, a.Bs = 8, a.k = 2;
    a.n_sink = 0, a.n_local = 1, a.block_idx = block_idx, a.block_cnt = block_cnt;
    return a;
  }
  void set_i32(const msa::hal::Tensor& t, std::vector<int32_t> v) { dev->stream().upload(t, v.data()); }

  std::unique_ptr<msa::hal::Device> dev;
  msa::hal::Tensor q, k_cache, v_cache, qi, ki_cache, block_table, kv_len, cu_q, block_score, block_idx, block_cnt, o,
      lse;

 private:
  HostTensor rnd(DType t, std::vector<int64_t> s) {
    HostTensor h(t, std::move(s));
    for (int64_t i = 0; i < h.numel(); ++i) h.set(i, 0.01f * static_cast<float>((i * 37) % 101) - 0.5f);
    return h;
  }
  msa::hal::Tensor up(const HostTensor& h) {
    auto o = msa::hal::to_device(*dev, h);
    keep.push_back(std::move(o.buffer));
    return o.tensor;
  }
  msa::hal::Tensor out(DType t, std::vector<int64_t> s) { return up(HostTensor(t, std::move(s))); }
  std::vector<msa::hal::BufferPtr> keep;
};

// Expects msa::Error whose message names `arg` (as "argument 'arg'").
template <typename F>
void expect_arg_error(F&& f, const std::string& arg) {
  try {
    f();
    FAIL() << "expected msa::Error naming '" << arg << "'";
  } catch (const msa::Error& e) {
    EXPECT_NE(std::string(e.what()).find("argument '" + arg + "'"), std::string::npos) << e.what();
  }
}

TEST(OpsValidation, ValidProblemRuns) {
  Problem p;
  ASSERT_NO_THROW(msa::ops::indexer_score(*p.dev, p.indexer()));
  ASSERT_NO_THROW(msa::ops::block_topk(*p.dev, p.topk()));
  ASSERT_NO_THROW(msa::ops::sparse_block_attention(*p.dev, p.sparse()));
}

// indexer_topk: each op's own checks, then the link between them (the select must read the
// scores the indexer writes, over the same batch).
TEST(OpsValidation, IndexerTopkLinksItsOps) {
  Problem p;
  ASSERT_NO_THROW((msa::ops::indexer_topk(*p.dev, {p.indexer(), p.topk()})));
  msa::ops::IndexerScoreArgs i = p.indexer();
  i.NQ = 3;
  expect_arg_error([&] { msa::ops::indexer_topk(*p.dev, {i, p.topk()}); }, "block_score");  // indexer_score's own check
  msa::ops::BlockTopkArgs t = p.topk();
  t.block_score = p.block_idx;
  expect_arg_error([&] { msa::ops::indexer_topk(*p.dev, {p.indexer(), t}); }, "block_score");  // block_topk's own check
  // A score tensor of the right shape that is not the indexer's output.
  auto other = msa::hal::to_device(*p.dev, HostTensor(DType::f32, {2, 2, 3}));
  t = p.topk();
  t.block_score = other.tensor;
  expect_arg_error([&] { msa::ops::indexer_topk(*p.dev, {p.indexer(), t}); }, "block_score");
  t = p.topk();
  t.Bs = 16;  // passes block_topk's own checks, but the keys' blocks are of 8
  expect_arg_error([&] { msa::ops::indexer_topk(*p.dev, {p.indexer(), t}); }, "Bs");
  t = p.topk();
  t.block_idx = msa::hal::Tensor(p.qi.buffer, DType::i32, {2, 2, 2});  // over the indexer's queries
  expect_arg_error([&] { msa::ops::indexer_topk(*p.dev, {p.indexer(), t}); }, "block_idx");
  auto kv_copy = msa::hal::to_device(*p.dev, msa::hal::to_host(*p.dev, p.kv_len));
  t = p.topk();
  t.kv_len = kv_copy.tensor;
  expect_arg_error([&] { msa::ops::indexer_topk(*p.dev, {p.indexer(), t}); }, "kv_len");
}

// On a backend without a fused kernel, indexer_topk is exactly the two ops in order.
TEST(OpsValidation, IndexerTopkEqualsTheTwoOps) {
  Problem p;
  msa::ops::indexer_topk(*p.dev, {p.indexer(), p.topk()});
  const HostTensor score = msa::hal::to_host(*p.dev, p.block_score), idx = msa::hal::to_host(*p.dev, p.block_idx);
  const HostTensor cnt = msa::hal::to_host(*p.dev, p.block_cnt);
  p.dev->stream().fill_bytes(p.block_score, 0);
  p.dev->stream().fill_bytes(p.block_idx, 0);
  p.dev->stream().fill_bytes(p.block_cnt, 0);
  msa::ops::indexer_score(*p.dev, p.indexer());
  msa::ops::block_topk(*p.dev, p.topk());
  EXPECT_EQ(msa::hal::to_host(*p.dev, p.block_score).bytes, score.bytes);
  EXPECT_EQ(msa::hal::to_host(*p.dev, p.block_idx).bytes, idx.bytes);
  EXPECT_EQ(msa::hal::to_host(*p.dev, p.block_cnt).bytes, cnt.bytes);
  EXPECT_NE(std::vector<uint8_t>(cnt.bytes.size(), 0), cnt.bytes);  // a selection was written
}

TEST(OpsValidation, HqNotMultipleOfHkv) {
  Problem p;
  auto a = p.sparse();
  a.q = a.q.reshape({2, 2, 32});  // D mismatch first; build a real Hq=3 case instead
  auto q3 = p.dev->alloc_tensor(DType::f32, {2, 3, 16});
  auto o3 = p.dev->alloc_tensor(DType::f32, {2, 3, 16});
  auto l3 = p.dev->alloc_tensor(DType::f32, {2, 3});
  a.q = q3.tensor, a.out = o3.tensor, a.lse = l3.tensor;
  expect_arg_error([&] { msa::ops::sparse_block_attention(*p.dev, a); }, "q");
}

TEST(OpsValidation, WrongShapesAndDtypes) {
  Problem p;
  auto a = p.sparse();
  a.out = p.lse;
  expect_arg_error([&] { msa::ops::sparse_block_attention(*p.dev, a); }, "out");
  a = p.sparse();
  a.block_idx = p.block_cnt;
  expect_arg_error([&] { msa::ops::sparse_block_attention(*p.dev, a); }, "block_idx");
  a = p.sparse();
  a.kv_len = p.q;
  expect_arg_error([&] { msa::ops::sparse_block_attention(*p.dev, a); }, "kv_len");
  a = p.sparse();
  a.mode = msa::ops::SelectionMode::shared;  // block_idx has Hs = 2, shared needs 1
  expect_arg_error([&] { msa::ops::sparse_block_attention(*p.dev, a); }, "block_idx");
  auto i = p.indexer();
  i.mode = msa::ops::SelectionMode::shared;  // Hi = 2
  expect_arg_error([&] { msa::ops::indexer_score(*p.dev, i); }, "qi");
  i = p.indexer();
  i.Qb = 3;
  expect_arg_error([&] { msa::ops::indexer_score(*p.dev, i); }, "Qb");
  i = p.indexer();
  i.scale = INFINITY;
  expect_arg_error([&] { msa::ops::indexer_score(*p.dev, i); }, "scale");
}

// NVFP4 keys: [P][Bs][Di/2] codes need the [P][Bs][Di/16] e4m3 scales, and Di % 16 == 0.
TEST(OpsValidation, Nvfp4IndexerKeys) {
  Problem p;
  auto codes = p.dev->alloc_tensor(DType::fp4_e2m1x2, {6, 8, 8});
  auto scales = p.dev->alloc_tensor(DType::fp8_e4m3, {6, 8, 1});
  p.dev->stream().fill_bytes(codes.tensor, 0x21);
  p.dev->stream().fill_bytes(scales.tensor, 0x38);  // 1.0
  auto i = p.indexer();
  i.ki_cache = codes.tensor;
  i.ki_scale = scales.tensor;
  EXPECT_NO_THROW(msa::ops::indexer_score(*p.dev, i));
  i.ki_scale = {};
  expect_arg_error([&] { msa::ops::indexer_score(*p.dev, i); }, "ki_scale");  // required
  auto f32_scales = p.dev->alloc_tensor(DType::f32, {6, 8, 1});
  i.ki_scale = f32_scales.tensor;
  expect_arg_error([&] { msa::ops::indexer_score(*p.dev, i); }, "ki_scale");  // e4m3 only
  auto per_token = p.dev->alloc_tensor(DType::fp8_e4m3, {6, 8});
  i.ki_scale = per_token.tensor;
  expect_arg_error([&] { msa::ops::indexer_score(*p.dev, i); }, "ki_scale");  // [P][Bs][Di/16]
  auto wide = p.dev->alloc_tensor(DType::fp4_e2m1x2, {6, 8, 16});             // Di codes instead of Di/2
  i.ki_cache = wide.tensor;
  i.ki_scale = scales.tensor;
  expect_arg_error([&] { msa::ops::indexer_score(*p.dev, i); }, "ki_cache");
  // An fp8 key cache does not take e4m3 group scales (its scale is [P][Bs] f32); NVFP4
  // needs Di % 16 == 0.
  auto fp8_keys = p.dev->alloc_tensor(DType::fp8_e4m3, {6, 8, 16});
  i = p.indexer();
  i.ki_cache = fp8_keys.tensor;
  i.ki_scale = scales.tensor;
  expect_arg_error([&] { msa::ops::indexer_score(*p.dev, i); }, "ki_scale");
  auto qi8 = p.dev->alloc_tensor(DType::f32, {2, 2, 8});
  auto codes8 = p.dev->alloc_tensor(DType::fp4_e2m1x2, {6, 8, 4});
  i = p.indexer();
  i.qi = qi8.tensor, i.ki_cache = codes8.tensor, i.ki_scale = scales.tensor;
  expect_arg_error([&] { msa::ops::indexer_score(*p.dev, i); }, "ki_cache");
}

// kv_append into an NVFP4 cache: the same key and scale shapes as indexer_score.
TEST(OpsValidation, Nvfp4KvAppend) {
  Problem p;
  auto ki = p.dev->alloc_tensor(DType::f32, {2, 16});
  auto codes = p.dev->alloc_tensor(DType::fp4_e2m1x2, {6, 8, 8});
  auto scales = p.dev->alloc_tensor(DType::fp8_e4m3, {6, 8, 1});
  auto k = p.dev->alloc_tensor(DType::f32, {2, 2, 16});
  msa::ops::KvAppendArgs a;
  a.k = k.tensor, a.v = k.tensor, a.ki = ki.tensor;
  a.block_table = p.block_table, a.kv_len = p.kv_len, a.cu_q = p.cu_q;
  a.k_cache = p.k_cache, a.v_cache = p.v_cache, a.ki_cache = codes.tensor, a.ki_scale = scales.tensor;
  EXPECT_NO_THROW(msa::ops::kv_append(*p.dev, a));
  a.ki_scale = {};
  expect_arg_error([&] { msa::ops::kv_append(*p.dev, a); }, "ki_scale");  // required
  auto wide = p.dev->alloc_tensor(DType::fp4_e2m1x2, {6, 8, 16});
  a.ki_cache = wide.tensor, a.ki_scale = scales.tensor;
  expect_arg_error([&] { msa::ops::kv_append(*p.dev, a); }, "ki_cache");  // Di codes instead of Di/2
  auto ki8 = p.dev->alloc_tensor(DType::f32, {2, 8});
  auto codes4 = p.dev->alloc_tensor(DType::fp4_e2m1x2, {6, 8, 4});
  a.ki = ki8.tensor, a.ki_cache = codes4.tensor;
  expect_arg_error([&] { msa::ops::kv_append(*p.dev, a); }, "ki_cache");  // Di = 8: not a multiple of 16
}

TEST(OpsValidation, KSmallerThanForcedBlocks) {
  Problem p;
  auto a = p.topk();
  a.n_sink = 2;  // forced: 2 sinks + 1 local = 3 > k = 2
  expect_arg_error([&] { msa::ops::block_topk(*p.dev, a); }, "k");
}

TEST(OpsValidation, PageIdOutOfRange) {
  Problem p;
  p.set_i32(p.block_table, {0, 1, 2, 3, 4, 6});
  expect_arg_error([&] { msa::ops::sparse_block_attention(*p.dev, p.sparse()); }, "block_table");
  p.set_i32(p.block_table, {0, 1, -1, 3, 4, 5});
  expect_arg_error([&] { msa::ops::indexer_score(*p.dev, p.indexer()); }, "block_table");
}

TEST(OpsValidation, KvLenShorterThanQueryOrLongerThanTable) {
  Problem p;
  p.set_i32(p.cu_q, {0, 1, 2});
  p.set_i32(p.kv_len, {0, 17});
  expect_arg_error([&] { msa::ops::sparse_block_attention(*p.dev, p.sparse()); }, "kv_len");
  p.set_i32(p.kv_len, {25, 17});  // 3 blocks of 8 hold 24 tokens
  expect_arg_error([&] { msa::ops::sparse_block_attention(*p.dev, p.sparse()); }, "kv_len");
}

TEST(OpsValidation, CuQAndNQ) {
  Problem p;
  p.set_i32(p.cu_q, {0, 2, 1});
  expect_arg_error([&] { msa::ops::sparse_block_attention(*p.dev, p.sparse()); }, "cu_q");
  p.set_i32(p.cu_q, {0, 1, 2});
  auto a = p.sparse();
  a.NQ = 1;
  a.block_idx = a.block_idx.slice_rows(0, 1);
  expect_arg_error([&] { msa::ops::sparse_block_attention(*p.dev, a); }, "NQ");
}

TEST(OpsValidation, OutputAliasingInput) {
  Problem p;
  auto a = p.sparse();
  a.out = p.q;
  expect_arg_error([&] { msa::ops::sparse_block_attention(*p.dev, a); }, "out");
}

TEST(OpsValidation, TensorFromAnotherDevice) {
  Problem p;
  auto other = msa::hal::create_device("cpu-ref");
  auto t = other->alloc_tensor(DType::f32, {2, 4, 16});
  auto a = p.sparse();
  a.q = t.tensor;
  expect_arg_error([&] { msa::ops::sparse_block_attention(*p.dev, a); }, "q");
}

TEST(OpsValidation, CountQueryBlocks) {
  // Sequence 0: 3 new tokens at positions 5..7 with Qb 4 -> blocks 1 (5..7): 1 block.
  // Sequence 1: 6 new tokens at positions 2..7 -> blocks 0 (2,3) and 1 (4..7): 2 blocks.
  // Sequence 2: no new tokens.
  const int32_t cu[] = {0, 3, 9, 9}, len[] = {8, 8, 4};
  EXPECT_EQ(msa::ops::count_query_blocks(cu, len, 4), 3);
  EXPECT_EQ(msa::ops::count_query_blocks(cu, len, 1), 9);
  EXPECT_THROW(msa::ops::count_query_blocks(cu, len, 3), msa::Error);
  const int32_t bad_len[] = {2, 8, 4};
  EXPECT_THROW(msa::ops::count_query_blocks(cu, bad_len, 1), msa::Error);
}

TEST(OpsValidation, UnknownBackend) {
  EXPECT_THROW(msa::hal::create_device("nope"), msa::Error);
  EXPECT_THROW(msa::hal::create_device("cpu-ref:3"), msa::Error);
  EXPECT_THROW(msa::hal::create_device("cuda:x"), msa::Error);
  EXPECT_EQ(msa::hal::create_device("CPU-REF")->name(), "cpu-ref");
}

TEST(DType, Conversions) {
  using namespace msa::hal;
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(f32_to_bf16(1.00390625f), f32_to_bf16(1.0f));  // ties to even
  EXPECT_EQ(f16_to_f32(f32_to_f16(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(70000.0f))));
  EXPECT_EQ(f16_to_f32(f32_to_f16(5.9604645e-8f)), 5.9604645e-8f);  // smallest subnormal
  EXPECT_EQ(fp8_e4m3_to_f32(f32_to_fp8_e4m3(448.0f)), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(f32_to_fp8_e4m3(1000.0f)), 448.0f);             // saturates
  EXPECT_EQ(fp8_e4m3_to_f32(f32_to_fp8_e4m3(0.001953125f)), 0.001953125f);  // 2^-9 subnormal
  EXPECT_EQ(fp8_e4m3_to_f32(f32_to_fp8_e4m3(1.0625f)), 1.0f);               // halfway 1 / 1.125 -> even
  EXPECT_EQ(fp8_e4m3_to_f32(f32_to_fp8_e4m3(1.1875f)), 1.25f);              // halfway 1.125 / 1.25 -> even
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7f)));
  // Every fp8 value round-trips exactly.
  for (int b = 0; b < 256; ++b) {
    const float f = fp8_e4m3_to_f32(static_cast<uint8_t>(b));
    if (std::isnan(f)) continue;
    EXPECT_EQ(fp8_e4m3_to_f32(f32_to_fp8_e4m3(f)), f) << b;
  }
  // Every f16 value round-trips exactly.
  for (int b = 0; b < 65536; ++b) {
    const float f = f16_to_f32(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), static_cast<uint16_t>(b)) << b;
  }
  EXPECT_THROW(parse_dtype("f64"), msa::Error);
  EXPECT_EQ(parse_dtype("nvfp4"), DType::fp4_e2m1x2);
  EXPECT_EQ(dtype_size(DType::fp4_e2m1x2), 1u);
}

// NVFP4 (hal/nvfp4.h): E2M1 decoding and the group quantizer's rule.
TEST(DType, Nvfp4) {
  using namespace msa::hal;
  const float mags[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 16; ++c) EXPECT_EQ(e2m1_to_f32(static_cast<uint8_t>(c)), (c & 8 ? -1 : 1) * mags[c & 7]) << c;
  const uint8_t packed[1] = {0x9a};  // low nibble 0xa = -1 (element 0), high 0x9 = -0.5
  EXPECT_EQ(e2m1_element(packed, 0), -1.0f);
  EXPECT_EQ(e2m1_element(packed, 1), -0.5f);
  // Codes at scale 2: ties go to the even code, magnitudes past 6 saturate, code 0 is +0.
  EXPECT_EQ(e2m1_code(0.5f, 2), 0);  // 0.25: tie 0 / 0.5 -> 0
  EXPECT_EQ(e2m1_code(0.51f, 2), 1);
  EXPECT_EQ(e2m1_code(1.5f, 2), 2);   // 0.75: tie 0.5 / 1 -> 1 (code 2)
  EXPECT_EQ(e2m1_code(2.5f, 2), 2);   // 1.25: tie 1 / 1.5 -> 1
  EXPECT_EQ(e2m1_code(3.5f, 2), 4);   // 1.75: tie 1.5 / 2 -> 2
  EXPECT_EQ(e2m1_code(5.0f, 2), 4);   // 2.5: tie 2 / 3 -> 2
  EXPECT_EQ(e2m1_code(7.0f, 2), 6);   // 3.5: tie 3 / 4 -> 4
  EXPECT_EQ(e2m1_code(10.0f, 2), 6);  // 5: tie 4 / 6 -> 4
  EXPECT_EQ(e2m1_code(10.5f, 2), 7);
  EXPECT_EQ(e2m1_code(1e9f, 2), 7);  // saturates at 6
  EXPECT_EQ(e2m1_code(-3.0f, 2), 8 | 3);
  EXPECT_EQ(e2m1_code(-0.1f, 2), 0);  // -0 -> +0
  EXPECT_EQ(e2m1_code(NAN, 2), 0);
  // A group: amax 12 -> scale e4m3(2) = 2; NaN ignored by amax and coded 0.
  float x[16] = {12, -12, 1, -1, 0, NAN, 3, 5, 7, 9, 11, -0.5f, 0.5f, 2, 4, 6};
  uint8_t codes[8], scale = 0;
  quantize_nvfp4_group(x, codes, &scale);
  EXPECT_EQ(fp8_e4m3_to_f32(scale), 2.0f);
  for (int i = 0; i < 16; ++i) {
    const float want = std::isnan(x[i]) ? 0.0f : e2m1_to_f32(e2m1_code(x[i], 2.0f)) * 2.0f;
    EXPECT_EQ(e2m1_element(codes, static_cast<size_t>(i)) * fp8_e4m3_to_f32(scale), want) << i;
  }
  EXPECT_EQ(e2m1_element(codes, 0) * 2.0f, 12.0f);
  EXPECT_EQ(e2m1_element(codes, 1) * 2.0f, -12.0f);
  // All zero (or tiny: amax / 6 rounds to e4m3 0) -> scale 0, codes 0.
  float z[16] = {};
  z[3] = 1e-4f;
  quantize_nvfp4_group(z, codes, &scale);
  EXPECT_EQ(scale, 0);
  for (uint8_t c : codes) EXPECT_EQ(c, 0);
  // Past the scale's range: scale saturates at 448, codes at 6.
  float big[16];
  std::fill(big, big + 16, 1e6f);
  quantize_nvfp4_group(big, codes, &scale);
  EXPECT_EQ(fp8_e4m3_to_f32(scale), 448.0f);
  EXPECT_EQ(codes[0], 0x77);
}

}  // namespace
