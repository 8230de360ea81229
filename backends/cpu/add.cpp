// add on Highway: y = a + b in f32, over fixed element chunks in parallel.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/add.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "backends/cpu/elementwise-inl.h"
#include "hwy/highway.h"
#include "ops/args.h"

HWY_BEFORE_NAMESPACE();
namespace msa::cpu {
namespace HWY_NAMESPACE {

void AddImpl(const ops::AddArgs& a) {
  Binary(a.a, a.b, a.y, [](DF, VF x, VF y) { return hn::Add(x, y); });
}

}  // namespace HWY_NAMESPACE
}  // namespace msa::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/kernels.h"

namespace msa::cpu {

HWY_EXPORT(AddImpl);

void add(hal::Stream&, const ops::AddArgs& a) { HWY_DYNAMIC_DISPATCH(AddImpl)(a); }

}  // namespace msa::cpu
#endif  // HWY_ONCE
