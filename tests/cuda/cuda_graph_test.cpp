// The MSA layer path is CUDA-graph capturable: indexer_score -> block_topk ->
// sparse_block_attention (split-KV decode, so the workspace and the merge launch are in
// the graph) captured on the device's stream, replayed, and compared bitwise with the
// same ops run uncaptured; then the inputs change in place and a replay must follow
// them. Also ops::indexer_topk: one kernel on this shape (the fused select), equal to
// the two ops. Runs with bf16 and fp8 indexer keys. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/graph.h"
#include "hal/error.h"
#include "hal/host_tensor.h"
#include "hal/registry.h"
#include "ops/ops.h"
#include "tests/common/no_cuda_device.h"

namespace msa {
namespace {

// A decode step of B sequences (one query each) through the whole MSA selection path.
struct Layer {
  int B = 3, Hq = 16, Hkv = 2, D = 128, Di = 64, Bs = 64, MB = 8, k = 4;
  std::vector<hal::Device::Owned> keep;
  ops::IndexerScoreArgs ix;
  ops::BlockTopkArgs tk;
  ops::SparseAttentionArgs at;
  hal::Tensor qi, q;

  hal::Tensor up(hal::Device& dev, const hal::HostTensor& h) {
    keep.push_back(hal::to_device(dev, h));
    return keep.back().tensor;
  }
  hal::Tensor out(hal::Device& dev, hal::DType t, std::initializer_list<int64_t> shape) {
    keep.push_back(dev.alloc_tensor(t, shape));
    return keep.back().tensor;
  }
  static hal::HostTensor rnd(hal::DType t, std::vector<int64_t> shape, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-2, 2);
    hal::HostTensor h(t, shape);
    for (int64_t i = 0; i < h.numel(); ++i) h.set(static_cast<size_t>(i), u(rng));
    return h;
  }

