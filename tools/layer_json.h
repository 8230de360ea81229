// The "config" object of the layer commands' JSON reports (msa layer, msa layer-backward;
// read by bench/layer_sweep.py): the LayerConfig fields every report names.
#pragma once
#include <nlohmann/json.hpp>

#include "hal/dtype.h"
#include "tools/layer_bench.h"

namespace msa::cli {

inline nlohmann::json layer_config_json(const LayerConfig& c) {
  return {{"Hq", c.Hq},
          {"Hkv", c.Hkv},
          {"D", c.D},
          {"Hi", c.Hi},
          {"Di", c.Di},
          {"Bs", c.Bs},
          {"k", c.k},
          {"Qb", c.Qb},
          {"dtype", hal::dtype_name(c.dtype)},
          {"ki_dtype", hal::dtype_name(c.ki_dtype)}};
}

}  // namespace msa::cli
