// The cpu-ref kernels validate index data eagerly: bad page ids, duplicate block
// indices, inconsistent cu_q / kv_len / NQ and bad items throw msa::Error naming the
// argument, before any output is written. Kernels are called straight from the kernel
// table, bypassing the ops:: host checks.
#include <gtest/gtest.h>

#include <vector>

#include "ops/ops.h"
#include "tests/cpu_ref/ref_util.h"

namespace msa::cpu_ref_test {
namespace {

using hal::OpId;

// Two sequences (q_len 2 and 1, kv_len 6 and 3), Bs 4, P 4, max_blocks 3, Hq = Hkv = 1.
struct Small {
  Ref ref;
  std::vector<int32_t> bt = {2, 0, -5, 3, 77, 77};  // entries past the last block: junk
  std::vector<int32_t> kv = {6, 3}, cu = {0, 2, 3};
  std::vector<int32_t> sel = {0, 1, -1, /*qb 1*/ 1, -1, -1, /*qb 2*/ 0, 5, 5};
  int64_t NQ = 3;

  ops::SparseAttentionArgs sparse() {
    ops::SparseAttentionArgs a;
    a.q = ref.make(DType::f32, {3, 1, 4}, random_values(12, DType::f32, 1));
    a.k_cache = ref.make(DType::f32, {4, 1, 4, 4}, random_values(64, DType::f32, 2));
    a.v_cache = ref.make(DType::f32, {4, 1, 4, 4}, random_values(64, DType::f32, 3));
    a.block_table = ref.make_i32({2, 3}, bt);
    a.kv_len = ref.make_i32({2}, kv);
    a.cu_q = ref.make_i32({3}, cu);
    a.NQ = NQ;
    a.block_idx = ref.make_i32({NQ, 1, 3}, sel);
    a.scale = 0.5f;
    a.out = ref.out(DType::f32, {3, 1, 4});
    a.lse = ref.out(DType::f32, {3, 1});
    return a;
  }
  ops::DenseAttentionArgs dense() {
    const ops::SparseAttentionArgs s = sparse();
    ops::DenseAttentionArgs a;
    a.q = s.q, a.k_cache = s.k_cache, a.v_cache = s.v_cache, a.block_table = s.block_table;
    a.kv_len = s.kv_len, a.cu_q = s.cu_q, a.scale = s.scale, a.out = s.out, a.lse = s.lse;
    return a;
  }
  ops::IndexerScoreArgs indexer() {
    ops::IndexerScoreArgs a;
    a.qi = ref.make(DType::f32, {3, 1, 4}, random_values(12, DType::f32, 4));
    a.ki_cache = ref.make(DType::bf16, {4, 4, 4}, random_values(64, DType::bf16, 5));
    a.block_table = ref.make_i32({2, 3}, bt);
    a.kv_len = ref.make_i32({2}, kv);
    a.cu_q = ref.make_i32({3}, cu);
    a.NQ = NQ;
    a.scale = 1.0f;
    a.block_score = ref.out(DType::f32, {NQ, 1, 3});
    return a;
  }
  ops::BlockTopkArgs topk() {
    ops::BlockTopkArgs a;
    a.block_score = ref.make(DType::f32, {NQ, 1, 3}, random_values(static_cast<size_t>(NQ) * 3, DType::f32, 6));
    a.kv_len = ref.make_i32({2}, kv);
    a.cu_q = ref.make_i32({3}, cu);
    a.NQ = NQ;
    a.Bs = 4;
    a.k = 1;
    a.block_idx = ref.out(DType::i32, {NQ, 1, 1});
    a.block_cnt = ref.out(DType::i32, {NQ, 1});
    return a;
  }
  ops::KvAppendArgs append() {
    ops::KvAppendArgs a;
    a.k = ref.make(DType::f32, {3, 1, 4}, random_values(12, DType::f32, 7));
    a.v = ref.make(DType::f32, {3, 1, 4}, random_values(12, DType::f32, 8));
    a.block_table = ref.make_i32({2, 3}, bt);
    a.kv_len = ref.make_i32({2}, kv);
    a.cu_q = ref.make_i32({3}, cu);
    a.k_cache = ref.make(DType::f32, {4, 1, 4, 4}, random_values(64, DType::f32, 9));
    a.v_cache = ref.make(DType::f32, {4, 1, 4, 4}, random_values(64, DType::f32, 10));
    return a;
  }
};

// Every op that reads block_table, with the same bad table.
void expect_all_paged_ops_throw(std::vector<int32_t> bt, std::initializer_list<const char*> parts) {
  Small s;
  s.bt = bt;
  expect_error([&] { s.ref.run(OpId::sparse_block_attention, s.sparse()); }, parts);
  expect_error([&] { s.ref.run(OpId::dense_attention, s.dense()); }, parts);
  expect_error([&] { s.ref.run(OpId::indexer_score, s.indexer()); }, parts);
  expect_error([&] { s.ref.run(OpId::kv_append, s.append()); }, parts);
}

TEST(CpuRefValidation, ValidSmallCaseRuns) {
  Small s;
  EXPECT_NO_THROW(s.ref.run(OpId::sparse_block_attention, s.sparse()));
  EXPECT_NO_THROW(s.ref.run(OpId::dense_attention, s.dense()));
  EXPECT_NO_THROW(s.ref.run(OpId::indexer_score, s.indexer()));
  EXPECT_NO_THROW(s.ref.run(OpId::block_topk, s.topk()));
  EXPECT_NO_THROW(s.ref.run(OpId::kv_append, s.append()));
}

TEST(CpuRefValidation, PageIdOutOfRange) {
  expect_all_paged_ops_throw({2, 4, -5, 3, 77, 77}, {"block_table", "[0][1]", "4"});
  expect_all_paged_ops_throw({2, 0, -5, -1, 77, 77}, {"block_table", "[1][0]"});
}

TEST(CpuRefValidation, DuplicateBlockIndex) {
  Small s;
  s.sel = {0, 1, 1, /*qb 1*/ 1, -1, -1, /*qb 2*/ 0, 5, 5};
  ops::SparseAttentionArgs a = s.sparse();
  expect_error([&] { s.ref.run(OpId::sparse_block_attention, a); }, {"block_idx", "more than once"});
  // Nothing was written: the output is still poisoned.
  for (float x : s.ref.get(a.out)) EXPECT_TRUE(std::isnan(x));
  // Through ops:: as well.
  expect_error([&] { ops::sparse_block_attention(s.ref.device(), a); }, {"block_idx"});
}

TEST(CpuRefValidation, RepeatedPaddingAndOutOfRangeEntriesAreFine) {
  Small s;
  s.sel = {-1, -1, -1, /*qb 1*/ 9, 9, -3, /*qb 2*/ 1, 1, 0};  // 1 >= ceil(3/4) for seq 1
  EXPECT_NO_THROW(s.ref.run(OpId::sparse_block_attention, s.sparse()));
}

TEST(CpuRefValidation, BadCuQ) {
  for (auto cu : {std::vector<int32_t>{1, 2, 3}, {0, 3, 2}, {0, 1, 2}}) {
    Small s;
    s.cu = cu;
    s.kv = {6, 6};
    expect_error([&] { s.ref.run(OpId::dense_attention, s.dense()); }, {"cu_q"});
    expect_error([&] { s.ref.run(OpId::kv_append, s.append()); }, {"cu_q"});
  }
}

TEST(CpuRefValidation, BadKvLen) {
  for (auto kv : {std::vector<int32_t>{1, 3}, {6, -1}, {13, 3}}) {  // < q_len, < 0, > 3 * 4
    Small s;
    s.kv = kv;
    expect_error([&] { s.ref.run(OpId::sparse_block_attention, s.sparse()); }, {"kv_len"});
    expect_error([&] { s.ref.run(OpId::indexer_score, s.indexer()); }, {"kv_len"});
    expect_error([&] { s.ref.run(OpId::block_topk, s.topk()); }, {"kv_len"});
  }
}

TEST(CpuRefValidation, WrongNQ) {
  Small s;
  s.NQ = 2;
  s.sel.resize(6);
  expect_error([&] { s.ref.run(OpId::sparse_block_attention, s.sparse()); }, {"NQ"});
  expect_error([&] { s.ref.run(OpId::indexer_score, s.indexer()); }, {"NQ"});
  expect_error([&] { s.ref.run(OpId::block_topk, s.topk()); }, {"NQ"});
}

TEST(CpuRefValidation, ForcedBlocksBeyondKWithOddBlockSize) {
  // Bs 3, Qb 4: queries at 4..7 form one query block spanning blocks 1 and 2, two forced
  // blocks, more than k = 1 although the host formula max(1, Qb/Bs) = 1 allows k = 1.
  Ref ref;
  ops::BlockTopkArgs a;
  a.block_score = ref.make(DType::f32, {1, 1, 3}, {1, 2, 3});
  a.kv_len = ref.make_i32({1}, {8});
  a.cu_q = ref.make_i32({2}, {0, 4});
  a.Qb = 4;
  a.NQ = 1;
  a.Bs = 3;
  a.k = 1;
  a.block_idx = ref.out(DType::i32, {1, 1, 1});
  a.block_cnt = ref.out(DType::i32, {1, 1});
  expect_error([&] { ops::block_topk(ref.device(), a); }, {"'k'", "forced"});
}

TEST(CpuRefValidation, PatchItemsMustCoverN) {
  for (auto items : {std::vector<int32_t>{1, 2, 2, 1, 1, 1}, {1, 2, 3}, {1, 0, 4}, {-1, -2, 2}}) {
    Ref ref;
    ops::PatchAttention3dArgs a;
    a.q = ref.make(DType::f32, {4, 1, 2}, random_values(8, DType::f32, 1));
    a.k = a.q;
    a.v = ref.make(DType::f32, {4, 1, 2}, random_values(8, DType::f32, 2));
    a.items = ref.make_i32({static_cast<int64_t>(items.size() / 3), 3}, items);
    a.out = ref.out(DType::f32, {4, 1, 2});
    a.lse = ref.out(DType::f32, {4, 1});
    expect_error([&] { ref.run(OpId::patch_attention_3d, a); }, {"items"});
  }
}

}  // namespace
}  // namespace msa::cpu_ref_test
