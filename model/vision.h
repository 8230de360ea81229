// model::VisionEncoder: the ViT of docs/model-spec.md. Patches (model/video.h) -> patch
// projection (matmul) -> pre-LayerNorm -> depth x [LayerNorm, qkv, rope_3d on q and k,
// patch_attention_3d (windows of `window` temporal patches), out-proj, residual;
// LayerNorm, GELU MLP, residual] -> LayerNorm -> spatial merge (each merge block's
// patches concatenated, then Linear-GELU-Linear to the text hidden size).
#pragma once
#include "hal/device.h"
#include "hal/export.h"
#include "model/config.h"
#include "model/device_weights.h"
#include "model/op_runner.h"
#include "model/video.h"
#include "model/workspace.h"

namespace msa::model {

class MSA_API VisionEncoder {
 public:
  // `weights`, `ws` and `run` must outlive the encoder; all on one device.
  VisionEncoder(const Config& config, const DeviceWeights& weights, Workspace& ws, OpRunner& run);
  // Encodes one video: returns its vision tokens [N / merge^2][hidden_size] in the
  // activation dtype, in a new buffer.
  hal::Device::Owned encode(const VisionInput& in);

 private:
  const Config& c_;
  const DeviceWeights& w_;
  Workspace& ws_;
  OpRunner& run_;
};

}  // namespace msa::model
