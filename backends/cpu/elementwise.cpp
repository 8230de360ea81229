// Row-wise and elementwise supporting ops on Highway: rms_norm (plain and gemma, f32
// statistics), swiglu, add. Work is split into fixed row / element ranges in parallel.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/elementwise.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>

#include "backends/cpu/convert-inl.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/scratch.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "ops/args.h"

HWY_BEFORE_NAMESPACE();
namespace msa::cpu {
namespace HWY_NAMESPACE {

// Loads n elements of dtype t from base + i into f32 dst.
HWY_INLINE void LoadRow(hal::DType t, const void* base, size_t i, size_t n, float* dst) {
  switch (t) {
    case hal::DType::bf16:
      ConvertRow(static_cast<const hwy::bfloat16_t*>(base) + i, n, 1.0f, dst);
      break;
    case hal::DType::f16:
      ConvertRow(static_cast<const hwy::float16_t*>(base) + i, n, 1.0f, dst);
      break;
    default:
      ConvertRow(static_cast<const float*>(base) + i, n, 1.0f, dst);
      break;
  }
}
// Stores f32 src into n elements of dtype t at base + i (round to nearest even).
HWY_INLINE void StoreRow(hal::DType t, const float* src, size_t n, void* base, size_t i) {
  switch (t) {
    case hal::DType::bf16:
      for (size_t j = 0; j < n; ++j) FromF32(src[j], static_cast<hwy::bfloat16_t*>(base) + i + j);
      break;
    case hal::DType::f16:
      for (size_t j = 0; j < n; ++j) FromF32(src[j], static_cast<hwy::float16_t*>(base) + i + j);
      break;
    default:
      std::copy(src, src + n, static_cast<float*>(base) + i);
      break;
  }
}

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

constexpr size_t kChunk = 16384;  // elements per parallel task

// y = f(a, b) elementwise in f32 over fixed chunks.
template <class F>
HWY_INLINE void Binary(const hal::Tensor& ta, const hal::Tensor& tb, const hal::Tensor& ty, F f) {
  const size_t n = static_cast<size_t>(ta.numel());
  parallel_for(static_cast<int64_t>((n + kChunk - 1) / kChunk), [&](int64_t c) {
    const DF df;
    const size_t L = hn::Lanes(df);
    const size_t i0 = static_cast<size_t>(c) * kChunk, len = std::min(kChunk, n - i0);
    float* x = scratch_floats(0, len);
    float* y = scratch_floats(1, len);
    LoadRow(ta.dtype, ta.data<const void>(), i0, len, x);
    LoadRow(tb.dtype, tb.data<const void>(), i0, len, y);
    size_t i = 0;
    for (; i + L <= len; i += L) hn::StoreU(f(df, hn::LoadU(df, x + i), hn::LoadU(df, y + i)), df, x + i);
    if (i < len) {  // tail through a padded vector
      alignas(64) float bx[64] = {0}, by[64] = {0};
      std::copy(x + i, x + len, bx);
      std::copy(y + i, y + len, by);
      hn::StoreU(f(df, hn::LoadU(df, bx), hn::LoadU(df, by)), df, bx);
      std::copy(bx, bx + (len - i), x + i);
    }
    StoreRow(ty.dtype, x, len, ty.data<void>(), i0);
  });
}

void SwigluImpl(const ops::SwigluArgs& a) {
  Binary(a.gate, a.up, a.y, [](DF df, VF g, VF u) {
    // silu(g) = g / (1 + exp(-g))
    const VF e = hn::Exp(df, hn::Min(hn::Neg(g), hn::Set(df, 88.0f)));  // no overflow
    return hn::Mul(hn::Div(g, hn::Add(hn::Set(df, 1.0f), e)), u);
  });
}

void AddImpl(const ops::AddArgs& a) {
  Binary(a.a, a.b, a.y, [](DF, VF x, VF y) { return hn::Add(x, y); });
}

}  // namespace HWY_NAMESPACE
}  // namespace msa::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/kernels.h"

namespace msa::cpu {

HWY_EXPORT(RmsNormImpl);
HWY_EXPORT(SwigluImpl);
HWY_EXPORT(AddImpl);

void rms_norm(hal::Stream&, const ops::RmsNormArgs& a) { HWY_DYNAMIC_DISPATCH(RmsNormImpl)(a); }
void swiglu(hal::Stream&, const ops::SwigluArgs& a) { HWY_DYNAMIC_DISPATCH(SwigluImpl)(a); }
void add(hal::Stream&, const ops::AddArgs& a) { HWY_DYNAMIC_DISPATCH(AddImpl)(a); }

}  // namespace msa::cpu
#endif  // HWY_ONCE
