#include "tools/layer_dist.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <numeric>
#include <vector>

#include "dist/world.h"
#include "hal/error.h"
#include "ops/ops.h"
#include "tools/median.h"

namespace msa::cli {
namespace {

// `t`'s shape with its first dim (pages) replaced by P: the indexer keys and their scales
// in any format (fp8 scales [P][Bs], NVFP4 codes [P][Bs][Di/2] and scales [P][Bs][Di/16]).
std::vector<int64_t> with_pages(const hal::HostTensor& t, int64_t P) {
  std::vector<int64_t> s = t.shape;
  s[0] = P;
  return s;
}

// A device tensor of `t`'s dtype and shape (rank 2 or 3) with P pages.
hal::Device::Owned alloc_pages(hal::Device& dev, const hal::HostTensor& t, int64_t P) {
  const std::vector<int64_t> s = with_pages(t, P);
  return s.size() == 2 ? dev.alloc_tensor(t.dtype, {s[0], s[1]}) : dev.alloc_tensor(t.dtype, {s[0], s[1], s[2]});
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Dim 1 of t viewed as [outer][H][inner]: elements [h0, h1).
hal::HostTensor slice_dim1(const hal::HostTensor& t, int64_t h0, int64_t h1) {
  std::vector<int64_t> shape = t.shape;
  const int64_t outer = shape[0], H = shape[1];
  shape[1] = h1 - h0;
  hal::HostTensor out(t.dtype, shape);
  const size_t inner = t.nbytes() / static_cast<size_t>(outer * H);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(out.bytes.data() + static_cast<size_t>(o * (h1 - h0)) * inner,
                t.bytes.data() + static_cast<size_t>(o * H + h0) * inner, static_cast<size_t>(h1 - h0) * inner);
  return out;
}

// The inverse: writes src ([outer][h1-h0][inner]) into dim-1 elements [h0, h1) of dst.
void place_dim1(hal::HostTensor& dst, const hal::HostTensor& src, int64_t h0) {
  const int64_t outer = dst.shape[0], H = dst.shape[1], n = src.shape[1];
  const size_t inner = dst.nbytes() / static_cast<size_t>(outer * H);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst.bytes.data() + static_cast<size_t>(o * H + h0) * inner,
                src.bytes.data() + static_cast<size_t>(o * n) * inner, static_cast<size_t>(n) * inner);
}

struct Times {
  std::vector<double> indexer, topk, fetch, sparse, layer;
};

// ---------------------------------------------------------------- heads ------------
LayerProblem head_shard(const LayerProblem& p, int rank, int world) {
  const LayerConfig& c = p.cfg;
  MSA_CHECK_ARG(c.Hkv % world == 0, "layer", "--gpus",
                std::to_string(world) + " ranks do not divide Hkv = " + std::to_string(c.Hkv));
  const bool shared = c.mode == ops::SelectionMode::shared;
  LayerProblem s;
  s.cfg = c;
  s.cfg.Hkv = c.Hkv / world;
  s.cfg.Hq = c.Hq / world;
  s.cfg.Hi = shared ? 1 : c.Hi / world;
  // One KV head per rank is per-KV-head selection with one index head, whatever the mode.
  if (shared && s.cfg.Hkv == 1) s.cfg.mode = ops::SelectionMode::per_kv_head;
  s.B = p.B;
  s.context = p.context;
  s.q_len = p.q_len;
  s.NQ = p.NQ;
  s.q = slice_dim1(p.q, rank * s.cfg.Hq, (rank + 1) * s.cfg.Hq);
  s.k_cache = slice_dim1(p.k_cache, rank * s.cfg.Hkv, (rank + 1) * s.cfg.Hkv);
  s.v_cache = slice_dim1(p.v_cache, rank * s.cfg.Hkv, (rank + 1) * s.cfg.Hkv);
  s.qi = shared ? p.qi : slice_dim1(p.qi, rank * s.cfg.Hi, (rank + 1) * s.cfg.Hi);
  s.ki_cache = p.ki_cache;  // the shared indexer key head: replicated
  s.ki_scale = p.ki_scale;
  s.block_table = p.block_table;
  s.kv_len = p.kv_len;
  s.cu_q = p.cu_q;
  return s;
}

// ---------------------------------------------------------------- context ----------
// Rank r owns blocks [lo[r], lo[r+1]) of every sequence and the queries at those positions.
class ContextRank {
 public:
  ContextRank(const LayerProblem& p, dist::Communicator& comm) : p_(p), comm_(comm), dev_(comm.device()) {
    const LayerConfig& c = p.cfg;
    MSA_CHECK_ARG(c.Bs % c.Qb == 0, "layer", "--parallel",
                  "context parallelism splits at KV blocks: Qb = " + std::to_string(c.Qb) + " must divide Bs");
    r_ = comm.rank();
    w_ = comm.world();
    nb_ = p.block_table.shape[1];
    for (int i = 0; i <= w_; ++i) lo_.push_back(nb_ * i / w_);
    for (int i = 0; i < w_; ++i) M_ = std::max(M_, lo_[i + 1] - lo_[i]);
    M_ = std::max<int64_t>(M_, 1);
    own_ = lo_[r_ + 1] - lo_[r_];
    Hs_ = c.mode == ops::SelectionMode::shared ? 1 : c.Hkv;
    split_queries();
    upload_owned();
  }

