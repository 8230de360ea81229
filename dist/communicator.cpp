#include "dist/communicator.h"

#include "hal/host_tensor.h"

namespace msa::dist {

std::vector<int32_t> all_gather_ints(Communicator& comm, std::span<const int32_t> values) {
  hal::Device& dev = comm.device();
  const auto n = static_cast<int64_t>(values.size());
  std::vector<int32_t> out(static_cast<size_t>(n * comm.world()));
  if (n == 0) return out;
  auto in = dev.alloc_tensor(hal::DType::i32, {n});
  auto all = dev.alloc_tensor(hal::DType::i32, {n * comm.world()});
  dev.stream().upload(in.tensor, values.data());
  comm.all_gather(in.tensor, all.tensor);
  dev.stream().download(out.data(), all.tensor);
  return out;
}

}  // namespace msa::dist
