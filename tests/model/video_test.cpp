// Patch extraction: merge-block order, pixel layout, rope positions, PPM frames.
#include <gtest/gtest.h>

#include <filesystem>

#include "hal/error.h"
#include "model/video.h"

namespace msa::model {
namespace {

VisionConfig small_vision() {
  VisionConfig v;
  v.hidden_size = 160;
  v.num_heads = 2;
  v.depth = 1;
  v.intermediate_size = 64;
  v.patch_size = 2;  // 2 x 2 pixel patches keep the arithmetic visible
  v.window = 2;
  return v;
}

TEST(ModelVideo, PatchOrderPixelsAndPositions) {
  const VisionConfig v = small_vision();
  // 5 frames of 8 x 12: 3 temporal patches (last frame repeated), 4 x 6 patches.
  const Video vid = synthetic_video(5, 8, 12, 3);
  const VisionInput in = patchify(vid, v);
  EXPECT_EQ(in.grid, (std::array<int32_t, 3>{3, 4, 6}));
  ASSERT_EQ(in.patches.shape, (std::vector<int64_t>{72, 24}));
  // Merge-block order: patch 0..3 = (0,0) (0,1) (1,0) (1,1), then the block to the right.
  const int32_t want_rc[][2] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}, {0, 2}, {0, 3}, {1, 2}};
  for (int n = 0; n < 7; ++n) {
    EXPECT_EQ(in.pos[n * 3 + 1], want_rc[n][0]) << n;
    EXPECT_EQ(in.pos[n * 3 + 2], want_rc[n][1]) << n;
  }
  // Temporal position restarts in every window of 2 temporal patches.
  EXPECT_EQ(in.pos[(24 * 0) * 3], 0);
  EXPECT_EQ(in.pos[(24 * 1) * 3], 1);
  EXPECT_EQ(in.pos[(24 * 2) * 3], 0);
  // Patch 5 of temporal patch 2 is row 0, col 3: its (channel 1, frame 1, y 1, x 0) pixel
  // is frame min(5, 4) = 4 (the repeated last frame), pixel (1, 6), green.
  const float* p = in.patches.data<float>() + (48 + 5) * 24;
  const float px = vid.rgb[((4 * 8 + 1) * 12 + 6) * 3 + 1] / 255.0f;
  EXPECT_FLOAT_EQ(p[1 * 8 + 1 * 4 + 1 * 2 + 0], (px - 0.4578275f) / 0.26130258f);
}

TEST(ModelVideo, CropsToMergeBlocksAndRejectsTinyFrames) {
  const VisionConfig v = small_vision();
  const VisionInput in = patchify(synthetic_video(2, 9, 13, 1), v);  // crops to 8 x 12
  EXPECT_EQ(in.grid, (std::array<int32_t, 3>{1, 4, 6}));
  EXPECT_THROW(patchify(synthetic_video(2, 3, 13, 1), v), Error);
}

TEST(ModelVideo, PpmFramesRoundTrip) {
  namespace fs = std::filesystem;
  const Video v = synthetic_video(2, 6, 10, 5);
  const fs::path dir = fs::temp_directory_path();
  const std::string a = (dir / "msa_model_test_f0.ppm").string(), b = (dir / "msa_model_test_f1.ppm").string();
  save_ppm_frame(v, 0, a);
  save_ppm_frame(v, 1, b);
  const Video l = load_ppm_frames({a, b});
  EXPECT_EQ(l.frames, 2);
  EXPECT_EQ(l.width, 10);
  EXPECT_EQ(l.height, 6);
  EXPECT_EQ(l.rgb, v.rgb);
  save_ppm_frame(synthetic_video(1, 4, 4, 1), 0, b);
  EXPECT_THROW(load_ppm_frames({a, b}), Error);  // size mismatch
  fs::remove(a);
  fs::remove(b);
  EXPECT_THROW(load_ppm_frames({a}), Error);  // missing
}

}  // namespace
}  // namespace msa::model
