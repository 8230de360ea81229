// swiglu on Highway: y = silu(gate) * up in f32, over fixed element chunks in parallel.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/swiglu.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "backends/cpu/elementwise-inl.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "ops/args.h"

HWY_BEFORE_NAMESPACE();
namespace msa::cpu {
namespace HWY_NAMESPACE {

void SwigluImpl(const ops::SwigluArgs& a) {
  Binary(a.gate, a.up, a.y, [](DF df, VF g, VF u) {
    // silu(g) = g / (1 + exp(-g))
    const VF e = hn::Exp(df, hn::Min(hn::Neg(g), hn::Set(df, 88.0f)));  // no overflow
    return hn::Mul(hn::Div(g, hn::Add(hn::Set(df, 1.0f), e)), u);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace msa::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/kernels.h"

namespace msa::cpu {

HWY_EXPORT(SwigluImpl);

void swiglu(hal::Stream&, const ops::SwigluArgs& a) { HWY_DYNAMIC_DISPATCH(SwigluImpl)(a); }

}  // namespace msa::cpu
#endif  // HWY_ONCE