  // One step; the phase times are appended to `t`.
  void step(Times& t) {
    auto& s = dev_.stream();
    const double t0 = now_ms();
    // 1. Indexer keys of every rank (padded to M pages per sequence).
    comm_.all_gather(ki_own_.tensor, ki_all_.tensor);
    if (ki_scale_own_.tensor.present()) comm_.all_gather(ki_scale_own_.tensor, ki_scale_all_.tensor);
    s.synchronize();
    const double t1 = now_ms();
    // 2. Score and select the blocks of this rank's queries.
    if (T_ > 0) ops::indexer_score(dev_, idx_);
    s.synchronize();
    const double t2 = now_ms();
    if (T_ > 0) ops::block_topk(dev_, topk_);
    s.synchronize();
    const double t3 = now_ms();
    // 3. Fetch the selected blocks other ranks own.
    fetch();
    s.synchronize();
    const double t4 = now_ms();
    if (T_ > 0) ops::sparse_block_attention(dev_, sparse_);
    s.synchronize();
    const double t5 = now_ms();
    t.indexer.push_back(t2 - t1);
    t.topk.push_back(t3 - t2);
    t.fetch.push_back((t1 - t0) + (t4 - t3));
    t.sparse.push_back(t5 - t4);
    t.layer.push_back(t5 - t0);
  }

  // Writes this rank's outputs into the single-device layout.
  void assemble(DistLayerResult& res) {
    if (T_ == 0) return;
    const hal::HostTensor out = hal::to_host(dev_, sparse_.out), idx = hal::to_host(dev_, topk_.block_idx);
    const size_t row = out.nbytes() / static_cast<size_t>(T_);
    for (int64_t t = 0; t < T_; ++t)
      std::memcpy(res.sparse_out.bytes.data() + static_cast<size_t>(global_token_[t]) * row,
                  out.bytes.data() + static_cast<size_t>(t) * row, row);
    const size_t qrow = idx.nbytes() / static_cast<size_t>(std::max<int64_t>(idx.shape[0], 1));
    for (int64_t q = 0; q < idx.shape[0]; ++q)
      std::memcpy(res.block_idx.bytes.data() + static_cast<size_t>(global_qblock_[q]) * qrow,
                  idx.bytes.data() + static_cast<size_t>(q) * qrow, qrow);
  }

  int64_t fetched() const { return fetched_; }

 private:
  hal::Tensor keep(hal::Device::Owned o) {
    bufs_.push_back(std::move(o.buffer));
    return o.tensor;
  }
  hal::Tensor up(const hal::HostTensor& h) { return keep(hal::to_device(dev_, h)); }
  int owner(int64_t j) const {
    int o = 0;
    while (j >= lo_[o + 1]) ++o;
    return o;
  }

