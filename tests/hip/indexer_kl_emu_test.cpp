// indexer_kl's portable kernels (backends/cuda/kernels/portable/indexer_kl*.cu*) in the CPU
// emulation, waves 64 and 32, against cpu-ref on the tile shapes the case library does
// not reach: the narrow gradient tile (Di <= 32), head dims that are not a multiple of 4
// (element-wise row loads, a last dim chunk shorter than the tile), block sizes below
// and above the 64-slot key chunk (a last chunk cut short), and a query group larger than
// a tile of rows (the target summed over head chunks).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "check/set_builders.h"
#include "hal/registry.h"
#include "tests/hip/emu/emu_device.h"

namespace msa::cases {
namespace {

using sets::attn;
using sets::kBF16;
using sets::kF32;
using sets::KlStage;
using sets::SelectionMode;

struct Shape {
  const char* what;
  AttnParams p;
  KlStage stage;
};

std::vector<Shape> shapes() {
  std::vector<Shape> s;
  const sets::Lens mixed{{1, 40, 7}, {90, 200, 7}};
  for (KlStage st : {KlStage::sparse, KlStage::dense}) {
    AttnParams p = attn(mixed, 8, 4, 32, 64, 1, 2, kF32);
    p.Di = 32;
    p.ki_dtype = kF32;
    s.push_back({"Di = 32 (narrow gradient tile)", p, st});
    p = attn(mixed, 4, 2, 34, 64, 4, 2, kBF16);
    p.Di = 70;
    s.push_back({"D = 34, Di = 70 (element-wise row loads, short last dim chunk)", p, st});
    s.push_back({"Bs = 16 (one short key chunk)", attn(mixed, 4, 2, 64, 16, 1, 5, kBF16), st});
    s.push_back({"Bs = 160 (three key chunks, the last short)", attn(mixed, 4, 2, 64, 160, 1, 2, kBF16), st});
    s.push_back({"G = 40 (two head chunks of the target tile)", attn(mixed, 40, 1, 64, 64, 1, 2, kBF16), st});
    s.push_back({"G = 20 shared over 2 KV heads", attn(mixed, 40, 2, 64, 64, 1, 2, kBF16, SelectionMode::shared), st});
  }
  return s;
}

class IndexerKlEmu : public ::testing::TestWithParam<int> {};

TEST_P(IndexerKlEmu, TileShapesMatchReference) {
  auto dev = GetParam() == 64 ? emu64::make_emu_device() : emu32::make_emu_device();
  auto ref = hal::create_device("cpu-ref");
  for (const Shape& sh : shapes()) {
    for (bool with_dkl : {false, true}) {
      const auto c = indexer_kl_case(sh.p, sh.stage, with_dkl);
      const CheckResult r = c->check(*dev, *ref);
      EXPECT_FALSE(r.skipped) << sh.what << " [" << c->vars() << "]: " << r.message;
      EXPECT_TRUE(r.passed) << sh.what << " [" << c->vars() << "] on " << dev->name() << ": " << r.message;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Waves, IndexerKlEmu, ::testing::Values(64, 32),
                         [](const ::testing::TestParamInfo<int>& i) { return "wave" + std::to_string(i.param); });

}  // namespace
}  // namespace msa::cases
