#include "check/batch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "hal/error.h"

namespace msa::cases {

Batch::Batch(std::vector<int32_t> ql, std::vector<int32_t> kl, int qb)
    : q_len(std::move(ql)), kv_len(std::move(kl)), Qb(qb) {
  if (q_len.size() != kv_len.size()) throw Error("cases: q_len and kv_len differ in length");
  cu_q.push_back(0);
  for (size_t b = 0; b < q_len.size(); ++b) {
    if (q_len[b] < 0 || q_len[b] > kv_len[b]) throw Error("cases: bad q_len/kv_len");
    const int64_t t_begin = cu_q.back();
    cu_q.push_back(static_cast<int32_t>(t_begin + q_len[b]));
    const int64_t pos0 = kv_len[b] - q_len[b];
    for (int64_t i = 0; i < q_len[b]; ++i) {
      token_seq.push_back(static_cast<int32_t>(b));
      token_pos.push_back(pos0 + i);
    }
    // Query blocks: runs of equal floor(pos / Qb).
    for (int64_t i = 0; i < q_len[b];) {
      const int64_t p = pos0 + i, blk = p / Qb;
      int64_t j = i;
      while (j < q_len[b] && (pos0 + j) / Qb == blk) ++j;
      qblocks.push_back({static_cast<int>(b), t_begin + i, t_begin + j, p, pos0 + j - 1});
      i = j;
    }
  }
}

std::string Batch::lens() const {
  auto list = [](const std::vector<int32_t>& v) {
    std::string s = "[";
    if (v.size() <= 6) {
      for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    } else {
      const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
      s += std::to_string(v.size()) + " x " + std::to_string(*lo) + ".." + std::to_string(*hi);
    }
    return s + "]";
  };
  return "q=" + list(q_len) + " kv=" + list(kv_len);
}

hal::HostTensor Batch::cu_q_tensor() const {
  hal::HostTensor t(hal::DType::i32, {static_cast<int64_t>(cu_q.size())});
  std::memcpy(t.bytes.data(), cu_q.data(), t.nbytes());
  return t;
}

hal::HostTensor Batch::kv_len_tensor() const {
  hal::HostTensor t(hal::DType::i32, {static_cast<int64_t>(kv_len.size())});
  if (t.nbytes()) std::memcpy(t.bytes.data(), kv_len.data(), t.nbytes());
  return t;
}

hal::HostTensor Pages::table_tensor(int B) const {
  hal::HostTensor t(hal::DType::i32, {B, max_blocks});
  if (t.nbytes()) std::memcpy(t.bytes.data(), table.data(), t.nbytes());
  return t;
}

Pages make_pages(const Batch& batch, int Bs, Rng& rng, bool shuffle, int spare, int extra_cols) {
  Pages p;
  p.Bs = Bs;
  int64_t need = 0;
  for (int b = 0; b < batch.B(); ++b) {
    p.max_blocks = std::max(p.max_blocks, batch.blocks_of(b, Bs));
    need += batch.blocks_of(b, Bs);
  }
  p.max_blocks += extra_cols;
  p.P = need + spare;
  std::vector<int32_t> order(static_cast<size_t>(p.P));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  if (shuffle) rng.shuffle(order);
  p.table.assign(static_cast<size_t>(batch.B() * p.max_blocks), -1);
  p.seq_of_page.assign(static_cast<size_t>(p.P), -1);
  p.block_of_page.assign(static_cast<size_t>(p.P), -1);
  size_t next = 0;
  for (int b = 0; b < batch.B(); ++b) {
    for (int64_t c = 0; c < batch.blocks_of(b, Bs); ++c) {
      const int32_t page = order[next++];
      p.table[static_cast<size_t>(b * p.max_blocks + c)] = page;
      p.seq_of_page[static_cast<size_t>(page)] = b;
      p.block_of_page[static_cast<size_t>(page)] = c;
    }
  }
  return p;
}

int64_t Pages::first_slack(const Batch& batch, int64_t p) const {
  const int b = seq_of_page[static_cast<size_t>(p)];
  if (b < 0) return 0;
  return std::clamp<int64_t>(batch.kv_len[static_cast<size_t>(b)] - block_of_page[static_cast<size_t>(p)] * Bs, 0, Bs);
}

hal::HostTensor random_tensor(hal::DType dtype, std::vector<int64_t> shape, Rng& rng, double sigma) {
  hal::HostTensor t(dtype, std::move(shape));
  const int64_t n = t.numel();
  if (dtype == hal::DType::fp4_e2m1x2) {  // packed E2M1 pairs: every byte equally likely
    for (int64_t i = 0; i < n; ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(rng.below(256));
    return t;
  }
  for (int64_t i = 0; i < n; ++i) t.set(static_cast<size_t>(i), static_cast<float>(sigma * rng.normal()));
  return t;
}

hal::HostTensor random_tile(hal::DType dtype, const std::vector<int64_t>& shape, Rng& rng, double sigma,
                            size_t max_tile, bool& tiled) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const size_t es = hal::dtype_size(dtype);
  tiled = static_cast<size_t>(n) * es > max_tile;
  if (!tiled) return random_tensor(dtype, shape, rng, sigma);
  const int64_t last = shape.empty() ? 1 : std::max<int64_t>(shape.back(), 1);
  // An odd number of rows, so the repeats do not line up with power-of-two strides.
  int64_t rows = static_cast<int64_t>(max_tile / es) / last;
  if (rows % 2 == 0) --rows;
  return random_tensor(dtype, {std::max<int64_t>(rows, 1) * last}, rng, sigma);
}

hal::HostTensor make_cache(const Batch& batch, const Pages& pages, int heads, int D, hal::DType dtype, Rng& rng,
                           double sigma, bool perf, bool& tiled) {
  const int Bs = pages.Bs;
  std::vector<int64_t> shape =
      heads > 0 ? std::vector<int64_t>{pages.P, heads, Bs, D} : std::vector<int64_t>{pages.P, Bs, D};
  if (perf) return random_tile(dtype, shape, rng, sigma, size_t{32} << 20, tiled);
  tiled = false;
  hal::HostTensor t = random_tensor(dtype, shape, rng, sigma);
  if (dtype == hal::DType::fp4_e2m1x2) return t;  // E2M1 has no NaN: NVFP4 slack goes in the scales
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const int64_t H = std::max(heads, 1);
  for (int64_t p = 0; p < pages.P; ++p) {
    const int64_t first_slack = pages.first_slack(batch, p);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t s = first_slack; s < Bs; ++s)
        for (int64_t d = 0; d < D; ++d) t.set(static_cast<size_t>(((p * H + h) * Bs + s) * D + d), nan);
  }
  return t;
}

