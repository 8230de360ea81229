#include "backends/cpu_ref/attention_common.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

#include "backends/cpu_ref/common.h"

namespace msa::cpu_ref {
namespace {

constexpr double kMaxF32 = FLT_MAX;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

void load_row(const hal::Tensor& t, int64_t off, int64_t n, double* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = load(t, off + i);
}

void store_row(const hal::Tensor& out, int64_t off, const double* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) store(out, off + i, src[i]);
}

void KvRows::append(const hal::Tensor& k_src, int64_t src_k_off, const hal::Tensor& v_src, int64_t src_v_off,
                    int64_t position) {
  for (int64_t d = 0; d < D; ++d) {
    k.push_back(hal::load_as_f32(k_src.dtype, k_src.data<const uint8_t>(), static_cast<size_t>(src_k_off + d)));
    v.push_back(hal::load_as_f32(v_src.dtype, v_src.data<const uint8_t>(), static_cast<size_t>(src_v_off + d)));
  }
  pos.push_back(position);
  k_off.push_back(src_k_off);
  v_off.push_back(src_v_off);
}

void KvRows::append_block(const hal::Tensor& k_cache, const hal::Tensor& v_cache, int64_t page, int64_t g, int64_t c,
                          int64_t kv_len) {
  const int64_t Hkv = k_cache.dim(1), Bs = k_cache.dim(2);
  const int64_t s_end = std::min((c + 1) * Bs, kv_len);
  for (int64_t s = c * Bs; s < s_end; ++s) {
    const int64_t off = ((page * Hkv + g) * Bs + (s - c * Bs)) * D;
    append(k_cache, off, v_cache, off, s);
  }
}

void attend_rows(const double* q, int64_t nq, const KvRows& kv, int64_t limit, double scale, double* out, double* lse,
                 std::vector<double>& scratch) {
  const int64_t D = kv.D, n = kv.rows();
  // scratch: logits [n][nq], then the row maxima [nq], denominators [nq] and the
  // non-finite flags [nq] (docs/spec.md, "Non-finite inputs").
  scratch.assign(static_cast<size_t>((n + 3) * nq), 0.0);
  double* logit = scratch.data();
  double* m = logit + n * nq;
  double* sum = m + nq;
  double* bad = sum + nq;
  std::fill(m, m + nq, kNegInf);
  std::fill(out, out + nq * D, 0.0);
  bool any = false, bad_value = false;
  for (int64_t r = 0; r < n; ++r) {
    if (kv.pos[static_cast<size_t>(r)] > limit) continue;
    any = true;
    const float* kr = kv.k.data() + r * D;
    const float* vr = kv.v.data() + r * D;
    for (int64_t d = 0; d < D; ++d) bad_value |= !std::isfinite(vr[d]);
    for (int64_t i = 0; i < nq; ++i) {
      const double l = scale * dot(q + i * D, kr, D);
      logit[r * nq + i] = l;
      // A logit that is NaN or outside float range (an f32 backend's inf) spoils the row.
      if (!(std::fabs(l) <= kMaxF32))
        bad[i] = 1.0;
      else if (l > m[i])
        m[i] = l;
    }
  }
  if (!any) {
    std::fill(lse, lse + nq, kNegInf);
    return;
  }
  for (int64_t r = 0; r < n; ++r) {
    if (kv.pos[static_cast<size_t>(r)] > limit) continue;
    const float* __restrict vr = kv.v.data() + r * D;
    for (int64_t i = 0; i < nq; ++i) {
      if (bad[i] != 0.0 || bad_value) continue;
      const double p = std::exp(logit[r * nq + i] - m[i]);
      sum[i] += p;
      double* __restrict o = out + i * D;
      for (int64_t d = 0; d < D; ++d) o[d] += p * static_cast<double>(vr[d]);
    }
  }
  for (int64_t i = 0; i < nq; ++i) {
    if (bad[i] != 0.0 || bad_value) {
      std::fill(out + i * D, out + (i + 1) * D, kNaN);
      lse[i] = kNaN;
      continue;
    }
    for (int64_t d = 0; d < D; ++d) out[i * D + d] /= sum[i];
    lse[i] = m[i] + std::log(sum[i]);
  }
}

void attend_heads(const hal::Tensor& q, int64_t t, int64_t h0, int64_t nh, const KvRows& kv, int64_t limit,
                  double scale, const hal::Tensor& out, const hal::Tensor& lse, AttendScratch& ws) {
  const int64_t H = q.dim(1), D = kv.D, row = t * H + h0;
  ws.q.resize(static_cast<size_t>(nh * D));
  ws.out.resize(static_cast<size_t>(nh * D));
  ws.lse.resize(static_cast<size_t>(nh));
  load_row(q, row * D, nh * D, ws.q.data());
  attend_rows(ws.q.data(), nh, kv, limit, scale, ws.out.data(), ws.lse.data(), ws.logits);
  store_row(out, row * D, ws.out.data(), nh * D);
  for (int64_t i = 0; i < nh; ++i) lse.data<float>()[row + i] = static_cast<float>(ws.lse[static_cast<size_t>(i)]);
}

}  // namespace msa::cpu_ref