  // This rank's query tokens (positions in its block range), as a varlen batch.
  void split_queries() {
    const LayerConfig& c = p_.cfg;
    const int32_t* cu = p_.cu_q.data<int32_t>();
    const int32_t* kl = p_.kv_len.data<int32_t>();
    std::vector<int32_t> cu_r{0}, kl_r;
    int64_t gqb = 0;  // global query blocks before sequence b
    for (int b = 0; b < p_.B; ++b) {
      const int64_t q_len = cu[b + 1] - cu[b], first = kl[b] - q_len;
      const int64_t p0 = std::max<int64_t>(first, lo_[r_] * c.Bs), p1 = std::min<int64_t>(kl[b], lo_[r_ + 1] * c.Bs);
      if (p1 > p0) {
        seqs_.push_back(b);
        kl_r.push_back(static_cast<int32_t>(p1));
        cu_r.push_back(cu_r.back() + static_cast<int32_t>(p1 - p0));
        for (int64_t pos = p0; pos < p1; ++pos) global_token_.push_back(cu[b] + (pos - first));
        for (int64_t qb = p0 / c.Qb; qb <= (p1 - 1) / c.Qb; ++qb) global_qblock_.push_back(gqb + qb - first / c.Qb);
      }
      if (q_len > 0) gqb += (kl[b] - 1) / c.Qb - first / c.Qb + 1;
    }
    T_ = static_cast<int64_t>(global_token_.size());
    const int64_t Br = static_cast<int64_t>(seqs_.size());
    NQ_ = T_ > 0 ? ops::count_query_blocks(cu_r, kl_r, c.Qb) : 0;
    MSA_CHECK_ARG(NQ_ == static_cast<int64_t>(global_qblock_.size()), "layer", "--parallel",
                  "internal: query block count mismatch");
    if (T_ == 0) return;
    hal::HostTensor q(c.dtype, {T_, c.Hq, c.D}), qi(p_.qi.dtype, {T_, c.Hi, c.Di});
    const size_t qrow = p_.q.nbytes() / static_cast<size_t>(p_.q.shape[0]);
    const size_t irow = p_.qi.nbytes() / static_cast<size_t>(p_.qi.shape[0]);
    for (int64_t t = 0; t < T_; ++t) {
      std::memcpy(q.bytes.data() + t * qrow, p_.q.bytes.data() + global_token_[t] * qrow, qrow);
      std::memcpy(qi.bytes.data() + t * irow, p_.qi.bytes.data() + global_token_[t] * irow, irow);
    }
    hal::HostTensor cu_t(hal::DType::i32, {Br + 1}), kl_t(hal::DType::i32, {Br});
    std::memcpy(cu_t.bytes.data(), cu_r.data(), cu_t.nbytes());
    std::memcpy(kl_t.bytes.data(), kl_r.data(), kl_t.nbytes());
    kv_len_host_ = kl_r;
    local_cu_ = cu_r;
    q_ = up(q);
    qi_ = up(qi);
    cu_ = up(cu_t);
    kl_ = up(kl_t);
  }

