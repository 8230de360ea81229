// .safetensors reader/writer. The header is validated completely (dtypes, shapes,
// offsets inside the data section, no overlaps, sizes matching shapes) before any tensor
// bytes are read; tensors are then read straight into their HostTensor.
#include "hal/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

#include "hal/atomic_file.h"
#include "hal/error.h"
#include "hal/json_bounds.h"

namespace msa::hal {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; big-endian hosts need byte swapping");

// Same bound as the reference implementation: a header this large is not a weight file.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error("safetensors file '" + path + "': " + what);
}

struct DTypeName {
  const char* name;
  DType dtype;
};
constexpr DTypeName kDTypes[] = {
    {"F32", DType::f32}, {"F16", DType::f16}, {"BF16", DType::bf16}, {"I32", DType::i32}, {"F8_E4M3", DType::fp8_e4m3}};

const char* safetensors_name(DType t) {
  for (const auto& d : kDTypes)
    if (d.dtype == t) return d.name;
  return nullptr;
}

// A non-negative JSON integer as uint64 (false for floats, negatives, non-numbers).
bool as_u64(const nlohmann::json& j, uint64_t& out) {
  if (j.is_number_unsigned()) {
    out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    if (v < 0) return false;
    out = static_cast<uint64_t>(v);
    return true;
  }
  return false;
}

struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

Entry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& j, uint64_t data_bytes) {
  const std::string where = "tensor '" + clip(name) + "': ";
  if (!j.is_object()) fail(path, where + "header entry is not an object");
  Entry e;
  e.name = name;

  auto dt = j.find("dtype");
  if (dt == j.end() || !dt->is_string()) fail(path, where + "missing or non-string 'dtype'");
  const std::string dname = dt->get<std::string>();
  const DTypeName* found = nullptr;
  for (const auto& d : kDTypes)
    if (dname == d.name) found = &d;
  if (found == nullptr)
    fail(path, where + "unsupported dtype '" + clip(dname) + "' (expected F32, F16, BF16, I32 or F8_E4M3)");
  e.dtype = found->dtype;

  auto sh = j.find("shape");
  if (sh == j.end() || !sh->is_array()) fail(path, where + "missing or non-array 'shape'");
  uint64_t numel = 1;
  for (const auto& d : *sh) {
    uint64_t v = 0;
    if (!as_u64(d, v)) fail(path, where + "shape " + json_excerpt(*sh) + " has a negative or non-integer dim");
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(path, where + "shape " + json_excerpt(*sh) + " has a dim too large");
    if (v != 0 && numel > std::numeric_limits<uint64_t>::max() / v)
      fail(path, where + "shape " + json_excerpt(*sh) + " overflows the element count");
    numel *= v;
    e.shape.push_back(static_cast<int64_t>(v));
  }
  const uint64_t esize = dtype_size(e.dtype);
  if (numel > std::numeric_limits<uint64_t>::max() / esize ||
      numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    fail(path, where + "shape " + json_excerpt(*sh) + " overflows the byte size");
  const uint64_t nbytes = numel * esize;

  auto off = j.find("data_offsets");
  if (off == j.end() || !off->is_array() || off->size() != 2 || !as_u64((*off)[0], e.begin) ||
      !as_u64((*off)[1], e.end))
    fail(path, where + "'data_offsets' must be two non-negative integers");
  if (e.begin > e.end || e.end > data_bytes)
    fail(path, where + "data_offsets " + json_excerpt(*off) + " out of range of the " + std::to_string(data_bytes) +
                   "-byte data section");
  if (e.end - e.begin != nbytes)
    fail(path, where + "data_offsets " + json_excerpt(*off) + " span " + std::to_string(e.end - e.begin) +
                   " bytes but dtype " + dname + " shape " + json_excerpt(*sh) + " needs " + std::to_string(nbytes));
  return e;
}

}  // namespace

