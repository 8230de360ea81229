// Helpers for the cpu-ref attention-op tests: a cpu-ref device with owned tensors, a
// varlen paged batch (shuffled pages, NaN in every slot that is not a valid token,
// garbage in block_table entries that must never be read), and the tests' own
// bookkeeping of query blocks, written independently of backends/cpu_ref/common.cpp.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "check/rng.h"
#include "hal/error.h"
#include "hal/host_tensor.h"
#include "hal/registry.h"
#include "ops/args.h"
#include "tests/common/ref_device.h"

namespace msa::cpu_ref_test {

using hal::DType;
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline const DType kActDTypes[] = {DType::f32, DType::bf16, DType::f16};

// A cpu-ref device plus the tensors a test made on it.
using Ref = test::RefDevice;

// A varlen batch over a paged cache, described on the host.
struct Layout {
  int B = 0, Bs = 1, P = 0, max_blocks = 0;
  int64_t T = 0;
  std::vector<int32_t> q_len, kv_len, cu_q;
  std::vector<int32_t> block_table;  // [B][max_blocks]
  std::vector<int> tok_seq;          // per packed token: its sequence
  std::vector<int64_t> tok_pos;      // per packed token: its position

  int n_blocks(int b) const { return (kv_len[b] + Bs - 1) / Bs; }
  int page(int b, int c) const { return block_table[b * max_blocks + c]; }
};

// Pages are a shuffled permutation with `spare_pages` never used; block_table entries
// past a sequence's last block hold garbage (out-of-range ids) that must never be read.
inline Layout make_layout(const std::vector<int>& q_lens, const std::vector<int>& kv_lens, int Bs, uint64_t seed,
                          int spare_pages = 3, int spare_blocks = 2) {
  Layout L;
  L.B = static_cast<int>(q_lens.size());
  L.Bs = Bs;
  L.q_len.assign(q_lens.begin(), q_lens.end());
  L.kv_len.assign(kv_lens.begin(), kv_lens.end());
  L.cu_q.push_back(0);
  int total_blocks = 0;
  for (int b = 0; b < L.B; ++b) {
    L.cu_q.push_back(L.cu_q.back() + q_lens[b]);
    L.max_blocks = std::max(L.max_blocks, L.n_blocks(b));
    total_blocks += L.n_blocks(b);
  }
  L.max_blocks += spare_blocks;
  L.T = L.cu_q.back();
  L.P = total_blocks + spare_pages;
  cases::Rng rng(seed);
  std::vector<int32_t> pages(static_cast<size_t>(L.P));
  for (int i = 0; i < L.P; ++i) pages[i] = i;
  rng.shuffle(pages);
  L.block_table.assign(static_cast<size_t>(L.B) * L.max_blocks, 0);
  int next = 0;
  for (int b = 0; b < L.B; ++b)
    for (int c = 0; c < L.max_blocks; ++c)
      L.block_table[b * L.max_blocks + c] = c < L.n_blocks(b) ? pages[next++] : (c % 2 ? -7 : L.P + 100 + c);
  for (int b = 0; b < L.B; ++b)
    for (int i = 0; i < q_lens[b]; ++i) {
      L.tok_seq.push_back(b);
      L.tok_pos.push_back(kv_lens[b] - q_lens[b] + i);
    }
  return L;
}

// The tests' numbering of query blocks: walk the packed tokens and open a new block
// whenever the sequence or floor(pos / Qb) changes. qb_of[t] per token, NQ = count.
struct QueryBlocks {
  std::vector<int64_t> qb_of;
  std::vector<int> seq;                         // per query block
  std::vector<std::vector<int64_t>> positions;  // per query block: its query positions
  int64_t nq() const { return static_cast<int64_t>(seq.size()); }
};

inline QueryBlocks query_blocks(const Layout& L, int Qb) {
  QueryBlocks q;
  int last_seq = -1;
  int64_t last_key = -1;
  for (int64_t t = 0; t < L.T; ++t) {
    const int b = L.tok_seq[t];
    const int64_t key = L.tok_pos[t] / Qb;
    if (b != last_seq || key != last_key) {
      q.seq.push_back(b);
      q.positions.emplace_back();
      last_seq = b;
      last_key = key;
    }
    q.qb_of.push_back(q.nq() - 1);
    q.positions.back().push_back(L.tok_pos[t]);
  }
  return q;
}

// A paged cache [P][heads][Bs][D] with random values (rounded to t) in the valid slots
// and NaN everywhere else; `logical[b]` gets sequence b's values as [heads][kv_len][D].
inline std::vector<float> paged_values(const Layout& L, int heads, int D, DType t, uint64_t seed,
                                       std::vector<std::vector<float>>& logical, float lo = -1.f, float hi = 1.f) {
  cases::Rng rng(seed);
  std::vector<float> paged(static_cast<size_t>(L.P) * heads * L.Bs * D, kNaN);
  logical.assign(static_cast<size_t>(L.B), {});
  for (int b = 0; b < L.B; ++b) {
    auto& lg = logical[b];
    lg.assign(static_cast<size_t>(heads) * L.kv_len[b] * D, 0.f);
    for (int h = 0; h < heads; ++h)
      for (int s = 0; s < L.kv_len[b]; ++s)
        for (int d = 0; d < D; ++d) {
          const float x = hal::round_to(t, static_cast<float>(rng.uniform(lo, hi)));
          lg[(static_cast<size_t>(h) * L.kv_len[b] + s) * D + d] = x;
          const int page = L.page(b, s / L.Bs);
          paged[((static_cast<size_t>(page) * heads + h) * L.Bs + s % L.Bs) * D + d] = x;
        }
  }
  return paged;
}

// Seeded values in [lo, hi), rounded to t.
inline std::vector<float> random_values(size_t n, DType t, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  cases::Rng rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = hal::round_to(t, static_cast<float>(rng.uniform(lo, hi)));
  return v;
}

// Relative error bound of the one final rounding of `out` to t (twice half an ulp).
inline double round_tol(DType t) {
  switch (t) {
    case DType::bf16:
      return 1.0 / 256;
    case DType::f16:
      return 1.0 / 2048;
    default:
      return 2.5e-7;
  }
}

// Expects `fn` to throw msa::Error whose message contains every one of `parts`.
template <typename Fn>
void expect_error(Fn&& fn, std::initializer_list<const char*> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected msa::Error";
  } catch (const msa::Error& e) {
    for (const char* p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

// Softmax attention of one query over explicit logits / values, the textbook way:
// p = exp(l) / sum(exp(l)) with the row max subtracted, out = sum p v. Masked logits are
// -inf. Returns lse (-inf and out = 0 when every logit is masked).
inline double softmax_row(const std::vector<double>& logits, const std::vector<double>& values, int D,
                          std::vector<double>& out) {
  out.assign(static_cast<size_t>(D), 0.0);
  double m = -kInf;
  for (double l : logits) m = std::max(m, l);
  if (m == -kInf) return -kInf;
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t s = 0; s < logits.size(); ++s) sum += p[s] = std::exp(logits[s] - m);
  for (size_t s = 0; s < logits.size(); ++s)
    for (int d = 0; d < D; ++d) out[d] += p[s] / sum * values[s * D + d];
  return m + std::log(sum);
}

// Compares an attention result with the oracle: out within one rounding to its dtype,
// lse -inf exactly where expected, else within f32 rounding.
inline void expect_attention(const std::vector<float>& out, const std::vector<float>& lse,
                             const std::vector<double>& want_out, const std::vector<double>& want_lse, int D, DType t,
                             const std::string& what) {
  ASSERT_EQ(out.size(), want_out.size());
  ASSERT_EQ(lse.size(), want_lse.size());
  int bad = 0;
  for (size_t r = 0; r < lse.size() && bad < 10; ++r) {
    const double tol_lse = 1e-6 * std::max(1.0, std::fabs(want_lse[r]));
    const bool lse_ok = std::isinf(want_lse[r]) ? lse[r] == -std::numeric_limits<float>::infinity()
                                                : std::fabs(lse[r] - want_lse[r]) <= tol_lse;
    if (!lse_ok) {
      ADD_FAILURE() << what << " row " << r << ": lse " << lse[r] << " want " << want_lse[r];
      ++bad;
    }
    for (int d = 0; d < D; ++d) {
      const double w = want_out[r * D + d], x = out[r * D + d];
      // Relative rounding, plus f16's subnormal spacing (2^-24) for tiny outputs.
      const double tol = round_tol(t) * std::fabs(w) + (t == DType::f16 ? 0x1p-24 : 1e-12);
      if (!(std::fabs(x - w) <= tol)) {
        ADD_FAILURE() << what << " row " << r << " dim " << d << ": got " << x << " want " << w;
        if (++bad >= 10) break;
      }
    }
  }
}

}  // namespace msa::cpu_ref_test