  // Pages of this rank's blocks: sequence b, block j -> local page b*M + (j - lo[r]).
  void upload_owned() {
    const LayerConfig& c = p_.cfg;
    const int64_t P = p_.B * M_;
    hal::HostTensor k(c.dtype, {P, c.Hkv, c.Bs, c.D}), v(c.dtype, {P, c.Hkv, c.Bs, c.D});
    hal::HostTensor ki(p_.ki_cache.dtype, with_pages(p_.ki_cache, P));
    hal::HostTensor ks;
    if (!p_.ki_scale.shape.empty()) ks = hal::HostTensor(p_.ki_scale.dtype, with_pages(p_.ki_scale, P));
    const size_t kvp = p_.k_cache.nbytes() / static_cast<size_t>(p_.k_cache.shape[0]);
    const size_t kip = p_.ki_cache.nbytes() / static_cast<size_t>(p_.ki_cache.shape[0]);
    const size_t ksp = ks.shape.empty() ? 0 : p_.ki_scale.nbytes() / static_cast<size_t>(p_.ki_scale.shape[0]);
    const int32_t* bt = p_.block_table.data<int32_t>();
    for (int64_t b = 0; b < p_.B; ++b)
      for (int64_t j = lo_[r_]; j < lo_[r_ + 1]; ++j) {
        const int64_t g = bt[b * nb_ + j], l = b * M_ + (j - lo_[r_]);
        std::memcpy(k.bytes.data() + l * kvp, p_.k_cache.bytes.data() + g * kvp, kvp);
        std::memcpy(v.bytes.data() + l * kvp, p_.v_cache.bytes.data() + g * kvp, kvp);
        std::memcpy(ki.bytes.data() + l * kip, p_.ki_cache.bytes.data() + g * kip, kip);
        if (!ks.shape.empty()) std::memcpy(ks.bytes.data() + l * ksp, p_.ki_scale.bytes.data() + g * ksp, ksp);
      }
    k_own_ = up(k);
    v_own_ = up(v);
    ki_own_ = hal::to_device(dev_, ki);
    ki_all_ = alloc_pages(dev_, ki, w_ * P);
    if (!ks.shape.empty()) {
      ki_scale_own_ = hal::to_device(dev_, ks);
      ki_scale_all_ = alloc_pages(dev_, ks, w_ * P);
    }
    if (T_ == 0) return;
    // The indexer reads the gathered keys: block j of sequence b is page
    // owner(j)*B*M + b*M + (j - lo[owner]).
    const int64_t Br = static_cast<int64_t>(seqs_.size());
    nb_r_ = 1;
    for (int32_t kv : kv_len_host_) nb_r_ = std::max<int64_t>(nb_r_, (kv + c.Bs - 1) / c.Bs);
    hal::HostTensor bti(hal::DType::i32, {Br, nb_r_});
    for (int64_t i = 0; i < Br; ++i)
      for (int64_t j = 0; j < nb_r_; ++j) {
        const int o = owner(std::min(j, nb_ - 1));
        bti.data<int32_t>()[i * nb_r_ + j] = static_cast<int32_t>(o * P + seqs_[i] * M_ + (j - lo_[o]));
      }
    const int64_t Hs = Hs_;
    idx_ = {qi_,
            ki_all_.tensor,
            ki_scale_all_.tensor,
            up(bti),
            kl_,
            cu_,
            c.Qb,
            NQ_,
            c.mode,
            0.0f,
            c.pool,
            keep(dev_.alloc_tensor(hal::DType::f32, {NQ_, c.Hi, nb_r_}))};
    topk_ = {idx_.block_score,
             kl_,
             cu_,
             c.Qb,
             NQ_,
             c.Bs,
             c.k,
             c.n_sink,
             c.n_local,
             keep(dev_.alloc_tensor(hal::DType::i32, {NQ_, Hs, c.k})),
             keep(dev_.alloc_tensor(hal::DType::i32, {NQ_, Hs}))};
    sparse_ = {q_,
               {},
               {},
               {},
               kl_,
               cu_,
               c.Qb,
               NQ_,
               c.mode,
               topk_.block_idx,
               0.0f,
               keep(dev_.alloc_tensor(c.dtype, {T_, c.Hq, c.D})),
               keep(dev_.alloc_tensor(hal::DType::f32, {T_, c.Hq}))};
  }

