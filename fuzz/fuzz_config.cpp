// Fuzzes model::load_config (config.json): any byte string must either give a Config
// that passes validate() or raise msa::Error; never another exception, a crash or a
// sanitizer report (UBSan catches overflowing int/float conversions of huge fields).
// An accepted config must survive to_json -> parse_config unchanged.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "hal/error.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/msa_fuzz_config_" + std::to_string(getpid()) +
           ".json";
  }();
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!f) std::abort();
  }
  msa::model::Config c;
  try {
    c = msa::model::load_config(path);
  } catch (const msa::Error&) {
    return 0;
  }
  msa::model::validate(c);  // accepted configs are valid (throws -> reported as a crash)
  const nlohmann::json j = msa::model::to_json(c);
  const nlohmann::json j2 = msa::model::to_json(msa::model::parse_config(j));
  if (j != j2) std::abort();
  return 0;
}
