// patch_attention_3d (docs/spec.md): windowed bidirectional attention of the ViT. Each
// window of `window` temporal patches of an item is one dense attention problem per
// head; tasks are (window, head, tile of kPatchRows query tokens), each running the
// shared online-softmax core over the window's keys in tiles of kPatchKeys tokens.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/patch_attention_3d.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backends/cpu/attention_core-inl.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/scratch.h"
#include "hal/dtype.h"
#include "hwy/highway.h"

// Included once per target by foreach_target.h: the plan is defined only the first time.
#ifndef MSA_CPU_PATCH_PLAN_DEFINED
#define MSA_CPU_PATCH_PLAN_DEFINED
namespace msa::cpu {
inline constexpr int64_t kPatchRows = 128;  // query tokens per task
inline constexpr int64_t kPatchKeys = 128;  // keys per converted tile

struct PatchPlan {
  struct Task {
    int64_t t_begin, t_end;  // the window's tokens
    int64_t q_begin, q_end;  // this task's query tokens
    int64_t head;
  };
  hal::DType dtype = hal::DType::f32;
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
  int64_t H = 0, D = 0;
  float scale = 1.0f;
  std::vector<Task> tasks;
};
}  // namespace msa::cpu
#endif  // MSA_CPU_PATCH_PLAN_DEFINED

HWY_BEFORE_NAMESPACE();
namespace msa::cpu {
namespace HWY_NAMESPACE {

template <typename T>
void RunPatchTask(const PatchPlan& p, const PatchPlan::Task& task) {
  const size_t D = static_cast<size_t>(p.D), H = static_cast<size_t>(p.H);
  const size_t N = hn::Lanes(DF());
  RowGroupState g;
  g.D = D;
  g.rows = static_cast<size_t>(task.q_end - task.q_begin);
  g.rpad = (g.rows + 15) / 16 * 16;
  g.qt = scratch_floats(0, D * g.rpad);
  g.o = scratch_floats(1, D * g.rpad);
  float* ml = scratch_floats(2, 3 * g.rpad);
  g.m = ml;
  g.l = ml + g.rpad;
  g.lim = ml + 2 * g.rpad;
  g.s = scratch_floats(3, kPatchKeys * kTileVecs * N);
  float* ktile = scratch_floats(4, kPatchKeys * D);
  float* vtile = scratch_floats(5, kPatchKeys * D);
  float* vbad = scratch_floats(6, kPatchKeys);

  const T* q = static_cast<const T*>(p.q);
  const size_t h = static_cast<size_t>(task.head);
  for (size_t r = 0; r < g.rpad; ++r) {
    const T* qrow = q + ((static_cast<size_t>(task.q_begin) + r) * H + h) * D;
    for (size_t d = 0; d < D; ++d) g.qt[d * g.rpad + r] = r < g.rows ? ToF32(qrow[d]) * p.scale : 0.0f;
    g.lim[r] = std::numeric_limits<float>::max();  // bidirectional: no mask
  }
  ResetRows(g);
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  for (int64_t j0 = task.t_begin; j0 < task.t_end; j0 += kPatchKeys) {
    const size_t nk = static_cast<size_t>(std::min(kPatchKeys, task.t_end - j0));
    const size_t base = (static_cast<size_t>(j0) * H + h) * D;
    ConvertRows(k + base, H * D, nk, D, nullptr, ktile);
    ConvertRows(v + base, H * D, nk, D, nullptr, vtile);
    g.vbad = ScrubValues(vtile, nk, D, vbad);
    AttendTile(g, ktile, vtile, nk, static_cast<float>(j0 - task.t_begin));
  }
  T* out = static_cast<T*>(p.out);
  for (size_t r = 0; r < g.rows; ++r) {
    const size_t row = (static_cast<size_t>(task.q_begin) + r) * H + h;
    FinishRow(g.o + r, g.rpad, D, g.m[r], g.l[r], out + row * D, p.lse + row);
  }
}

void RunPatchPlan(const PatchPlan& p) {
  parallel_for(static_cast<int64_t>(p.tasks.size()), [&](int64_t i) {
    const PatchPlan::Task& t = p.tasks[static_cast<size_t>(i)];
    switch (p.dtype) {
      case hal::DType::bf16:
        RunPatchTask<hwy::bfloat16_t>(p, t);
        break;
      case hal::DType::f16:
        RunPatchTask<hwy::float16_t>(p, t);
        break;
      default:
        RunPatchTask<float>(p, t);
        break;
    }
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace msa::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <string>

#include "backends/cpu/kernels.h"
#include "hal/error.h"

namespace msa::cpu {

HWY_EXPORT(RunPatchPlan);

void patch_attention_3d(hal::Stream&, const ops::PatchAttention3dArgs& a) {
  const char* op = "patch_attention_3d";
  const int64_t N = a.q.dim(0), H = a.q.dim(1), D = a.q.dim(2);
  MSA_CHECK_ARG(a.window >= 1, op, "window", "must be >= 1, got " + std::to_string(a.window));
  const int64_t n_items = a.items.present() ? a.items.dim(0) : 0;
  const int32_t* items = n_items > 0 ? a.items.data<const int32_t>() : nullptr;
  PatchPlan p;
  p.dtype = a.q.dtype;
  p.q = a.q.data<const void>();
  p.k = a.k.data<const void>();
  p.v = a.v.data<const void>();
  p.out = a.out.data<void>();
  p.lse = a.lse.data<float>();
  p.H = H;
  p.D = D;
  p.scale = a.scale != 0.0f ? a.scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  int64_t first = 0;
  for (int64_t i = 0; i < n_items; ++i) {
    const int64_t gt = items[i * 3], gh = items[i * 3 + 1], gw = items[i * 3 + 2];
    const std::string at = "items[" + std::to_string(i) + "]";
    MSA_CHECK_ARG(gt >= 1 && gh >= 1 && gw >= 1, op, "items",
                  at + " = {" + std::to_string(gt) + ", " + std::to_string(gh) + ", " + std::to_string(gw) +
                      "} has a grid dimension < 1");
    const int64_t hw = gh * gw;
    MSA_CHECK_ARG(gt <= (N - first) / hw, op, "items",
                  at + " needs more tokens than the " + std::to_string(N) + " in q");
    for (int64_t w0 = 0; w0 < gt; w0 += a.window) {
      const int64_t t0 = first + w0 * hw, t1 = first + std::min<int64_t>(gt, w0 + a.window) * hw;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t q0 = t0; q0 < t1; q0 += kPatchRows)
          p.tasks.push_back({t0, t1, q0, std::min(q0 + kPatchRows, t1), h});
    }
    first += gt * hw;
  }
  MSA_CHECK_ARG(first == N, op, "items",
                "describe " + std::to_string(first) + " tokens but q has " + std::to_string(N));
  HWY_DYNAMIC_DISPATCH(RunPatchPlan)(p);
}

}  // namespace msa::cpu
#endif  // HWY_ONCE
