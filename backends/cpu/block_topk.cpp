// block_topk (docs/spec.md): per query block and selection head, the forced blocks
// (sinks, and the n_local blocks ending at each query's own block) plus the best-scoring
// other valid blocks, returned ascending and -1 padded.
//
// Selection is a real O(nvalid) partial selection: each candidate becomes one 64-bit key
// (order-preserving bits of the score above ~index), so "larger key" is exactly "higher
// score, then lower index" (NaN counts as -inf and is never picked; -0 == +0), and
// std::nth_element picks the top ones. Keys are distinct, so the result is unique and
// equal to the reference's on identical scores. Rows run in parallel.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/varlen.h"
#include "hal/error.h"

namespace msa::cpu {
namespace {

// Order-preserving map of a non-NaN float to uint32 (-0 maps like +0).
inline uint32_t ordered_bits(float x) {
  if (x == 0.0f) x = 0.0f;
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);
}

struct Row {
  const float* score;
  int64_t nvalid;
  int64_t sink_end;            // forced: [0, sink_end)
  int64_t local_lo, local_hi;  // forced: [local_lo, local_hi] (empty when lo > hi)
};

// Writes the selection of one row into out[k] and returns its count.
int32_t select_row(const Row& r, int64_t k, int32_t* out, std::vector<uint64_t>& keys) {
  int64_t n = 0;
  if (r.nvalid <= k) {
    for (int64_t c = 0; c < r.nvalid; ++c) out[n++] = static_cast<int32_t>(c);
  } else {
    auto forced = [&](int64_t c) { return c < r.sink_end || (c >= r.local_lo && c <= r.local_hi); };
    keys.clear();
    for (int64_t c = 0; c < r.nvalid; ++c) {
      const float s = r.score[c];
      // NaN and -inf are never picked (the comparison is false for NaN).
      if (!(s > -std::numeric_limits<float>::infinity()) || forced(c)) continue;
      keys.push_back(static_cast<uint64_t>(ordered_bits(s)) << 32 | (0xFFFFFFFFu - static_cast<uint32_t>(c)));
    }
    const int64_t n_forced =
        std::min(r.sink_end, r.nvalid) + std::max<int64_t>(0, r.local_hi - std::max(r.local_lo, r.sink_end) + 1);
    const int64_t m = std::min<int64_t>(k - n_forced, static_cast<int64_t>(keys.size()));
    if (m > 0 && m < static_cast<int64_t>(keys.size()))
      std::nth_element(keys.begin(), keys.begin() + (m - 1), keys.end(), std::greater<uint64_t>());
    // Forced blocks and the m best, merged ascending.
    for (int64_t c = 0; c < std::min(r.sink_end, r.nvalid); ++c) out[n++] = static_cast<int32_t>(c);
    for (int64_t c = std::max(r.local_lo, r.sink_end); c <= r.local_hi; ++c) out[n++] = static_cast<int32_t>(c);
    for (int64_t i = 0; i < m; ++i) out[n++] = static_cast<int32_t>(0xFFFFFFFFu - static_cast<uint32_t>(keys[i]));
    std::sort(out, out + n);
  }
  for (int64_t j = n; j < k; ++j) out[j] = -1;
  return static_cast<int32_t>(n);
}

}  // namespace

void block_topk(hal::Stream&, const ops::BlockTopkArgs& a) {
  const char* op = "block_topk";
  const int64_t Hs = a.block_score.dim(1), MB = a.block_score.dim(2);
  const int64_t k = a.k, Bs = a.Bs;
  MSA_CHECK_ARG(k >= 1, op, "k", "must be >= 1, got " + std::to_string(k));
  MSA_CHECK_ARG(a.n_sink >= 0, op, "n_sink", "must be >= 0, got " + std::to_string(a.n_sink));
  MSA_CHECK_ARG(a.n_local >= 0, op, "n_local", "must be >= 0, got " + std::to_string(a.n_local));
  const Batch batch = make_batch(op, a.cu_q, a.kv_len, -1, Bs, MB, a.Qb);
  check_nq(op, batch, a.NQ);
  MSA_CHECK_ARG(a.block_score.dim(0) == batch.nq(), op, "block_score",
                "must have NQ = " + std::to_string(batch.nq()) + " rows");
  // Forced blocks per query block, checked against k before any output is written.
  for (int64_t n = 0; n < batch.nq(); ++n) {
    const QBlock& qb = batch.qblocks[static_cast<size_t>(n)];
    const int64_t nvalid = qb.p1 / Bs + 1;
    if (nvalid <= k) continue;
    int64_t forced = std::min<int64_t>(a.n_sink, nvalid);
    if (a.n_local > 0) {
      const int64_t lo = std::max<int64_t>({0, qb.p0 / Bs - a.n_local + 1, forced});
      forced += std::max<int64_t>(0, qb.p1 / Bs - lo + 1);
    }
    MSA_CHECK_ARG(forced <= k, op, "k",
                  std::to_string(forced) + " forced blocks in query block " + std::to_string(n) +
                      " exceed k = " + std::to_string(k));
  }
  const float* score = a.block_score.data<const float>();
  int32_t* idx = a.block_idx.data<int32_t>();
  int32_t* cnt = a.block_cnt.data<int32_t>();
  parallel_for(
      batch.nq() * Hs,
      [&](int64_t i) {
        thread_local std::vector<uint64_t> keys;
        const int64_t n = i / Hs;
        const QBlock& qb = batch.qblocks[static_cast<size_t>(n)];
        Row r;
        r.score = score + i * MB;
        r.nvalid = qb.p1 / Bs + 1;
        r.sink_end = a.n_sink;
        r.local_lo = a.n_local > 0 ? std::max<int64_t>(0, qb.p0 / Bs - a.n_local + 1) : 1;
        r.local_hi = a.n_local > 0 ? qb.p1 / Bs : 0;
        cnt[i] = select_row(r, k, idx + i * k, keys);
      },
      std::max<int64_t>(1, 32768 / std::max<int64_t>(1, MB)));  // ~32K scores per task
}

}  // namespace msa::cpu
