// rope (docs/spec.md): neox-style rotary embedding of the first rotary_dim dims of every
// head, y may be x. Angles pos * inv_freq and their cos / sin are computed in double once
// per token (f32 angles lose ~0.1 rad at 1M positions); the rotation of all heads runs
// on Highway vectors in f32.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/rope.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/convert-inl.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/scratch.h"
#include "hwy/highway.h"
#include "ops/args.h"

HWY_BEFORE_NAMESPACE();
namespace msa::cpu {
namespace HWY_NAMESPACE {

template <typename T>
void RopeT(const ops::RopeArgs& a, const std::vector<double>& inv_freq) {
  const size_t H = static_cast<size_t>(a.x.dim(1)), D = static_cast<size_t>(a.x.dim(2));
  const size_t half = inv_freq.size();
  const int32_t* pos = a.pos.data<const int32_t>();
  const T* x = a.x.data<const T>();
  T* y = a.y.data<T>();
  parallel_for(
      a.x.dim(0),
      [&](int64_t t) {
        const DF df;
        const size_t L = hn::Lanes(df);
        float* cs = scratch_floats(0, 2 * half + D);
        float* sn = cs + half;
        float* row = sn + half;
        for (size_t j = 0; j < half; ++j) {
          const double ang = static_cast<double>(pos[t]) * inv_freq[j];
          cs[j] = static_cast<float>(std::cos(ang));
          sn[j] = static_cast<float>(std::sin(ang));
        }
        for (size_t h = 0; h < H; ++h) {
          const size_t base = (static_cast<size_t>(t) * H + h) * D;
          for (size_t d = 0; d < D; ++d) row[d] = ToF32(x[base + d]);
          size_t j = 0;
          for (; j + L <= half; j += L) {
            const VF x0 = hn::LoadU(df, row + j), x1 = hn::LoadU(df, row + half + j);
            const VF c = hn::LoadU(df, cs + j), s = hn::LoadU(df, sn + j);
            hn::StoreU(hn::NegMulAdd(x1, s, hn::Mul(x0, c)), df, row + j);
            hn::StoreU(hn::MulAdd(x0, s, hn::Mul(x1, c)), df, row + half + j);
          }
          for (; j < half; ++j) {
            const float x0 = row[j], x1 = row[half + j];
            row[j] = x0 * cs[j] - x1 * sn[j];
            row[half + j] = x1 * cs[j] + x0 * sn[j];
          }
          for (size_t d = 0; d < D; ++d) FromF32(row[d], y + base + d);
        }
      },
      4);
}

void RopeImpl(const ops::RopeArgs& a) {
  const int64_t D = a.x.dim(2);
  const int64_t rd = a.rotary_dim == 0 ? D : a.rotary_dim;
  std::vector<double> inv_freq(static_cast<size_t>(rd / 2));
  for (size_t j = 0; j < inv_freq.size(); ++j)
    inv_freq[j] = std::pow(static_cast<double>(a.theta), -2.0 * static_cast<double>(j) / static_cast<double>(rd));
  switch (a.x.dtype) {
    case hal::DType::bf16:
      RopeT<hwy::bfloat16_t>(a, inv_freq);
      break;
    case hal::DType::f16:
      RopeT<hwy::float16_t>(a, inv_freq);
      break;
    default:
      RopeT<float>(a, inv_freq);
      break;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace msa::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/kernels.h"

namespace msa::cpu {

HWY_EXPORT(RopeImpl);

void rope(hal::Stream&, const ops::RopeArgs& a) { HWY_DYNAMIC_DISPATCH(RopeImpl)(a); }

}  // namespace msa::cpu
#endif  // HWY_ONCE
