// msa._C's MSA ops: indexer scoring, block selection, sparse / dense / patch attention,
// kv_append.
#include <string>

#include "ops/ops.h"
#include "python/src/call.h"
#include "python/src/op_bindings.h"
#include "python/src/paged_args.h"
#include "python/src/scalars.h"

namespace msa::python {
namespace {

using py::handle;
using Str = const std::string&;

void indexer_args(Call& c, handle qi, handle ki_cache, handle ki_scale, handle block_table, handle kv_len, handle cu_q,
                  int slots[6]) {
  slots[0] = c.arg("qi", qi, Role::in);
  slots[1] = c.arg("ki_cache", ki_cache, Role::in, ByteRole::nvfp4_codes);
  slots[2] = c.arg("ki_scale", ki_scale, Role::in, ByteRole::fp8_bytes);
  slots[3] = c.arg("block_table", block_table, Role::in);
  slots[4] = c.arg("kv_len", kv_len, Role::in);
  slots[5] = c.arg("cu_q", cu_q, Role::in);
}

void fill_indexer(const Call& c, ops::IndexerScoreArgs& a, const int slots[6]) {
  a.qi = c.tensor(slots[0]);
  a.ki_cache = c.tensor(slots[1]);
  a.ki_scale = c.tensor(slots[2]);
  a.block_table = c.tensor(slots[3]);
  a.kv_len = c.tensor(slots[4]);
  a.cu_q = c.tensor(slots[5]);
}

}  // namespace

void bind_attention_ops(py::module_& m) {
  m.def("indexer_score",
        [](Str backend, uint64_t stream, handle qi, handle ki_cache, handle ki_scale, handle block_table, handle kv_len,
           handle cu_q, int64_t Qb, int64_t NQ, Str mode, double scale, Str pool, handle block_score) {
          const std::string op = "indexer_score";
          Call c(op, backend, stream);
          ops::IndexerScoreArgs a;
          int s[6];
          indexer_args(c, qi, ki_cache, ki_scale, block_table, kv_len, cu_q, s);
          const int out = c.arg("block_score", block_score, Role::out);
          hal::Device& d = c.bind();
          fill_indexer(c, a, s);
          a.Qb = to_int(op, "Qb", Qb);
          a.NQ = NQ;
          a.mode = to_mode(op, mode);
          a.scale = to_float(op, "scale", scale);
          a.pool = to_pool(op, pool);
          a.block_score = c.tensor(out);
          ops::indexer_score(d, a);
          c.finish();
        });

  m.def("block_topk",
        [](Str backend, uint64_t stream, handle block_score, handle kv_len, handle cu_q, int64_t Qb, int64_t NQ,
           int64_t Bs, int64_t k, int64_t n_sink, int64_t n_local, handle block_idx, handle block_cnt) {
          const std::string op = "block_topk";
          Call c(op, backend, stream);
          const int is = c.arg("block_score", block_score, Role::in);
          const int il = c.arg("kv_len", kv_len, Role::in);
          const int iq = c.arg("cu_q", cu_q, Role::in);
          const int ii = c.arg("block_idx", block_idx, Role::out);
          const int ic = c.arg("block_cnt", block_cnt, Role::out);
          hal::Device& d = c.bind();
          ops::BlockTopkArgs a;
          a.block_score = c.tensor(is);
          a.kv_len = c.tensor(il);
          a.cu_q = c.tensor(iq);
          a.Qb = to_int(op, "Qb", Qb);
          a.NQ = NQ;
          a.Bs = to_int(op, "Bs", Bs);
          a.k = to_int(op, "k", k);
          a.n_sink = to_int(op, "n_sink", n_sink);
          a.n_local = to_int(op, "n_local", n_local);
          a.block_idx = c.tensor(ii);
          a.block_cnt = c.tensor(ic);
          ops::block_topk(d, a);
          c.finish();
        });

  m.def("indexer_topk",
        [](Str backend, uint64_t stream, handle qi, handle ki_cache, handle ki_scale, handle block_table, handle kv_len,
           handle cu_q, int64_t Qb, int64_t NQ, Str mode, double scale, Str pool, int64_t k, int64_t n_sink,
           int64_t n_local, handle block_score, handle block_idx, handle block_cnt) {
          const std::string op = "indexer_topk";
          Call c(op, backend, stream);
          ops::IndexerScoreArgs idx;
          int s[6];
          indexer_args(c, qi, ki_cache, ki_scale, block_table, kv_len, cu_q, s);
          const int is = c.arg("block_score", block_score, Role::out);
          const int ii = c.arg("block_idx", block_idx, Role::out);
          const int ic = c.arg("block_cnt", block_cnt, Role::out);
          hal::Device& d = c.bind();
          fill_indexer(c, idx, s);
          idx.Qb = to_int(op, "Qb", Qb);
          idx.NQ = NQ;
          idx.mode = to_mode(op, mode);
          idx.scale = to_float(op, "scale", scale);
          idx.pool = to_pool(op, pool);
          idx.block_score = c.tensor(is);
          ops::BlockTopkArgs topk;
          topk.block_score = idx.block_score;
          topk.kv_len = idx.kv_len;
          topk.cu_q = idx.cu_q;
          topk.Qb = idx.Qb;
          topk.NQ = NQ;
          topk.Bs = idx.ki_cache.rank >= 2 ? static_cast<int>(idx.ki_cache.shape[1]) : 0;
          topk.k = to_int(op, "k", k);
          topk.n_sink = to_int(op, "n_sink", n_sink);
          topk.n_local = to_int(op, "n_local", n_local);
          topk.block_idx = c.tensor(ii);
          topk.block_cnt = c.tensor(ic);
          ops::indexer_topk(d, {idx, topk});
          c.finish();
        });

  m.def("sparse_block_attention",
        [](Str backend, uint64_t stream, handle q, handle k_cache, handle v_cache, handle block_table, handle kv_len,
           handle cu_q, handle block_idx, int64_t Qb, int64_t NQ, Str mode, double scale, handle out, handle lse) {
          const std::string op = "sparse_block_attention";
          Call c(op, backend, stream);
          const PagedSlots s = paged_args(c, q, k_cache, v_cache, block_table, kv_len, cu_q);
          const int ib = c.arg("block_idx", block_idx, Role::in);
          const int io = c.arg("out", out, Role::out);
          const int ie = c.arg("lse", lse, Role::out);
          hal::Device& d = c.bind();
          ops::SparseAttentionArgs a;
          fill_paged(c, s, a);
          a.Qb = to_int(op, "Qb", Qb);
          a.NQ = NQ;
          a.mode = to_mode(op, mode);
          a.block_idx = c.tensor(ib);
          a.scale = to_float(op, "scale", scale);
          a.out = c.tensor(io);
          a.lse = c.tensor(ie);
          ops::sparse_block_attention(d, a);
          c.finish();
        });

  m.def("dense_attention", [](Str backend, uint64_t stream, handle q, handle k_cache, handle v_cache,
                              handle block_table, handle kv_len, handle cu_q, double scale, handle out, handle lse) {
    const std::string op = "dense_attention";
    Call c(op, backend, stream);
    const PagedSlots s = paged_args(c, q, k_cache, v_cache, block_table, kv_len, cu_q);
    const int io = c.arg("out", out, Role::out);
    const int ie = c.arg("lse", lse, Role::out);
    hal::Device& d = c.bind();
    ops::DenseAttentionArgs a;
    fill_paged(c, s, a);
    a.scale = to_float(op, "scale", scale);
    a.out = c.tensor(io);
    a.lse = c.tensor(ie);
    ops::dense_attention(d, a);
    c.finish();
  });

  m.def("patch_attention_3d", [](Str backend, uint64_t stream, handle q, handle k, handle v, handle items,
                                 int64_t window, double scale, handle out, handle lse) {
    const std::string op = "patch_attention_3d";
    Call c(op, backend, stream);
    const int iq = c.arg("q", q, Role::in);
    const int ik = c.arg("k", k, Role::in);
    const int iv = c.arg("v", v, Role::in);
    const int ii = c.arg("items", items, Role::in);
    const int io = c.arg("out", out, Role::out);
    const int ie = c.arg("lse", lse, Role::out);
    hal::Device& d = c.bind();
    ops::PatchAttention3dArgs a;
    a.q = c.tensor(iq);
    a.k = c.tensor(ik);
    a.v = c.tensor(iv);
    a.items = c.tensor(ii);
    a.window = to_int(op, "window", window);
    a.scale = to_float(op, "scale", scale);
    a.out = c.tensor(io);
    a.lse = c.tensor(ie);
    ops::patch_attention_3d(d, a);
    c.finish();
  });

  m.def("kv_append", [](Str backend, uint64_t stream, handle k, handle v, handle ki, handle block_table, handle kv_len,
                        handle cu_q, handle k_cache, handle v_cache, handle ki_cache, handle ki_scale) {
    const std::string op = "kv_append";
    Call c(op, backend, stream);
    const int ik = c.arg("k", k, Role::in);
    const int iv = c.arg("v", v, Role::in);
    const int ii = c.arg("ki", ki, Role::in);
    const int it = c.arg("block_table", block_table, Role::in);
    const int il = c.arg("kv_len", kv_len, Role::in);
    const int icu = c.arg("cu_q", cu_q, Role::in);
    const int ikc = c.arg("k_cache", k_cache, Role::inout);
    const int ivc = c.arg("v_cache", v_cache, Role::inout);
    const int iic = c.arg("ki_cache", ki_cache, Role::inout, ByteRole::nvfp4_codes);
    const int iis = c.arg("ki_scale", ki_scale, Role::inout, ByteRole::fp8_bytes);
    hal::Device& d = c.bind();
    ops::KvAppendArgs a;
    a.k = c.tensor(ik);
    a.v = c.tensor(iv);
    a.ki = c.tensor(ii);
    a.block_table = c.tensor(it);
    a.kv_len = c.tensor(il);
    a.cu_q = c.tensor(icu);
    a.k_cache = c.tensor(ikc);
    a.v_cache = c.tensor(ivc);
    a.ki_cache = c.tensor(iic);
    a.ki_scale = c.tensor(iis);
    ops::kv_append(d, a);
    c.finish();
  });
}

}  // namespace msa::python
