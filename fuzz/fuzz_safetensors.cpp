// Fuzzes hal::read_safetensors: any byte string written to a file must either load or
// raise msa::Error; never crash, hang, over-allocate or trip a sanitizer. What loads must
// be self-consistent (byte size == numel * dtype size) and survive a write/read round trip
// unchanged.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "hal/error.h"
#include "hal/safetensors.h"

namespace {

std::string temp_path(const char* tag) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/msa_fuzz_st_" + std::to_string(getpid()) + "_" +
         tag + ".safetensors";
}

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!f) std::abort();  // the harness itself failed, not the reader
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string in = temp_path("in"), back = temp_path("back");
  write_file(in, data, size);
  std::map<std::string, msa::hal::HostTensor> tensors;
  std::map<std::string, std::string> meta;
  try {
    tensors = msa::hal::read_safetensors(in, &meta);
  } catch (const msa::Error&) {
    return 0;  // rejected with a message: the expected outcome for most inputs
  }
  for (const auto& [name, t] : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) {
      if (d < 0) std::abort();
      n *= d;
    }
    if (t.numel() != n || t.bytes.size() != static_cast<size_t>(n) * msa::hal::dtype_size(t.dtype)) std::abort();
  }
  // Round trip: what was read writes and reads back identically.
  msa::hal::write_safetensors(back, tensors, meta);
  std::map<std::string, std::string> meta2;
  const auto again = msa::hal::read_safetensors(back, &meta2);
  if (meta2 != meta || again.size() != tensors.size()) std::abort();
  for (const auto& [name, t] : tensors) {
    const auto it = again.find(name);
    if (it == again.end() || it->second.dtype != t.dtype || it->second.shape != t.shape || it->second.bytes != t.bytes)
      std::abort();
  }
  return 0;
}
