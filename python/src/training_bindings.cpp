// msa._C's training ops: the attention backward passes and the indexer's KL loss.
#include <string>

#include "hal/error.h"
#include "ops/ops.h"
#include "python/src/call.h"
#include "python/src/op_bindings.h"
#include "python/src/paged_args.h"
#include "python/src/scalars.h"

namespace msa::python {
namespace {

using py::handle;
using Str = const std::string&;

ops::KlStage to_stage(Str op, Str name) {
  if (name == "sparse") return ops::KlStage::sparse;
  if (name == "dense") return ops::KlStage::dense;
  throw_arg_error(op, "stage", "'" + name + "' is not a stage (sparse or dense)");
}

// The gradient's input, the forward's paged-cache inputs and outputs, and the gradient
// outputs, shared by the sparse and dense backward passes. `block_idx` (sparse only) is
// bound between the forward's inputs and outputs, as the op's argument order has it
// (its slot is -1 for the dense pass).
struct BackwardSlots {
  int dout;
  PagedSlots paged;
  int block_idx, out, lse, dq, dk_cache, dv_cache;
};

BackwardSlots backward_args(Call& c, handle dout, handle q, handle k_cache, handle v_cache, handle block_table,
                            handle kv_len, handle cu_q, const handle* block_idx, handle out, handle lse, handle dq,
                            handle dk_cache, handle dv_cache) {
  BackwardSlots s{};
  s.dout = c.arg("dout", dout, Role::in);
  s.paged = paged_args(c, q, k_cache, v_cache, block_table, kv_len, cu_q);
  s.block_idx = block_idx != nullptr ? c.arg("block_idx", *block_idx, Role::in) : -1;
  s.out = c.arg("out", out, Role::in);
  s.lse = c.arg("lse", lse, Role::in);
  s.dq = c.arg("dq", dq, Role::out);
  s.dk_cache = c.arg("dk_cache", dk_cache, Role::out);
  s.dv_cache = c.arg("dv_cache", dv_cache, Role::out);
  return s;
}

template <typename Args>
void fill_backward(const Call& c, const BackwardSlots& s, Args& a) {
  a.dout = c.tensor(s.dout);
  fill_paged(c, s.paged, a);
  a.out = c.tensor(s.out);
  a.lse = c.tensor(s.lse);
  a.dq = c.tensor(s.dq);
  a.dk_cache = c.tensor(s.dk_cache);
  a.dv_cache = c.tensor(s.dv_cache);
}

}  // namespace

void bind_training_ops(py::module_& m) {
  m.def("sparse_block_attention_backward",
        [](Str backend, uint64_t stream, handle dout, handle q, handle k_cache, handle v_cache, handle block_table,
           handle kv_len, handle cu_q, handle block_idx, handle out, handle lse, int64_t Qb, int64_t NQ, Str mode,
           double scale, handle dq, handle dk_cache, handle dv_cache) {
          const std::string op = "sparse_block_attention_backward";
          Call c(op, backend, stream);
          const BackwardSlots s = backward_args(c, dout, q, k_cache, v_cache, block_table, kv_len, cu_q, &block_idx,
                                                out, lse, dq, dk_cache, dv_cache);
          hal::Device& d = c.bind();
          ops::SparseAttentionBackwardArgs a;
          fill_backward(c, s, a);
          a.block_idx = c.tensor(s.block_idx);
          a.Qb = to_int(op, "Qb", Qb);
          a.NQ = NQ;
          a.mode = to_mode(op, mode);
          a.scale = to_float(op, "scale", scale);
          ops::sparse_block_attention_backward(d, a);
          c.finish();
        });

  m.def("dense_attention_backward", [](Str backend, uint64_t stream, handle dout, handle q, handle k_cache,
                                       handle v_cache, handle block_table, handle kv_len, handle cu_q, handle out,
                                       handle lse, double scale, handle dq, handle dk_cache, handle dv_cache) {
    const std::string op = "dense_attention_backward";
    Call c(op, backend, stream);
    const BackwardSlots s = backward_args(c, dout, q, k_cache, v_cache, block_table, kv_len, cu_q, nullptr, out, lse,
                                          dq, dk_cache, dv_cache);
    hal::Device& d = c.bind();
    ops::DenseAttentionBackwardArgs a;
    fill_backward(c, s, a);
    a.scale = to_float(op, "scale", scale);
    ops::dense_attention_backward(d, a);
    c.finish();
  });

  m.def("patch_attention_3d_backward", [](Str backend, uint64_t stream, handle dout, handle q, handle k, handle v,
                                          handle items, handle out, handle lse, int64_t window, double scale, handle dq,
                                          handle dk, handle dv) {
    const std::string op = "patch_attention_3d_backward";
    Call c(op, backend, stream);
    const int s_dout = c.arg("dout", dout, Role::in), s_q = c.arg("q", q, Role::in), s_k = c.arg("k", k, Role::in),
              s_v = c.arg("v", v, Role::in), s_items = c.arg("items", items, Role::in),
              s_out = c.arg("out", out, Role::in), s_lse = c.arg("lse", lse, Role::in),
              s_dq = c.arg("dq", dq, Role::out), s_dk = c.arg("dk", dk, Role::out), s_dv = c.arg("dv", dv, Role::out);
    hal::Device& d = c.bind();
    ops::PatchAttention3dBackwardArgs a;
    a.dout = c.tensor(s_dout), a.q = c.tensor(s_q), a.k = c.tensor(s_k), a.v = c.tensor(s_v);
    a.items = c.tensor(s_items), a.out = c.tensor(s_out), a.lse = c.tensor(s_lse);
    a.dq = c.tensor(s_dq), a.dk = c.tensor(s_dk), a.dv = c.tensor(s_dv);
    a.window = to_int(op, "window", window);
    a.scale = to_float(op, "scale", scale);
    ops::patch_attention_3d_backward(d, a);
    c.finish();
  });

  m.def("indexer_kl",
        [](Str backend, uint64_t stream, handle qi, handle ki_cache, handle q, handle k_cache, handle lse,
           handle block_table, handle kv_len, handle cu_q, handle block_idx, handle dkl, Str stage, int64_t Qb,
           int64_t NQ, Str mode, double scale, double scale_i, handle kl, handle dqi, handle dki_cache) {
          const std::string op = "indexer_kl";
          Call c(op, backend, stream);
          const int s_qi = c.arg("qi", qi, Role::in), s_ki = c.arg("ki_cache", ki_cache, Role::in),
                    s_q = c.arg("q", q, Role::in), s_k = c.arg("k_cache", k_cache, Role::in),
                    s_lse = c.arg("lse", lse, Role::in), s_bt = c.arg("block_table", block_table, Role::in),
                    s_len = c.arg("kv_len", kv_len, Role::in), s_cu = c.arg("cu_q", cu_q, Role::in),
                    s_idx = c.arg("block_idx", block_idx, Role::in), s_dkl = c.arg("dkl", dkl, Role::in),
                    s_kl = c.arg("kl", kl, Role::out), s_dqi = c.arg("dqi", dqi, Role::out),
                    s_dki = c.arg("dki_cache", dki_cache, Role::out);
          hal::Device& d = c.bind();
          ops::IndexerKlArgs a;
          a.qi = c.tensor(s_qi), a.ki_cache = c.tensor(s_ki), a.q = c.tensor(s_q), a.k_cache = c.tensor(s_k);
          a.lse = c.tensor(s_lse), a.block_table = c.tensor(s_bt), a.kv_len = c.tensor(s_len), a.cu_q = c.tensor(s_cu);
          a.block_idx = c.tensor(s_idx), a.dkl = c.tensor(s_dkl);
          a.stage = to_stage(op, stage);
          a.Qb = to_int(op, "Qb", Qb);
          a.NQ = NQ;
          a.mode = to_mode(op, mode);
          a.scale = to_float(op, "scale", scale);
          a.scale_i = to_float(op, "scale_i", scale_i);
          a.kl = c.tensor(s_kl), a.dqi = c.tensor(s_dqi), a.dki_cache = c.tensor(s_dki);
          ops::indexer_kl(d, a);
          c.finish();
        });
}

}  // namespace msa::python