hal::HostTensor make_block_idx(const Batch& batch, int Bs, int Hs, int k, Rng& rng, bool correlated) {
  const int64_t NQ = batch.NQ();
  hal::HostTensor t(hal::DType::i32, {NQ, Hs, k});
  int32_t* out = t.data<int32_t>();
  std::vector<std::vector<int32_t>> prev(static_cast<size_t>(Hs));
  int prev_seq = -1;
  for (int64_t n = 0; n < NQ; ++n) {
    const QueryBlock& qb = batch.qblocks[static_cast<size_t>(n)];
    const int32_t nvalid = static_cast<int32_t>(qb.p1 / Bs + 1), local = nvalid - 1;
    const bool continue_walk = correlated && qb.b == prev_seq;
    for (int h = 0; h < Hs; ++h) {
      std::set<int32_t> sel;
      const int want = std::min(k, nvalid);
      if (continue_walk) {
        sel.insert(prev[static_cast<size_t>(h)].begin(), prev[static_cast<size_t>(h)].end());
        sel.insert(local);
        // Drift: now and then one block is swapped for another.
        if (rng.chance(0.1) && static_cast<int>(sel.size()) > 1) {
          auto it = sel.begin();
          std::advance(it, rng.below(static_cast<int64_t>(sel.size())));
          if (*it != local) sel.erase(it);
        }
        while (static_cast<int>(sel.size()) > want) {
          auto it = sel.begin();
          std::advance(it, rng.below(static_cast<int64_t>(sel.size())));
          if (*it != local) sel.erase(it);
        }
      } else {
        sel.insert(local);
      }
      int target = want;
      if (!correlated && want == k && k > 1 && rng.chance(0.25)) target = want - 1;  // exercise -1 padding
      while (static_cast<int>(sel.size()) < target) sel.insert(static_cast<int32_t>(rng.below(nvalid)));
      int32_t* row = out + (n * Hs + h) * k;
      int j = 0;
      for (int32_t c : sel) row[j++] = c;
      for (; j < k; ++j) row[j] = -1;
      prev[static_cast<size_t>(h)].assign(sel.begin(), sel.end());
    }
    prev_seq = qb.b;
  }
  return t;
}

