#include "model/video.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>

#include "hal/atomic_file.h"
#include "hal/error.h"

namespace msa::model {
namespace {

// CLIP / Qwen2-VL pixel normalisation.
constexpr float kMean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
constexpr float kStd[3] = {0.26862954f, 0.26130258f, 0.27577711f};

// Next whitespace-separated header token of a PPM file, skipping '#' comments.
std::string ppm_token(std::istream& in) {
  std::string tok;
  int ch;
  while ((ch = in.get()) != EOF) {
    if (ch == '#') {
      while ((ch = in.get()) != EOF && ch != '\n') {
      }
      continue;
    }
    if (std::isspace(ch)) {
      if (!tok.empty()) break;
      continue;
    }
    tok.push_back(static_cast<char>(ch));
  }
  return tok;
}

int ppm_int(std::istream& in, const std::string& path, const char* what) {
  const std::string t = ppm_token(in);
  try {
    size_t used = 0;
    const long v = std::stol(t, &used);
    if (used == t.size() && v > 0 && v < 65536) return static_cast<int>(v);
  } catch (const std::exception&) {
  }
  throw Error("frames: '" + path + "': bad PPM " + what + " '" + t + "'");
}

}  // namespace

void check_video_size(int64_t frames, int64_t height, int64_t width, const std::string& arg) {
  // Each factor is below 2^31: the products are checked by division, never overflowing.
  const uint64_t pixels = kMaxVideoBytes / 3;
  MSA_CHECK_ARG(frames >= 1 && height >= 1 && width >= 1 &&
                    static_cast<uint64_t>(height) <= pixels / static_cast<uint64_t>(width) &&
                    static_cast<uint64_t>(frames) <= pixels / static_cast<uint64_t>(height * width),
                "video", arg,
                std::to_string(frames) + " frames of " + std::to_string(width) + "x" + std::to_string(height) +
                    " pixels are more than the " + std::to_string(kMaxVideoBytes >> 20) +
                    " MiB of RGB a video may have");
}

Video synthetic_video(int frames, int height, int width, uint64_t seed) {
  MSA_CHECK_ARG(frames >= 1 && height >= 1 && width >= 1, "video", "--video",
                "frames, height and width must all be >= 1");
  check_video_size(frames, height, width, "--video");
  Video v{frames, height, width, {}};
  v.rgb.resize(static_cast<size_t>(frames) * height * width * 3);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  size_t i = 0;
  for (int f = 0; f < frames; ++f)
    for (int y = 0; y < height; ++y)
      for (int x = 0; x < width; ++x)
        for (int c = 0; c < 3; ++c) {
          s ^= s << 13, s ^= s >> 7, s ^= s << 17;  // xorshift64 noise
          const double wave = std::sin(0.07 * (x + 3 * f) + 0.05 * y * (c + 1) + c);
          const double val = 128.0 + 90.0 * wave + static_cast<double>(s % 32) - 16.0;
          v.rgb[i++] = static_cast<uint8_t>(std::clamp(val, 0.0, 255.0));
        }
  return v;
}

Video load_ppm_frames(const std::vector<std::string>& paths) {
  MSA_CHECK_ARG(!paths.empty(), "frames", "paths", "no frame files given");
  Video v;
  for (const auto& path : paths) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("frames: cannot open '" + path + "'");
    if (ppm_token(in) != "P6") throw Error("frames: '" + path + "' is not a binary PPM (P6)");
    const int w = ppm_int(in, path, "width"), h = ppm_int(in, path, "height");
    if (ppm_int(in, path, "maxval") != 255) throw Error("frames: '" + path + "': only maxval 255 is supported");
    if (v.frames == 0) {
      v.width = w;
      v.height = h;
    } else if (w != v.width || h != v.height) {
      throw Error("frames: '" + path + "' is " + std::to_string(w) + "x" + std::to_string(h) + ", the first frame " +
                  std::to_string(v.width) + "x" + std::to_string(v.height));
    }
    check_video_size(v.frames + 1, h, w, "--frames");
    const size_t n = static_cast<size_t>(w) * h * 3;
    const size_t off = v.rgb.size();
    v.rgb.resize(off + n);
    in.read(reinterpret_cast<char*>(v.rgb.data() + off), static_cast<std::streamsize>(n));
    if (static_cast<size_t>(in.gcount()) != n) throw Error("frames: '" + path + "' is truncated");
    ++v.frames;
  }
  return v;
}

void save_ppm_frame(const Video& v, int frame, const std::string& path) {
  const size_t n = static_cast<size_t>(v.width) * v.height * 3;
  hal::AtomicFile out(path, "frames");
  out.write("P6\n" + std::to_string(v.width) + " " + std::to_string(v.height) + "\n255\n");
  out.write(v.rgb.data() + n * frame, n);
  out.commit();
}

VisionInput patchify(const Video& v, const VisionConfig& c) {
  const int P = c.patch_size, Tp = c.temporal_patch_size, m = c.spatial_merge_size;
  const int unit = P * m;
  if (v.frames < 1 || v.height < unit || v.width < unit)
    throw Error("video: " + std::to_string(v.width) + "x" + std::to_string(v.height) + " with " +
                std::to_string(v.frames) + " frames is smaller than one " + std::to_string(unit) + "x" +
                std::to_string(unit) + " merge block");
  const int gh = v.height / unit * m, gw = v.width / unit * m;
  const int gt = (v.frames + Tp - 1) / Tp;
  const int y0 = (v.height - gh * P) / 2, x0 = (v.width - gw * P) / 2;  // center crop
  VisionInput in;
  in.grid = {gt, gh, gw};
  const int64_t N = static_cast<int64_t>(gt) * gh * gw;
  in.patches = hal::HostTensor(hal::DType::f32, {N, c.patch_dim()});
  in.pos.resize(static_cast<size_t>(N) * 3);
  float* out = in.patches.data<float>();
  int64_t n = 0;
  for (int t = 0; t < gt; ++t)
    for (int br = 0; br < gh / m; ++br)
      for (int bc = 0; bc < gw / m; ++bc)
        for (int dy = 0; dy < m; ++dy)
          for (int dx = 0; dx < m; ++dx, ++n) {
            const int row = br * m + dy, col = bc * m + dx;
            in.pos[n * 3 + 0] = t % c.window;  // M3 restarts t in every window
            in.pos[n * 3 + 1] = row;
            in.pos[n * 3 + 2] = col;
            float* p = out + n * c.patch_dim();
            for (int ch = 0; ch < 3; ++ch)
              for (int ft = 0; ft < Tp; ++ft) {
                const int f = std::min(t * Tp + ft, v.frames - 1);
                for (int py = 0; py < P; ++py)
                  for (int px = 0; px < P; ++px) {
                    const size_t src =
                        ((static_cast<size_t>(f) * v.height + y0 + row * P + py) * v.width + x0 + col * P + px) * 3 +
                        ch;
                    *p++ = (v.rgb[src] / 255.0f - kMean[ch]) / kStd[ch];
                  }
              }
          }
  return in;
}

int64_t vision_token_count(const VisionInput& in, const VisionConfig& c) { return in.num_patches() / c.merge_tokens(); }

}  // namespace msa::model
