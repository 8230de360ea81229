// Argument errors of the training ops: host checks name the argument; the cpu-ref
// kernels' eager checks of index data name it too; backends without the op refuse it.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "hal/host_device.h"
#include "hal/host_tensor.h"

#include "tests/training/training_util.h"

namespace msa::training_test {
namespace {

using cpu_ref_test::expect_error;

struct SparseBackwardCall {
  Ref r;
  PagedCase c = make_paged_case({3}, {6}, 4, 2, 1, 4, 91);
  ops::SparseAttentionBackwardArgs a;

  SparseBackwardCall() {
    select_random(c, 1, 2, ops::SelectionMode::per_kv_head, 92);
    const Forward f = paged_forward(r, c, true, c.q, c.k, c.v);
    a.dout = r.make(DType::f32, c.q_shape(), c.dout);
    a.q = r.make(DType::f32, c.q_shape(), c.q);
    a.k_cache = r.make(DType::f32, c.kv_shape(), c.k);
    a.v_cache = r.make(DType::f32, c.kv_shape(), c.v);
    a.block_table = r.make_i32({c.L.B, c.L.max_blocks}, c.L.block_table);
    a.kv_len = r.make_i32({c.L.B}, c.L.kv_len);
    a.cu_q = r.make_i32({c.L.B + 1}, c.L.cu_q);
    a.NQ = c.qbs.nq();
    a.block_idx = r.make_i32({c.qbs.nq(), c.Hs(), c.K}, c.block_idx);
    a.out = r.make(DType::f32, c.q_shape(), f.out);
    a.lse = r.make(DType::f32, {c.L.T, c.Hq}, f.lse);
    a.dq = r.out(DType::f32, c.q_shape());
    a.dk_cache = r.out(DType::f32, c.kv_shape());
    a.dv_cache = r.out(DType::f32, c.kv_shape());
  }
  void run() { ops::sparse_block_attention_backward(r.device(), a); }
};

TEST(TrainingValidation, SparseBackwardNamesTheArgument) {
  {
    SparseBackwardCall s;
    s.run();
  }  // the unmodified call is valid
  {
    SparseBackwardCall s;
    s.a.dq = s.r.out(DType::bf16, s.c.q_shape());
    expect_error([&] { s.run(); }, {"sparse_block_attention_backward", "'dq'", "f32"});
  }
  {
    SparseBackwardCall s;
    s.a.dout = s.r.out(DType::f32, {s.c.L.T, s.c.Hq, s.c.D + 1});
    expect_error([&] { s.run(); }, {"'dout'"});
  }
  {
    SparseBackwardCall s;
    s.a.dk_cache = s.r.out(DType::f32, {s.c.L.P, 1, s.c.L.Bs, s.c.D + 1});
    expect_error([&] { s.run(); }, {"'dk_cache'"});
  }
  {
    SparseBackwardCall s;
    s.a.dv_cache = s.a.dk_cache;
    expect_error([&] { s.run(); }, {"'dv_cache'", "overlaps"});
  }
  {
    SparseBackwardCall s;
    s.a.lse = s.r.out(DType::f32, {s.c.L.T, s.c.Hq + 1});
    expect_error([&] { s.run(); }, {"'lse'"});
  }
  {
    SparseBackwardCall s;
    s.a.NQ += 1;
    s.a.block_idx = s.r.make_i32({s.a.NQ, 1, 2}, std::vector<int32_t>(static_cast<size_t>(s.a.NQ) * 2, -1));
    expect_error([&] { s.run(); }, {"'NQ'"});
  }
  {
    SparseBackwardCall s;
    s.a.scale = INFINITY;
    expect_error([&] { s.run(); }, {"'scale'"});
  }
  {
    SparseBackwardCall s;
    std::vector<int32_t> bi = s.c.block_idx;
    bi[0] = 0;
    bi[1] = 0;
    s.a.block_idx = s.r.make_i32({s.c.qbs.nq(), 1, 2}, bi);
    expect_error([&] { s.run(); }, {"'block_idx'", "more than once"});
  }
  {
    SparseBackwardCall s;
    std::vector<int32_t> bt = s.c.L.block_table;
    bt[0] = 999;
    s.a.block_table = s.r.make_i32({s.c.L.B, s.c.L.max_blocks}, bt);
    expect_error([&] { s.run(); }, {"'block_table'"});
  }
}

TEST(TrainingValidation, IndexerKlNamesTheArgument) {
  Ref r;
  PagedCase c = make_paged_case({3}, {6}, 4, 2, 1, 4, 93);
  const Forward f = paged_forward(r, c, false, c.q, c.k, c.v);
  const auto call = [&](auto&& edit) {
    ops::IndexerKlArgs a;
    a.qi = r.make(DType::f32, {c.L.T, 1, 4}, std::vector<float>(c.L.T * 4, 0.5f));
    a.ki_cache = r.make(DType::f32, {c.L.P, c.L.Bs, 4}, std::vector<float>(c.L.P * c.L.Bs * 4, 0.25f));
    a.q = r.make(DType::f32, c.q_shape(), c.q);
    a.k_cache = r.make(DType::f32, c.kv_shape(), c.k);
    a.lse = r.make(DType::f32, {c.L.T, c.Hq}, f.lse);
    a.block_table = r.make_i32({c.L.B, c.L.max_blocks}, c.L.block_table);
    a.kv_len = r.make_i32({c.L.B}, c.L.kv_len);
    a.cu_q = r.make_i32({c.L.B + 1}, c.L.cu_q);
    a.stage = ops::KlStage::dense;
    a.kl = r.out(DType::f32, {c.L.T, 1});
    a.dqi = r.out(DType::f32, {c.L.T, 1, 4});
    a.dki_cache = r.out(DType::f32, {c.L.P, c.L.Bs, 4});
    edit(a);
    ops::indexer_kl(r.device(), a);
  };
  call([](ops::IndexerKlArgs&) {});  // valid
  expect_error([&] { call([&](ops::IndexerKlArgs& a) {
                       a.ki_cache = r.out(DType::fp8_e4m3, {c.L.P, c.L.Bs, 4});
                     }); },
               {"indexer_kl", "'ki_cache'", "inference formats"});
  expect_error([&] { call([&](ops::IndexerKlArgs& a) {
                       a.block_idx = r.make_i32({1, 1, 1}, {0});
                     }); },
               {"'block_idx'", "stage sparse"});
  expect_error([&] { call([&](ops::IndexerKlArgs& a) { a.stage = ops::KlStage::sparse; }); }, {"'block_idx'"});
  expect_error([&] { call([&](ops::IndexerKlArgs& a) { a.dkl = r.out(DType::f32, {c.L.T, 2}); }); }, {"'dkl'"});
  expect_error([&] { call([&](ops::IndexerKlArgs& a) {
                       a.qi = r.out(DType::f32, {c.L.T, 2, 4});
                     }); },
               {"'qi'", "Hi == Hs"});
  expect_error([&] { call([&](ops::IndexerKlArgs& a) {
                       a.dki_cache = r.out(DType::f32, {c.L.P, c.L.Bs, 5});
                     }); },
               {"'dki_cache'"});
  expect_error([&] { call([&](ops::IndexerKlArgs& a) { a.scale_i = NAN; }); }, {"'scale_i'"});
  expect_error([&] { call([&](ops::IndexerKlArgs& a) { a.stage = static_cast<ops::KlStage>(7); }); }, {"'stage'"});
}

TEST(TrainingValidation, PatchBackwardNamesTheArgument) {
  Ref r;
  const std::vector<float> x(4 * 1 * 2, 0.5f);
  ops::PatchAttention3dBackwardArgs a;
  a.dout = r.make(DType::f32, {4, 1, 2}, x), a.q = a.dout, a.k = a.dout, a.v = a.dout;
  a.items = r.make_i32({1, 3}, {1, 2, 3});  // 6 patches for N = 4
  a.out = a.dout, a.lse = r.make(DType::f32, {4, 1}, {0, 0, 0, 0});
  a.dq = r.out(DType::f32, {4, 1, 2}), a.dk = r.out(DType::f32, {4, 1, 2}), a.dv = r.out(DType::f32, {4, 1, 2});
  expect_error([&] { ops::patch_attention_3d_backward(r.device(), a); }, {"patch_attention_3d_backward", "'items'"});
  a.items = r.make_i32({1, 3}, {1, 2, 2});
  a.dk = a.q;
  expect_error([&] { ops::patch_attention_3d_backward(r.device(), a); }, {"'dk'"});
}

// A device whose kernel table lacks the op refuses it with the dispatch error.
TEST(TrainingValidation, AbsentKernelIsNotSupported) {
  hal::HostDevice bare("bare", "bare", hal::KernelTable{}, 1);
  std::vector<hal::Device::Owned> keep;
  const auto make = [&](hal::DType t, std::vector<int64_t> shape) {
    hal::HostTensor h(t, std::move(shape));
    std::fill(h.bytes.begin(), h.bytes.end(), uint8_t{0});
    keep.push_back(hal::to_device(bare, h));
    return keep.back().tensor;
  };
  ops::PatchAttention3dBackwardArgs a;
  a.dout = make(DType::f32, {4, 1, 2}), a.q = make(DType::f32, {4, 1, 2}), a.k = make(DType::f32, {4, 1, 2});
  a.v = make(DType::f32, {4, 1, 2}), a.out = make(DType::f32, {4, 1, 2}), a.lse = make(DType::f32, {4, 1});
  hal::HostTensor items(DType::i32, {1, 3});
  items.data<int32_t>()[0] = 1, items.data<int32_t>()[1] = 2, items.data<int32_t>()[2] = 2;
  keep.push_back(hal::to_device(bare, items));
  a.items = keep.back().tensor;
  a.dq = make(DType::f32, {4, 1, 2}), a.dk = make(DType::f32, {4, 1, 2}), a.dv = make(DType::f32, {4, 1, 2});
  expect_error([&] { ops::patch_attention_3d_backward(bare, a); },
               {"patch_attention_3d_backward: not supported on bare: not implemented by this backend"});
}

}  // namespace
}  // namespace msa::training_test
