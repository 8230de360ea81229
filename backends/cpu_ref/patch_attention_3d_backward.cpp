// patch_attention_3d_backward: the gradient of patch_attention_3d (docs/training.md) to
// q, k and v within the forward's windows. Scalar, one thread, double accumulation in a
// fixed order.
#include <vector>

#include "backends/cpu_ref/attention_backward.h"
#include "backends/cpu_ref/common.h"
#include "backends/cpu_ref/kernels.h"
#include "backends/cpu_ref/patch_windows.h"

namespace msa::cpu_ref {

void patch_attention_3d_backward(hal::Stream&, const ops::PatchAttention3dBackwardArgs& a) {
  const int64_t N = a.q.dim(0), H = a.q.dim(1), D = a.q.dim(2);
  const auto windows = checked_windows("patch_attention_3d_backward", a.items, a.window, N);
  const double scale = resolve_scale(a.scale, D);

  AttentionGrads grads(a.q.numel(), a.k.numel());
  const BackwardRows rows{a.dout, a.q, a.out, a.lse};
  KvRows kv;
  kv.D = D;
  std::vector<double> scratch;
  for (const PatchWindow& w : windows) {
    for (int64_t h = 0; h < H; ++h) {
      kv.clear();
      for (int64_t t = w.t_begin; t < w.t_end; ++t) kv.append(a.k, (t * H + h) * D, a.v, (t * H + h) * D, 0);
      for (int64_t t = w.t_begin; t < w.t_end; ++t) backward_heads(rows, t, h, 1, kv, 0, scale, grads, scratch);
    }
  }
  grads.store(a.dq, a.dk, a.dv);
}

}  // namespace msa::cpu_ref
