// Helpers for the training-op tests: a paged attention case (the cpu-ref tests' varlen
// layout, NaN in every slack slot), the forward op's loss sum(dout * out) through ops::,
// and a central finite difference with one Richardson step, so gradients are checked
// against the forward op itself.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "tests/cpu_ref/ref_util.h"

namespace msa::training_test {

using cpu_ref_test::DType;
using cpu_ref_test::kNaN;
using cpu_ref_test::Layout;
using cpu_ref_test::QueryBlocks;
using cpu_ref_test::Ref;

// One paged attention call: inputs on the host, f32 or the dtype t.
struct PagedCase {
  Layout L;
  int Hq = 4, Hkv = 2, D = 4, Qb = 1, K = 0;
  DType t = DType::f32;
  ops::SelectionMode mode = ops::SelectionMode::per_kv_head;
  std::vector<float> q, k, v, dout;  // q/dout [T][Hq][D]; k/v [P][Hkv][Bs][D], NaN in slack slots
  QueryBlocks qbs;
  std::vector<int32_t> block_idx;  // [NQ][Hs][K]

  int Hs() const { return mode == ops::SelectionMode::shared ? 1 : Hkv; }
  std::vector<int64_t> q_shape() const { return {L.T, Hq, D}; }
  std::vector<int64_t> kv_shape() const { return {L.P, Hkv, L.Bs, D}; }
};

inline PagedCase make_paged_case(const std::vector<int>& q_lens, const std::vector<int>& kv_lens, int Bs, int Hq,
                                 int Hkv, int D, uint64_t seed) {
  PagedCase c;
  c.L = cpu_ref_test::make_layout(q_lens, kv_lens, Bs, seed);
  c.Hq = Hq;
  c.Hkv = Hkv;
  c.D = D;
  std::vector<std::vector<float>> logical;
  c.q = cpu_ref_test::random_values(static_cast<size_t>(c.L.T) * Hq * D, c.t, seed + 1, -1.5f, 1.5f);
  c.k = cpu_ref_test::paged_values(c.L, Hkv, D, c.t, seed + 2, logical, -1.5f, 1.5f);
  c.v = cpu_ref_test::paged_values(c.L, Hkv, D, c.t, seed + 3, logical);
  c.dout = cpu_ref_test::random_values(c.q.size(), c.t, seed + 4);
  return c;
}

// A random selection per (query block, selection head): valid blocks with probability
// 0.6 (some in the query's future), then -1 padding and ids past the sequence, shuffled.
// `empty_every` > 0 makes every such query block's selection all padding.
inline void select_random(PagedCase& c, int Qb, int K, ops::SelectionMode mode, uint64_t seed, int empty_every = 0) {
  c.Qb = Qb;
  c.K = K;
  c.mode = mode;
  c.qbs = cpu_ref_test::query_blocks(c.L, Qb);
  cases::Rng rng(seed);
  c.block_idx.clear();
  for (int64_t n = 0; n < c.qbs.nq(); ++n) {
    const int nb = c.L.n_blocks(c.qbs.seq[n]);
    for (int hs = 0; hs < c.Hs(); ++hs) {
      std::vector<int32_t> row;
      const bool empty = empty_every > 0 && n % empty_every == 0;
      for (int b = 0; b < nb && static_cast<int>(row.size()) < K && !empty; ++b)
        if (rng.chance(0.6)) row.push_back(b);
      while (static_cast<int>(row.size()) < K)
        row.push_back(rng.chance(0.5) ? -1 : nb + static_cast<int32_t>(rng.below(4)));
      rng.shuffle(row);
      c.block_idx.insert(c.block_idx.end(), row.begin(), row.end());
    }
  }
}

// One parameterised case: dense or sparse, the query-block size, the mode, every how
// many query blocks a selection is empty (0 = none), the selection's seed.
struct Variant {
  const char* name;
  bool sparse;
  int Qb;
  ops::SelectionMode mode;
  int empty_every;
  uint64_t seed = 12;
};

// The forward's outputs.
struct Forward {
  std::vector<float> out, lse;
};

// sparse_block_attention (sparse = true) or dense_attention of `c` with q/k/v replaced.
inline Forward paged_forward(Ref& r, const PagedCase& c, bool sparse, const std::vector<float>& q,
                             const std::vector<float>& k, const std::vector<float>& v) {
  const hal::Tensor tq = r.make(c.t, c.q_shape(), q), tk = r.make(c.t, c.kv_shape(), k),
                    tv = r.make(c.t, c.kv_shape(), v);
  const hal::Tensor bt = r.make_i32({c.L.B, c.L.max_blocks}, c.L.block_table), kl = r.make_i32({c.L.B}, c.L.kv_len),
                    cu = r.make_i32({c.L.B + 1}, c.L.cu_q);
  const hal::Tensor out = r.out(c.t, c.q_shape()), lse = r.out(DType::f32, {c.L.T, c.Hq});
  if (sparse) {
    ops::SparseAttentionArgs a;
    a.q = tq, a.k_cache = tk, a.v_cache = tv, a.block_table = bt, a.kv_len = kl, a.cu_q = cu;
    a.Qb = c.Qb, a.NQ = c.qbs.nq(), a.mode = c.mode;
    a.block_idx = r.make_i32({c.qbs.nq(), c.Hs(), c.K}, c.block_idx);
    a.out = out, a.lse = lse;
    ops::sparse_block_attention(r.device(), a);
  } else {
    ops::DenseAttentionArgs a;
    a.q = tq, a.k_cache = tk, a.v_cache = tv, a.block_table = bt, a.kv_len = kl, a.cu_q = cu;
    a.out = out, a.lse = lse;
    ops::dense_attention(r.device(), a);
  }
  return {r.get(out), r.get(lse)};
}

// The gradients of one backward call.
struct Grads {
  std::vector<float> dq, dk, dv;
};

inline Grads paged_backward(Ref& r, const PagedCase& c, bool sparse, const Forward& f) {
  const hal::Tensor tq = r.make(c.t, c.q_shape(), c.q), tk = r.make(c.t, c.kv_shape(), c.k),
                    tv = r.make(c.t, c.kv_shape(), c.v), dout = r.make(c.t, c.q_shape(), c.dout);
  const hal::Tensor bt = r.make_i32({c.L.B, c.L.max_blocks}, c.L.block_table), kl = r.make_i32({c.L.B}, c.L.kv_len),
                    cu = r.make_i32({c.L.B + 1}, c.L.cu_q);
  const hal::Tensor out = r.make(c.t, c.q_shape(), f.out), lse = r.make(DType::f32, {c.L.T, c.Hq}, f.lse);
  const hal::Tensor dq = r.out(DType::f32, c.q_shape()), dk = r.out(DType::f32, c.kv_shape()),
                    dv = r.out(DType::f32, c.kv_shape());
  if (sparse) {
    ops::SparseAttentionBackwardArgs a;
    a.dout = dout, a.q = tq, a.k_cache = tk, a.v_cache = tv, a.block_table = bt, a.kv_len = kl, a.cu_q = cu;
    a.Qb = c.Qb, a.NQ = c.qbs.nq(), a.mode = c.mode;
    a.block_idx = r.make_i32({c.qbs.nq(), c.Hs(), c.K}, c.block_idx);
    a.out = out, a.lse = lse, a.dq = dq, a.dk_cache = dk, a.dv_cache = dv;
    ops::sparse_block_attention_backward(r.device(), a);
  } else {
    ops::DenseAttentionBackwardArgs a;
    a.dout = dout, a.q = tq, a.k_cache = tk, a.v_cache = tv, a.block_table = bt, a.kv_len = kl, a.cu_q = cu;
    a.out = out, a.lse = lse, a.dq = dq, a.dk_cache = dk, a.dv_cache = dv;
    ops::dense_attention_backward(r.device(), a);
  }
  return {r.get(dq), r.get(dk), r.get(dv)};
}

// sum dout * out in double.
inline double loss_of(const std::vector<float>& dout, const std::vector<float>& out) {
  double s = 0.0;
  for (size_t i = 0; i < out.size(); ++i) s += static_cast<double>(dout[i]) * out[i];
  return s;
}

// d f / d x[i] by central differences at steps h and h/2 combined (Richardson), so the
// truncation error is O(h^4) and f32 rounding of f's terms stays below ~1e-5.
inline double finite_difference(const std::function<double(const std::vector<float>&)>& f, std::vector<float> x,
                                size_t i, double h = 1.0 / 32) {
  const float x0 = x[i];
  const auto central = [&](double step) {
    x[i] = static_cast<float>(x0 + step);
    const double up = f(x);
    x[i] = static_cast<float>(x0 - step);
    const double down = f(x);
    x[i] = x0;
    return (up - down) / (2 * step);
  };
  const double d1 = central(h), d2 = central(h / 2);
  return (4 * d2 - d1) / 3;
}

// Checks grad[i] against the finite difference of f at every index where x is not NaN,
// and grad[i] == 0 exactly where x is NaN (slack slots). Returns the count of nonzero
// gradients (a test also requires some).
inline int expect_gradient(const std::function<double(const std::vector<float>&)>& f, const std::vector<float>& x,
                           const std::vector<float>& grad, double tol, const std::string& what) {
  EXPECT_EQ(x.size(), grad.size()) << what;
  int bad = 0, nonzero = 0;
  for (size_t i = 0; i < x.size() && bad < 8; ++i) {
    if (std::isnan(x[i])) {
      if (grad[i] != 0.0f) {
        ADD_FAILURE() << what << "[" << i << "]: slack slot gradient " << grad[i] << ", want 0";
        ++bad;
      }
      continue;
    }
    const double fd = finite_difference(f, x, i);
    if (!(std::fabs(fd - grad[i]) <= tol * std::max(1.0, std::fabs(fd)))) {
      ADD_FAILURE() << what << "[" << i << "]: gradient " << grad[i] << ", finite difference " << fd;
      ++bad;
    }
    nonzero += grad[i] != 0.0f;
  }
  return nonzero;
}

}  // namespace msa::training_test
