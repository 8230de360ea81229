// One plain struct per op, with the argument names of the op contract (docs/spec.md).
// Inputs first, then scalar parameters, then preallocated outputs. Every backend's
// kernel receives these after ops:: has checked shapes, dtypes and scalars, and after
// defaults (scale = 0 -> 1/sqrt(dim)) have been resolved to concrete values.
// Notation: T packed query tokens, B sequences, Hq/Hkv/Hi heads, D/Di head dims,
// P pages, Bs block size, NQ query blocks, Hs selection heads (Hkv or 1), k selected.
#pragma once
#include <cstdint>

#include "hal/export.h"
#include "hal/tensor.h"
#include "ops/paged_batch.h"

namespace msa::ops {

using hal::Tensor;

// per_kv_head (M3): Hi == Hkv, indexer head g selects for KV head g.
// shared (extension, DSA-like): Hi == 1, one selection for every KV head.
enum class SelectionMode : int { per_kv_head, shared };
// Pooling of token logits into one block score: max (M3) or log-sum-exp (extension).
enum class Pool : int { max, lse };
// plain: x * rsqrt(mean(x^2)+eps) * w; gemma (M3): ... * (1 + w).
enum class NormKind : int { plain, gemma };

MSA_API const char* mode_name(SelectionMode m);
MSA_API const char* pool_name(Pool p);

struct IndexerScoreArgs {
  Tensor qi;           // [T][Hi][Di] f32|bf16|f16
  Tensor ki_cache;     // [P][Bs][Di] bf16|f32|fp8_e4m3, or NVFP4: [P][Bs][Di/2] fp4_e2m1x2
  Tensor ki_scale;     // fp8 keys: (optional) [P][Bs] f32, absent = 1;
                       // NVFP4 keys: (required) [P][Bs][Di/16] fp8_e4m3 group scales
  Tensor block_table;  // [B][max_blocks] i32
  Tensor kv_len;       // [B] i32
  Tensor cu_q;         // [B+1] i32
  int Qb = 1;
  int64_t NQ = 0;
  SelectionMode mode = SelectionMode::per_kv_head;
  float scale = 0.0f;  // 0 = 1/sqrt(Di)
  Pool pool = Pool::max;
  Tensor block_score;  // out [NQ][Hi][max_blocks] f32
};

struct BlockTopkArgs {
  Tensor block_score;  // [NQ][Hs][max_blocks] f32
  Tensor kv_len;       // [B] i32
  Tensor cu_q;         // [B+1] i32
  int Qb = 1;
  int64_t NQ = 0;
  int Bs = 128;
  int k = 16;
  int n_sink = 0;
  int n_local = 1;
  Tensor block_idx;  // out [NQ][Hs][k] i32, ascending, -1 padded
  Tensor block_cnt;  // out [NQ][Hs] i32
};

// The composite indexer_topk: indexer_score, then block_topk over the scores it writes.
// `topk` names the indexer's block_score and the same kv_len, cu_q, Qb and NQ, with Bs
// the indexer keys' block size.
struct IndexerTopkArgs {
  IndexerScoreArgs indexer;
  BlockTopkArgs topk;
};

struct SparseAttentionArgs {
  Tensor q;            // [T][Hq][D]
  Tensor k_cache;      // [P][Hkv][Bs][D]
  Tensor v_cache;      // [P][Hkv][Bs][D]
  Tensor block_table;  // [B][max_blocks] i32
  Tensor kv_len;       // [B] i32
  Tensor cu_q;         // [B+1] i32
  int Qb = 1;
  int64_t NQ = 0;
  SelectionMode mode = SelectionMode::per_kv_head;
  Tensor block_idx;    // [NQ][Hs][k] i32
  float scale = 0.0f;  // 0 = 1/sqrt(D)
  Tensor out;          // out [T][Hq][D], dtype of q
  Tensor lse;          // out [T][Hq] f32
};

struct DenseAttentionArgs {
  Tensor q, k_cache, v_cache, block_table, kv_len, cu_q;  // as SparseAttentionArgs
  float scale = 0.0f;
  Tensor out;  // out [T][Hq][D]
  Tensor lse;  // out [T][Hq] f32
};

struct PatchAttention3dArgs {
  Tensor q, k, v;      // [N][H][D]
  Tensor items;        // [n][3] i32 {grid_t, grid_h, grid_w}
  int window = 4;      // temporal patches per window
  float scale = 0.0f;  // 0 = 1/sqrt(D)
  Tensor out;          // out [N][H][D]
  Tensor lse;          // out [N][H] f32
};

// The training ops (docs/training.md): gradients of the attention ops and the indexer's
// KL loss. Gradients are f32; dk_cache/dv_cache/dki_cache slots no query attended are 0.

// Gradient of sparse_block_attention: the forward's inputs and outputs plus dout.
struct SparseAttentionBackwardArgs {
  Tensor dout;                                            // [T][Hq][D], dtype of q
  Tensor q, k_cache, v_cache, block_table, kv_len, cu_q;  // as SparseAttentionArgs
  int Qb = 1;
  int64_t NQ = 0;
  SelectionMode mode = SelectionMode::per_kv_head;
  Tensor block_idx;    // [NQ][Hs][k] i32
  float scale = 0.0f;  // 0 = 1/sqrt(D)
  Tensor out;          // the forward's out [T][Hq][D], dtype of q
  Tensor lse;          // the forward's lse [T][Hq] f32
  Tensor dq;           // out [T][Hq][D] f32
  Tensor dk_cache;     // out [P][Hkv][Bs][D] f32
  Tensor dv_cache;     // out [P][Hkv][Bs][D] f32
};

// Gradient of dense_attention: as SparseAttentionBackwardArgs without the selection.
struct DenseAttentionBackwardArgs {
  Tensor dout;  // [T][Hq][D], dtype of q
  Tensor q, k_cache, v_cache, block_table, kv_len, cu_q;
  float scale = 0.0f;
  Tensor out, lse;  // the forward's outputs
  Tensor dq;        // out [T][Hq][D] f32
  Tensor dk_cache;  // out [P][Hkv][Bs][D] f32
  Tensor dv_cache;  // out [P][Hkv][Bs][D] f32
};

// Gradient of patch_attention_3d.
struct PatchAttention3dBackwardArgs {
  Tensor dout;     // [N][H][D], dtype of q
  Tensor q, k, v;  // [N][H][D]
  Tensor items;    // [n][3] i32
  int window = 4;
  float scale = 0.0f;
  Tensor out, lse;    // the forward's outputs
  Tensor dq, dk, dv;  // out [N][H][D] f32
};

// Token sets of indexer_kl: the selected blocks (sparse) or every causal token (dense).
enum class KlStage : int { sparse, dense };
MSA_API const char* stage_name(KlStage s);

// KL(target || student) per query and selection head, with the gradients of
// sum dkl * kl to the indexer's queries and keys (the target is detached).
struct IndexerKlArgs {
  Tensor qi;           // [T][Hi][Di] f32|bf16|f16
  Tensor ki_cache;     // [P][Bs][Di] bf16|f32
  Tensor q;            // [T][Hq][D]
  Tensor k_cache;      // [P][Hkv][Bs][D], dtype of q
  Tensor lse;          // [T][Hq] f32, the main branch's lse over the same token sets
  Tensor block_table;  // [B][max_blocks] i32
  Tensor kv_len;       // [B] i32
  Tensor cu_q;         // [B+1] i32
  Tensor block_idx;    // [NQ][Hs][k] i32, stage sparse only (absent for dense)
  Tensor dkl;          // (optional) [T][Hs] f32, absent = all ones
  KlStage stage = KlStage::sparse;
  int Qb = 1;      // stage sparse only
  int64_t NQ = 0;  // stage sparse only
  SelectionMode mode = SelectionMode::per_kv_head;
  float scale = 0.0f;    // main branch, 0 = 1/sqrt(D)
  float scale_i = 0.0f;  // indexer, 0 = 1/sqrt(Di)
  Tensor kl;             // out [T][Hs] f32
  Tensor dqi;            // out [T][Hi][Di] f32
  Tensor dki_cache;      // out [P][Bs][Di] f32
};

// Writes this step's keys and values into their cache slots: token i of sequence b goes
// to position kv_len[b] - q_len[b] + i. k/v have the cache dtype. ki (optional, with
// ki_cache) is f32/bf16/f16 and is converted to ki_cache's dtype; for fp8 keys with a
// ki_scale tensor the per-token scale is amax/448 (1 when the row is all zero); NVFP4
// keys are quantized per group of 16 dims (hal/nvfp4.h, quantize_nvfp4_group).
struct KvAppendArgs {
  Tensor k;            // [T][Hkv][D]
  Tensor v;            // [T][Hkv][D]
  Tensor ki;           // (optional) [T][Di]
  Tensor block_table;  // [B][max_blocks] i32
  Tensor kv_len;       // [B] i32 (including the new tokens)
  Tensor cu_q;         // [B+1] i32
  Tensor k_cache;      // in/out [P][Hkv][Bs][D]
  Tensor v_cache;      // in/out [P][Hkv][Bs][D]
  Tensor ki_cache;     // (optional) in/out [P][Bs][Di] ([P][Bs][Di/2] fp4_e2m1x2 for NVFP4)
  Tensor ki_scale;     // (optional) in/out [P][Bs] f32, fp8 ki_cache only;
                       // (required) in/out [P][Bs][Di/16] fp8_e4m3 for an NVFP4 ki_cache
};

// y = x W^T (+ bias). x [M][K], w [N][K], bias [N] (optional), y [M][N].
// x, w, bias and y share one activation dtype; accumulation in f32 (f64 on cpu-ref).
struct MatmulArgs {
  Tensor x, w, bias;
  Tensor y;
};

// Row-wise over the last dim: x [M][N], w [N] (f32 or the dtype of x), y [M][N].
struct RmsNormArgs {
  Tensor x, w;
  float eps = 1e-6f;
  NormKind kind = NormKind::gemma;
  Tensor y;
};

// y = (x - mean) * rsqrt(var + eps) * w + b over the last dim. b optional.
struct LayerNormArgs {
  Tensor x, w, b;
  float eps = 1e-6f;
  Tensor y;
};

// Neox-style rotary embedding of the first rotary_dim dims of every head, in place
// (y may equal x). x [T][H][D], pos [T] i32, inv_freq_j = theta^(-2j/rotary_dim).
struct RopeArgs {
  Tensor x;
  Tensor pos;
  int rotary_dim = 0;  // 0 = D
  float theta = 1e4f;
  Tensor y;  // [T][H][D]; may be the same view as x
};

// 3-axis rotary embedding for the ViT (see the contract). x [N][H][D], pos [N][3].
struct Rope3dArgs {
  Tensor x;
  Tensor pos;
  float theta = 1e4f;
  Tensor y;  // may be the same view as x
};

// y = silu(gate) * up, elementwise. gate, up, y [M][N].
struct SwigluArgs {
  Tensor gate, up;
  Tensor y;
};

// y = gelu(x) (exact, erf form), elementwise.
struct GeluArgs {
  Tensor x;
  Tensor y;
};

// y = a + b, elementwise, same shapes.
struct AddArgs {
  Tensor a, b;
  Tensor y;
};

// y[t] = table[ids[t]]. table [V][H], ids [T] i32, y [T][H]. ids out of range: error.
struct EmbeddingArgs {
  Tensor table, ids;
  Tensor y;
};

// In place: the rows t of x [T][H] with tokens[t] == placeholder are replaced, in order,
// by the rows of vis [Nv][H]; the number of placeholders must equal Nv.
struct ScatterVisualArgs {
  Tensor tokens;  // [T] i32
  Tensor vis;     // [Nv][H]
  int32_t placeholder = 0;
  Tensor x;  // in/out [T][H]
};

// idx[m] = argmax over n of x[m][n] (ties: lowest index; NaN is never the max unless the
// whole row is NaN, then 0). x [M][N] f32|bf16|f16, idx [M] i32.
struct ArgmaxArgs {
  Tensor x;
  Tensor idx;
};

}  // namespace msa::ops
