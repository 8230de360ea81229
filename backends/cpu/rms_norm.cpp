// rms_norm on Highway (plain and gemma, f32 statistics), rows split over fixed ranges in
// parallel.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/rms_norm.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cmath>

#include "backends/cpu/elementwise-inl.h"
#include "hwy/highway.h"
#include "ops/args.h"

HWY_BEFORE_NAMESPACE();
namespace msa::cpu {
namespace HWY_NAMESPACE {

void RmsNormImpl(const ops::RmsNormArgs& a) {
  const size_t N = static_cast<size_t>(a.x.dim(-1));
  const int64_t M = N == 0 ? 0 : a.x.numel() / static_cast<int64_t>(N);
  const bool gemma = a.kind == ops::NormKind::gemma;
  parallel_for(
      M,
      [&](int64_t m) {
        const DF df;
        const size_t L = hn::Lanes(df);
        float* x = scratch_floats(0, N);
        float* w = scratch_floats(1, N);
        LoadRow(a.x.dtype, a.x.data<const void>(), static_cast<size_t>(m) * N, N, x);
        LoadRow(a.w.dtype, a.w.data<const void>(), 0, N, w);
        VF ss = hn::Zero(df);
        size_t i = 0;
        for (; i + L <= N; i += L) {
          const VF v = hn::LoadU(df, x + i);
          ss = hn::MulAdd(v, v, ss);
        }
        float sum = hn::GetLane(hn::SumOfLanes(df, ss));
        for (; i < N; ++i) sum += x[i] * x[i];
        const float inv = 1.0f / std::sqrt(sum / static_cast<float>(N) + a.eps);
        const VF vi = hn::Set(df, inv), one = hn::Set(df, 1.0f);
        for (i = 0; i + L <= N; i += L) {
          VF wv = hn::LoadU(df, w + i);
          if (gemma) wv = hn::Add(wv, one);
          hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(df, x + i), vi), wv), df, x + i);
        }
        for (; i < N; ++i) x[i] = x[i] * inv * (gemma ? 1.0f + w[i] : w[i]);
        StoreRow(a.y.dtype, x, N, a.y.data<void>(), static_cast<size_t>(m) * N);
      },
      4);
}

}  // namespace HWY_NAMESPACE
}  // namespace msa::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/kernels.h"

namespace msa::cpu {

HWY_EXPORT(RmsNormImpl);

void rms_norm(hal::Stream&, const ops::RmsNormArgs& a) { HWY_DYNAMIC_DISPATCH(RmsNormImpl)(a); }

}  // namespace msa::cpu
#endif  // HWY_ONCE
