// patch_attention_3d_backward (docs/training.md) in f32 on the oneTBB arena, with the
// tiles of backward_core-inl.h: one task per (window, head) owns every gradient row it
// writes; key tiles outer, query batches inner, dq summed over the key tiles in order.
// Deterministic for any thread count. Windows are validated by the reference's checks.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/patch_attention_3d_backward.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cpu/backward_core-inl.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/scratch.h"
#include "backends/cpu_ref/patch_windows.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace msa::cpu {
namespace HWY_NAMESPACE {

// patch_attention_3d_backward over one (window, head) per task. q, k, v, dout: [N][H][D]
// f32; delta [N][H].
void PatchBackward(const std::vector<cpu_ref::PatchWindow>& windows, int64_t H, int64_t D, float scale, const float* q,
                   const float* k, const float* v, const float* dout, const float* lse, const float* delta, float* dq,
                   float* dk, float* dv) {
  const size_t Dz = static_cast<size_t>(D), ld = static_cast<size_t>(H * D);
  parallel_for(static_cast<int64_t>(windows.size()) * H, [&](int64_t task) {
    const cpu_ref::PatchWindow& w = windows[static_cast<size_t>(task / H)];
    const int64_t h = task % H;
    const size_t n = static_cast<size_t>(w.t_end - w.t_begin);
    const size_t base = static_cast<size_t>(w.t_begin * H + h) * Dz;  // row i of the window at base + i * ld
    for (size_t i = 0; i < n; ++i)
      for (float* g : {dq, dk, dv}) std::fill(g + base + i * ld, g + base + i * ld + Dz, 0.0f);
    RowBatch b(Dz);
    // The key tile's rows, contiguous and zero-padded to whole vectors (for dq's dS K).
    float* krows = scratch_floats(4, PadKeys(kBackwardRows) * Dz);
    float* dqb = scratch_floats(5, kBackwardRows * Dz);
    for (size_t j0 = 0; j0 < n; j0 += kBackwardRows) {
      const size_t nk = std::min(kBackwardRows, n - j0);
      BackwardTile tile;
      LoadKeyTile(tile, Dz, nk, k + base + j0 * ld, v + base + j0 * ld, ld, scratch_floats(0, KeyTileFloats(Dz, nk)));
      for (size_t j = 0; j < nk; ++j)
        std::copy(k + base + (j0 + j) * ld, k + base + (j0 + j) * ld + Dz, krows + j * Dz);
      std::fill(krows + nk * Dz, krows + tile.kpad * Dz, 0.0f);
      for (size_t r0 = 0; r0 < n; r0 += kBackwardRows) {
        b.rows = 0;
        const size_t nr = std::min(kBackwardRows, n - r0);
        for (size_t i = r0; i < r0 + nr; ++i) {
          const size_t row = (base + i * ld) / Dz;
          b.add(q + base + i * ld, dout + base + i * ld, Dz, scale, lse[row], delta[row], static_cast<int64_t>(nk));
        }
        BackwardBatch(tile, b.qs, b.go, b.rows, b.lse, b.delta, b.nvis);
        const size_t hi = static_cast<size_t>(*std::max_element(b.nvis, b.nvis + nr));
        RowsTimesKeys(tile.dp, tile.kpad, nr, hi == 0 ? 0 : PadKeys(hi), krows, Dz, dqb);
        for (size_t i = 0; i < nr; ++i) {
          float* dst = dq + base + (r0 + i) * ld;
          for (size_t d = 0; d < Dz; ++d) dst[d] += dqb[i * Dz + d];
        }
      }
      AddTransposed(tile.dkt, tile.kpad, nk, Dz, dk + base + j0 * ld, ld);
      AddTransposed(tile.dvt, tile.kpad, nk, Dz, dv + base + j0 * ld, ld);
    }
    for (size_t i = 0; i < n; ++i)
      for (size_t d = 0; d < Dz; ++d) dq[base + i * ld + d] *= scale;
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace msa::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backends/cpu/backward_inputs.h"
#include "backends/cpu/f32_rows.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu_ref/common.h"

namespace msa::cpu {

HWY_EXPORT(PatchBackward);

void patch_attention_3d_backward(hal::Stream&, const ops::PatchAttention3dBackwardArgs& a) {
  const int64_t N = a.q.dim(0), H = a.q.dim(1), D = a.q.dim(2);
  const auto windows = cpu_ref::checked_windows("patch_attention_3d_backward", a.items, a.window, N);
  const float scale = static_cast<float>(cpu_ref::resolve_scale(a.scale, D));
  const std::vector<float> q = to_f32(a.q, D), k = to_f32(a.k, D), v = to_f32(a.v, D), dout = to_f32(a.dout, D),
                           lse = to_f32(a.lse, H);
  const std::vector<float> delta = row_dots(dout, to_f32(a.out, D), D);
  HWY_DYNAMIC_DISPATCH(PatchBackward)
  (windows, H, D, scale, q.data(), k.data(), v.data(), dout.data(), lse.data(), delta.data(), a.dq.data<float>(),
   a.dk.data<float>(), a.dv.data<float>());
}

}  // namespace msa::cpu
#endif  // HWY_ONCE
