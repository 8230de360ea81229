#include "model/vision.h"

#include <utility>

#include "hal/error.h"

namespace msa::model {

VisionEncoder::VisionEncoder(const Config& config, const DeviceWeights& weights, Workspace& ws, OpRunner& run)
    : c_(config), w_(weights), ws_(ws), run_(run) {
  if (!c_.vision.enabled()) throw Error("vision: this model has no vision encoder (vision_config.depth = 0)");
}

hal::Device::Owned VisionEncoder::encode(const VisionInput& in) {
  const VisionConfig& v = c_.vision;
  const hal::DType dt = w_.dtype();
  const int64_t N = in.num_patches(), K = v.patch_dim(), C = v.hidden_size;
  const int64_t H = v.num_heads, Dv = v.head_dim(), I = v.intermediate_size;
  const int64_t M = v.merge_tokens(), Nm = N / M;
  MSA_CHECK_ARG(N > 0 && N % M == 0 && in.patches.shape.size() == 2 && in.patches.shape[1] == K, "vision", "patches",
                "expected [N][" + std::to_string(K) + "] with N a positive multiple of " + std::to_string(M) +
                    ", got " + in.patches.str());
  // Inputs: pixels in the activation dtype, rope positions, the one visual item.
  hal::HostTensor px(dt, {N, K});
  for (int64_t i = 0; i < N * K; ++i) px.set(static_cast<size_t>(i), in.patches.get(static_cast<size_t>(i)));
  const Tensor patches = ws_.get("vis.patches", dt, {N, K});
  const Tensor pos = ws_.get("vis.pos", hal::DType::i32, {N, 3});
  const Tensor items = ws_.get("vis.items", hal::DType::i32, {1, 3});
  run_.upload(patches, px.bytes.data());
  run_.upload(pos, in.pos.data());
  run_.upload(items, in.grid.data());

  Tensor x = ws_.get("vis.x", dt, {N, C});
  Tensor x2 = ws_.get("vis.x2", dt, {N, C});
  const Tensor h = ws_.get("vis.h", dt, {N, C});
  const float eps = v.layer_norm_eps;
  run_.matmul(patches, w_.get("visual.patch_embed.proj.weight"), x2);
  run_.layer_norm(x2, w_.get("visual.pre_layernorm.weight"), w_.get("visual.pre_layernorm.bias"), eps, x);

  const Tensor q = ws_.get("vis.q", dt, {N, C}), k = ws_.get("vis.k", dt, {N, C});
  const Tensor val = ws_.get("vis.v", dt, {N, C}), o = ws_.get("vis.o", dt, {N, C});
  const Tensor lse = ws_.get("vis.lse", hal::DType::f32, {N, H});
  const Tensor a = ws_.get("vis.a", dt, {N, C});
  const Tensor f = ws_.get("vis.f", dt, {N, I}), g = ws_.get("vis.g", dt, {N, I});
  for (int blk = 0; blk < v.depth; ++blk) {
    const std::string p = "visual.blocks." + std::to_string(blk) + ".";
    run_.layer_norm(x, w_.get(p + "norm1.weight"), w_.get(p + "norm1.bias"), eps, h);
    // q, k, v from the row slices of the fused qkv weight: each comes out contiguous.
    const Tensor& wqkv = w_.get(p + "attn.qkv.weight");
    const Tensor& bqkv = w_.get(p + "attn.qkv.bias");
    run_.matmul(h, wqkv.slice_rows(0, C), q, bqkv.slice_rows(0, C));
    run_.matmul(h, wqkv.slice_rows(C, 2 * C), k, bqkv.slice_rows(C, 2 * C));
    run_.matmul(h, wqkv.slice_rows(2 * C, 3 * C), val, bqkv.slice_rows(2 * C, 3 * C));
    const Tensor q3 = q.reshape({N, H, Dv}), k3 = k.reshape({N, H, Dv});
    run_.rope_3d(q3, pos, v.rope_theta);
    run_.rope_3d(k3, pos, v.rope_theta);
    ops::PatchAttention3dArgs pa;
    pa.q = q3;
    pa.k = k3;
    pa.v = val.reshape({N, H, Dv});
    pa.items = items;
    pa.window = v.window;
    pa.out = o.reshape({N, H, Dv});
    pa.lse = lse;
    run_.patch_attention_3d(pa);
    run_.matmul(o, w_.get(p + "attn.proj.weight"), a, w_.get(p + "attn.proj.bias"));
    run_.add(x, a, x2);
    std::swap(x, x2);
    run_.layer_norm(x, w_.get(p + "norm2.weight"), w_.get(p + "norm2.bias"), eps, h);
    run_.matmul(h, w_.get(p + "mlp.fc1.weight"), f, w_.get(p + "mlp.fc1.bias"));
    run_.gelu(f, g);
    run_.matmul(g, w_.get(p + "mlp.fc2.weight"), a, w_.get(p + "mlp.fc2.bias"));
    run_.add(x, a, x2);
    std::swap(x, x2);
  }
  run_.layer_norm(x, w_.get("visual.merger.ln_q.weight"), w_.get("visual.merger.ln_q.bias"), eps, h);
  // Merge blocks are consecutive rows, so [N][C] viewed as [N/M][M*C] concatenates them.
  const Tensor hm = h.reshape({Nm, M * C});
  const Tensor m1 = ws_.get("vis.m1", dt, {Nm, M * C}), m2 = ws_.get("vis.m2", dt, {Nm, M * C});
  run_.matmul(hm, w_.get("visual.merger.mlp.0.weight"), m1, w_.get("visual.merger.mlp.0.bias"));
  run_.gelu(m1, m2);
  hal::Device::Owned out = run_.device().alloc_tensor(dt, {Nm, c_.hidden_size});
  run_.matmul(m2, w_.get("visual.merger.mlp.2.weight"), out.tensor, w_.get("visual.merger.mlp.2.bias"));
  return out;
}

}  // namespace msa::model