  // Requests the selected blocks owned elsewhere, serves the peers' requests, and builds
  // the attention's cache (own pages, then fetched pages) and block table.
  void fetch() {
    const LayerConfig& c = p_.cfg;
    fetched_ = 0;
    const int64_t Br = static_cast<int64_t>(seqs_.size()), P = p_.B * M_;
    // Which (sequence, block) pairs this rank needs, per owner, in a fixed order.
    std::vector<std::vector<int32_t>> need(static_cast<size_t>(w_));  // flattened (b, j) pairs
    std::vector<int32_t> slot;  // [Br][nb_r]: staging slot + 1 of a fetched block, 0 = none
    if (T_ > 0) {
      const hal::HostTensor idx = hal::to_host(dev_, topk_.block_idx);
      slot.assign(static_cast<size_t>(Br * nb_r_), 0);
      std::vector<char> want(static_cast<size_t>(Br * nb_r_), 0);
      // Query block q belongs to local sequence seq_of_qblock.
      int64_t q = 0;
      for (int64_t i = 0; i < Br; ++i) {
        const int64_t first = kv_len_host_[i] - (local_cu_[i + 1] - local_cu_[i]);
        const int64_t nq = (kv_len_host_[i] - 1) / c.Qb - first / c.Qb + 1;
        for (int64_t e = 0; e < nq * Hs_ * c.k; ++e) {
          const int32_t j = idx.data<int32_t>()[q * Hs_ * c.k + e];
          if (j >= 0 && (j < lo_[r_] || j >= lo_[r_ + 1])) want[i * nb_r_ + j] = 1;
        }
        q += nq;
      }
      for (int64_t i = 0; i < Br; ++i)
        for (int64_t j = 0; j < nb_r_; ++j)
          if (want[i * nb_r_ + j]) {
            auto& n = need[owner(j)];
            n.push_back(seqs_[i]);
            n.push_back(static_cast<int32_t>(j));
          }
    }
    std::vector<int32_t> counts;
    for (const auto& n : need) counts.push_back(static_cast<int32_t>(n.size() / 2));
    const std::vector<int32_t> all = dist::all_gather_ints(comm_, counts);  // all[src * w + dst]
    auto& s = dev_.stream();
    // Request lists: to owner o the pairs of need[o]; from peer p its pairs for this rank.
    std::vector<hal::Device::Owned> req_send(w_), req_recv(w_);
    std::vector<hal::Tensor> rs(w_), rr(w_);
    for (int o = 0; o < w_; ++o) {
      if (o == r_) continue;
      if (!need[o].empty()) {
        req_send[o] = dev_.alloc_tensor(hal::DType::i32, {static_cast<int64_t>(need[o].size())});
        s.upload(req_send[o].tensor, need[o].data());
        rs[o] = req_send[o].tensor;
      }
      if (const int64_t n = all[o * w_ + r_]; n > 0) {
        req_recv[o] = dev_.alloc_tensor(hal::DType::i32, {2 * n});
        rr[o] = req_recv[o].tensor;
      }
    }
    comm_.all_to_all(rs, rr);
    // Serve: the requested own pages, packed per peer (K and V).
    std::vector<hal::Device::Owned> kpack(w_), vpack(w_);
    std::vector<hal::Tensor> ks(w_), vs(w_);
    for (int p = 0; p < w_; ++p) {
      if (!rr[p].present()) continue;
      const int64_t n = all[p * w_ + r_];
      std::vector<int32_t> pairs(static_cast<size_t>(2 * n));
      s.download(pairs.data(), rr[p]);
      kpack[p] = dev_.alloc_tensor(c.dtype, {n, c.Hkv, c.Bs, c.D});
      vpack[p] = dev_.alloc_tensor(c.dtype, {n, c.Hkv, c.Bs, c.D});
      for (int64_t i = 0; i < n; ++i) {
        const int64_t b = pairs[2 * i], j = pairs[2 * i + 1];
        MSA_CHECK_ARG(b >= 0 && b < p_.B && j >= lo_[r_] && j < lo_[r_ + 1], "layer", "--parallel",
                      "internal: a peer asked for a block this rank does not own");
        const int64_t l = b * M_ + (j - lo_[r_]);
        s.copy(kpack[p].tensor.slice_rows(i, i + 1), k_own_.slice_rows(l, l + 1));
        s.copy(vpack[p].tensor.slice_rows(i, i + 1), v_own_.slice_rows(l, l + 1));
      }
      ks[p] = kpack[p].tensor;
      vs[p] = vpack[p].tensor;
    }
    // Receive: the attention's cache is the own pages, then each owner's pages in order.
    std::vector<int64_t> off(static_cast<size_t>(w_) + 1, 0);
    for (int o = 0; o < w_; ++o) off[o + 1] = off[o] + (o == r_ ? 0 : all[r_ * w_ + o]);
    const int64_t F = off[w_];
    kv_k_ = dev_.alloc_tensor(c.dtype, {P + F, c.Hkv, c.Bs, c.D});
    kv_v_ = dev_.alloc_tensor(c.dtype, {P + F, c.Hkv, c.Bs, c.D});
    s.copy(kv_k_.tensor.slice_rows(0, P), k_own_);
    s.copy(kv_v_.tensor.slice_rows(0, P), v_own_);
    std::vector<hal::Tensor> rk(w_), rv(w_);
    for (int o = 0; o < w_; ++o)
      if (off[o + 1] > off[o]) {
        rk[o] = kv_k_.tensor.slice_rows(P + off[o], P + off[o + 1]);
        rv[o] = kv_v_.tensor.slice_rows(P + off[o], P + off[o + 1]);
      }
    comm_.all_to_all(ks, rk);
    comm_.all_to_all(vs, rv);
    fetched_ = F;
    if (T_ == 0) return;
    // Block table of the attention: own blocks, fetched blocks, and page 0 for the blocks
    // no query selected (never read).
    hal::HostTensor bt(hal::DType::i32, {Br, nb_r_});
    for (int64_t i = 0; i < Br; ++i)
      for (int64_t j = 0; j < nb_r_; ++j)
        if (j >= lo_[r_] && j < lo_[r_ + 1])
          bt.data<int32_t>()[i * nb_r_ + j] = static_cast<int32_t>(seqs_[i] * M_ + j - lo_[r_]);
    for (int o = 0; o < w_; ++o)
      for (size_t e = 0; e < need[o].size() / 2; ++e) {
        const int32_t b = need[o][2 * e], j = need[o][2 * e + 1];
        const int64_t i = std::find(seqs_.begin(), seqs_.end(), b) - seqs_.begin();
        bt.data<int32_t>()[i * nb_r_ + j] = static_cast<int32_t>(P + off[o] + static_cast<int64_t>(e));
      }
    bt_ = hal::to_device(dev_, bt);
    sparse_.k_cache = kv_k_.tensor;
    sparse_.v_cache = kv_v_.tensor;
    sparse_.block_table = bt_.tensor;
  }

