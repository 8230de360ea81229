// model video input: frames in host memory (synthetic or read from .ppm files) and their
// cut into ViT patches, in the order and with the positions the vision encoder expects.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "hal/export.h"
#include "hal/host_tensor.h"
#include "model/config.h"

namespace msa::model {

// RGB frames, 8 bits per channel, [frames][height][width][3].
struct Video {
  int frames = 0, height = 0, width = 0;
  std::vector<uint8_t> rgb;
};

// A deterministic moving pattern with seeded noise (frames >= 1, sizes >= 1).
MSA_API Video synthetic_video(int frames, int height, int width, uint64_t seed);

// Largest video (RGB bytes, all frames) msa reads or makes: 256 MiB, hundreds of frames.
constexpr uint64_t kMaxVideoBytes = uint64_t{256} << 20;
// Throws msa::Error naming `arg` when a video of this size is past kMaxVideoBytes.
MSA_API void check_video_size(int64_t frames, int64_t height, int64_t width, const std::string& arg);
// Reads binary PPM (P6, maxval 255) frames of equal size; an image is one frame.
// Throws msa::Error naming the file on a malformed or mismatched file.
MSA_API Video load_ppm_frames(const std::vector<std::string>& paths);
// Writes one frame as binary PPM (P6).
MSA_API void save_ppm_frame(const Video& v, int frame, const std::string& path);

// One video cut into patches.
struct VisionInput {
  hal::HostTensor patches;        // [N][patch_dim] f32, CLIP-normalised pixels
  std::array<int32_t, 3> grid{};  // {grid_t, grid_h, grid_w} in patches
  std::vector<int32_t> pos;       // [N][3] rope_3d positions (t within its window, row, col)
  int64_t num_patches() const { return patches.shape.empty() ? 0 : patches.shape[0]; }
};

// Cuts `v` into temporal_patch x patch x patch x 3 patches (the last frame repeated to fill
// the last temporal patch; height and width center-cropped to multiples of
// patch * spatial_merge). Patches of one temporal patch are in merge-block order
// (spatial_merge x spatial_merge neighbours consecutive); a patch's pixels are ordered
// (channel, frame, row, col) like the Conv3d weight. Throws msa::Error when the video
// is smaller than one merge block.
MSA_API VisionInput patchify(const Video& v, const VisionConfig& c);

// Text tokens the vision encoder makes from `in`: N / spatial_merge^2.
MSA_API int64_t vision_token_count(const VisionInput& in, const VisionConfig& c);

}  // namespace msa::model
