// The case sets: quick, full, perf. Seeds come from each case's name and vars, so a
// case keeps its inputs whatever the filter or the set around it.
#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "check/attention_cases.h"
#include "check/case.h"
#include "check/rng.h"
#include "check/set_builders.h"
#include "check/support_cases.h"
#include "hal/error.h"

namespace msa::cases {
namespace sets {

void add_quick(CaseList& c) {
  {
    AttnParams p = attn(kDecodeVarlen, 8, 2, 64, 64, 1, 2, kBF16);
    p.empty_sel = true;
    c.push_back(sparse_attention_case(p));
  }
  {
    AttnParams p = attn(kPrefix, 4, 2, 64, 64, 1, 2, kF32);
    p.correlated = true;
    c.push_back(sparse_attention_case(p));
  }
  c.push_back(sparse_attention_case(attn({{70}, {200}}, 4, 1, 80, 64, 64, 3, kF16, SelectionMode::shared)));
  c.push_back(dense_attention_case(attn(kMixed, 4, 2, 64, 64, 1, 0, kBF16)));
  c.push_back(dense_attention_case(attn(kDecodeVarlen, 8, 2, 128, 128, 1, 0, kF32)));
  {
    AttnParams p = attn(kDecodeVarlen, 8, 2, 64, 64, 1, 2, kBF16);
    c.push_back(indexer_score_case(p));
    p = attn(kPrefix, 8, 2, 64, 64, 64, 2, kBF16, SelectionMode::shared);
    p.ki_dtype = kFP8;
    p.ki_scale = true;
    p.pool = Pool::lse;
    c.push_back(indexer_score_case(p));
    p = attn(kDecodeVarlen, 8, 2, 64, 64, 1, 2, kBF16);
    p.ki_dtype = kFP4;
    c.push_back(indexer_score_case(p));  // Multi-token decode: draft tokens straddling a block boundary, ragged q_len.
    p = attn({{4, 2, 0, 3}, {130, 700, 10, 66}}, 8, 2, 64, 64, 1, 2, kBF16);
    p.ki_dtype = kFP8;
    c.push_back(indexer_score_case(p));
  }
  {
    AttnParams p = attn({{64, 1}, {1000, 700}}, 8, 2, 64, 64, 1, 4, kBF16);
    c.push_back(block_topk_case(p));
    p.n_sink = 2;
    p.n_local = 2;
    p.Qb = 64;
    p.k = 5;
    c.push_back(block_topk_case(p));
    c.push_back(block_topk_case(attn(kDecodeVarlen, 8, 2, 64, 64, 1, 8, kBF16, SelectionMode::shared)));
    AttnParams m3 = attn({{1, 1}, {2500, 1900}}, 64, 4, 128, 128, 1, 16, kBF16);  // the fused decode path
    m3.Di = 128;
    c.push_back(indexer_topk_case(m3));
    m3.ki_dtype = kFP4;
    c.push_back(indexer_topk_case(m3));
  }
  {
    VitParams v;
    v.items = {{1, 2, 2}, {5, 2, 3}};
    c.push_back(patch_attention_3d_case(v));
    c.push_back(rope_3d_case(v));
  }
  {
    AttnParams p = attn(kMixed, 4, 2, 64, 64, 1, 0, kBF16);
    p.ki_dtype = kFP8;
    p.ki_scale = true;
    c.push_back(kv_append_case(p, true));
    p.ki_dtype = kFP4;
    p.ki_scale = false;
    c.push_back(kv_append_case(p, true));
  }
  {
    RowParams m = rows(5, 17, kBF16, true);
    m.K = 33;
    c.push_back(matmul_case(m));
  }
  c.push_back(rms_norm_case(rows(3, 64, kBF16, true)));
  c.push_back(layer_norm_case(rows(3, 80, kF32, true)));
  {
    RowParams r = rows(9, 64, kBF16);
    r.H = 2;
    r.rotary_dim = 32;
    r.theta = 5e6f;
    c.push_back(rope_case(r));
  }
  c.push_back(swiglu_case(rows(3, 40, kF16)));
  c.push_back(gelu_case(rows(3, 40, kF32)));
  c.push_back(add_case(rows(3, 40, kBF16)));
  c.push_back(embedding_case(rows(6, 32, kBF16)));
  c.push_back(scatter_visual_case(rows(20, 16, kF32)));
  c.push_back(argmax_case(rows(5, 100, kF32, true)));
  add_nonfinite(c);
  add_quick_training(c);
}

// G in {1, 2, 4, 8, 16} as {Hq, Hkv}.
constexpr int kGroups[][2] = {{2, 2}, {4, 2}, {8, 2}, {8, 1}, {16, 1}};

// The functional variations of sparse attention, made by `make` (the forward or its
// backward): G, D x dtype on a cached prefix, Bs, Qb, mode, k >= blocks, batch shapes,
// empty selections, entries past the sequence, ordered pages with a scale, drifting selections.
void add_sparse_variations(CaseList& c, AttnMaker make) {
  for (const auto& g : kGroups) c.push_back(make(attn(kDecodeVarlen, g[0], g[1], 64, 64, 1, 2, kBF16)));
  // D x dtype on a cached prefix.
  for (int D : {64, 80, 128})
    for (DType t : kActs) c.push_back(make(attn(kPrefix, 4, 2, D, 64, 1, 2, t)));
  // Bs, Qb, mode, k >= blocks, batch shapes.
  for (SelectionMode m : {SelectionMode::per_kv_head, SelectionMode::shared}) {
    c.push_back(make(attn({{40}, {400}}, 4, 2, 64, 128, 1, 2, kBF16, m)));
    c.push_back(make(attn({{100}, {300}}, 4, 2, 64, 64, 64, 3, kF32, m)));
    c.push_back(make(attn({{100}, {450}}, 4, 2, 64, 128, 64, 2, kBF16, m)));
    c.push_back(make(attn({{150}, {300}}, 4, 2, 64, 64, 128, 3, kF16, m)));
    c.push_back(make(attn(kDecodeVarlen, 8, 2, 64, 64, 1, 8, kBF16, m)));  // k >= blocks
    c.push_back(make(attn(kMixed, 4, 2, 64, 64, 1, 2, kF32, m)));
    c.push_back(make(attn(kMixed, 4, 2, 64, 64, 64, 2, kBF16, m)));
  }
  for (const Lens& l : {kEmpty, kShort, kDecode, kEmptySeq}) c.push_back(make(attn(l, 4, 2, 64, 64, 1, 2, kBF16)));
  for (int Qb : {1, 128}) {
    AttnParams p = attn({{150}, {300}}, 4, 2, 64, 64, Qb, 3, kF32);
    p.empty_sel = true;
    c.push_back(make(p));
  }
  {
    AttnParams p = attn(kMixed, 4, 2, 64, 64, 1, 2, kBF16);
    p.oob_idx = true;
    c.push_back(make(p));
    p = attn(kPrefix, 4, 2, 64, 64, 1, 2, kF32);
    p.shuffle = false;
    p.scale = 0.3f;
    c.push_back(make(p));
    p = attn({{100}, {600}}, 4, 2, 64, 64, 1, 3, kBF16);
    p.correlated = true;
    c.push_back(make(p));
  }
}

// The functional variations of dense attention, made by `make` (the forward or its
// backward): G, D x dtype on a cached prefix, batch shapes, Bs, ordered pages with a scale.
void add_dense_variations(CaseList& c, AttnMaker make) {
  for (const auto& g : kGroups) c.push_back(make(attn(kDecodeVarlen, g[0], g[1], 64, 64, 1, 0, kF32)));
  for (int D : {64, 80, 128})
    for (DType t : kActs) c.push_back(make(attn(kPrefix, 4, 2, D, 64, 1, 0, t)));
  for (const Lens& l : {kEmpty, kShort, kDecode, kMixed, kEmptySeq})
    c.push_back(make(attn(l, 4, 2, 64, 64, 1, 0, kBF16)));
  c.push_back(make(attn({{40}, {400}}, 4, 2, 64, 128, 1, 0, kBF16)));
  {
    AttnParams p = attn(kPrefix, 4, 2, 64, 64, 1, 0, kF16);
    p.shuffle = false;
    p.scale = 0.3f;
    c.push_back(make(p));
  }
}

void add_full_attention(CaseList& c) {
  add_sparse_variations(c, sparse_attention_case);
  // The reference configuration (M3) at small contexts, and longer chunks (GPU backends
  // split the KV range or tile queries only past some size).
  {
    AttnParams m3 = attn({{1, 1}, {2500, 1900}}, 64, 4, 128, 128, 1, 16, kBF16);
    m3.Di = 128;
    c.push_back(sparse_attention_case(m3));
    c.push_back(dense_attention_case(m3));
    c.push_back(indexer_score_case(m3));
    c.push_back(block_topk_case(m3));
    m3.ki_dtype = kFP8;
    c.push_back(indexer_score_case(m3));
    m3.ki_dtype = kFP4;
    c.push_back(indexer_score_case(m3));
    // Batches of 8 (decode kernels that guess "token t is sequence t" and give each batch
    // element its own workgroups): ragged contexts with a one-token sequence and partial
    // last blocks, 32 splits per (token, KV head) on the Vulkan GQA kernel; then a batch
    // where the guess fails (a sequence with two query tokens, one with none) and k = 13.
    AttnParams m8 =
        attn({{1, 1, 1, 1, 1, 1, 1, 1}, {2500, 1900, 130, 1, 700, 128, 3000, 4100}}, 64, 4, 128, 128, 1, 16, kBF16);
    m8.Di = 128;
    const AttnParams d8 = m8;
    c.push_back(sparse_attention_case(m8));
    c.push_back(indexer_score_case(m8));
    m8.ki_dtype = kFP8;
    c.push_back(indexer_score_case(m8));
    m8.ki_dtype = kFP4;
    c.push_back(indexer_score_case(m8));
    m8.scale = -0.05f;  // max pooling with a negative scale (the CUDA decode kernel's scaled path)
    c.push_back(indexer_score_case(m8));
    AttnParams mx =
        attn({{1, 2, 0, 1, 1, 1, 1, 1}, {900, 260, 64, 1, 700, 128, 1000, 333}}, 64, 4, 128, 128, 1, 13, kBF16);
    mx.Di = 128;
    c.push_back(sparse_attention_case(mx));
    c.push_back(indexer_score_case(mx));
    for (int Qb : {1, 64}) c.push_back(sparse_attention_case(attn({{128}, {700}}, 8, 2, 64, 64, Qb, 4, kBF16)));
    c.push_back(dense_attention_case(attn({{128}, {700}}, 4, 2, 64, 64, 1, 0, kF16)));
    // Dense decode (the Vulkan GQA kernel over every visible block): the ragged B = 8
    // batch, the batch where "token t is sequence t" fails, multi-token decode with
    // ragged q_len (draft tokens straddling a block boundary), G = 16 at D = 64 in f16 and
    // at D = 128 in f32, and one long context split past the combine's 512 cached weights.
    c.push_back(dense_attention_case(d8));
    c.push_back(dense_attention_case(mx));
    c.push_back(dense_attention_case(attn({{4, 2, 0, 3}, {130, 700, 10, 66}}, 8, 2, 64, 64, 1, 0, kBF16)));
    c.push_back(dense_attention_case(attn({{1, 1, 1}, {300, 129, 64}}, 16, 1, 64, 64, 1, 0, kF16)));
    c.push_back(dense_attention_case(attn({{1, 2}, {333, 1000}}, 32, 2, 128, 128, 1, 0, kF32)));
    c.push_back(dense_attention_case(attn({{1}, {40000}}, 16, 1, 64, 64, 1, 0, kBF16)));
  }
  // The sm_90 cluster decode kernel (G = 16, D = Bs = 128): B = 8 with mixed lengths
  // (fewer valid blocks than k: -1 padding; a one-token sequence; a partial last block),
  // out-of-range and empty selections, k not a multiple of the cluster size (5, 12, 20),
  // k = 64, f16, shared mode, several tokens of a sequence (causal limit inside a block),
  // and Qb = 64 (one cluster per token of a query block; more groups than SMs: C = 1).
  {
    const Lens b8{std::vector<int32_t>(8, 1), {3000, 129, 1, 128, 2500, 700, 4100, 257}};
    auto m3 = [](Lens l, int Qb, int k, DType t = kBF16, SelectionMode m = SelectionMode::per_kv_head) {
      return attn(std::move(l), 64, 4, 128, 128, Qb, k, t, m);
    };
    c.push_back(sparse_attention_case(m3(b8, 1, 16)));
    c.push_back(sparse_attention_case(m3(b8, 1, 5)));
    AttnParams p = m3(b8, 1, 16);
    p.oob_idx = true;
    c.push_back(sparse_attention_case(p));
    p = m3(b8, 1, 16);
    p.empty_sel = true;
    c.push_back(sparse_attention_case(p));
    for (int k : {12, 20}) c.push_back(sparse_attention_case(m3({{1, 1}, {3000, 2000}}, 1, k)));
    c.push_back(sparse_attention_case(m3({{1}, {9000}}, 1, 64)));
    c.push_back(sparse_attention_case(m3({{1, 1, 1}, {1500, 300, 2200}}, 1, 16, kF16)));
    c.push_back(sparse_attention_case(m3({{1, 1, 1}, {1500, 300, 2200}}, 1, 16, kBF16, SelectionMode::shared)));
    c.push_back(sparse_attention_case(m3({{3, 1}, {1000, 300}}, 1, 4)));
    c.push_back(sparse_attention_case(m3({{40}, {2000}}, 64, 4)));
    // Past one warp's batch scan (B = 40: every thread walks the sequences) and at its
    // edge (B = 32 with a sequence without queries: NQ != B, so no page is guessed).
    Lens b40{std::vector<int32_t>(40, 1), std::vector<int32_t>(40)};
    for (int i = 0; i < 40; ++i) b40.kv[static_cast<size_t>(i)] = 1 + (97 + 613 * i) % 2300;
    c.push_back(sparse_attention_case(m3(b40, 1, 16)));
    Lens b32{std::vector<int32_t>(32, 1), std::vector<int32_t>(32)};
    for (int i = 0; i < 32; ++i) b32.kv[static_cast<size_t>(i)] = 1 + (211 + 389 * i) % 1500;
    b32.q[5] = 0;
    c.push_back(sparse_attention_case(m3(b32, 1, 8)));
    // A serving batch of multi-token decode past 512 tokens (B = 48, 6-16 tokens per
    // sequence, 527 in all): still the decode kernels, the batch scanned per token.
    Lens mt{std::vector<int32_t>(48), std::vector<int32_t>(48)};
    for (int i = 0; i < 48; ++i) {
      mt.q[static_cast<size_t>(i)] = 6 + (5 * i) % 11;
      mt.kv[static_cast<size_t>(i)] = 40 + (331 + 577 * i) % 1700;
    }
    c.push_back(sparse_attention_case(m3(mt, 1, 16)));
  }
  // Prefill shapes (T > 512: past the CUDA decode kernels, so the CUDA flash prefill kernel
  // runs): GQA packing at G = 16 / 8 / 2, a varlen batch (one sequence from empty, one on
  // a prefix: causal edges inside tiles), D = 80 (padded), few chunks on a longer context
  // (split-KV + merge), Bs = 128 (two tiles per page); sparse token-level selection (the
  // union of a chunk's selections), Qb = 64 (one list per tile), shared mode at G = 4.
  c.push_back(dense_attention_case(attn({{260, 300}, {260, 700}}, 16, 1, 64, 64, 1, 0, kBF16)));
  c.push_back(dense_attention_case(attn({{600}, {650}}, 4, 2, 80, 64, 1, 0, kF16)));
  c.push_back(dense_attention_case(attn({{530}, {1100}}, 8, 1, 64, 64, 1, 0, kBF16)));
  c.push_back(dense_attention_case(attn({{520}, {700}}, 16, 1, 128, 128, 1, 0, kBF16)));
  // The sm_90 wgmma prefill kernel (D = 128, Bs a multiple of 128): f16, G = 4, varlen (one
  // sequence from empty, one on a prefix), Bs = 256 (two 128-key tiles per page).
  c.push_back(dense_attention_case(attn({{300, 260}, {300, 600}}, 8, 2, 128, 256, 1, 0, kF16)));
  {
    AttnParams p = attn({{520}, {1500}}, 16, 1, 128, 128, 1, 2, kBF16);
    p.correlated = true;
    c.push_back(sparse_attention_case(p));
    c.push_back(sparse_attention_case(attn({{600}, {900}}, 8, 1, 64, 64, 64, 3, kF16)));
    c.push_back(sparse_attention_case(attn({{560}, {700}}, 8, 2, 64, 64, 1, 3, kBF16, SelectionMode::shared)));
  }
  add_dense_variations(c, dense_attention_case);
}

void add_full_selection(CaseList& c) {
  // indexer_score: key dtypes x query dtypes, pools, modes, Qb, Di, Bs, batches.
  struct KiVariant {
    DType t;
    bool scale;
  };
  for (KiVariant kv : {KiVariant{kBF16, false}, KiVariant{kF32, false}, KiVariant{kFP8, false}, KiVariant{kFP8, true},
                       KiVariant{kFP4, false}})
    for (DType qt : kActs) {
      AttnParams p = attn(kDecodeVarlen, 8, 2, 64, 64, 1, 0, qt);
      p.ki_dtype = kv.t;
      p.ki_scale = kv.scale;
      c.push_back(indexer_score_case(p));
    }
  // NVFP4 keys at widths and block sizes the tensor-core paths do not take (Di 16 and 48:
  // one and three scale groups; Bs = 40).
  for (int Di : {16, 48}) {
    AttnParams p = attn(kMixed, 8, 2, 64, 40, 1, 0, kBF16);
    p.Di = Di;
    p.ki_dtype = kFP4;
    c.push_back(indexer_score_case(p));
  }
  for (Pool pool : {Pool::max, Pool::lse})
    for (SelectionMode m : {SelectionMode::per_kv_head, SelectionMode::shared})
      for (int Qb : {1, 64}) {
        AttnParams p = attn({{100}, {300}}, 8, 2, 64, 64, Qb, 0, kBF16, m);
        p.pool = pool;
        c.push_back(indexer_score_case(p));
      }
  for (int Di : {64, 128})
    for (int Bs : {64, 128}) {
      AttnParams p = attn(kMixed, 8, 4, 64, Bs, 1, 0, kF32);
      p.Di = Di;
      c.push_back(indexer_score_case(p));
    }
  for (const Lens& l : {kEmpty, kShort, kPrefix, kEmptySeq})
    c.push_back(indexer_score_case(attn(l, 8, 2, 64, 64, 1, 0, kBF16)));
  {
    AttnParams p = attn({{150}, {300}}, 8, 2, 64, 64, 128, 0, kF16);
    p.shuffle = false;
    p.scale = 0.05f;
    c.push_back(indexer_score_case(p));
  }
  // Prefill shapes of the CUDA tensor-core indexer (T >= 8 B; 64-token tiles at Hi = 4):
  // the reference sizes (Hi = 4, Di = 128, Bs = 128), fp8 keys with scales, f16 queries
  // on fp8 keys, Qb above the tile, Bs = 256, lse pooling, shared selection.
  {
    const Lens pre{{260, 130}, {1100, 600}};
    auto tc = [&](int Qb, int Bs, DType qt, SelectionMode m = SelectionMode::per_kv_head) {
      AttnParams p = attn(pre, 8, 4, 64, Bs, Qb, 0, qt, m);
      p.Di = 128;
      return p;
    };
    c.push_back(indexer_score_case(tc(1, 128, kBF16)));
    AttnParams p = tc(1, 128, kBF16);
    p.ki_dtype = kFP8;
    p.ki_scale = true;
    c.push_back(indexer_score_case(p));
    p = tc(1, 128, kF16);
    p.ki_dtype = kFP8;
    c.push_back(indexer_score_case(p));
    p.ki_dtype = kFP4;  // NVFP4 keys in prefill (f16, then bf16 queries with lse pooling)
    c.push_back(indexer_score_case(p));
    p = tc(64, 128, kBF16);
    p.ki_dtype = kFP4;
    p.pool = Pool::lse;
    c.push_back(indexer_score_case(p));
    c.push_back(indexer_score_case(tc(128, 128, kBF16)));
    c.push_back(indexer_score_case(tc(1, 256, kBF16)));
    p = tc(1, 128, kBF16);
    p.pool = Pool::lse;
    c.push_back(indexer_score_case(p));
    c.push_back(indexer_score_case(tc(1, 128, kBF16, SelectionMode::shared)));
    // The CUDA wgmma indexer (bf16, Bs % 128 == 0, Di 64/128, Hi >= 4; 32-token tiles at
    // Hi = 4): Qb in registers (2, 4) and through shared memory (16, 64 = two sub-tiles),
    // lse with Qb 4, Bs = 256 (two steps per block), Di = 64, Hi = 8 (two query heads per
    // KV head: per_kv_head with Hkv = 8).
    c.push_back(indexer_score_case(tc(2, 128, kBF16)));
    c.push_back(indexer_score_case(tc(16, 128, kBF16)));
    c.push_back(indexer_score_case(tc(64, 256, kBF16)));
    p = tc(4, 128, kBF16);
    p.pool = Pool::lse;
    c.push_back(indexer_score_case(p));
    p = tc(1, 128, kBF16);
    p.Di = 64;
    c.push_back(indexer_score_case(p));
    p = attn(pre, 16, 8, 64, 128, 8, 0, kBF16);
    p.Di = 128;
    c.push_back(indexer_score_case(p));
  }
  // Multi-token decode (speculative drafts, MTP; CUDA: the decode indexer's token groups
  // share one key read): q_len 2, 4, 8 and 16 per sequence (one and two groups of 8 at
  // Hi = 4), tokens straddling a block boundary, ragged q_len with an empty sequence and
  // partial groups, more than 64 tokens, Hi = 8, one shared head, every key format, lse
  // pooling and a negative scale.
  {
    auto mtp = [](Lens l, int Hkv, DType ki, SelectionMode m = SelectionMode::per_kv_head) {
      AttnParams p = attn(std::move(l), 8 * Hkv, Hkv, 128, 128, 1, 0, kBF16, m);
      p.Di = 128;
      p.ki_dtype = ki;
      return p;
    };
    for (int ql : {2, 4, 8, 16})
      for (DType ki : {kBF16, kFP8, kFP4})
        c.push_back(indexer_score_case(mtp({std::vector<int32_t>(4, ql), {2500, 130, 900, 257}}, 4, ki)));
    const Lens ragged{{3, 0, 16, 1, 7, 5}, {1200, 40, 700, 129, 1030, 5}};
    for (DType ki : {kBF16, kFP8, kFP4}) c.push_back(indexer_score_case(mtp(ragged, 4, ki)));
    AttnParams p = mtp(ragged, 4, kFP4);
    p.pool = Pool::lse;
    c.push_back(indexer_score_case(p));
    p = mtp(ragged, 4, kFP4);
    p.scale = -0.05f;
    c.push_back(indexer_score_case(p));
    p = mtp(ragged, 4, kFP8);
    p.ki_scale = true;
    p.dtype = kF16;
    c.push_back(indexer_score_case(p));
    c.push_back(indexer_score_case(mtp({std::vector<int32_t>(12, 8), std::vector<int32_t>(12, 600)}, 4, kFP8)));
    c.push_back(indexer_score_case(mtp({{4, 4, 2}, {800, 300, 2000}}, 8, kBF16)));
    c.push_back(indexer_score_case(mtp({{8, 3, 12}, {800, 300, 2000}}, 1, kFP4, SelectionMode::shared)));
    p = mtp({{4, 4, 4, 4}, {2500, 1900, 130, 1000}}, 4, kFP4);
    p.k = 16;
    c.push_back(indexer_topk_case(p));
  }
  // block_topk: Qb, Bs, n_sink, n_local, k, modes, batches, special scores on and off.
  const Lens long_batch{{64, 1, 0, 200}, {1000, 700, 50, 1300}};
  for (int Qb : {1, 64, 128})
    for (int n_sink : {0, 2})
      for (int n_local : {0, 1, 2}) {
        const int Bs = 64;
        const int need = n_sink + (n_local > 0 ? n_local - 1 + std::max(1, Qb / Bs) : 0);
        AttnParams p = attn(long_batch, 8, 2, 64, Bs, Qb, std::max(need, 4), kBF16);
        p.n_sink = n_sink;
        p.n_local = n_local;
        c.push_back(block_topk_case(p));
      }
  for (SelectionMode m : {SelectionMode::per_kv_head, SelectionMode::shared})
    for (int Bs : {64, 128})
      for (bool special : {true, false}) {
        AttnParams p = attn(long_batch, 8, 4, 64, Bs, 1, 6, kBF16, m);
        p.special_scores = special;
        c.push_back(block_topk_case(p));
      }
  for (const Lens& l : {kEmpty, kShort, kDecodeVarlen, kMixed, kEmptySeq}) {
    c.push_back(block_topk_case(attn(l, 8, 2, 64, 64, 1, 1, kBF16)));
    c.push_back(block_topk_case(attn(l, 8, 2, 64, 64, 1, 16, kBF16)));  // k >= blocks
  }
  // Long rows (> 1024 blocks): GPU backends cut a row into chunks and merge them. Ties,
  // NaN, -inf, +-0 and mostly dead rows; a short row (nvalid <= k) in the same call; sinks
  // and a local window spanning blocks (Qb = 128); k = 128 with chunks of 2 and 8 keys per
  // thread; shared mode.
  {
    const Lens lng{{1, 1, 2, 1}, {140000, 70000, 200000, 500}};
    c.push_back(block_topk_case(attn(lng, 64, 4, 128, 128, 1, 16, kBF16)));
    AttnParams p = attn(lng, 8, 2, 64, 64, 128, 8, kBF16);
    p.n_sink = 2;
    p.n_local = 2;
    c.push_back(block_topk_case(p));
    c.push_back(block_topk_case(attn({{1, 1}, {190000, 1024000}}, 8, 1, 64, 64, 1, 128, kBF16, SelectionMode::shared)));
    c.push_back(block_topk_case(attn({{1}, {2000000}}, 8, 2, 64, 64, 1, 100, kBF16)));
    // More rows than the split path takes (2 per SM) of over 2048 blocks: one wide block
    // per row. Rows of 3004 scores (float4 loads, 8 keys per thread) with sinks and a
    // local window; then rows of 12502 scores (scalar loads, 16 keys per thread) in shared
    // mode, k = 64, the first sequence's of <= 8190 valid blocks, the second's of more
    // (the row kernel after the wide one).
    AttnParams w = attn({{150}, {192192}}, 8, 2, 64, 64, 1, 16, kBF16);
    w.n_sink = 2;
    w.n_local = 2;
    c.push_back(block_topk_case(w));
    c.push_back(
        block_topk_case(attn({{270, 60}, {524160, 800040}}, 8, 2, 64, 64, 1, 64, kBF16, SelectionMode::shared)));
  }
  // indexer_topk: the decode shapes a backend may fuse (CUDA: Qb = 1, <= 64 queries, rows
  // of <= 2048 blocks), each variation once, and shapes it must run unfused.
  {
    AttnParams m3 = attn({{1, 1}, {2500, 1900}}, 64, 4, 128, 128, 1, 16, kBF16);
    m3.Di = 128;
    c.push_back(indexer_topk_case(m3));
    AttnParams p = m3;
    p.ki_dtype = kFP8;
    c.push_back(indexer_topk_case(p));
    p.ki_scale = true;
    p.pool = Pool::lse;
    c.push_back(indexer_topk_case(p));
    p = m3;
    p.ki_dtype = kFP4;
    c.push_back(indexer_topk_case(p));
    p.pool = Pool::lse;
    p.dtype = kF16;
    c.push_back(indexer_topk_case(p));
    // Batch of 8, ragged (rows with nvalid <= k, a one-token sequence), then a batch where
    // token t is not sequence t (two queries in one sequence, one sequence without).
    p = attn({{1, 1, 1, 1, 1, 1, 1, 1}, {2500, 1900, 130, 1, 700, 128, 3000, 4100}}, 64, 4, 128, 128, 1, 16, kBF16);
    p.Di = 128;
    c.push_back(indexer_topk_case(p));
    p.ki_dtype = kFP4;
    c.push_back(indexer_topk_case(p));
    p.ki_dtype = kBF16;
    p.q_len = {1, 2, 0, 1};
    p.kv_len = {2000, 3100, 500, 900};
    p.k = 13;
    c.push_back(indexer_topk_case(p));
    // Sinks and a wider local window; shared selection (one row per query); eight rows
    // per query (Hkv = 8) at Di = 64.
    p = m3;
    p.n_sink = 2;
    p.n_local = 3;
    p.k = 8;
    c.push_back(indexer_topk_case(p));
    p = attn({{1, 1, 1}, {2500, 1900, 6000}}, 64, 4, 128, 128, 1, 16, kBF16, SelectionMode::shared);
    p.Di = 128;
    c.push_back(indexer_topk_case(p));
    p = attn({{1, 1}, {3000, 800}}, 64, 8, 128, 64, 1, 16, kBF16);
    p.Di = 64;
    c.push_back(indexer_topk_case(p));
    // Rows of 1094 and 1563 blocks (fused on CUDA, 8 scores per thread of a select block).
    p = attn({{1, 1}, {140000, 200000}}, 64, 4, 128, 128, 1, 16, kBF16);
    p.Di = 128;
    c.push_back(indexer_topk_case(p));
    // Unfused on CUDA: a row of 2344 blocks, prefill with Qb = 64, f32 queries; empty
    // batches.
    p = attn({{1}, {300000}}, 64, 4, 128, 128, 1, 16, kBF16);
    p.Di = 128;
    c.push_back(indexer_topk_case(p));
    c.push_back(indexer_topk_case(attn(kPrefix, 8, 2, 64, 64, 64, 2, kBF16)));
    c.push_back(indexer_topk_case(attn(kDecodeVarlen, 8, 2, 64, 64, 1, 2, kF32)));
    for (const Lens& l : {kEmpty, kEmptySeq}) c.push_back(indexer_topk_case(attn(l, 8, 2, 64, 64, 1, 1, kBF16)));
  }
}

// The functional variations of patch attention, made by `make` (the forward or its
// backward): kVitItems at D x dtype with window 4, window 3 with a scale, and windows of
// several 128-token chunks with a partial last key tile (a 576-token video window, a
// 130-token image).
void add_patch_variations(CaseList& c, std::unique_ptr<Case> (*make)(const VitParams&)) {
  VitParams v;
  v.items = kVitItems;
  for (int D : {64, 80, 128})
    for (DType t : kActs) {
      v.D = D;
      v.dtype = t;
      c.push_back(make(v));
    }
  v.D = 80;
  v.window = 3;
  v.scale = 0.2f;
  c.push_back(make(v));
  VitParams w;
  w.items = {{4, 12, 12}, {1, 10, 13}};
  c.push_back(make(w));
}

void add_full_other(CaseList& c) {
  add_patch_variations(c, patch_attention_3d_case);
  // rope_3d over the same items, D x dtype (bf16 in place).
  VitParams v;
  v.items = kVitItems;
  for (int D : {64, 80, 128})
    for (DType t : kActs) {
      v.D = D;
      v.dtype = t;
      v.in_place = t == kBF16;
      c.push_back(rope_3d_case(v));
    }
  // kv_append: dtypes x indexer-key variants, batches.
  for (DType t : kActs) {
    AttnParams p = attn(kMixed, 4, 2, 64, 64, 1, 0, t);
    c.push_back(kv_append_case(p, false));
    for (DType kt : {kBF16, kF32, kFP8}) {
      p.ki_dtype = kt;
      p.ki_scale = false;
      c.push_back(kv_append_case(p, true));
    }
    p.ki_dtype = kFP8;
    p.ki_scale = true;
    c.push_back(kv_append_case(p, true));
    p.ki_dtype = kFP4;
    p.ki_scale = false;
    c.push_back(kv_append_case(p, true));
  }
  for (const Lens& l : {kEmpty, kDecodeVarlen, kEmptySeq})
    c.push_back(kv_append_case(attn(l, 4, 2, 80, 128, 1, 0, kBF16), true));
  {
    AttnParams p = attn(kMixed, 4, 2, 64, 40, 1, 0, kF32);  // NVFP4, three scale groups, Bs = 40
    p.Di = 48;
    p.ki_dtype = kFP4;
    c.push_back(kv_append_case(p, true));
  }
  // Supporting ops over the three activation dtypes, odd sizes included.
  for (DType t : kActs) {
    for (bool bias : {false, true}) {
      RowParams m = rows(5, 17, t, bias);
      m.K = 33;
      c.push_back(matmul_case(m));
      m = rows(16, 64, t, bias);
      m.K = 128;
      c.push_back(matmul_case(m));
    }
    for (ops::NormKind kind : {ops::NormKind::plain, ops::NormKind::gemma})
      for (bool wf32 : {false, true}) {
        RowParams r = rows(4, 67, t, wf32);
        r.kind = kind;
        c.push_back(rms_norm_case(r));
      }
    c.push_back(rms_norm_case(rows(1, 128, t)));
    for (bool bias : {false, true}) c.push_back(layer_norm_case(rows(4, 80, t, bias)));
    for (int rd : {0, 32}) {
      for (bool in_place : {false, true}) {
        RowParams r = rows(9, 64, t, in_place);
        r.H = 3;
        r.rotary_dim = rd;
        r.theta = rd ? 5e6f : 1e4f;
        c.push_back(rope_case(r));
      }
    }
    c.push_back(swiglu_case(rows(3, 67, t)));
    c.push_back(gelu_case(rows(3, 67, t)));
    c.push_back(add_case(rows(3, 67, t)));
    c.push_back(add_case(rows(0, 8, t)));
    c.push_back(embedding_case(rows(7, 33, t)));
    c.push_back(scatter_visual_case(rows(40, 24, t)));
    c.push_back(argmax_case(rows(7, 100, t, true)));
    c.push_back(argmax_case(rows(3, 1000, t, false)));
  }
}

void add_perf(CaseList& c, double scale) {
  const int Bs = 128;
  auto scaled = [&](int64_t n, int64_t min) {
    return static_cast<int32_t>(std::max<int64_t>(min, static_cast<int64_t>(std::llround(n * scale))));
  };
  auto ref = [&](Lens l, int Qb) {
    AttnParams p = attn(std::move(l), 64, 4, 128, Bs, Qb, 16, kBF16);
    p.Di = 128;
    p.n_local = 1;
    p.special_scores = false;  // scores as the indexer makes them
    return p;
  };
  const int64_t chunk = scaled(8192, 16);
  for (int64_t L : {int64_t{8} << 10, int64_t{32} << 10, int64_t{128} << 10, int64_t{512} << 10, int64_t{1} << 20}) {
    const int32_t l = scaled(L, 16);
    for (int batch : {1, 8}) {
      const AttnParams p = ref(
          {std::vector<int32_t>(static_cast<size_t>(batch), 1), std::vector<int32_t>(static_cast<size_t>(batch), l)},
          1);
      c.push_back(indexer_score_case(p));
      AttnParams p8 = p;
      p8.ki_dtype = kFP8;
      c.push_back(indexer_score_case(p8));
      AttnParams p4 = p;
      p4.ki_dtype = kFP4;
      c.push_back(indexer_score_case(p4));
      c.push_back(indexer_topk_case(p4));
      c.push_back(block_topk_case(p));
      c.push_back(indexer_topk_case(p));
      c.push_back(sparse_attention_case(p));
      c.push_back(dense_attention_case(p));
      c.push_back(msa_layer_case(p));
      c.push_back(msa_layer_case(p8));
      c.push_back(msa_layer_case(p4));
    }
    const int32_t q = static_cast<int32_t>(std::min<int64_t>(chunk, l));
    AttnParams p = ref({{q}, {l}}, 1);
    c.push_back(indexer_score_case(p));
    c.push_back(block_topk_case(p));
    c.push_back(sparse_attention_case(p));
    p.correlated = true;
    c.push_back(sparse_attention_case(p));
    p.correlated = false;
    c.push_back(dense_attention_case(p));
    c.push_back(msa_layer_case(p));
    p.correlated = true;  // queries as a slow random walk: realistic selection reuse
    c.push_back(msa_layer_case(p));
    AttnParams p64 = ref({{q}, {l}}, 64);
    c.push_back(sparse_attention_case(p64));
    c.push_back(msa_layer_case(p64));
    if (L <= (int64_t{32} << 10)) {
      // The whole context from empty.
      AttnParams e = ref({{l}, {l}}, 1);
      c.push_back(dense_attention_case(e));
      c.push_back(msa_layer_case(e));
      e.Qb = 64;
      c.push_back(sparse_attention_case(e));
      c.push_back(msa_layer_case(e));
    }
  }
  // Multi-token decode (speculative drafts, MTP): q_len 2-16 at B = 8 over 128K and 1M,
  // and a serving batch (B = 128 at 50K, q_len 1 and 8); the draft tokens' queries
  // independent or correlated (a slow random walk, as adjacent tokens' are).
  auto mtp = [&](int B, int64_t L, int ql, DType ki, bool correlated) {
    const int32_t l = scaled(L, 16 + ql);
    AttnParams p =
        ref({std::vector<int32_t>(static_cast<size_t>(B), ql), std::vector<int32_t>(static_cast<size_t>(B), l)}, 1);
    p.ki_dtype = ki;
    p.correlated = correlated;
    return p;
  };
  for (int64_t L : {int64_t{128} << 10, int64_t{1} << 20})
    for (int ql : {2, 4, 8, 16}) {
      c.push_back(indexer_score_case(mtp(8, L, ql, kFP4, false)));
      c.push_back(msa_layer_case(mtp(8, L, ql, kFP4, false)));
      c.push_back(msa_layer_case(mtp(8, L, ql, kFP4, true)));
      c.push_back(sparse_attention_case(mtp(8, L, ql, kFP4, true)));
    }
  for (int ql : {1, 8}) {
    c.push_back(indexer_score_case(mtp(128, 51200, ql, kFP8, false)));
    c.push_back(msa_layer_case(mtp(128, 51200, ql, kFP8, false)));
    c.push_back(msa_layer_case(mtp(128, 51200, ql, kFP8, true)));
  }
  // ViT: windows of 4 temporal patches of 32x32 patches (4096 tokens), two windows.
  VitParams v;
  const int32_t side = std::max<int32_t>(2, static_cast<int32_t>(std::lround(32 * std::sqrt(scale))));
  v.items = {{8, side, side}};
  v.H = 16;
  v.D = 80;
  c.push_back(patch_attention_3d_case(v));
  c.push_back(rope_3d_case(v));
  add_perf_training(c, scale, v);
}

}  // namespace sets

namespace {

uint64_t name_seed(const Case& c) {
  uint64_t h = 1469598103934665603ULL;
  for (char ch : c.name() + "|" + c.vars()) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ULL;
  return mix_seed(h, 0x6d7361);
}

}  // namespace

bool matches_filter(std::string_view name, std::string_view filter) {
  if (filter.empty()) return true;
  size_t start = 0;
  while (start <= filter.size()) {
    const size_t end = std::min(filter.find(',', start), filter.size());
    if (filter.substr(start, end - start) == name) return true;
    start = end + 1;
  }
  return false;
}

// Every name of a filter must be an op or a composite case, so a typo is an error
// instead of an empty (passing) run.
void check_filter(std::string_view filter) {
  size_t start = 0;
  while (!filter.empty() && start <= filter.size()) {
    const size_t end = std::min(filter.find(',', start), filter.size());
    const std::string_view name = filter.substr(start, end - start);
    hal::OpId op;
    if (name != "msa_layer" && name != "msa_layer_backward" && !hal::parse_op(name, op)) {
      std::string known = "msa_layer, msa_layer_backward";
      for (int i = 0; i < hal::kOpCount; ++i) known += std::string(", ") + hal::op_name(static_cast<hal::OpId>(i));
      throw Error("cases: argument 'op': unknown op '" + std::string(name) + "' (known: " + known + ")");
    }
    start = end + 1;
  }
}

CaseList make_cases(std::string_view set, std::string_view op_filter, double scale) {
  using namespace sets;
  check_filter(op_filter);
  CaseList all;
  if (set == "quick") {
    add_quick(all);
  } else if (set == "full") {
    add_full_attention(all);
    add_full_selection(all);
    add_full_other(all);
    add_nonfinite(all);
    add_nonfinite_tuned(all);
    add_full_training(all);
  } else if (set == "perf") {
    if (!(scale > 0) || scale > 1) throw Error("cases: perf scale must be in (0, 1], got " + std::to_string(scale));
    add_perf(all, scale);
  } else {
    throw Error("cases: unknown case set '" + std::string(set) + "' (quick, full, perf)");
  }
  CaseList out;
  for (auto& c : all) {
    if (!matches_filter(c->name(), op_filter)) continue;
    c->set_seed(name_seed(*c));
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace msa::cases
