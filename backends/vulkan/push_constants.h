// Push-constant structs, one per shader, mirrored field for field (all 4-byte scalars,
// so the C++ and std430 layouts agree) by the `PushConstants` block of the shader named
// in each comment. off_* are element offsets returned by Launch::bind().
#pragma once
#include <cstddef>
#include <cstdint>

namespace msa::vulkan {

// shaders/paged_attention.comp
struct AttentionPC {
  uint32_t off_q, off_k, off_v, off_bt, off_kvlen, off_cuq, off_idx, off_out, off_lse;
  uint32_t T, Hq, Hkv, D, P, Bs, max_blocks, B, Qb, NQ, k, Hs;
  float scale;
  uint32_t n_split;    // workgroups per (token, head)
  uint32_t per_split;  // key-set units (block_idx entries / logical blocks) per split
};
static_assert(sizeof(AttentionPC) == 24 * 4);

// shaders/paged_attention.gqa.comp (off_k / off_v in 16-byte units)
struct AttnGqaPC {
  uint32_t off_q, off_k, off_v, off_bt, off_kvlen, off_cuq, off_idx, off_out, off_lse;
  uint32_t T, Hq, Hkv, G, D, P, Bs, max_blocks, B, NQ, k, Hs;
  float scale;
  uint32_t n_split;    // workgroups per (token, KV head)
  uint32_t per_split;  // units (tiles of keys) per split
  uint32_t tpb;        // units per KV block
  uint32_t dense;      // 1: entry e is logical block e (dense_attention; k = max_blocks, no block_idx)
};
static_assert(sizeof(AttnGqaPC) == 26 * 4);

// shaders/paged_attention.gqa.comp with BDA=1: K and V by device address (bytes), then the rest
// as above (off_k / off_v 0). 120 bytes in the shader, within the 128 guaranteed.
struct AttnGqaBdaPC {
  uint64_t k_addr, v_addr;
  AttnGqaPC p;
};
static_assert(offsetof(AttnGqaBdaPC, p) == 16 && sizeof(AttnGqaBdaPC) <= 128);

// shaders/paged_attention.combine.comp
struct AttnCombinePC {
  uint32_t off_opart, off_lpart, off_out, off_lse;
  uint32_t rows, S, D;
};
static_assert(sizeof(AttnCombinePC) == 7 * 4);

// shaders/stream_copy.comp (16-byte units)
struct CopyPC {
  uint32_t off_src, off_dst, n;
};
static_assert(sizeof(CopyPC) == 3 * 4);

// shaders/patch_attention_3d.comp
struct PatchAttentionPC {
  uint32_t off_q, off_k, off_v, off_items, off_out, off_lse;
  uint32_t N, H, D, n_items, window;
  float scale;
};
static_assert(sizeof(PatchAttentionPC) == 12 * 4);

// shaders/indexer_score.comp
struct IndexerScorePC {
  uint32_t off_qi, off_ki, off_kis, off_bt, off_kvlen, off_cuq, off_out;
  uint32_t T, Hi, Di, P, Bs, mb_table, mb_out, B, Qb, NQ, has_scale, pool_lse;
  float scale;
};
static_assert(sizeof(IndexerScorePC) == 20 * 4);

// shaders/indexer_score.block.comp (off_ki in 16-byte units)
struct IndexerBlockPC {
  IndexerScorePC base;
  uint32_t bpw;  // KV blocks per workgroup
};
static_assert(sizeof(IndexerBlockPC) == 21 * 4);

// shaders/indexer_score.block.comp with BDA=1: the key cache by device address (bytes), then
// the rest as above (off_ki 0).
struct IndexerBlockBdaPC {
  uint64_t ki_addr;
  IndexerBlockPC p;
};
static_assert(offsetof(IndexerBlockBdaPC, p) == 8 && sizeof(IndexerBlockBdaPC) <= 128);

// shaders/block_topk.comp
struct BlockTopkPC {
  uint32_t off_score, off_kvlen, off_cuq, off_idx, off_cnt;
  uint32_t B, Hs, MB, Qb, NQ, Bs, k, n_sink, n_local;
};
static_assert(sizeof(BlockTopkPC) == 14 * 4);

// shaders/kv_append.kv.comp
struct KvAppendKvPC {
  uint32_t off_k, off_v, off_bt, off_kvlen, off_cuq, off_kc, off_vc;
  uint32_t T, Hkv, D, P, Bs, max_blocks, B;
};
static_assert(sizeof(KvAppendKvPC) == 14 * 4);

// shaders/kv_append.kv.comp with BDA=1: the caches by device address (bytes), then the
// rest as above (off_kc / off_vc 0).
struct KvAppendKvBdaPC {
  uint64_t kc_addr, vc_addr;
  KvAppendKvPC p;
};
static_assert(offsetof(KvAppendKvBdaPC, p) == 16 && sizeof(KvAppendKvBdaPC) <= 128);

// shaders/kv_append.ki.comp
struct KvAppendKiPC {
  uint32_t off_ki, off_bt, off_kvlen, off_cuq, off_kic, off_kis;
  uint32_t T, Di, P, Bs, max_blocks, B, has_scale;
};
static_assert(sizeof(KvAppendKiPC) == 13 * 4);

// shaders/matmul.comp
struct MatmulPC {
  uint32_t off_x, off_w, off_b, off_y;
  uint32_t M, N, K, has_bias, tiles_n;
};
static_assert(sizeof(MatmulPC) == 9 * 4);

// shaders/norm.comp (rms_norm and layer_norm)
struct NormPC {
  uint32_t off_x, off_w, off_b, off_y;
  uint32_t M, N;
  float eps;
  uint32_t flag;  // rms_norm: gemma; layer_norm: has bias
};
static_assert(sizeof(NormPC) == 8 * 4);

// shaders/rotary.comp (rope and rope_3d)
struct RopePC {
  uint32_t off_x, off_pos, off_y;
  uint32_t T, H, D;
  uint32_t half_dim;
  uint32_t npair;
};
static_assert(sizeof(RopePC) == 8 * 4);

// shaders/eltwise.comp (add, swiglu, gelu)
struct EltwisePC {
  uint32_t off_a, off_b, off_y;
  uint32_t n;
};
static_assert(sizeof(EltwisePC) == 4 * 4);

// shaders/embedding.comp
struct EmbeddingPC {
  uint32_t off_table, off_ids, off_y;
  uint32_t V, H, T;
};
static_assert(sizeof(EmbeddingPC) == 6 * 4);

// shaders/scatter_visual.comp
struct ScatterVisualPC {
  uint32_t off_tokens, off_vis, off_x;
  uint32_t T, Nv, H;
  int32_t placeholder;
};
static_assert(sizeof(ScatterVisualPC) == 7 * 4);

// shaders/argmax.comp
struct ArgmaxPC {
  uint32_t off_x, off_idx;
  uint32_t M, N;
};
static_assert(sizeof(ArgmaxPC) == 4 * 4);

// ---- training ops (docs/training.md); ws_* are word offsets into the workspace -------

// shaders/block_inverse.count.comp
struct BlockInverseCountPC {
  uint32_t off_bt, off_kvlen, off_cuq, off_idx;
  uint32_t T, B, P, Bs, max_blocks, Qb, NQ, Hs, K;
  uint32_t sparse, head_buckets;
  uint32_t ws_rows, ws_bucket, ws_count;
};
static_assert(sizeof(BlockInverseCountPC) == 18 * 4);

// shaders/block_inverse.scan.comp
struct BlockInverseScanPC {
  uint32_t n_buckets, ws_count, ws_begin;
};
static_assert(sizeof(BlockInverseScanPC) == 3 * 4);

// shaders/block_inverse.fill.comp
struct BlockInverseFillPC {
  uint32_t n_entries, ws_bucket, ws_count, ws_begin, ws_entry;
};
static_assert(sizeof(BlockInverseFillPC) == 5 * 4);

// shaders/block_inverse.sort.comp
struct BlockInverseSortPC {
  uint32_t n_buckets, ws_begin, ws_entry;
};
static_assert(sizeof(BlockInverseSortPC) == 3 * 4);

// shaders/paged_attention_backward.dq.comp
struct AttnBackwardDqPC {
  uint32_t off_q, off_k, off_v, off_bt, off_kvlen, off_cuq, off_idx, off_dout, off_out, off_lse, off_dq, ws_delta;
  uint32_t T, Hq, Hkv, D, P, Bs, max_blocks, B, Qb, NQ, K, Hs, sparse;
  float scale;
};
static_assert(sizeof(AttnBackwardDqPC) == 26 * 4);

// shaders/paged_attention_backward.dkv.comp
struct AttnBackwardDkvPC {
  uint32_t off_q, off_k, off_v, off_idx, off_dout, off_lse, off_dk, off_dv;
  uint32_t ws_rows, ws_begin, ws_entry, ws_delta;
  uint32_t Hq, Hkv, D, P, Bs, max_blocks, K, Hs, sparse, head_buckets;
  float scale;
};
static_assert(sizeof(AttnBackwardDkvPC) == 23 * 4);

// shaders/patch_attention_3d_backward.comp
struct PatchBackwardPC {
  uint32_t off_q, off_k, off_v, off_items, off_dout, off_out, off_lse, off_dq, off_dk, off_dv;
  uint32_t N, H, D, n_items, window;
  float scale;
};
static_assert(sizeof(PatchBackwardPC) == 16 * 4);

// shaders/indexer_kl.comp
struct IndexerKlPC {
  uint32_t off_qi, off_ki, off_q, off_k, off_lse, off_bt, off_kvlen, off_cuq, off_idx, off_dkl, off_kl, off_dqi;
  uint32_t ws_lse_u;
  uint32_t T, Hq, Hkv, D, P, Bs, max_blocks, B, Qb, NQ, K, Hs, Di, sparse, has_dkl;
  float scale, scale_i;
};
static_assert(sizeof(IndexerKlPC) == 30 * 4);

// shaders/indexer_kl.dki.comp
struct IndexerKlDkiPC {
  uint32_t off_qi, off_ki, off_q, off_k, off_lse, off_idx, off_dkl, off_dki;
  uint32_t ws_rows, ws_begin, ws_entry, ws_lse_u;
  uint32_t Hq, Hkv, D, P, Bs, max_blocks, K, Hs, Di, sparse, has_dkl;
  float scale, scale_i;
};
static_assert(sizeof(IndexerKlDkiPC) == 25 * 4);

}  // namespace msa::vulkan
