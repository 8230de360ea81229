// indexer_score: per query block, indexer head and KV block, the pooled (max or
// log-sum-exp) indexer logit l = scale_i * dot(qi, ki) [* ki_scale] over the block's
// (NVFP4 keys: ki = e2m1 code * its group's e4m3 scale, decoded before the dot)
// valid causal tokens, maximised over the block's queries (docs/spec.md,
// "Op: indexer_score"). Scalar, one thread, double accumulation; the f32 result is the
// double rounded once.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu_ref/attention_common.h"
#include "backends/cpu_ref/common.h"
#include "backends/cpu_ref/kernels.h"
#include "hal/nvfp4.h"

namespace msa::cpu_ref {
namespace {

// Rows [0, n) of the indexer keys of `page` as doubles; NVFP4 rows are decoded with their
// group scales.
void load_key_rows(const ops::IndexerScoreArgs& a, int64_t page, int64_t Bs, int64_t n, int64_t Di, double* out) {
  if (a.ki_cache.dtype != hal::DType::fp4_e2m1x2) {
    load_row(a.ki_cache, page * Bs * Di, n * Di, out);
    return;
  }
  const auto* codes = a.ki_cache.data<const uint8_t>();
  const auto* scales = a.ki_scale.data<const uint8_t>();
  const int64_t G = Di / hal::kNvfp4Group;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t row = page * Bs + r;
    for (int64_t d = 0; d < Di; ++d) {
      const double s = hal::fp8_e4m3_to_f32(scales[row * G + d / hal::kNvfp4Group]);
      out[r * Di + d] = hal::e2m1_element(codes + row * (Di / 2), static_cast<size_t>(d)) * s;
    }
  }
}

// max(a, b) where a NaN on either side wins, so NaN inputs cannot hide.
double nan_max(double a, double b) { return std::isnan(a) || a >= b ? a : b; }

}  // namespace

void indexer_score(hal::Stream&, const ops::IndexerScoreArgs& a) {
  const char* op = "indexer_score";
  const int64_t T = a.qi.dim(0), Hi = a.qi.dim(1), Di = a.qi.dim(2);
  const int64_t P = a.ki_cache.dim(0), Bs = a.ki_cache.dim(1);
  const int64_t MB = a.block_score.dim(2);
  MSA_CHECK_ARG(a.mode != ops::SelectionMode::shared || Hi == 1, op, "qi",
                "shared mode needs Hi = 1, got " + std::to_string(Hi));
  const Batch batch = make_batch(op, a.cu_q, a.kv_len, T, Bs, a.block_table.dim(1), a.Qb);
  check_nq(op, batch, a.NQ);
  check_block_table(op, batch, a.block_table, P);
  const double scale = resolve_scale(a.scale, Di);
  const bool has_scale = a.ki_scale.present() && a.ki_cache.dtype == hal::DType::fp8_e4m3;  // per-token f32
  const bool pool_lse = a.pool == ops::Pool::lse;

  // Every entry no valid token reaches (including past a sequence's last block) is -inf.
  float* out = a.block_score.data<float>();
  std::fill(out, out + a.block_score.numel(), -std::numeric_limits<float>::infinity());

  std::vector<double> q, ki, logit;
  for (size_t b = 0; b < batch.seqs.size(); ++b) {
    const Sequence& s = batch.seqs[b];
    if (s.q_len == 0) continue;
    q.resize(static_cast<size_t>(s.q_len * Hi * Di));
    load_row(a.qi, s.q_begin * Hi * Di, s.q_len * Hi * Di, q.data());
    for (int64_t c = 0; c < s.n_blocks; ++c) {
      const int64_t page = page_of(a.block_table, static_cast<int64_t>(b), c);
      const int64_t s0 = c * Bs, n = std::min(s0 + Bs, s.kv_len) - s0;  // valid slots
      ki.resize(static_cast<size_t>(n * Di));
      load_key_rows(a, page, Bs, n, Di, ki.data());
      logit.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < s.q_len; ++i) {
        const int64_t pos = s.pos0 + i;
        if (pos < s0) continue;                       // the block is entirely in this query's future
        const int64_t m = std::min(n, pos - s0 + 1);  // causal: s <= pos
        const int64_t qb = s.qb_begin + pos / a.Qb - s.pos0 / a.Qb;
        for (int64_t j = 0; j < Hi; ++j) {
          const double* qr = q.data() + (i * Hi + j) * Di;
          double mx = kNegInf;
          for (int64_t r = 0; r < m; ++r) {
            double l = dot(qr, ki.data() + r * Di, Di);
            if (has_scale) l *= static_cast<double>(a.ki_scale.data<const float>()[page * Bs + r]);
            logit[static_cast<size_t>(r)] = scale * l;
            mx = r == 0 ? logit[0] : nan_max(mx, logit[static_cast<size_t>(r)]);
          }
          double pooled = mx;
          if (pool_lse && std::isfinite(mx)) {
            double sum = 0.0;
            for (int64_t r = 0; r < m; ++r) sum += std::exp(logit[static_cast<size_t>(r)] - mx);
            pooled = mx + std::log(sum);
          }
          float& dst = out[(qb * Hi + j) * MB + c];
          dst = static_cast<float>(nan_max(static_cast<double>(dst), pooled));
        }
      }
    }
  }
}

}  // namespace msa::cpu_ref
