#include "tools/layer_train.h"

#include <chrono>

#include "hal/error.h"
#include "ops/ops.h"
#include "tools/device_tensor_pool.h"
#include "tools/median.h"

namespace msa::cli {

const char* train_op_name(TrainOp op) {
  switch (op) {
    case TrainOp::indexer_score:
      return "indexer_score";
    case TrainOp::block_topk:
      return "block_topk";
    case TrainOp::sparse_fwd:
      return "sparse_block_attention";
    case TrainOp::sparse_bwd:
      return "sparse_block_attention_backward";
    case TrainOp::indexer_kl:
      return "indexer_kl";
    case TrainOp::dense_fwd:
      return "dense_attention";
    case TrainOp::dense_bwd:
      return "dense_attention_backward";
  }
  return "?";
}

struct LayerTrainRun::Impl : DeviceTensorPool {
  hal::Tensor busy;  // the queued timing's head of device work (allocated on first use)
  ops::IndexerScoreArgs idx;
  ops::BlockTopkArgs topk;
  ops::SparseAttentionArgs sparse;
  ops::SparseAttentionBackwardArgs sparse_bwd;
  ops::IndexerKlArgs kl;
  ops::DenseAttentionArgs dense;
  ops::DenseAttentionBackwardArgs dense_bwd;
};

LayerTrainRun::LayerTrainRun(hal::Device& device, const LayerProblem& p, const hal::HostTensor& block_idx,
                             const hal::HostTensor& dout)
    : device_(device), impl_(std::make_unique<Impl>()) {
  auto& m = *impl_;
  const auto& c = p.cfg;
  const auto f32 = hal::DType::f32;
  const hal::Tensor q = m.up(device, p.q), kc = m.up(device, p.k_cache), vc = m.up(device, p.v_cache);
  const hal::Tensor bt = m.up(device, p.block_table), kl = m.up(device, p.kv_len), cu = m.up(device, p.cu_q);
  const hal::Tensor qi = m.up(device, p.qi), ki = m.up(device, p.ki_cache), sel = m.up(device, block_idx);
  const int64_t T = p.q.shape[0], max_blocks = p.block_table.shape[1], Hs = block_idx.shape[1];
  const std::vector<int64_t> q_shape = p.q.shape, kv_shape = p.k_cache.shape;
  m.idx = {qi,   ki,     m.up(device, p.ki_scale),
           bt,   kl,     cu,
           c.Qb, p.NQ,   c.mode,
           0.0f, c.pool, m.make(device, f32, {p.NQ, c.Hi, max_blocks})};
  m.topk = {m.idx.block_score,
            kl,
            cu,
            c.Qb,
            p.NQ,
            c.Bs,
            c.k,
            c.n_sink,
            c.n_local,
            m.make(device, hal::DType::i32, {p.NQ, Hs, c.k}),
            m.make(device, hal::DType::i32, {p.NQ, Hs})};
  m.sparse = {q,
              kc,
              vc,
              bt,
              kl,
              cu,
              c.Qb,
              p.NQ,
              c.mode,
              sel,
              0.0f,
              m.make(device, c.dtype, q_shape),
              m.make(device, f32, {T, c.Hq})};
  auto& sb = m.sparse_bwd;
  sb.dout = m.up(device, dout);
  sb.q = q, sb.k_cache = kc, sb.v_cache = vc, sb.block_table = bt, sb.kv_len = kl, sb.cu_q = cu;
  sb.Qb = c.Qb, sb.NQ = p.NQ, sb.mode = c.mode, sb.block_idx = sel;
  sb.out = m.sparse.out, sb.lse = m.sparse.lse;
  sb.dq = m.make(device, f32, q_shape), sb.dk_cache = m.make(device, f32, kv_shape);
  sb.dv_cache = m.make(device, f32, kv_shape);
  auto& k = m.kl;
  k.qi = qi, k.ki_cache = ki, k.q = q, k.k_cache = kc, k.lse = m.sparse.lse;
  k.block_table = bt, k.kv_len = kl, k.cu_q = cu, k.block_idx = sel;  // dkl absent: all ones
  k.stage = ops::KlStage::sparse, k.Qb = c.Qb, k.NQ = p.NQ, k.mode = c.mode;
  k.kl = m.make(device, f32, {T, Hs}), k.dqi = m.make(device, f32, p.qi.shape);
  k.dki_cache = m.make(device, f32, p.ki_cache.shape);
  m.dense = {q, kc, vc, bt, kl, cu, 0.0f, m.make(device, c.dtype, q_shape), m.make(device, f32, {T, c.Hq})};
  auto& db = m.dense_bwd;
  db.dout = sb.dout;
  db.q = q, db.k_cache = kc, db.v_cache = vc, db.block_table = bt, db.kv_len = kl, db.cu_q = cu;
  db.out = m.dense.out, db.lse = m.dense.lse;
  db.dq = m.make(device, f32, q_shape), db.dk_cache = m.make(device, f32, kv_shape);
  db.dv_cache = m.make(device, f32, kv_shape);
}

LayerTrainRun::~LayerTrainRun() = default;

size_t LayerTrainRun::device_bytes() const { return impl_->bytes; }

void LayerTrainRun::run(TrainOp op) {
  auto& m = *impl_;
  switch (op) {
    case TrainOp::indexer_score:
      ops::indexer_score(device_, m.idx);
      break;
    case TrainOp::block_topk:
      ops::block_topk(device_, m.topk);
      break;
    case TrainOp::sparse_fwd:
      ops::sparse_block_attention(device_, m.sparse);
      break;
    case TrainOp::sparse_bwd:
      ops::sparse_block_attention_backward(device_, m.sparse_bwd);
      break;
    case TrainOp::indexer_kl:
      ops::indexer_kl(device_, m.kl);
      break;
    case TrainOp::dense_fwd:
      ops::dense_attention(device_, m.dense);
      break;
    case TrainOp::dense_bwd:
      ops::dense_attention_backward(device_, m.dense_bwd);
      break;
  }
}

void LayerTrainRun::run_once() {
  for (int i = 0; i < kTrainOpCount; ++i) run(static_cast<TrainOp>(i));
  device_.stream().synchronize();
}

std::vector<TrainOpTime> LayerTrainRun::time(int iters, bool queued) {
  auto& s = device_.stream();
  auto e0 = device_.create_event(), e1 = device_.create_event();
  std::vector<TrainOpTime> out;
  for (int i = 0; i < kTrainOpCount; ++i) {
    const auto op = static_cast<TrainOp>(i);
    const auto t0 = std::chrono::steady_clock::now();
    run(op);  // warm-up
    s.synchronize();
    const double warm_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int calls = warm_s > 3.0 ? 1 : warm_s > 0.5 ? std::min(iters, 2) : iters;
    std::vector<double> ms;
    for (int it = 0; it < calls; ++it) {
      if (queued) {
        if (!impl_->busy.present()) impl_->busy = impl_->make(device_, hal::DType::i32, {int64_t{1} << 28});  // 1 GiB
        s.fill_bytes(impl_->busy, 0);
      }
      s.record(*e0);
      run(op);
      s.record(*e1);
      s.synchronize();
      ms.push_back(e1->elapsed_ms(*e0));
    }
    out.push_back({median(ms), calls});
  }
  return out;
}

hal::HostTensor LayerTrainRun::download(const std::string& what) {
  auto& m = *impl_;
  const std::pair<const char*, const hal::Tensor*> table[] = {{"topk_idx", &m.topk.block_idx},
                                                              {"out", &m.sparse.out},
                                                              {"lse", &m.sparse.lse},
                                                              {"dq", &m.sparse_bwd.dq},
                                                              {"dk", &m.sparse_bwd.dk_cache},
                                                              {"dv", &m.sparse_bwd.dv_cache},
                                                              {"kl", &m.kl.kl},
                                                              {"dqi", &m.kl.dqi},
                                                              {"dki", &m.kl.dki_cache},
                                                              {"dense_out", &m.dense.out},
                                                              {"dense_dq", &m.dense_bwd.dq},
                                                              {"dense_dk", &m.dense_bwd.dk_cache},
                                                              {"dense_dv", &m.dense_bwd.dv_cache}};
  for (const auto& [name, t] : table)
    if (what == name) return hal::to_host(device_, *t);
  throw Error("layer training run: unknown output '" + what + "'");
}

std::vector<double> train_op_flops(const LayerConfig& c, int Hs, double keys, double causal) {
  const double group = static_cast<double>(c.Hq) / Hs;
  const double fwd = 4.0 * group * c.D * keys, dense = 4.0 * c.Hq * c.D * causal;
  return {2.0 * c.Hi * c.Di * causal,
          0.0,
          fwd,
          2.5 * fwd,
          2.0 * group * c.D * keys + 6.0 * c.Di * keys,
          dense,
          2.5 * dense};
}

}  // namespace msa::cli