  const LayerProblem& p_;
  dist::Communicator& comm_;
  hal::Device& dev_;
  int r_ = 0, w_ = 1;
  int64_t nb_ = 0, M_ = 0, own_ = 0, Hs_ = 1, T_ = 0, NQ_ = 0, nb_r_ = 0, fetched_ = 0;
  std::vector<int64_t> lo_;
  std::vector<int> seqs_;
  std::vector<int64_t> global_token_, global_qblock_;
  std::vector<int32_t> kv_len_host_, local_cu_;
  std::vector<hal::BufferPtr> bufs_;
  hal::Tensor q_, qi_, cu_, kl_, k_own_, v_own_;
  hal::Device::Owned ki_own_, ki_all_, ki_scale_own_, ki_scale_all_, kv_k_, kv_v_, bt_;
  ops::IndexerScoreArgs idx_;
  ops::BlockTopkArgs topk_;
  ops::SparseAttentionArgs sparse_;
};

// ---------------------------------------------------------------- heads, sharded keys
// Decode only: rank r owns its heads' query/KV/index heads as in head_shard, and KV blocks
// [r*M, (r+1)*M) of the indexer key head (M = ceil(blocks / world)). Every rank scores
// its key range for all index heads; the scores are all-gathered as [world][B][Hi][M] and
// each rank gathers the rows of its own index heads, in block order, into [B][Hs][world*M]
// (one `embedding` op as a row gather), then block_topk and the sparse attention run on
// its heads as usual.
class ShardedKeyHeadsRank {
 public:
  ShardedKeyHeadsRank(const LayerProblem& p, dist::Communicator& comm)
      : p_(p), comm_(comm), dev_(comm.device()), shard_(head_shard(p, comm.rank(), comm.world())) {
    const LayerConfig& c = p.cfg;
    const int r = comm.rank(), w = comm.world();
    MSA_CHECK_ARG(c.mode == ops::SelectionMode::per_kv_head, "layer", "--parallel",
                  "heads-sharded-ki needs per_kv_head selection");
    const int32_t* cu = p.cu_q.data<int32_t>();
    const int32_t* kl = p.kv_len.data<int32_t>();
    nb_ = p.block_table.shape[1];
    M_ = (nb_ + w - 1) / w;
    const int64_t lo = std::min<int64_t>(r * M_, nb_), hi = std::min<int64_t>(lo + M_, nb_);
    for (int b = 0; b < p.B; ++b) {
      MSA_CHECK_ARG(cu[b + 1] - cu[b] == 1, "layer", "--parallel",
                    "heads-sharded-ki is for decode (--q-len 1): the key split ignores causality within a range");
      MSA_CHECK_ARG(kl[b] > (w - 1) * M_ * c.Bs, "layer", "--parallel",
                    "heads-sharded-ki needs every sequence to reach the last rank's key range (context > " +
                        std::to_string((w - 1) * M_ * c.Bs) + ")");
    }
    // This rank's key pages and a block table / kv_len relative to its range: a decode
    // query sees every key of the range, so shifting positions changes nothing.
    const int64_t P = p.B * M_;
    hal::HostTensor ki(p.ki_cache.dtype, with_pages(p.ki_cache, P)), bt(hal::DType::i32, {p.B, M_}),
        klr(hal::DType::i32, {p.B});
    hal::HostTensor ks;
    if (!p.ki_scale.shape.empty()) ks = hal::HostTensor(p.ki_scale.dtype, with_pages(p.ki_scale, P));
    const size_t kip = p.ki_cache.nbytes() / static_cast<size_t>(p.ki_cache.shape[0]);
    const size_t ksp = ks.shape.empty() ? 0 : p.ki_scale.nbytes() / static_cast<size_t>(p.ki_scale.shape[0]);
    for (int64_t b = 0; b < p.B; ++b) {
      for (int64_t j = lo; j < hi; ++j) {
        const int64_t g = p.block_table.data<int32_t>()[b * nb_ + j], l = b * M_ + (j - lo);
        std::memcpy(ki.bytes.data() + l * kip, p.ki_cache.bytes.data() + g * kip, kip);
        if (!ks.shape.empty()) std::memcpy(ks.bytes.data() + l * ksp, p.ki_scale.bytes.data() + g * ksp, ksp);
      }
      for (int64_t j = 0; j < M_; ++j)
        bt.data<int32_t>()[b * M_ + j] = static_cast<int32_t>(b * M_ + std::min(j, std::max<int64_t>(hi - lo - 1, 0)));
      klr.data<int32_t>()[b] = static_cast<int32_t>(std::min<int64_t>(kl[b] - lo * c.Bs, (hi - lo) * c.Bs));
    }
    const int64_t T = p.q.shape[0], Hs = shard_.cfg.Hkv, NQ = p.NQ;
    idx_ = {up(p.qi), up(ki), ks.shape.empty() ? hal::Tensor{} : up(ks), up(bt), up(klr), up(p.cu_q), c.Qb, NQ, c.mode,
            0.0f,     c.pool, make(hal::DType::f32, {NQ, c.Hi, M_})};
    all_scores_ = make(hal::DType::f32, {w * NQ * c.Hi, M_});
    // Row (q, h, o) of this rank's score matrix is row (o, q, r*Hs + h) of the gathered one.
    hal::HostTensor ids(hal::DType::i32, {NQ * Hs * w});
    for (int64_t q = 0; q < NQ; ++q)
      for (int64_t h = 0; h < Hs; ++h)
        for (int o = 0; o < w; ++o)
          ids.data<int32_t>()[(q * Hs + h) * w + o] = static_cast<int32_t>((o * NQ + q) * c.Hi + r * Hs + h);
    ids_ = up(ids);
    const hal::Tensor kl_all = up(p.kv_len), cu_all = idx_.cu_q;
    topk_ = {make(hal::DType::f32, {NQ, Hs, w * M_}),
             kl_all,
             cu_all,
             c.Qb,
             NQ,
             c.Bs,
             c.k,
             c.n_sink,
             c.n_local,
             make(hal::DType::i32, {NQ, Hs, c.k}),
             make(hal::DType::i32, {NQ, Hs})};
    sparse_ = {up(shard_.q),
               up(shard_.k_cache),
               up(shard_.v_cache),
               up(p.block_table),
               kl_all,
               cu_all,
               c.Qb,
               NQ,
               c.mode,
               topk_.block_idx,
               0.0f,
               make(c.dtype, {T, shard_.cfg.Hq, c.D}),
               make(hal::DType::f32, {T, shard_.cfg.Hq})};
  }