std::map<std::string, HostTensor> read_safetensors(const std::string& path,
                                                   std::map<std::string, std::string>* metadata) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, std::string("cannot open: ") + std::strerror(errno));
  f.seekg(0, std::ios::end);
  const std::streamoff fsize = f.tellg();
  if (fsize < 0) fail(path, "cannot determine the file size");
  const uint64_t file_bytes = static_cast<uint64_t>(fsize);
  if (file_bytes < 8)
    fail(path, "truncated: " + std::to_string(file_bytes) + " bytes, shorter than the 8-byte header length");

  f.seekg(0);
  uint8_t len_bytes[8];
  f.read(reinterpret_cast<char*>(len_bytes), 8);
  if (!f) fail(path, "cannot read the header length");
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | len_bytes[i];
  if (hlen > file_bytes - 8)
    fail(path, "header length " + std::to_string(hlen) + " exceeds the file (" + std::to_string(file_bytes) +
                   " bytes): truncated or not a safetensors file");
  if (hlen > kMaxHeaderBytes) fail(path, "header length " + std::to_string(hlen) + " is implausibly large");

  std::string header(static_cast<size_t>(hlen), '\0');
  f.read(header.data(), static_cast<std::streamsize>(hlen));
  if (!f) fail(path, "cannot read the " + std::to_string(hlen) + "-byte header");
  // Bounded parse: no NUL, shallow nesting, each tensor name once (json objects keep one
  // value per key, so a repeated name would otherwise silently replace the first).
  const nlohmann::json j = parse_json_bounded(header, "safetensors file '" + path + "': header");
  if (!j.is_object()) fail(path, "header is not a JSON object");

  const uint64_t data_start = 8 + hlen, data_bytes = file_bytes - data_start;
  std::vector<Entry> entries;
  if (metadata != nullptr) metadata->clear();
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) fail(path, "'__metadata__' is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) fail(path, "'__metadata__' value '" + clip(m.key()) + "' is not a string");
        if (metadata != nullptr) (*metadata)[m.key()] = m->get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(path, it.key(), *it, data_bytes));
  }

  // Overlap check: sorted by start, each non-empty range must begin at or after the
  // previous non-empty range's end.
  std::vector<const Entry*> order;
  for (const auto& e : entries)
    if (e.end > e.begin) order.push_back(&e);
  std::sort(order.begin(), order.end(),
            [](const Entry* a, const Entry* b) { return std::tie(a->begin, a->end) < std::tie(b->begin, b->end); });
  for (size_t i = 1; i < order.size(); ++i)
    if (order[i]->begin < order[i - 1]->end)
      fail(path, "tensors '" + clip(order[i - 1]->name) + "' and '" + clip(order[i]->name) + "' overlap");

  std::map<std::string, HostTensor> out;
  for (const auto& e : entries) {
    HostTensor t(e.dtype, e.shape);
    if (e.end > e.begin) {
      f.seekg(static_cast<std::streamoff>(data_start + e.begin));
      f.read(reinterpret_cast<char*>(t.bytes.data()), static_cast<std::streamsize>(e.end - e.begin));
      if (!f) fail(path, "tensor '" + clip(e.name) + "': read failed (file truncated while reading?)");
    }
    out.emplace(e.name, std::move(t));
  }
  return out;
}

void write_safetensors(const std::string& path, const std::map<std::string, HostTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json j = nlohmann::json::object();
  if (!metadata.empty()) {
    nlohmann::json m = nlohmann::json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    j["__metadata__"] = std::move(m);
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") fail(path, "a tensor may not be named '__metadata__'");
    const char* dname = safetensors_name(t.dtype);
    if (dname == nullptr)
      fail(path, "tensor '" + name + "': dtype " + dtype_name(t.dtype) + " has no safetensors name");
    for (int64_t d : t.shape)
      if (d < 0) fail(path, "tensor '" + name + "': negative dim in " + t.str());
    const uint64_t want = static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype);
    if (t.bytes.size() != want)
      fail(path, "tensor '" + name + "': holds " + std::to_string(t.bytes.size()) + " bytes but " + t.str() +
                     " needs " + std::to_string(want));
    j[name] = {{"dtype", dname}, {"shape", t.shape}, {"data_offsets", {offset, offset + want}}};
    offset += want;
  }
  std::string header;
  try {
    header = j.dump();
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("cannot encode the header (names and metadata must be UTF-8): ") + e.what());
  }
  // Pad with spaces so the data section starts 8-byte aligned, as the reference writer does.
  header.append((8 - header.size() % 8) % 8, ' ');

  AtomicFile f(path, "safetensors file '" + path + "'");
  uint8_t len_bytes[8];
  uint64_t hlen = header.size();
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<uint8_t>(hlen >> (8 * i));
  f.write(len_bytes, 8);
  f.write(header);
  for (const auto& [name, t] : tensors) f.write(t.bytes.data(), t.bytes.size());
  f.commit();
}

}  // namespace msa::hal
