#include "model/op_runner.h"

#include "ops/ops.h"

namespace msa::model {

void OpRunner::matmul(const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& bias) {
  prof_.op("matmul", [&] { ops::matmul(device_, ops::MatmulArgs{x, w, bias, y}); });
}

void OpRunner::rms_norm(const Tensor& x, const Tensor& w, float eps, const Tensor& y) {
  prof_.op("rms_norm", [&] { ops::rms_norm(device_, ops::RmsNormArgs{x, w, eps, ops::NormKind::gemma, y}); });
}

void OpRunner::layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps, const Tensor& y) {
  prof_.op("layer_norm", [&] { ops::layer_norm(device_, ops::LayerNormArgs{x, w, b, eps, y}); });
}

void OpRunner::rope(const Tensor& x, const Tensor& pos, int rotary_dim, float theta) {
  prof_.op("rope", [&] { ops::rope(device_, ops::RopeArgs{x, pos, rotary_dim, theta, x}); });
}

void OpRunner::rope_3d(const Tensor& x, const Tensor& pos, float theta) {
  prof_.op("rope_3d", [&] { ops::rope_3d(device_, ops::Rope3dArgs{x, pos, theta, x}); });
}

void OpRunner::all_reduce(const Tensor& x) {
  if (comm_ == nullptr) return;
  prof_.op("all_reduce", [&] { comm_->all_reduce_sum(x); });
}

void OpRunner::add(const Tensor& a, const Tensor& b, const Tensor& y) {
  prof_.op("add", [&] { ops::add(device_, ops::AddArgs{a, b, y}); });
}

void OpRunner::gelu(const Tensor& x, const Tensor& y) {
  prof_.op("gelu", [&] { ops::gelu(device_, ops::GeluArgs{x, y}); });
}

void OpRunner::swiglu(const Tensor& gate, const Tensor& up, const Tensor& y) {
  prof_.op("swiglu", [&] { ops::swiglu(device_, ops::SwigluArgs{gate, up, y}); });
}

void OpRunner::embedding(const Tensor& table, const Tensor& ids, const Tensor& y) {
  prof_.op("embedding", [&] { ops::embedding(device_, ops::EmbeddingArgs{table, ids, y}); });
}

void OpRunner::scatter_visual(const Tensor& tokens, const Tensor& vis, int32_t placeholder, const Tensor& x) {
  prof_.op("scatter_visual", [&] {
    ops::scatter_visual(device_, ops::ScatterVisualArgs{tokens, vis, placeholder, x});
  });
}

void OpRunner::argmax(const Tensor& x, const Tensor& idx) {
  prof_.op("argmax", [&] { ops::argmax(device_, ops::ArgmaxArgs{x, idx}); });
}

void OpRunner::kv_append(const ops::KvAppendArgs& a) {
  prof_.op("kv_append", [&] { ops::kv_append(device_, a); });
}

void OpRunner::dense_attention(const ops::DenseAttentionArgs& a) {
  prof_.op("dense_attention", [&] { ops::dense_attention(device_, a); });
}

void OpRunner::indexer_topk(const ops::IndexerScoreArgs& idx, const ops::BlockTopkArgs& topk) {
  prof_.op("indexer_topk", [&] { ops::indexer_topk(device_, {idx, topk}); });
}

void OpRunner::sparse_block_attention(const ops::SparseAttentionArgs& a) {
  prof_.op("sparse_block_attention", [&] { ops::sparse_block_attention(device_, a); });
}

void OpRunner::patch_attention_3d(const ops::PatchAttention3dArgs& a) {
  prof_.op("patch_attention_3d", [&] { ops::patch_attention_3d(device_, a); });
}

void OpRunner::upload(const Tensor& dst, const void* src) {
  prof_.op("upload", [&] { device_.stream().upload(dst, src); });
}

void OpRunner::copy(const Tensor& dst, const Tensor& src) {
  prof_.op("copy", [&] { device_.stream().copy(dst, src); });
}

hal::HostTensor OpRunner::download(const Tensor& src) {
  hal::HostTensor h;
  prof_.op("download", [&] { h = hal::to_host(device_, src); });
  return h;
}

}  // namespace msa::model
