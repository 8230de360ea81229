#include "model/decoder.h"

#include <algorithm>
#include <utility>

#include "hal/error.h"
#include "ops/ops.h"

namespace msa::model {

struct Decoder::Batch {
  int64_t T = 0, B = 0, NQ = 0, max_blocks = 0;
  Tensor tokens, pos;                            // on the device
  ops::PagedBatch paged;                         // on the device
  std::vector<int32_t> h_pos, h_cu_q, h_kv_len;  // host copies
};

Decoder::Decoder(const Config& config, const DeviceWeights& weights, KvCache& cache, Workspace& ws, OpRunner& run,
                 DecoderOptions options)
    : c_(config), w_(weights), cache_(cache), ws_(ws), run_(run), opt_(options) {}

namespace {

std::string layer_prefix(int l) { return "model.layers." + std::to_string(l) + "."; }

// Adds the attended fraction of every (query, selection head) of one MSA layer.
void add_selection_stats(const hal::HostTensor& idx, const std::vector<int32_t>& pos, const std::vector<int32_t>& cu_q,
                         int Qb, int Bs, SelectionStats& st) {
  const int64_t Hs = idx.shape[1], k = idx.shape[2];
  const int32_t* d = idx.data<int32_t>();
  int64_t qb = -1;
  for (size_t b = 0; b + 1 < cu_q.size(); ++b) {
    int64_t prev = -1;
    for (int32_t t = cu_q[b]; t < cu_q[b + 1]; ++t) {
      const int64_t p = pos[t];
      if (t == cu_q[b] || p / Qb != prev) ++qb;  // query blocks: sequence by sequence
      prev = p / Qb;
      for (int64_t g = 0; g < Hs; ++g) {
        int64_t attended = 0;
        for (int64_t j = 0; j < k; ++j) {
          const int64_t c = d[(qb * Hs + g) * k + j];
          if (c >= 0) attended += std::clamp<int64_t>(p + 1 - c * Bs, 0, Bs);
        }
        st.fraction_sum += static_cast<double>(attended) / static_cast<double>(p + 1);
        st.count += 1;
      }
    }
  }
}

}  // namespace

StepOutput Decoder::forward(const StepInput& in) {
  const size_t nseq = in.seqs.size();
  MSA_CHECK_ARG(in.q_len.size() == nseq, "decoder", "q_len", "needs one entry per sequence");
  Batch b;
  b.B = static_cast<int64_t>(nseq);
  b.T = static_cast<int64_t>(in.tokens.size());
  int64_t total = 0;
  for (int32_t q : in.q_len) {
    MSA_CHECK_ARG(q >= 1, "decoder", "q_len", "every sequence needs at least one new token");
    total += q;
  }
  MSA_CHECK_ARG(total == b.T && b.T > 0, "decoder", "tokens",
                "must hold sum(q_len) = " + std::to_string(total) + " ids, got " + std::to_string(b.T));
  for (size_t i = 0; i < in.out_rows.size(); ++i)
    MSA_CHECK_ARG(in.out_rows[i] >= 0 && in.out_rows[i] < b.T && (i == 0 || in.out_rows[i] > in.out_rows[i - 1]),
                  "decoder", "out_rows", "must be ascending rows of the batch");

  // Index data: the cache grows first, so kv_len includes this step's tokens.
  b.h_cu_q.assign(1, 0);
  for (size_t s = 0; s < nseq; ++s) {
    const int64_t kv = cache_.append(in.seqs[s], in.q_len[s]);
    b.h_kv_len.push_back(static_cast<int32_t>(kv));
    b.h_cu_q.push_back(b.h_cu_q.back() + in.q_len[s]);
    for (int32_t i = 0; i < in.q_len[s]; ++i) b.h_pos.push_back(static_cast<int32_t>(kv - in.q_len[s] + i));
  }
  const hal::HostTensor bt = cache_.block_table(in.seqs);
  b.max_blocks = bt.shape[1];
  const int Qb = c_.sparse_query_block;
  b.NQ = ops::count_query_blocks(b.h_cu_q, b.h_kv_len, Qb);
  b.tokens = ws_.get("d.tokens", hal::DType::i32, {b.T});
  b.pos = ws_.get("d.pos", hal::DType::i32, {b.T});
  b.paged.cu_q = ws_.get("d.cu_q", hal::DType::i32, {b.B + 1});
  b.paged.kv_len = ws_.get("d.kv_len", hal::DType::i32, {b.B});
  b.paged.block_table = ws_.get("d.block_table", hal::DType::i32, {b.B, b.max_blocks});
  run_.upload(b.tokens, in.tokens.data());
  run_.upload(b.pos, b.h_pos.data());
  run_.upload(b.paged.cu_q, b.h_cu_q.data());
  run_.upload(b.paged.kv_len, b.h_kv_len.data());
  run_.upload(b.paged.block_table, bt.bytes.data());

  const hal::DType dt = w_.dtype();
  const int64_t H = c_.hidden_size;
  Tensor x = ws_.get("d.x", dt, {b.T, H}), x2 = ws_.get("d.x2", dt, {b.T, H});
  const Tensor h = ws_.get("d.h", dt, {b.T, H}), o = ws_.get("d.o", dt, {b.T, H});
  run_.embedding(w_.get("model.embed_tokens.weight"), b.tokens, x);
  if (in.vis.present()) run_.scatter_visual(b.tokens, in.vis, c_.image_token_id, x);

  StepOutput so;
  std::vector<Tensor> selection;  // block_idx of each MSA layer (collect_selection)
  for (int l = 0; l < c_.num_hidden_layers; ++l) {
    const std::string p = layer_prefix(l);
    run_.rms_norm(x, w_.get(p + "input_layernorm.weight"), c_.rms_norm_eps, h);
    attention(l, b, h, o, selection);
    run_.add(x, o, x2);
    std::swap(x, x2);
    run_.rms_norm(x, w_.get(p + "post_attention_layernorm.weight"), c_.rms_norm_eps, h);
    mlp(l, b, h, o);
    run_.add(x, o, x2);
    std::swap(x, x2);
  }

  // Final norm, LM head and argmax on the rows asked for only.
  const int64_t n = static_cast<int64_t>(in.out_rows.size());
  if (n > 0) head(in, x, so);
  for (const Tensor& t : selection) {
    so.block_idx.push_back(run_.download(t));
    add_selection_stats(so.block_idx.back(), b.h_pos, b.h_cu_q, c_.sparse_query_block, c_.sparse_block_size,
                        so.selection);
  }
  return so;
}

void Decoder::head(const StepInput& in, const Tensor& x, StepOutput& so) {
  const hal::DType dt = w_.dtype();
  const int64_t n = static_cast<int64_t>(in.out_rows.size()), T = x.dim(0), H = c_.hidden_size;
  Tensor last = x;
  if (n != T) {
    last = ws_.get("d.last", dt, {n, H});
    for (int64_t i = 0; i < n;) {  // one copy per run of consecutive rows
      int64_t j = i + 1;
      while (j < n && in.out_rows[j] == in.out_rows[j - 1] + 1) ++j;
      run_.copy(last.slice_rows(i, j), x.slice_rows(in.out_rows[i], in.out_rows[j - 1] + 1));
      i = j;
    }
  }
  const Tensor hn = ws_.get("d.hn", dt, {n, H});
  run_.rms_norm(last, w_.get("model.norm.weight"), c_.rms_norm_eps, hn);
  so.logits = ws_.get("d.logits", dt, {n, c_.vocab_size});
  const Tensor& head = w_.get(c_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
  run_.matmul(hn, head, so.logits);
  so.ids = ws_.get("d.ids", hal::DType::i32, {n});
  run_.argmax(so.logits, so.ids);
}

void Decoder::attention(int l, const Batch& b, const Tensor& h, const Tensor& out, std::vector<Tensor>& selection) {
  const std::string p = layer_prefix(l) + "self_attn.";
  const hal::DType dt = w_.dtype();
  const int64_t T = b.T, Hq = c_.num_attention_heads, Hkv = c_.num_key_value_heads, D = c_.head_dim;
  // The attention output slot holds the un-normed q until the attention writes it.
  const Tensor attn = ws_.get("a.attn", dt, {T, Hq, D});
  const Tensor q_raw = attn.reshape({T, Hq * D}), q = ws_.get("a.q", dt, {T, Hq, D});
  const Tensor k_raw = ws_.get("a.k_raw", dt, {T, Hkv * D}), k = ws_.get("a.k", dt, {T, Hkv, D});
  const Tensor v = ws_.get("a.v", dt, {T, Hkv, D});
  run_.matmul(h, w_.get(p + "q_proj.weight"), q_raw);
  run_.matmul(h, w_.get(p + "k_proj.weight"), k_raw);
  run_.matmul(h, w_.get(p + "v_proj.weight"), v.reshape({T, Hkv * D}));
  run_.rms_norm(q_raw.reshape({T * Hq, D}), w_.get(p + "q_norm.weight"), c_.rms_norm_eps, q.reshape({T * Hq, D}));
  run_.rms_norm(k_raw.reshape({T * Hkv, D}), w_.get(p + "k_norm.weight"), c_.rms_norm_eps, k.reshape({T * Hkv, D}));
  run_.rope(q, b.pos, c_.rotary_dim, c_.rope_theta);
  run_.rope(k, b.pos, c_.rotary_dim, c_.rope_theta);

  const LayerCache& lc = cache_.layer(l);
  const bool dense = c_.is_dense_layer(l) || opt_.force_dense;
  const Tensor lse = ws_.get("a.lse", hal::DType::f32, {T, Hq});
  ops::KvAppendArgs ka;
  ka.k = k;
  ka.v = v;
  ops::set_batch(ka, b.paged);
  ka.k_cache = lc.k_cache;
  ka.v_cache = lc.v_cache;
  if (dense) {
    run_.kv_append(ka);
    ops::DenseAttentionArgs da;
    da.q = q;
    da.k_cache = lc.k_cache;
    da.v_cache = lc.v_cache;
    ops::set_batch(da, b.paged);
    da.out = attn;
    da.lse = lse;
    run_.dense_attention(da);
  } else {
    // Index branch keys go into the cache with this step's K and V.
    const int64_t Di = c_.sparse_index_dim;
    const Tensor ki_raw = ws_.get("a.ki_raw", dt, {T, Di}), ki = ws_.get("a.ki", dt, {T, 1, Di});
    run_.matmul(h, w_.get(p + "indexer.k_proj.weight"), ki_raw);
    run_.rms_norm(ki_raw, w_.get(p + "indexer.k_norm.weight"), c_.rms_norm_eps, ki.reshape({T, Di}));
    run_.rope(ki, b.pos, c_.index_rotary_dim(), c_.rope_theta);
    ka.ki = ki.reshape({T, Di});
    ka.ki_cache = lc.ki_cache;
    ka.ki_scale = lc.ki_scale;
    run_.kv_append(ka);
    const int64_t Hs = c_.sparse_num_index_heads;
    // With collect_selection each layer keeps its own slot, downloaded after the last layer
    // (one synchronisation per forward, not one per layer).
    const std::string slot = opt_.collect_selection ? "a.block_idx." + std::to_string(l) : "a.block_idx";
    const Tensor block_idx = ws_.get(slot, hal::DType::i32, {b.NQ, Hs, c_.sparse_topk_blocks});
    index_selection(l, b, h, block_idx);
    ops::SparseAttentionArgs sa;
    sa.q = q;
    sa.k_cache = lc.k_cache;
    sa.v_cache = lc.v_cache;
    ops::set_batch(sa, b.paged);
    sa.Qb = c_.sparse_query_block;
    sa.NQ = b.NQ;
    sa.mode = c_.selection_mode();
    sa.block_idx = block_idx;
    sa.out = attn;
    sa.lse = lse;
    run_.sparse_block_attention(sa);
    if (opt_.collect_selection) selection.push_back(block_idx);
  }
  run_.matmul(attn.reshape({T, Hq * D}), w_.get(p + "o_proj.weight"), out);
  run_.all_reduce(out);  // head-parallel ranks: the sum of every rank's heads
}

void Decoder::index_selection(int l, const Batch& b, const Tensor& h, const Tensor& block_idx) {
  const std::string p = layer_prefix(l) + "self_attn.indexer.";
  const hal::DType dt = w_.dtype();
  const int64_t T = b.T, Hi = c_.sparse_num_index_heads, Di = c_.sparse_index_dim;
  const Tensor qi_raw = ws_.get("i.qi_raw", dt, {T, Hi * Di}), qi = ws_.get("i.qi", dt, {T, Hi, Di});
  run_.matmul(h, w_.get(p + "q_proj.weight"), qi_raw);
  run_.rms_norm(qi_raw.reshape({T * Hi, Di}), w_.get(p + "q_norm.weight"), c_.rms_norm_eps, qi.reshape({T * Hi, Di}));
  run_.rope(qi, b.pos, c_.index_rotary_dim(), c_.rope_theta);

  const LayerCache& lc = cache_.layer(l);
  const Tensor score = ws_.get("i.block_score", hal::DType::f32, {b.NQ, Hi, b.max_blocks});
  ops::IndexerScoreArgs is;
  is.qi = qi;
  is.ki_cache = lc.ki_cache;
  is.ki_scale = lc.ki_scale;
  ops::set_batch(is, b.paged);
  is.Qb = c_.sparse_query_block;
  is.NQ = b.NQ;
  is.mode = c_.selection_mode();
  is.pool = c_.sparse_score_type;
  is.block_score = score;

  ops::BlockTopkArgs tk;
  tk.block_score = score;
  tk.kv_len = b.paged.kv_len;
  tk.cu_q = b.paged.cu_q;
  tk.Qb = c_.sparse_query_block;
  tk.NQ = b.NQ;
  tk.Bs = c_.sparse_block_size;
  tk.k = c_.sparse_topk_blocks;
  tk.n_sink = c_.sparse_init_block;
  tk.n_local = c_.sparse_local_block;
  tk.block_idx = block_idx;
  tk.block_cnt = ws_.get("i.block_cnt", hal::DType::i32, {b.NQ, Hi});
  run_.indexer_topk(is, tk);
}

void Decoder::mlp(int l, const Batch& b, const Tensor& h, const Tensor& out) {
  const std::string p = layer_prefix(l) + "mlp.";
  const hal::DType dt = w_.dtype();
  const int64_t T = b.T, I = c_.intermediate_size;
  const Tensor gate = ws_.get("m.gate", dt, {T, I}), up = ws_.get("m.up", dt, {T, I});
  const Tensor act = ws_.get("m.act", dt, {T, I});
  run_.matmul(h, w_.get(p + "gate_proj.weight"), gate);
  run_.matmul(h, w_.get(p + "up_proj.weight"), up);
  run_.swiglu(gate, up, act);
  run_.matmul(act, w_.get(p + "down_proj.weight"), out);
  run_.all_reduce(out);  // head-parallel ranks: the sum over the intermediate slices
}

}  // namespace msa::model