double distinct_blocks_per_64(const Batch& batch, const hal::HostTensor& block_idx) {
  const int64_t NQ = block_idx.shape[0], Hs = block_idx.shape[1], k = block_idx.shape[2];
  const int32_t* bi = block_idx.data<int32_t>();
  double sum = 0;
  int64_t groups = 0;
  for (int64_t h = 0; h < Hs; ++h) {
    for (int64_t n0 = 0; n0 < NQ; n0 += 64) {
      std::set<std::pair<int, int32_t>> seen;
      for (int64_t n = n0; n < std::min(NQ, n0 + 64); ++n)
        for (int64_t j = 0; j < k; ++j) {
          const int32_t c = bi[(n * Hs + h) * k + j];
          if (c >= 0) seen.insert({batch.qblocks[static_cast<size_t>(n)].b, c});
        }
      sum += static_cast<double>(seen.size());
      ++groups;
    }
  }
  return groups ? sum / static_cast<double>(groups) : 0.0;
}

SelectionStats selection_stats(const Batch& batch, int Bs, const hal::HostTensor& block_idx) {
  SelectionStats st;
  const int64_t NQ = block_idx.shape[0], Hs = block_idx.shape[1], k = block_idx.shape[2];
  const int32_t* bi = block_idx.data<int32_t>();
  std::set<std::tuple<int, int64_t, int32_t>> blocks;
  for (int64_t n = 0; n < NQ; ++n) {
    const QueryBlock& qb = batch.qblocks[static_cast<size_t>(n)];
    const int64_t kv = batch.kv_len[static_cast<size_t>(qb.b)], nblk = batch.blocks_of(qb.b, Bs);
    for (int64_t h = 0; h < Hs; ++h) {
      for (int64_t j = 0; j < k; ++j) {
        const int32_t c = bi[(n * Hs + h) * k + j];
        if (c < 0 || c >= nblk || int64_t{c} * Bs > qb.p1) continue;
        blocks.insert({qb.b, h, c});
        for (int64_t t = qb.t0; t < qb.t1; ++t) {
          const int64_t last =
              std::min<int64_t>({batch.token_pos[static_cast<size_t>(t)], kv - 1, int64_t{c} * Bs + Bs - 1});
          st.pairs += static_cast<double>(std::max<int64_t>(0, last - int64_t{c} * Bs + 1));
        }
      }
    }
  }
  st.unique_blocks = static_cast<double>(blocks.size());
  return st;
}

double dense_pairs(const Batch& batch) {
  double s = 0;
  for (size_t t = 0; t < batch.token_pos.size(); ++t)
    s += static_cast<double>(
        std::min<int64_t>(batch.token_pos[t] + 1, batch.kv_len[static_cast<size_t>(batch.token_seq[t])]));
  return s;
}

}  // namespace msa::cases
