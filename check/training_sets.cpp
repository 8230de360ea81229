// The training ops' cases of the quick, full and perf sets (docs/training.md, "Cross-check cases").
#include <algorithm>
#include <cmath>

#include "check/set_builders.h"

namespace msa::cases::sets {

// A few small cases per training op: both selection modes, Qb 1 and > 1, empty
// selections and entries past the sequence, both indexer_kl stages.
void add_quick_training(CaseList& c) {
  {
    AttnParams p = attn(kDecodeVarlen, 8, 2, 64, 64, 1, 2, kBF16);
    p.empty_sel = true;
    c.push_back(sparse_attention_backward_case(p));
    p = attn(kPrefix, 4, 2, 64, 64, 1, 2, kF32);
    p.oob_idx = true;
    c.push_back(sparse_attention_backward_case(p));
    c.push_back(sparse_attention_backward_case(attn({{70}, {200}}, 4, 1, 80, 64, 64, 3, kF16, SelectionMode::shared)));
  }
  c.push_back(dense_attention_backward_case(attn(kMixed, 4, 2, 64, 64, 1, 0, kBF16)));
  c.push_back(dense_attention_backward_case(attn(kPrefix, 4, 2, 64, 64, 1, 0, kF32)));
  {
    VitParams v;
    v.items = {{1, 2, 2}, {5, 2, 3}};
    c.push_back(patch_attention_3d_backward_case(v));
    v.dtype = kF32;
    v.D = 64;
    c.push_back(patch_attention_3d_backward_case(v));
  }
  {
    AttnParams p = attn(kDecodeVarlen, 8, 2, 64, 64, 1, 2, kBF16);
    p.empty_sel = true;
    c.push_back(indexer_kl_case(p, KlStage::sparse, false));
    p = attn(kPrefix, 4, 2, 64, 64, 64, 2, kF32, SelectionMode::shared);
    p.ki_dtype = kF32;
    c.push_back(indexer_kl_case(p, KlStage::sparse, true));
    p = attn(kMixed, 4, 2, 64, 64, 1, 0, kF32);
    p.ki_dtype = kF32;
    c.push_back(indexer_kl_case(p, KlStage::dense, false));
    c.push_back(indexer_kl_case(attn(kPrefix, 4, 2, 64, 64, 1, 0, kBF16, SelectionMode::shared), KlStage::dense, true));
  }
}

// The training ops over the forward ops' shapes and dtypes, plus training-sized prefill
// (T up to 4K from an empty cache: kv_len == q_len).
void add_full_training(CaseList& c) {
  // sparse_block_attention_backward: the forward's variations, entries past the sequence
  // with query blocks spanning blocks, the reference head configuration (G = 16,
  // D = Bs = 128) in decode and in a chunk.
  add_sparse_variations(c, sparse_attention_backward_case);
  {
    AttnParams p = attn({{150}, {300}}, 4, 2, 64, 64, 128, 3, kF32);
    p.oob_idx = true;
    c.push_back(sparse_attention_backward_case(p));
    c.push_back(sparse_attention_backward_case(attn({{1, 1}, {2500, 1900}}, 64, 4, 128, 128, 1, 16, kBF16)));
    c.push_back(sparse_attention_backward_case(attn({{256}, {1024}}, 16, 1, 128, 128, 64, 4, kBF16)));
  }
  // dense_attention_backward: the forward's variations, a varlen prefill at G = 16 with one
  // sequence from empty.
  add_dense_variations(c, dense_attention_backward_case);
  c.push_back(dense_attention_backward_case(attn({{260, 300}, {260, 700}}, 16, 1, 64, 64, 1, 0, kBF16)));
  add_patch_variations(c, patch_attention_3d_backward_case);
  // indexer_kl: stage x mode x Qb, query and key dtypes, dkl given or all ones, Di, Bs,
  // batches, empty selections, entries past the sequence, a main-branch scale.
  for (SelectionMode m : {SelectionMode::per_kv_head, SelectionMode::shared}) {
    for (int Qb : {1, 64})
      c.push_back(indexer_kl_case(attn({{100}, {300}}, 8, 2, 64, 64, Qb, 3, kBF16, m), KlStage::sparse, Qb == 64));
    c.push_back(indexer_kl_case(attn({{100}, {300}}, 8, 2, 64, 64, 1, 0, kBF16, m), KlStage::dense, true));
  }
  for (DType ki : {kBF16, kF32})
    for (DType qt : kActs) {
      AttnParams p = attn(kDecodeVarlen, 8, 2, 64, 64, 1, 2, qt);
      p.ki_dtype = ki;
      c.push_back(indexer_kl_case(p, KlStage::sparse, false));
      p = attn(kPrefix, 4, 2, 64, 64, 1, 0, qt);
      p.ki_dtype = ki;
      c.push_back(indexer_kl_case(p, KlStage::dense, false));
    }
  for (KlStage st : {KlStage::sparse, KlStage::dense}) {
    for (const Lens& l : {kEmpty, kShort, kMixed, kEmptySeq})
      c.push_back(indexer_kl_case(attn(l, 4, 2, 64, 64, 1, 2, kBF16), st, false));
    AttnParams p = attn(kMixed, 8, 4, 64, 128, 1, 2, kF32);
    p.Di = 128;
    p.ki_dtype = kF32;
    c.push_back(indexer_kl_case(p, st, true));
    p = attn(kPrefix, 4, 2, 64, 64, 1, 2, kF32);
    p.shuffle = false;
    p.scale = 0.3f;
    c.push_back(indexer_kl_case(p, st, true));
  }
  for (int Qb : {1, 128}) {
    AttnParams p = attn({{150}, {300}}, 4, 2, 64, 64, Qb, 3, kF32);
    p.empty_sel = true;
    c.push_back(indexer_kl_case(p, KlStage::sparse, true));
    p.empty_sel = false;
    p.oob_idx = true;
    c.push_back(indexer_kl_case(p, KlStage::sparse, false));
  }
  c.push_back(indexer_kl_case(attn({{1, 1}, {2500, 1900}}, 64, 4, 128, 128, 1, 16, kBF16), KlStage::sparse, false));
  // Training-sized prefill from an empty cache: one 4K sequence (sparse: Qb = 64, k = 16),
  // a varlen batch of 1K + 3K, both modes, both indexer_kl stages.
  {
    const Lens t4k{{4096}, {4096}}, t1k3k{{1024, 3072}, {1024, 3072}};
    c.push_back(sparse_attention_backward_case(attn(t4k, 4, 2, 64, 64, 64, 16, kBF16)));
    c.push_back(sparse_attention_backward_case(attn(t1k3k, 4, 1, 64, 64, 1, 8, kF32, SelectionMode::shared)));
    c.push_back(dense_attention_backward_case(attn(t4k, 2, 1, 64, 64, 1, 0, kBF16)));
    c.push_back(dense_attention_backward_case(attn(t1k3k, 2, 2, 64, 128, 1, 0, kF32)));
    c.push_back(indexer_kl_case(attn(t4k, 4, 2, 64, 64, 64, 16, kBF16), KlStage::sparse, true));
    c.push_back(indexer_kl_case(attn(t1k3k, 2, 1, 64, 64, 1, 0, kF32, SelectionMode::shared), KlStage::dense, false));
  }
}

// The benchmark shapes: the reference configuration at contexts 8K .. 1M (scaled).
// Training-sized calls of the training ops, each timed with its forward as the baseline:
// the training example's dense warm-up (T = 2048 from empty, 8 query heads over 4 KV heads,
// D = 32, Bs = 64, f32) and an M3-like sparse stage (T = 4096 from empty, 16 over 2, D =
// 128, Bs = 64, k = 16, Qb = 64, bf16), indexer_kl on both, and the ViT windows' backward.
// Lengths are the full ones at cpu's scale (1/16) and above, shorter below (cpu-ref).
void add_perf_training(CaseList& c, double scale, const VitParams& vit) {
  auto len = [&](int32_t L) {
    return static_cast<int32_t>(std::min<int64_t>(L, std::max<int64_t>(128, std::llround(16.0 * L * scale))));
  };
  const int32_t td = len(2048), ts = len(4096);
  AttnParams d = attn({{td}, {td}}, 8, 4, 32, 64, 1, 0, kF32);
  d.ki_dtype = kF32;
  d.Di = 32;
  c.push_back(dense_attention_backward_case(d, true));
  c.push_back(indexer_kl_case(d, KlStage::dense, false, true));
  AttnParams sp = attn({{ts}, {ts}}, 16, 2, 128, 64, 64, 16, kBF16);
  sp.Di = 128;
  c.push_back(sparse_attention_backward_case(sp, true));
  c.push_back(indexer_kl_case(sp, KlStage::sparse, false, true));
  c.push_back(patch_attention_3d_backward_case(vit, true));
  // `msa layer --backward` and bench_training.py's shape: M3's layout, one sequence from
  // empty, the sink block and the local block forced.
  for (int64_t L : {int64_t{32} << 10, int64_t{128} << 10}) {
    const auto l = static_cast<int32_t>(std::max<int64_t>(128, std::llround(static_cast<double>(L) * scale)));
    AttnParams m3 = attn({{l}, {l}}, 64, 4, 128, 128, 1, 16, kBF16);
    m3.Di = 128;
    m3.n_sink = 1;
    m3.n_local = 1;
    for (SyntheticSelection kind : {SyntheticSelection::random, SyntheticSelection::correlated})
      c.push_back(msa_layer_backward_case(m3, kind));
  }
}

}  // namespace msa::cases::sets
