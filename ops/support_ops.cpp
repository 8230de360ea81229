// Host checks and dispatch for the supporting ops the model uses.
#include <cmath>
#include <vector>

#include "hal/error.h"
#include "ops/attention_checks.h"
#include "ops/checks.h"
#include "ops/ops.h"

namespace msa::ops {
namespace {

using detail::Checker;
using hal::DType;
using hal::OpId;

using detail::kActDtypes;

// A tensor of any rank 1..4, viewed as rows over its last dim.
void rows_tensor(const Checker& c, const Tensor& t, const std::string& arg) {
  MSA_REQUIRE(c, t.present(), arg, "is required but absent");
  MSA_REQUIRE(c, t.rank >= 1, arg, "must have rank >= 1");
  c.tensor(t, arg, t.rank, kActDtypes);
}

void elementwise_out(const Checker& c, const Tensor& y, const Tensor& x, const std::string& xname,
                     bool allow_in_place) {
  c.tensor(y, "y", y.rank);
  c.same_shape(y, "y", x, xname);
  c.no_alias(y, "y", x, xname, allow_in_place);
}

}  // namespace

void matmul(hal::Device& device, const MatmulArgs& a) {
  Checker c(device, OpId::matmul);
  c.tensor(a.x, "x", 2, kActDtypes);
  c.tensor(a.w, "w", 2);
  c.same_dtype(a.w, "w", a.x, "x");
  c.dim(a.w, "w", 1, a.x.shape[1], "K (dim 1 of x)");
  if (a.bias.present()) {
    c.tensor(a.bias, "bias", 1);
    c.same_dtype(a.bias, "bias", a.x, "x");
    c.dim(a.bias, "bias", 0, a.w.shape[0], "N (dim 0 of w)");
  }
  c.tensor(a.y, "y", 2);
  c.same_dtype(a.y, "y", a.x, "x");
  c.dim(a.y, "y", 0, a.x.shape[0], "M (dim 0 of x)");
  c.dim(a.y, "y", 1, a.w.shape[0], "N (dim 0 of w)");
  c.no_alias(a.y, "y", a.x, "x");
  c.no_alias(a.y, "y", a.w, "w");
  c.no_alias(a.y, "y", a.bias, "bias");
  detail::dispatch(device, OpId::matmul, &a);
}

void rms_norm(hal::Device& device, const RmsNormArgs& a) {
  Checker c(device, OpId::rms_norm);
  rows_tensor(c, a.x, "x");
  c.tensor(a.w, "w", 1);
  MSA_REQUIRE(c, a.w.dtype == DType::f32 || a.w.dtype == a.x.dtype, "w", "dtype must be f32 or the dtype of x");
  c.dim(a.w, "w", 0, a.x.dim(-1), "the last dim of x");
  c.finite(a.eps, "eps");
  MSA_REQUIRE(c, a.eps >= 0, "eps", "must be >= 0");
  MSA_REQUIRE(c, a.kind == NormKind::plain || a.kind == NormKind::gemma, "kind", "must be plain or gemma");
  elementwise_out(c, a.y, a.x, "x", true);
  c.no_alias(a.y, "y", a.w, "w");
  detail::dispatch(device, OpId::rms_norm, &a);
}

void layer_norm(hal::Device& device, const LayerNormArgs& a) {
  Checker c(device, OpId::layer_norm);
  rows_tensor(c, a.x, "x");
  c.tensor(a.w, "w", 1);
  MSA_REQUIRE(c, a.w.dtype == DType::f32 || a.w.dtype == a.x.dtype, "w", "dtype must be f32 or the dtype of x");
  c.dim(a.w, "w", 0, a.x.dim(-1), "the last dim of x");
  if (a.b.present()) {
    c.tensor(a.b, "b", 1);
    c.same_dtype(a.b, "b", a.w, "w");
    c.dim(a.b, "b", 0, a.x.dim(-1), "the last dim of x");
  }
  c.finite(a.eps, "eps");
  MSA_REQUIRE(c, a.eps >= 0, "eps", "must be >= 0");
  elementwise_out(c, a.y, a.x, "x", true);
  c.no_alias(a.y, "y", a.w, "w");
  c.no_alias(a.y, "y", a.b, "b");
  detail::dispatch(device, OpId::layer_norm, &a);
}

void rope(hal::Device& device, const RopeArgs& args) {
  Checker c(device, OpId::rope);
  RopeArgs a = args;
  c.tensor(a.x, "x", 3, kActDtypes);
  c.tensor(a.pos, "pos", 1, {DType::i32});
  c.dim(a.pos, "pos", 0, a.x.shape[0], "T");
  const int64_t D = a.x.shape[2];
  if (a.rotary_dim == 0) a.rotary_dim = static_cast<int>(D);
  MSA_REQUIRE(c, a.rotary_dim >= 2 && a.rotary_dim % 2 == 0 && a.rotary_dim <= D, "rotary_dim",
              "must be even, >= 2 and <= D = " + std::to_string(D) + ", got " + std::to_string(a.rotary_dim));
  c.finite(a.theta, "theta", true);
  elementwise_out(c, a.y, a.x, "x", true);
  c.no_alias(a.y, "y", a.pos, "pos");
  detail::dispatch(device, OpId::rope, &a);
}

void rope_3d(hal::Device& device, const Rope3dArgs& a) {
  Checker c(device, OpId::rope_3d);
  c.tensor(a.x, "x", 3, kActDtypes);
  MSA_REQUIRE(c, a.x.shape[2] >= 6, "x", "head dim D must be >= 6 (2*floor(D/6) dims per axis)");
  c.tensor(a.pos, "pos", 2, {DType::i32});
  c.dim(a.pos, "pos", 0, a.x.shape[0], "N");
  c.dim(a.pos, "pos", 1, 3, "3 (t, h, w)");
  c.finite(a.theta, "theta", true);
  elementwise_out(c, a.y, a.x, "x", true);
  c.no_alias(a.y, "y", a.pos, "pos");
  detail::dispatch(device, OpId::rope_3d, &a);
}

void swiglu(hal::Device& device, const SwigluArgs& a) {
  Checker c(device, OpId::swiglu);
  rows_tensor(c, a.gate, "gate");
  c.tensor(a.up, "up", a.up.rank);
  c.same_shape(a.up, "up", a.gate, "gate");
  elementwise_out(c, a.y, a.gate, "gate", true);
  c.no_alias(a.y, "y", a.up, "up", true);
  detail::dispatch(device, OpId::swiglu, &a);
}

void gelu(hal::Device& device, const GeluArgs& a) {
  Checker c(device, OpId::gelu);
  rows_tensor(c, a.x, "x");
  elementwise_out(c, a.y, a.x, "x", true);
  detail::dispatch(device, OpId::gelu, &a);
}

void add(hal::Device& device, const AddArgs& a) {
  Checker c(device, OpId::add);
  rows_tensor(c, a.a, "a");
  c.tensor(a.b, "b", a.b.rank);
  c.same_shape(a.b, "b", a.a, "a");
  elementwise_out(c, a.y, a.a, "a", true);
  c.no_alias(a.y, "y", a.b, "b", true);
  detail::dispatch(device, OpId::add, &a);
}

void embedding(hal::Device& device, const EmbeddingArgs& a) {
  Checker c(device, OpId::embedding);
  c.tensor(a.table, "table", 2, kActDtypes);
  c.tensor(a.ids, "ids", 1, {DType::i32});
  c.tensor(a.y, "y", 2);
  c.same_dtype(a.y, "y", a.table, "table");
  c.dim(a.y, "y", 0, a.ids.shape[0], "T (length of ids)");
  c.dim(a.y, "y", 1, a.table.shape[1], "H (dim 1 of table)");
  c.no_alias(a.y, "y", a.table, "table");
  c.no_alias(a.y, "y", a.ids, "ids");
  if (device.host_accessible()) {
    std::vector<int32_t> ids(static_cast<size_t>(a.ids.numel()));
    if (!ids.empty()) device.stream().download(ids.data(), a.ids);
    for (size_t t = 0; t < ids.size(); ++t)
      MSA_REQUIRE(c, ids[t] >= 0 && ids[t] < a.table.shape[0], "ids",
                  "ids[" + std::to_string(t) + "] = " + std::to_string(ids[t]) + " is outside the vocabulary [0, " +
                      std::to_string(a.table.shape[0]) + ")");
  }
  detail::dispatch(device, OpId::embedding, &a);
}

void scatter_visual(hal::Device& device, const ScatterVisualArgs& a) {
  Checker c(device, OpId::scatter_visual);
  c.tensor(a.tokens, "tokens", 1, {DType::i32});
  c.tensor(a.x, "x", 2, kActDtypes);
  c.dim(a.x, "x", 0, a.tokens.shape[0], "T (length of tokens)");
  c.tensor(a.vis, "vis", 2);
  c.same_dtype(a.vis, "vis", a.x, "x");
  c.dim(a.vis, "vis", 1, a.x.shape[1], "H (dim 1 of x)");
  c.no_alias(a.x, "x", a.vis, "vis");
  c.no_alias(a.x, "x", a.tokens, "tokens");
  if (device.host_accessible()) {
    std::vector<int32_t> tok(static_cast<size_t>(a.tokens.numel()));
    if (!tok.empty()) device.stream().download(tok.data(), a.tokens);
    int64_t n = 0;
    for (int32_t t : tok) n += t == a.placeholder;
    MSA_REQUIRE(c, n == a.vis.shape[0], "vis",
                "has " + std::to_string(a.vis.shape[0]) + " rows but tokens hold " + std::to_string(n) +
                    " placeholders (id " + std::to_string(a.placeholder) + ")");
  }
  detail::dispatch(device, OpId::scatter_visual, &a);
}

void argmax(hal::Device& device, const ArgmaxArgs& a) {
  Checker c(device, OpId::argmax);
  c.tensor(a.x, "x", 2, kActDtypes);
  MSA_REQUIRE(c, a.x.shape[1] >= 1, "x", "rows must have at least one element");
  c.tensor(a.idx, "idx", 1, {DType::i32});
  c.dim(a.idx, "idx", 0, a.x.shape[0], "M (dim 0 of x)");
  c.no_alias(a.idx, "idx", a.x, "x");
  detail::dispatch(device, OpId::argmax, &a);
}

}  // namespace msa::ops