  void build(hal::Device& dev, hal::DType key_dt) {
    if (key_dt == hal::DType::fp4_e2m1x2) Di = 128;  // the tensor-core decode indexer's NVFP4 width
    const int P = B * MB;
    hal::HostTensor bt(hal::DType::i32, {B, MB}), kvl(hal::DType::i32, {B}), cu(hal::DType::i32, {B + 1});
    const int lens[3] = {MB * Bs, 300, 5 * Bs + 1};
    for (int b = 0; b < B; ++b) {
      for (int c = 0; c < MB; ++c) bt.data<int32_t>()[b * MB + c] = (b * MB + c * 5) % P;  // scattered pages
      kvl.data<int32_t>()[b] = lens[b % 3];
      cu.data<int32_t>()[b] = b;
    }
    cu.data<int32_t>()[B] = B;
    const hal::Tensor btd = up(dev, bt), kvd = up(dev, kvl), cud = up(dev, cu);
    qi = up(dev, rnd(hal::DType::bf16, {B, Hkv, Di}, 1));
    q = up(dev, rnd(hal::DType::bf16, {B, Hq, D}, 2));

    ix.qi = qi;
    if (key_dt == hal::DType::fp4_e2m1x2) {  // NVFP4: random code bytes, e4m3 group scales in [0.5, 2]
      hal::HostTensor codes(key_dt, {P, Bs, Di / 2}), scales(hal::DType::fp8_e4m3, {P, Bs, Di / 16});
      std::mt19937 rng(3);
      for (int64_t i = 0; i < codes.numel(); ++i) codes.data<uint8_t>()[i] = static_cast<uint8_t>(rng() & 0xffu);
      for (int64_t i = 0; i < scales.numel(); ++i)
        scales.set(static_cast<size_t>(i), 0.5f + static_cast<float>(rng() % 16) / 10.0f);
      ix.ki_cache = up(dev, codes);
      ix.ki_scale = up(dev, scales);
    } else {
      ix.ki_cache = up(dev, rnd(key_dt, {P, Bs, Di}, 3));
    }
    if (key_dt == hal::DType::fp8_e4m3) ix.ki_scale = up(dev, rnd(hal::DType::f32, {P, Bs}, 4));
    ix.block_table = btd;
    ix.kv_len = kvd;
    ix.cu_q = cud;
    ix.Qb = 1;
    ix.NQ = B;
    ix.block_score = out(dev, hal::DType::f32, {B, Hkv, MB});

    tk.block_score = ix.block_score;
    tk.kv_len = kvd;
    tk.cu_q = cud;
    tk.Qb = 1;
    tk.NQ = B;
    tk.Bs = Bs;
    tk.k = k;
    tk.n_sink = 1;
    tk.n_local = 1;
    tk.block_idx = out(dev, hal::DType::i32, {B, Hkv, k});
    tk.block_cnt = out(dev, hal::DType::i32, {B, Hkv});

    at.q = q;
    at.k_cache = up(dev, rnd(hal::DType::bf16, {P, Hkv, Bs, D}, 5));
    at.v_cache = up(dev, rnd(hal::DType::bf16, {P, Hkv, Bs, D}, 6));
    at.block_table = btd;
    at.kv_len = kvd;
    at.cu_q = cud;
    at.Qb = 1;
    at.NQ = B;
    at.block_idx = tk.block_idx;
    at.out = out(dev, hal::DType::bf16, {B, Hq, D});
    at.lse = out(dev, hal::DType::f32, {B, Hq});
  }
  void run(hal::Device& dev) const {
    ops::indexer_score(dev, ix);
    ops::block_topk(dev, tk);
    ops::sparse_block_attention(dev, at);
  }
  // Every output as raw bytes (waits for the stream).
  std::vector<uint8_t> outputs(hal::Device& dev) const {
    std::vector<uint8_t> all;
    for (const hal::Tensor* t : {&ix.block_score, &tk.block_idx, &tk.block_cnt, &at.out, &at.lse}) {
      std::vector<uint8_t> b(t->nbytes());
      dev.stream().download(b.data(), *t);
      all.insert(all.end(), b.begin(), b.end());
    }
    return all;
  }
  void poison(hal::Device& dev) const {
    for (const hal::Tensor* t : {&ix.block_score, &tk.block_idx, &tk.block_cnt, &at.out, &at.lse})
      dev.stream().fill_bytes(*t, 0xA5);
  }
};

class CudaGraph : public ::testing::TestWithParam<hal::DType> {
 protected:
  void SetUp() override {
    if (std::string why = test::no_cuda_device(); !why.empty()) GTEST_SKIP() << why;
    dev = hal::create_device("cuda:0");
  }
  std::unique_ptr<hal::Device> dev;
};

TEST_P(CudaGraph, LayerReplayMatchesUncapturedBitwise) {
  Layer l;
  l.build(*dev, GetParam());
  l.run(*dev);  // warm-up: sizes the workspace, sets kernel attributes
  const std::vector<uint8_t> want = l.outputs(*dev);
  dev->stream().synchronize();

  l.poison(*dev);
  const std::vector<uint8_t> poisoned = l.outputs(*dev);
  ASSERT_NE(want, poisoned);
  cuda::CapturedGraph g(*dev);
  l.run(*dev);
  g.end();
  EXPECT_GE(g.nodes(), 3u);  // indexer, top-k, attention (+ merge)
  EXPECT_EQ(l.outputs(*dev), poisoned) << "capturing must record the ops, not run them";

  g.replay();
  g.replay();
  EXPECT_EQ(l.outputs(*dev), want);
  dev->stream().synchronize();

  // New queries in place: the replay reads the current data.
  dev->stream().upload(l.qi, Layer::rnd(hal::DType::bf16, {l.B, l.Hkv, l.Di}, 11).bytes.data());
  dev->stream().upload(l.q, Layer::rnd(hal::DType::bf16, {l.B, l.Hq, l.D}, 12).bytes.data());
  l.run(*dev);
  const std::vector<uint8_t> want2 = l.outputs(*dev);
  EXPECT_NE(want2, want);
  l.poison(*dev);
  g.replay();
  EXPECT_EQ(l.outputs(*dev), want2);
  EXPECT_NO_THROW(dev->stream().synchronize());
}

// ops::indexer_topk on this decode step is one kernel (the select fused into the indexer:
// one graph node where the two ops are two), equals the two ops bitwise, and replays: the
// per-query-block counters the fused kernel keeps are back to zero after every launch.
TEST_P(CudaGraph, FusedSelectionIsOneKernelEqualToTheTwoOps) {
  Layer l;
  l.build(*dev, GetParam());
  const auto selection = [&] {
    std::vector<uint8_t> all;
    for (const hal::Tensor* t : {&l.ix.block_score, &l.tk.block_idx, &l.tk.block_cnt}) {
      std::vector<uint8_t> b(t->nbytes());
      dev->stream().download(b.data(), *t);
      all.insert(all.end(), b.begin(), b.end());
    }
    return all;
  };
  ops::indexer_score(*dev, l.ix);
  ops::block_topk(*dev, l.tk);
  const std::vector<uint8_t> want = selection();
  l.poison(*dev);
  ops::indexer_topk(*dev, {l.ix, l.tk});  // uncaptured, twice: the counters reset themselves
  ops::indexer_topk(*dev, {l.ix, l.tk});
  EXPECT_EQ(selection(), want);

  l.poison(*dev);
  cuda::CapturedGraph g(*dev);
  ops::indexer_topk(*dev, {l.ix, l.tk});
  g.end();
  EXPECT_EQ(g.nodes(), 1u) << "indexer_topk ran as separate kernels: the fused path was not taken";
  g.replay();
  g.replay();
  EXPECT_EQ(selection(), want);
  dev->stream().upload(l.qi, Layer::rnd(hal::DType::bf16, {l.B, l.Hkv, l.Di}, 21).bytes.data());
  ops::indexer_score(*dev, l.ix);
  ops::block_topk(*dev, l.tk);
  const std::vector<uint8_t> want2 = selection();
  EXPECT_NE(want2, want);
  l.poison(*dev);
  g.replay();
  EXPECT_EQ(selection(), want2);
  EXPECT_NO_THROW(dev->stream().synchronize());
}

INSTANTIATE_TEST_SUITE_P(Keys, CudaGraph,
                         ::testing::Values(hal::DType::bf16, hal::DType::fp8_e4m3, hal::DType::fp4_e2m1x2),
                         [](const auto& info) { return std::string(hal::dtype_name(info.param)); });

}  // namespace
}  // namespace msa
