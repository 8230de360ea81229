// The portable training kernels in the CPU emulation (waves 32 and 64) on what the case
// library's cross-check does not pin down: the device-side index checks (the emulated
// device is not host-accessible, so no host check runs first) raise the forward ops'
// errors naming the argument, and key slots no query attended, NaN slack slots and
// spare pages get exactly 0 in dk_cache / dv_cache / dki_cache.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "hal/error.h"
#include "hal/host_tensor.h"
#include "ops/ops.h"
#include "tests/hip/emu/emu_device.h"

namespace {

using msa::hal::DType;
using msa::hal::HostTensor;

// Decode batch: 2 sequences (kv_len 13 and 9, one query each), Hq = 4, Hkv = 2, Bs = 8,
// D = Di = 16, pages 0-1 and 2-3 and a spare page 4; slack slots hold NaN.
struct Tiny {
  static constexpr int kBs = 8, kD = 16, kP = 5;
  HostTensor q{DType::f32, {2, 4, kD}}, dout{DType::f32, {2, 4, kD}};
  HostTensor k{DType::f32, {kP, 2, kBs, kD}}, v{DType::f32, {kP, 2, kBs, kD}};
  HostTensor qi{DType::f32, {2, 2, kD}}, ki{DType::f32, {kP, kBs, kD}};
  HostTensor table{DType::i32, {2, 2}}, kv_len{DType::i32, {2}}, cu_q{DType::i32, {3}};
  HostTensor block_idx{DType::i32, {2, 2, 2}};
  int64_t NQ = 2;

  Tiny() {
    for (HostTensor* t : {&q, &dout, &k, &v, &qi, &ki})
      for (int64_t i = 0; i < t->numel(); ++i) t->set(i, 0.5f * std::sin(0.37f * static_cast<float>(i) + 1.0f));
    const int32_t tab[] = {0, 1, 2, 3}, len[] = {13, 9}, cu[] = {0, 1, 2}, idx[] = {0, 1, 1, -1, 1, 0, 0, 5};
    std::copy(tab, tab + 4, table.data<int32_t>());
    std::copy(len, len + 2, kv_len.data<int32_t>());
    std::copy(cu, cu + 3, cu_q.data<int32_t>());
    std::copy(idx, idx + 8, block_idx.data<int32_t>());
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int page = 0; page < kP; ++page)
      for (int s = 0; s < kBs; ++s)
        if (!live(page, s))
          for (int d = 0; d < kD; ++d) {
            for (int g = 0; g < 2; ++g)
              k.set(((page * 2 + g) * kBs + s) * kD + d, nan), v.set(((page * 2 + g) * kBs + s) * kD + d, nan);
            ki.set((page * kBs + s) * kD + d, nan);
          }
  }
  // Whether slot s of page holds a token (slack slots and the spare page do not).
  static bool live(int page, int s) { return page == 0 || page == 2 || (page == 1 && s < 5) || (page == 3 && s < 1); }
};

// Runs `fn` on the emulated device with the batch's tensors uploaded, then synchronizes
// (device-side checks raise there).
struct Run {
  std::unique_ptr<msa::hal::Device> dev;
  std::vector<msa::hal::Device::Owned> keep;
  msa::hal::Tensor up(const HostTensor& h) {
    keep.push_back(msa::hal::to_device(*dev, h));
    return keep.back().tensor;
  }
  msa::hal::Tensor out(std::initializer_list<int64_t> shape) { return up(HostTensor(DType::f32, shape)); }
};

Run make_run(int wave) {
  Run r;
  r.dev = wave == 64 ? msa::emu64::make_emu_device() : msa::emu32::make_emu_device();
  return r;
}

// The forward's out and lse on the same device (inputs of the backward).
std::pair<msa::hal::Tensor, msa::hal::Tensor> forward(Run& r, const Tiny& b, bool sparse) {
  const auto out = r.out({2, 4, Tiny::kD}), lse = r.out({2, 4});
  if (sparse) {
    msa::ops::SparseAttentionArgs a;
    a.q = r.up(b.q), a.k_cache = r.up(b.k), a.v_cache = r.up(b.v), a.block_table = r.up(b.table);
    a.kv_len = r.up(b.kv_len), a.cu_q = r.up(b.cu_q), a.block_idx = r.up(b.block_idx), a.NQ = b.NQ;
    a.out = out, a.lse = lse;
    msa::ops::sparse_block_attention(*r.dev, a);
  } else {
    msa::ops::DenseAttentionArgs a;
    a.q = r.up(b.q), a.k_cache = r.up(b.k), a.v_cache = r.up(b.v), a.block_table = r.up(b.table);
    a.kv_len = r.up(b.kv_len), a.cu_q = r.up(b.cu_q), a.out = out, a.lse = lse;
    msa::ops::dense_attention(*r.dev, a);
  }
  r.dev->stream().synchronize();
  return {out, lse};
}