  void step(Times& t) {
    auto& s = dev_.stream();
    const double t0 = now_ms();
    ops::indexer_score(dev_, idx_);
    s.synchronize();
    const double t1 = now_ms();
    comm_.all_gather(idx_.block_score, all_scores_);
    ops::embedding(dev_, {all_scores_, ids_, topk_.block_score.reshape({topk_.block_score.numel() / M_, M_})});
    s.synchronize();
    const double t2 = now_ms();
    ops::block_topk(dev_, topk_);
    s.synchronize();
    const double t3 = now_ms();
    ops::sparse_block_attention(dev_, sparse_);
    s.synchronize();
    const double t4 = now_ms();
    t.indexer.push_back(t1 - t0);
    t.fetch.push_back(t2 - t1);
    t.topk.push_back(t3 - t2);
    t.sparse.push_back(t4 - t3);
    t.layer.push_back(t4 - t0);
  }

  void assemble(DistLayerResult& res) {
    place_dim1(res.sparse_out, hal::to_host(dev_, sparse_.out), comm_.rank() * shard_.cfg.Hq);
    const hal::HostTensor idx = hal::to_host(dev_, topk_.block_idx);
    place_dim1(res.block_idx, idx, comm_.rank() * idx.shape[1]);
  }

 private:
  hal::Tensor up(const hal::HostTensor& h) {
    auto o = hal::to_device(dev_, h);
    bufs_.push_back(std::move(o.buffer));
    return o.tensor;
  }
  hal::Tensor make(hal::DType t, std::initializer_list<int64_t> s) {
    auto o = dev_.alloc_tensor(t, s);
    bufs_.push_back(std::move(o.buffer));
    return o.tensor;
  }

