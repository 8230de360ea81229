// Reading and writing `.safetensors` files (the Hugging Face weight format): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape, data_offsets}} with an
// optional "__metadata__" string map, then the raw little-endian tensor bytes.
// Supported dtypes: F32, F16, BF16, I32, F8_E4M3. Any malformed file (truncated, bad
// JSON, unknown dtype, negative dims, size overflow, offsets out of range, overlapping
// or not matching the shape) raises msa::Error naming the file and the problem.
#pragma once
#include <map>
#include <string>

#include "hal/export.h"
#include "hal/host_tensor.h"

namespace msa::hal {

// Reads every tensor of the file at `path`, keyed by name. When `metadata` is given it
// receives the "__metadata__" map (empty when the file has none).
MSA_API std::map<std::string, HostTensor> read_safetensors(const std::string& path,
                                                           std::map<std::string, std::string>* metadata = nullptr);

// Writes `tensors` (in name order, densely packed, header padded to 8 bytes) and the
// optional metadata to `path`, replacing the file whole (hal::AtomicFile: a reader or a
// crash sees the old file or the new one). Throws msa::Error when any write fails or a
// tensor's byte size does not match its shape; the old file is then left as it was.
MSA_API void write_safetensors(const std::string& path, const std::map<std::string, HostTensor>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

}  // namespace msa::hal
