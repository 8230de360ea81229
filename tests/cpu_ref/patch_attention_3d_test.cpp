// patch_attention_3d of cpu-ref against the full N x N logit matrix masked by window
// membership (each token's (item, window) computed by enumerating the packing).
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "tests/cpu_ref/ref_util.h"

namespace msa::cpu_ref_test {
namespace {

using Items = std::vector<std::array<int32_t, 3>>;

struct PatchResult {
  std::vector<float> out, lse;
};

PatchResult run_patch(const Items& items, int window, int H, int D, DType t, const std::vector<float>& q,
                      const std::vector<float>& k, const std::vector<float>& v, int64_t N) {
  Ref ref;
  ops::PatchAttention3dArgs a;
  a.q = ref.make(t, {N, H, D}, q);
  a.k = ref.make(t, {N, H, D}, k);
  a.v = ref.make(t, {N, H, D}, v);
  std::vector<int32_t> flat;
  for (const auto& it : items) flat.insert(flat.end(), it.begin(), it.end());
  a.items = ref.make_i32({static_cast<int64_t>(items.size()), 3}, flat);
  a.window = window;
  a.out = ref.out(t, {N, H, D});
  a.lse = ref.out(DType::f32, {N, H});
  ops::patch_attention_3d(ref.device(), a);
  return {ref.get(a.out), ref.get(a.lse)};
}

// Window id of every token: item index * 1e6 + temporal patch / window.
std::vector<int64_t> window_ids(const Items& items, int window) {
  std::vector<int64_t> id;
  for (size_t i = 0; i < items.size(); ++i)
    for (int tp = 0; tp < items[i][0]; ++tp)
      for (int p = 0; p < items[i][1] * items[i][2]; ++p) id.push_back(static_cast<int64_t>(i) * 1000000 + tp / window);
  return id;
}

void oracle(const Items& items, int window, int H, int D, const std::vector<float>& q, const std::vector<float>& k,
            const std::vector<float>& v, std::vector<double>& out, std::vector<double>& lse) {
  const std::vector<int64_t> id = window_ids(items, window);
  const size_t N = id.size();
  const double scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  out.assign(N * H * D, 0.0);
  lse.assign(N * H, 0.0);
  std::vector<double> logits(N), values(N * D), row;
  for (int h = 0; h < H; ++h)
    for (size_t t = 0; t < N; ++t) {
      for (size_t u = 0; u < N; ++u) {
        double dot = 0;
        for (int d = 0; d < D; ++d) {
          dot += double(q[(t * H + h) * D + d]) * k[(u * H + h) * D + d];
          values[u * D + d] = v[(u * H + h) * D + d];
        }
        logits[u] = id[t] == id[u] ? scale * dot : -kInf;
      }
      lse[t * H + h] = softmax_row(logits, values, D, row);
      std::copy(row.begin(), row.end(), out.begin() + (t * H + h) * D);
    }
}

TEST(CpuRefPatchAttention3d, MatchesMaskedFullMatrix) {
  // A 5-temporal-patch video (windows 4 + 1 at window 4), an image, a tall thin video and
  // a short video shorter than one window.
  const Items items = {{5, 2, 3}, {1, 2, 2}, {8, 1, 1}, {3, 1, 2}};
  const int64_t N = 30 + 4 + 8 + 6;
  const int H = 2, D = 8;
  for (DType t : kActDTypes)
    for (int window : {4, 2, 1, 10}) {
      const auto q = random_values(N * H * D, t, 1 + window, -2.f, 2.f);
      const auto k = random_values(N * H * D, t, 2 + window, -2.f, 2.f);
      const auto v = random_values(N * H * D, t, 3 + window);
      const PatchResult r = run_patch(items, window, H, D, t, q, k, v, N);
      std::vector<double> want_out, want_lse;
      oracle(items, window, H, D, q, k, v, want_out, want_lse);
      expect_attention(r.out, r.lse, want_out, want_lse, D, t,
                       std::string(hal::dtype_name(t)) + " window=" + std::to_string(window));
    }
}

TEST(CpuRefPatchAttention3d, WindowsAreIsolated) {
  // Changing the values of window 1 of item 0 leaves window 0 and item 1 untouched.
  const Items items = {{4, 1, 2}, {2, 2, 1}};
  const int64_t N = 8 + 4;
  const int H = 1, D = 4;
  const auto q = random_values(N * D, DType::f32, 1), k = random_values(N * D, DType::f32, 2);
  auto v = random_values(N * D, DType::f32, 3);
  const PatchResult a = run_patch(items, 2, H, D, DType::f32, q, k, v, N);
  for (int64_t t = 4; t < 8; ++t)
    for (int d = 0; d < D; ++d) v[t * D + d] += 5.0f;
  const PatchResult b = run_patch(items, 2, H, D, DType::f32, q, k, v, N);
  for (int64_t t = 0; t < N; ++t)
    for (int d = 0; d < D; ++d) {
      const bool in_changed_window = t >= 4 && t < 8;
      if (in_changed_window)
        EXPECT_NEAR(b.out[t * D + d], a.out[t * D + d] + 5.0f, 1e-5);
      else
        EXPECT_EQ(b.out[t * D + d], a.out[t * D + d]) << "token " << t;
    }
}

}  // namespace
}  // namespace msa::cpu_ref_test
