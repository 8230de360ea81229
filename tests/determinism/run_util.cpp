#include "run_util.h"

#include <cstring>

#include "check/device_io.h"
#include "hal/registry.h"

namespace msa_test {

std::string unavailable(const std::string& backend) {
  for (const auto& s : msa::hal::list_backends()) {
    if (s.name != backend) continue;
    if (!s.compiled) return backend + ": " + s.unavailable_reason;
    if (s.devices.empty()) return backend + " has no device: " + s.unavailable_reason;
    return "";
  }
  return backend + " is not a known backend";
}

Outputs run_case(const msa::cases::Case& c, msa::hal::Device& dev, uint64_t seed) {
  using msa::cases::Role;
  const msa::cases::CaseData data = c.make_data(seed, false);
  std::vector<msa::cases::DeviceSlot> ds;
  std::vector<msa::hal::Tensor> views;
  for (const auto& s : data.slots) {
    ds.push_back(msa::cases::upload_slot(dev, s, true));
    views.push_back(ds.back().tensor);
  }
  const msa::cases::Bound bound(data.slots, views);
  msa::cases::Launch launch = c.bind(dev, bound);
  Outputs o;
  o.skipped = launch.supports();
  if (!o.skipped.empty()) return o;
  launch.run();
  dev.stream().synchronize();
  for (size_t i = 0; i < data.slots.size(); ++i) {
    const auto& s = data.slots[i];
    if (s.absent || s.role == Role::in) continue;
    o.names.push_back(s.name);
    o.tensors.push_back(msa::cases::payload(s, msa::cases::download_raw(dev, ds[i])));
  }
  return o;
}

std::string bitwise_diff(const Outputs& a, const Outputs& b) {
  if (a.names != b.names) return "different output slots";
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& x = a.tensors[i].bytes;
    const auto& y = b.tensors[i].bytes;
    if (x.size() != y.size()) return a.names[i] + ": sizes differ";
    if (std::memcmp(x.data(), y.data(), x.size()) == 0) continue;
    const size_t es = msa::hal::dtype_size(a.tensors[i].dtype);
    for (size_t j = 0; j < x.size(); ++j)
      if (x[j] != y[j])
        return a.names[i] + " element " + std::to_string(j / es) + ": " + std::to_string(a.tensors[i].get(j / es)) +
               " vs " + std::to_string(b.tensors[i].get(j / es));
  }
  return "";
}

}  // namespace msa_test
