// patch_attention_3d: the ViT's windowed "3D" attention (docs/spec.md,
// "Op: patch_attention_3d"). Tokens are packed item by item; each item is cut into windows
// of `window` temporal patches (grid_h * grid_w tokens each), and every token attends
// bidirectionally to exactly the tokens of its window. Scalar, one thread, double
// accumulation.
#include "backends/cpu_ref/attention_common.h"
#include "backends/cpu_ref/common.h"
#include "backends/cpu_ref/kernels.h"
#include "backends/cpu_ref/patch_windows.h"

namespace msa::cpu_ref {

void patch_attention_3d(hal::Stream&, const ops::PatchAttention3dArgs& a) {
  const int64_t N = a.q.dim(0), H = a.q.dim(1), D = a.q.dim(2);
  const auto windows = checked_windows("patch_attention_3d", a.items, a.window, N);
  const double scale = resolve_scale(a.scale, D);

  KvRows kv;
  kv.D = D;
  AttendScratch ws;
  for (const PatchWindow& w : windows) {
    for (int64_t h = 0; h < H; ++h) {
      kv.clear();
      for (int64_t t = w.t_begin; t < w.t_end; ++t) kv.append(a.k, (t * H + h) * D, a.v, (t * H + h) * D, 0);
      // Every row has pos 0 and the limit is 0: no mask inside the window.
      for (int64_t t = w.t_begin; t < w.t_end; ++t) attend_heads(a.q, t, h, 1, kv, 0, scale, a.out, a.lse, ws);
    }
  }
}

}  // namespace msa::cpu_ref
