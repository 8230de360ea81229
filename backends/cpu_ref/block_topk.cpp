// block_topk: per query block and selection head, the KV blocks to attend
// (docs/spec.md, "Op: block_topk"): all valid blocks when there are at most k, otherwise
// the forced blocks (sinks, and the n_local blocks ending at each query's own block) and
// then the best-scoring other blocks. Written as k rounds of a linear argmax so the
// selection rules read directly off the code; O(k * nvalid) per row.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu_ref/common.h"
#include "backends/cpu_ref/kernels.h"

namespace msa::cpu_ref {

void block_topk(hal::Stream&, const ops::BlockTopkArgs& a) {
  const char* op = "block_topk";
  const int64_t Hs = a.block_score.dim(1), MB = a.block_score.dim(2);
  const int64_t k = a.k, Bs = a.Bs;
  MSA_CHECK_ARG(k >= 1, op, "k", "must be >= 1, got " + std::to_string(k));
  MSA_CHECK_ARG(a.n_sink >= 0, op, "n_sink", "must be >= 0, got " + std::to_string(a.n_sink));
  MSA_CHECK_ARG(a.n_local >= 0, op, "n_local", "must be >= 0, got " + std::to_string(a.n_local));
  // No query tensor here, so cu_q[B] is not compared with a token count.
  const Batch batch = make_batch(op, a.cu_q, a.kv_len, -1, Bs, MB, a.Qb);
  check_nq(op, batch, a.NQ);
  MSA_CHECK_ARG(a.block_score.dim(0) == batch.nq(), op, "block_score",
                "must have NQ = " + std::to_string(batch.nq()) + " rows");

  const float* score = a.block_score.data<const float>();
  int32_t* idx = a.block_idx.data<int32_t>();
  int32_t* cnt = a.block_cnt.data<int32_t>();
  std::vector<char> chosen;
  for (int64_t n = 0; n < batch.nq(); ++n) {
    const QueryBlock& qb = batch.qblocks[static_cast<size_t>(n)];
    const int64_t nvalid = qb.p1 / Bs + 1;  // blocks 0 .. floor(p1 / Bs)
    for (int64_t h = 0; h < Hs; ++h) {
      const float* row = score + (n * Hs + h) * MB;
      chosen.assign(static_cast<size_t>(nvalid), 0);
      int64_t count = 0;
      auto take = [&](int64_t c) {
        if (!chosen[static_cast<size_t>(c)]) {
          chosen[static_cast<size_t>(c)] = 1;
          ++count;
        }
      };
      if (nvalid <= k) {
        for (int64_t c = 0; c < nvalid; ++c) take(c);
      } else {
        // Forced: sinks, and floor(p/Bs)-n_local+1 .. floor(p/Bs) for every query position
        // p of the block, which together are one range since p runs over p0 .. p1.
        for (int64_t c = 0; c < std::min<int64_t>(a.n_sink, nvalid); ++c) take(c);
        if (a.n_local > 0)
          for (int64_t c = std::max<int64_t>(0, qb.p0 / Bs - a.n_local + 1); c <= qb.p1 / Bs; ++c) take(c);
        // The host's check k >= n_sink + n_local - 1 + max(1, Qb/Bs) guarantees this for
        // power-of-two Qb and Bs; other sizes can need more.
        MSA_CHECK_ARG(count <= k, op, "k",
                      std::to_string(count) + " forced blocks in query block " + std::to_string(n) +
                          " exceed k = " + std::to_string(k));
        // Then by descending score: NaN counts as -inf, -inf is never picked, -0 == +0,
        // ties go to the lower index (strict > while scanning upwards).
        while (count < k) {
          int64_t best = -1;
          float best_s = 0.0f;
          for (int64_t c = 0; c < nvalid; ++c) {
            const float sc = row[c];
            if (chosen[static_cast<size_t>(c)] || std::isnan(sc) || (std::isinf(sc) && sc < 0)) continue;
            if (best < 0 || sc > best_s) {
              best = c;
              best_s = sc;
            }
          }
          if (best < 0) break;
          take(best);
        }
      }
      int32_t* out = idx + (n * Hs + h) * k;
      int64_t j = 0;
      for (int64_t c = 0; c < nvalid; ++c)
        if (chosen[static_cast<size_t>(c)]) out[j++] = static_cast<int32_t>(c);
      for (; j < k; ++j) out[j] = -1;
      cnt[n * Hs + h] = static_cast<int32_t>(count);
    }
  }
}

}  // namespace msa::cpu_ref
