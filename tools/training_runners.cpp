// `msa op` runners of the training ops (docs/training.md; tensor names in docs/ops-cli.md).
#include <vector>

#include "hal/error.h"
#include "ops/ops.h"
#include "tools/op_runner.h"

namespace msa::cli {
namespace {

using hal::DType;

std::vector<int64_t> shape_of(const hal::Tensor& t) { return {t.shape.begin(), t.shape.begin() + t.rank}; }

ops::KlStage parse_stage(const std::string& s) {
  if (s == "sparse") return ops::KlStage::sparse;
  if (s == "dense") return ops::KlStage::dense;
  throw Error("argument '--param stage': '" + s + "' is not sparse or dense");
}

// The tensors the sparse and dense backward passes share: dout, the forward's paged-cache
// inputs and outputs (read), and the f32 gradients (allocated once the parameters are checked).
template <typename Args>
void read_paged_backward(OpIo& io, Args& a) {
  a.dout = io.in("dout"), a.q = io.in("q"), a.k_cache = io.in("k_cache"), a.v_cache = io.in("v_cache");
  a.block_table = io.in("block_table"), a.kv_len = io.in("kv_len"), a.cu_q = io.in("cu_q");
  a.out = io.in("out"), a.lse = io.in("lse");
}

template <typename Args>
void paged_gradients(OpIo& io, Args& a) {
  a.dq = io.out("dq", DType::f32, shape_of(a.q));
  a.dk_cache = io.out("dk_cache", DType::f32, shape_of(a.k_cache));
  a.dv_cache = io.out("dv_cache", DType::f32, shape_of(a.k_cache));
}

}  // namespace

void add_training_runners(RunnerTable& r) {
  r["sparse_block_attention_backward"] = [](hal::Device& d, OpIo& io, OpParams& p) {
    ops::SparseAttentionBackwardArgs a;
    read_paged_backward(io, a);
    a.block_idx = io.in("block_idx");
    a.Qb = int_param(p, "Qb", 1), a.NQ = resolve_nq(io, p, a.Qb, a.block_idx.shape[0], "block_idx");
    a.mode = parse_mode(p.get_str("mode", "per_kv_head")), a.scale = scale_param(p, "scale");
    paged_gradients(io, a);
    ops::sparse_block_attention_backward(d, a);
  };
  r["dense_attention_backward"] = [](hal::Device& d, OpIo& io, OpParams& p) {
    ops::DenseAttentionBackwardArgs a;
    read_paged_backward(io, a);
    a.scale = scale_param(p, "scale");
    paged_gradients(io, a);
    ops::dense_attention_backward(d, a);
  };
  r["patch_attention_3d_backward"] = [](hal::Device& d, OpIo& io, OpParams& p) {
    ops::PatchAttention3dBackwardArgs a;
    a.dout = io.in("dout"), a.q = io.in("q"), a.k = io.in("k"), a.v = io.in("v"), a.items = io.in("items");
    a.out = io.in("out"), a.lse = io.in("lse");
    a.window = int_param(p, "window", 4), a.scale = scale_param(p, "scale");
    a.dq = io.out("dq", DType::f32, shape_of(a.q));
    a.dk = io.out("dk", DType::f32, shape_of(a.q));
    a.dv = io.out("dv", DType::f32, shape_of(a.q));
    ops::patch_attention_3d_backward(d, a);
  };
  r["indexer_kl"] = [](hal::Device& d, OpIo& io, OpParams& p) {
    ops::IndexerKlArgs a;
    a.qi = io.in("qi"), a.ki_cache = io.in("ki_cache"), a.q = io.in("q"), a.k_cache = io.in("k_cache");
    a.lse = io.in("lse"), a.block_table = io.in("block_table"), a.kv_len = io.in("kv_len"), a.cu_q = io.in("cu_q");
    a.dkl = io.opt("dkl");
    a.stage = parse_stage(p.get_str("stage", "sparse"));
    if (a.stage == ops::KlStage::sparse) {
      a.block_idx = io.in("block_idx");
      a.Qb = int_param(p, "Qb", 1), a.NQ = resolve_nq(io, p, a.Qb, a.block_idx.shape[0], "block_idx");
    }
    a.mode = parse_mode(p.get_str("mode", "per_kv_head"));
    a.scale = scale_param(p, "scale"), a.scale_i = scale_param(p, "scale_i");
    a.kl = io.out("kl", DType::f32, {a.qi.shape[0], a.qi.shape[1]});
    a.dqi = io.out("dqi", DType::f32, shape_of(a.qi));
    a.dki_cache = io.out("dki_cache", DType::f32, shape_of(a.ki_cache));
    ops::indexer_kl(d, a);
  };
}

}  // namespace msa::cli