// The key-side gradients (dk_cache and dv_cache, or dki_cache) of one op on `bad`, with
// out/lse from the forward on `good` (a bad batch would fail there first).
using KeyGrads = std::vector<HostTensor>;
KeyGrads run_op(int wave, const std::string& op, const Tiny& good, const Tiny& bad) {
  Run r = make_run(wave);
  const bool sparse = op != "dense_attention_backward" && op != "indexer_kl_dense";
  const auto [out, lse] = forward(r, good, sparse);
  const auto dk = r.out({Tiny::kP, 2, Tiny::kBs, Tiny::kD}), dv = r.out({Tiny::kP, 2, Tiny::kBs, Tiny::kD});
  if (op == "sparse_block_attention_backward" || op == "dense_attention_backward") {
    const auto dq = r.out({2, 4, Tiny::kD});
    if (sparse) {
      msa::ops::SparseAttentionBackwardArgs a;
      a.dout = r.up(bad.dout), a.q = r.up(bad.q), a.k_cache = r.up(bad.k), a.v_cache = r.up(bad.v);
      a.block_table = r.up(bad.table), a.kv_len = r.up(bad.kv_len), a.cu_q = r.up(bad.cu_q);
      a.block_idx = r.up(bad.block_idx), a.NQ = bad.NQ, a.out = out, a.lse = lse, a.dq = dq, a.dk_cache = dk,
      a.dv_cache = dv;
      msa::ops::sparse_block_attention_backward(*r.dev, a);
    } else {
      msa::ops::DenseAttentionBackwardArgs a;
      a.dout = r.up(bad.dout), a.q = r.up(bad.q), a.k_cache = r.up(bad.k), a.v_cache = r.up(bad.v);
      a.block_table = r.up(bad.table), a.kv_len = r.up(bad.kv_len), a.cu_q = r.up(bad.cu_q);
      a.out = out, a.lse = lse, a.dq = dq, a.dk_cache = dk, a.dv_cache = dv;
      msa::ops::dense_attention_backward(*r.dev, a);
    }
    r.dev->stream().synchronize();
    return {msa::hal::to_host(*r.dev, dk), msa::hal::to_host(*r.dev, dv)};
  }
  msa::ops::IndexerKlArgs a;
  a.qi = r.up(bad.qi), a.ki_cache = r.up(bad.ki), a.q = r.up(bad.q), a.k_cache = r.up(bad.k), a.lse = lse;
  a.block_table = r.up(bad.table), a.kv_len = r.up(bad.kv_len), a.cu_q = r.up(bad.cu_q);
  a.stage = sparse ? msa::ops::KlStage::sparse : msa::ops::KlStage::dense;
  if (sparse) a.block_idx = r.up(bad.block_idx), a.NQ = bad.NQ;
  a.kl = r.out({2, 2}), a.dqi = r.out({2, 2, Tiny::kD});
  const auto dki = r.out({Tiny::kP, Tiny::kBs, Tiny::kD});
  a.dki_cache = dki;
  msa::ops::indexer_kl(*r.dev, a);
  r.dev->stream().synchronize();
  return {msa::hal::to_host(*r.dev, dki)};
}

const char* const kOps[] = {"sparse_block_attention_backward", "dense_attention_backward", "indexer_kl",
                            "indexer_kl_dense"};

// The error `fn` throws ("" when none).
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const msa::Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(int wave, const Tiny& bad, const std::string& arg, bool sparse_only = false) {
  const Tiny good;
  for (const std::string op : kOps) {
    const bool sparse = op != "dense_attention_backward" && op != "indexer_kl_dense";
    if (sparse_only && !sparse) continue;
    const std::string e = error_of([&] { run_op(wave, op, good, bad); });
    const std::string name = op == "indexer_kl_dense" ? "indexer_kl" : op;
    EXPECT_NE(e.find("argument '" + arg + "'"), std::string::npos) << op << " at wave " << wave << ": '" << e << "'";
    EXPECT_NE(e.find("by " + name), std::string::npos) << op << " at wave " << wave << ": '" << e << "'";
  }
}

class TrainingEmu : public ::testing::TestWithParam<int> {};

TEST_P(TrainingEmu, BadPageOfAnAttendedBlockIsFlagged) {
  Tiny bad;
  bad.table.data<int32_t>()[2] = 99;  // sequence 1, block 0 (selected and attended)
  expect_error(GetParam(), bad, "block_table");
}

TEST_P(TrainingEmu, KvLenPastTheTableIsFlagged) {
  Tiny bad;
  bad.kv_len.data<int32_t>()[1] = 17;  // > max_blocks * Bs = 16
  expect_error(GetParam(), bad, "kv_len");
}

TEST_P(TrainingEmu, NqDisagreeingWithTheBatchIsFlagged) {
  Tiny bad;
  bad.NQ = 3;
  bad.block_idx = HostTensor(DType::i32, {3, 2, 2});
  for (int64_t i = 0; i < 12; ++i) bad.block_idx.data<int32_t>()[i] = static_cast<int32_t>(i % 2);
  expect_error(GetParam(), bad, "NQ", /*sparse_only=*/true);
}

TEST_P(TrainingEmu, UnattendedSlackAndSparePagesGetZero) {
  const Tiny b;
  for (const std::string op : kOps) {
    const KeyGrads grads = run_op(GetParam(), op, b, b);
    for (const HostTensor& g : grads) {
      const int heads = g.shape.size() == 4 ? 2 : 1;
      int nonzero = 0;
      for (int page = 0; page < Tiny::kP; ++page)
        for (int h = 0; h < heads; ++h)
          for (int s = 0; s < Tiny::kBs; ++s)
            for (int d = 0; d < Tiny::kD; ++d) {
              const float x = g.get(((page * heads + h) * Tiny::kBs + s) * Tiny::kD + d);
              ASSERT_TRUE(std::isfinite(x)) << op << " page " << page << " slot " << s;
              if (!Tiny::live(page, s)) EXPECT_EQ(x, 0.0f) << op << " page " << page << " slot " << s;
              nonzero += x != 0.0f;
            }
      EXPECT_GT(nonzero, 0) << op << ": attended slots must get a gradient";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Waves, TrainingEmu, ::testing::Values(32, 64),
                         [](const auto& info) { return "wave" + std::to_string(info.param); });

}  // namespace
