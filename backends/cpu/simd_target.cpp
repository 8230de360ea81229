// Reports the Highway target the kernels dispatch to (for probe() and the README).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/simd_target.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace msa::cpu {
namespace HWY_NAMESPACE {

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace msa::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <string>

namespace msa::cpu {

HWY_EXPORT(TargetName);

std::string simd_target() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

}  // namespace msa::cpu
#endif  // HWY_ONCE
