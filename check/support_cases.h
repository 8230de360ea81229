// Cases of the ViT ops (patch_attention_3d, rope_3d), kv_append and the supporting ops.
#pragma once
#include <array>
#include <memory>
#include <vector>

#include "check/attention_cases.h"
#include "check/case.h"
#include "ops/args.h"

namespace msa::cases {

struct VitParams {
  std::vector<std::array<int32_t, 3>> items{{2, 2, 3}};  // {grid_t, grid_h, grid_w}
  int H = 2, D = 80, window = 4;
  hal::DType dtype = hal::DType::bf16;
  float scale = 0.0f;
  bool in_place = false;  // rope_3d: y is x
};
std::unique_ptr<Case> patch_attention_3d_case(const VitParams& p);
std::unique_ptr<Case> rope_3d_case(const VitParams& p);

// kv_append: this step's K/V (+ indexer keys) into a paged cache (AttnParams: q_len,
// kv_len, Hkv, D, Bs, dtype, Di, ki_dtype, ki_scale; with_ki = false leaves ki absent).
std::unique_ptr<Case> kv_append_case(const AttnParams& p, bool with_ki);

// Row-wise and elementwise ops on [M][N] (matmul: x [M][K], w [N][K]).
struct RowParams {
  int64_t M = 4, N = 64, K = 32;
  hal::DType dtype = hal::DType::f32;
  bool flag = false;  // matmul/layer_norm: bias; rms_norm: w in f32;
                      // rope: in place; argmax: ties and NaN rows
  ops::NormKind kind = ops::NormKind::gemma;
  int H = 2, rotary_dim = 0;  // rope: x [M][H][N], rotary_dim (0 = N)
  float theta = 1e4f;
  int64_t V = 50;  // embedding: vocabulary
};
std::unique_ptr<Case> matmul_case(const RowParams& p);
std::unique_ptr<Case> rms_norm_case(const RowParams& p);
std::unique_ptr<Case> layer_norm_case(const RowParams& p);
std::unique_ptr<Case> rope_case(const RowParams& p);
std::unique_ptr<Case> swiglu_case(const RowParams& p);
std::unique_ptr<Case> gelu_case(const RowParams& p);
std::unique_ptr<Case> add_case(const RowParams& p);
std::unique_ptr<Case> embedding_case(const RowParams& p);
std::unique_ptr<Case> scatter_visual_case(const RowParams& p);
std::unique_ptr<Case> argmax_case(const RowParams& p);

}  // namespace msa::cases
