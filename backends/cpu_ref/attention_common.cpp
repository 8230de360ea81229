#include "backends/cpu_ref/attention_common.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu_ref/common.h"

namespace msa::cpu_ref {

void load_row(const hal::Tensor& t, int64_t off, int64_t D, double* dst) {
  for (int64_t d = 0; d < D; ++d) dst[d] = load(t, off + d);
}

void KvRows::append(const hal::Tensor& k_src, int64_t k_off, const hal::Tensor& v_src,
                    int64_t v_off, int64_t position) {
  const size_t base = k.size();
  k.resize(base + static_cast<size_t>(D));
  v.resize(base + static_cast<size_t>(D));
  load_row(k_src, k_off, D, k.data() + base);
  load_row(v_src, v_off, D, v.data() + base);
  pos.push_back(position);
}

void KvRows::append_block(const hal::Tensor& k_cache, const hal::Tensor& v_cache, int64_t page,
                          int64_t g, int64_t c, int64_t kv_len) {
  const int64_t Hkv = k_cache.dim(1), Bs = k_cache.dim(2);
  const int64_t s_end = std::min((c + 1) * Bs, kv_len);
  for (int64_t s = c * Bs; s < s_end; ++s) {
    const int64_t off = ((page * Hkv + g) * Bs + (s - c * Bs)) * D;
    append(k_cache, off, v_cache, off, s);
  }
}

double attend_row(const double* q, const KvRows& kv, int64_t limit, double scale, double* out,
                  std::vector<double>& scratch) {
  const int64_t D = kv.D, n = kv.rows();
  scratch.assign(static_cast<size_t>(n), kNegInf);
  double m = kNegInf;
  bool any = false;
  for (int64_t r = 0; r < n; ++r) {
    if (kv.pos[static_cast<size_t>(r)] > limit) continue;
    const double* kr = kv.k.data() + r * D;
    double dot = 0.0;
    for (int64_t d = 0; d < D; ++d) dot += q[d] * kr[d];
    const double l = scale * dot;
    scratch[static_cast<size_t>(r)] = l;
    // A NaN logit (only from NaN in valid inputs) propagates through exp() below.
    if (!any || l > m) m = l;
    any = true;
  }
  std::fill(out, out + D, 0.0);
  if (!any) return kNegInf;
  double sum = 0.0;
  for (int64_t r = 0; r < n; ++r) {
    if (kv.pos[static_cast<size_t>(r)] > limit) continue;
    const double p = std::exp(scratch[static_cast<size_t>(r)] - m);
    sum += p;
    const double* vr = kv.v.data() + r * D;
    for (int64_t d = 0; d < D; ++d) out[d] += p * vr[d];
  }
  for (int64_t d = 0; d < D; ++d) out[d] /= sum;
  return m + std::log(sum);
}

void store_row(const hal::Tensor& out, int64_t off, const double* row, int64_t D,
               const hal::Tensor& lse, int64_t lse_index, double lse_value) {
  for (int64_t d = 0; d < D; ++d) store(out, off + d, row[d]);
  lse.data<float>()[lse_index] = static_cast<float>(lse_value);
}

}  // namespace msa::cpu_ref