  const LayerProblem& p_;
  dist::Communicator& comm_;
  hal::Device& dev_;
  LayerProblem shard_;
  int64_t nb_ = 0, M_ = 0;
  std::vector<hal::BufferPtr> bufs_;
  hal::Tensor all_scores_, ids_;
  ops::IndexerScoreArgs idx_;
  ops::BlockTopkArgs topk_;
  ops::SparseAttentionArgs sparse_;
};

// The slowest rank's median of each phase.
void reduce_times(const std::vector<Times>& per_rank, DistLayerResult& r) {
  for (const Times& t : per_rank) {
    r.indexer_ms = std::max(r.indexer_ms, median(t.indexer));
    r.topk_ms = std::max(r.topk_ms, median(t.topk));
    r.fetch_ms = std::max(r.fetch_ms, median(t.fetch));
    r.sparse_ms = std::max(r.sparse_ms, median(t.sparse));
    r.layer_ms = std::max(r.layer_ms, median(t.layer));
  }
}

}  // namespace

Parallel parse_parallel(const std::string& s) {
  if (s == "heads") return Parallel::heads;
  if (s == "heads-sharded-ki") return Parallel::heads_sharded_ki;
  if (s == "context") return Parallel::context;
  throw Error("argument '--parallel': '" + s + "' is not heads, heads-sharded-ki or context");
}

DistLayerResult run_layer_dist(const LayerProblem& prob, const std::string& backend, int world, Parallel mode,
                               int iters) {
  MSA_CHECK_ARG(iters >= 1, "layer", "--iters", "must be >= 1");
  const LayerConfig& c = prob.cfg;
  dist::World w(backend, world);
  DistLayerResult res;
  const int64_t Hs = c.mode == ops::SelectionMode::shared ? 1 : c.Hkv;
  res.sparse_out = hal::HostTensor(c.dtype, {prob.q.shape[0], c.Hq, c.D});
  res.block_idx = hal::HostTensor(hal::DType::i32, {prob.NQ, Hs, c.k});
  std::vector<Times> times(static_cast<size_t>(world));
  std::mutex m;
  if (mode == Parallel::heads) {
    w.run([&](dist::Communicator& comm) {
      const int r = comm.rank();
      const LayerProblem shard = head_shard(prob, r, comm.world());
      LayerRun run(comm.device(), shard);
      run.run_once();  // warm-up
      for (int it = 0; it < iters; ++it) {
        const double t0 = now_ms();
        const LayerTimes t = run.time_sparse();
        times[r].layer.push_back(now_ms() - t0);
        times[r].indexer.push_back(t.indexer_ms);
        times[r].topk.push_back(t.topk_ms);
        times[r].sparse.push_back(t.sparse_ms);
        times[r].fetch.push_back(0.0);
      }
      const hal::HostTensor out = run.download("sparse_out"), idx = run.download("block_idx");
      std::lock_guard<std::mutex> lock(m);
      place_dim1(res.sparse_out, out, r * shard.cfg.Hq);
      if (idx.shape[1] == Hs)
        res.block_idx = idx;  // shared selection: every rank has it all
      else
        place_dim1(res.block_idx, idx, r * idx.shape[1]);
    });
  } else if (mode == Parallel::heads_sharded_ki) {
    w.run([&](dist::Communicator& comm) {
      ShardedKeyHeadsRank hr(prob, comm);
      Times warm;
      hr.step(warm);
      for (int it = 0; it < iters; ++it) hr.step(times[comm.rank()]);
      std::lock_guard<std::mutex> lock(m);
      hr.assemble(res);
    });
  } else {
    std::vector<int64_t> fetched(static_cast<size_t>(world), 0);
    w.run([&](dist::Communicator& comm) {
      const int r = comm.rank();
      ContextRank cr(prob, comm);
      Times warm;
      cr.step(warm);
      for (int it = 0; it < iters; ++it) cr.step(times[r]);
      fetched[r] = cr.fetched();
      std::lock_guard<std::mutex> lock(m);
      cr.assemble(res);
    });
    for (int64_t f : fetched) res.fetched_blocks += f;
  }
  reduce_times(times, res);
  return res;
}

}  // namespace msa::cli
