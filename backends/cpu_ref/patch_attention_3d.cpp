// patch_attention_3d: the ViT's windowed "3D" attention (docs/spec.md,
// "Op: patch_attention_3d"). Tokens are packed item by item; each item is cut into windows
// of `window` temporal patches (grid_h * grid_w tokens each), and every token attends
// bidirectionally to exactly the tokens of its window. Scalar, one thread, double
// accumulation.
#include <algorithm>
#include <string>
#include <vector>

#include "backends/cpu_ref/attention_common.h"
#include "backends/cpu_ref/common.h"
#include "backends/cpu_ref/kernels.h"

namespace msa::cpu_ref {

void patch_attention_3d(hal::Stream&, const ops::PatchAttention3dArgs& a) {
  const char* op = "patch_attention_3d";
  const int64_t N = a.q.dim(0), H = a.q.dim(1), D = a.q.dim(2);
  MSA_CHECK_ARG(a.window >= 1, op, "window", "must be >= 1, got " + std::to_string(a.window));
  const int64_t n_items = a.items.present() ? a.items.dim(0) : 0;
  const int32_t* items = n_items > 0 ? a.items.data<const int32_t>() : nullptr;

  // Validate every item and the total before any work.
  std::vector<int64_t> first(static_cast<size_t>(n_items) + 1, 0);
  for (int64_t i = 0; i < n_items; ++i) {
    const int64_t gt = items[i * 3], gh = items[i * 3 + 1], gw = items[i * 3 + 2];
    const std::string at = "items[" + std::to_string(i) + "]";
    MSA_CHECK_ARG(gt >= 1 && gh >= 1 && gw >= 1, op, "items",
                  at + " = {" + std::to_string(gt) + ", " + std::to_string(gh) + ", " +
                      std::to_string(gw) + "} has a grid dimension < 1");
    // Each factor is < 2^31, so gh * gw fits; bound before the third multiply.
    const int64_t hw = gh * gw;
    const int64_t left = N - first[static_cast<size_t>(i)];
    MSA_CHECK_ARG(gt <= left / hw, op, "items",
                  at + " needs more tokens than the " + std::to_string(N) + " in q");
    first[static_cast<size_t>(i) + 1] = first[static_cast<size_t>(i)] + gt * hw;
  }
  MSA_CHECK_ARG(first.back() == N, op, "items",
                "describe " + std::to_string(first.back()) + " tokens but q has " +
                    std::to_string(N));
  const double scale = resolve_scale(a.scale, D);

  KvRows kv;
  kv.D = D;
  AttendScratch ws;
  for (int64_t i = 0; i < n_items; ++i) {
    const int64_t gt = items[i * 3], hw = int64_t{items[i * 3 + 1]} * items[i * 3 + 2];
    for (int64_t w0 = 0; w0 < gt; w0 += a.window) {
      const int64_t t_begin = first[static_cast<size_t>(i)] + w0 * hw;
      const int64_t t_end = first[static_cast<size_t>(i)] + std::min(gt, w0 + a.window) * hw;
      for (int64_t h = 0; h < H; ++h) {
        kv.clear();
        for (int64_t t = t_begin; t < t_end; ++t)
          kv.append(a.k, (t * H + h) * D, a.v, (t * H + h) * D, 0);
        // Every row has pos 0 and the limit is 0: no mask inside the window.
        for (int64_t t = t_begin; t < t_end; ++t)
          attend_heads(a.q, t, h, 1, kv, 0, scale, a.out, a.lse, ws);
      }
    }
  }
}

}  // namespace msa::cpu_ref
