#include "backends/vulkan/launch.h"

#include <cstdlib>

#include "backends/vulkan/stream.h"
#include "hal/error.h"

namespace msa::vulkan {

Launch::Launch(hal::Stream& stream, std::string shader, hal::OpId op)
    : stream_(static_cast<VulkanStream&>(stream)),
      dev_(stream_.device()),
      shader_(std::move(shader)),
      where_(hal::op_name(op)),
      error_word_(static_cast<uint32_t>(op)) {
  Allocation* err = dev_.error_flags();
  infos_.push_back({err->buffer, 0, err->size});
}

Launch::Launch(hal::Stream& stream, std::string shader, std::string where)
    : stream_(static_cast<VulkanStream&>(stream)),
      dev_(stream_.device()),
      shader_(std::move(shader)),
      where_(std::move(where)),
      error_word_(0) {
  Allocation* err = dev_.error_flags();
  infos_.push_back({err->buffer, 0, err->size});
}

uint32_t Launch::bind(const hal::Tensor& t, const char* what) {
  const char* where = where_.c_str();
  if (!t.present()) {
    bind_raw(dev_.dummy(), dev_.dummy()->size);
    return 0;
  }
  MSA_CHECK_ARG(&t.buffer->device() == &dev_, where, what,
                "tensor lives on " + t.buffer->device().name() + ", not on " + dev_.name());
  const uint64_t esize = hal::dtype_size(t.dtype);
  MSA_CHECK_ARG(t.offset % esize == 0, where, what,
                "byte offset " + std::to_string(t.offset) + " is not a multiple of the element size");
  const uint64_t align = dev_.caps().storage_align;
  const uint64_t base = t.offset / align * align;  // (align is a power of two >= 1)
  const uint64_t skew = t.offset - base;
  // Round the range up to whole 32-bit words (16-bit and 8-bit data are read as words
  // or word-aligned pairs); allocations are padded to 16 bytes so this stays inside.
  uint64_t range = (skew + t.nbytes() + 3) / 4 * 4;
  if (range == 0) range = 4;
  auto* a = static_cast<Allocation*>(t.buffer->handle());
  if (base + range > a->size) range = a->size - base;
  MSA_CHECK_ARG(range <= dev_.caps().max_storage_range, where, what,
                t.str() + " spans " + std::to_string(range) +
                    " bytes, more than this device's "
                    "maxStorageBufferRange of " +
                    std::to_string(dev_.caps().max_storage_range));
  infos_.push_back({a->buffer, base, range});
  return static_cast<uint32_t>(skew / esize);
}

uint64_t Launch::bind_address(const hal::Tensor& t, const char* what, uint64_t align) {
  const char* where = where_.c_str();
  MSA_CHECK_ARG(t.present(), where, what, "tensor is absent");
  MSA_CHECK_ARG(&t.buffer->device() == &dev_, where, what,
                "tensor lives on " + t.buffer->device().name() + ", not on " + dev_.name());
  auto* a = static_cast<Allocation*>(t.buffer->handle());
  MSA_CHECK_ARG(a->address != 0, where, what,
                t.str() + ": " + dev_.caps().name + " gives no buffer device address (MSA_VK_BDA=0 or unsupported)");
  const uint64_t addr = a->address + t.offset;
  MSA_CHECK_ARG(addr % align == 0, where, what,
                t.str() + ": device address not a multiple of " + std::to_string(align) + " bytes");
  bind_raw(dev_.dummy(), dev_.dummy()->size);
  stream_.count_address_bind();
  return addr;
}

void Launch::bind_raw(Allocation* a, uint64_t bytes, uint64_t offset) {
  uint64_t range = bytes < 4 ? 4 : (bytes + 3) / 4 * 4;
  if (offset + range > a->size) range = a->size - offset;
  if (range > dev_.caps().max_storage_range)
    throw Error(where_ + ": workspace binding of " + std::to_string(range) + " bytes exceeds maxStorageBufferRange");
  infos_.push_back({a->buffer, offset, range});
}

void Launch::run_raw(const void* pc, uint32_t pc_bytes, uint64_t groups) {
  if (groups == 0) return;
  const Caps& caps = dev_.caps();
  const uint64_t gx = groups < caps.max_groups[0] ? groups : caps.max_groups[0];
  const uint64_t gy = (groups + gx - 1) / gx;
  if (gy > caps.max_groups[1])
    throw Error(where_ + ": " + std::to_string(groups) + " workgroups exceed this device's dispatch limits");
  const auto nb = static_cast<uint32_t>(infos_.size());
  const Pipeline& p = dev_.pipelines().get(shader_, error_word_, nb, pc_bytes);
  VkDescriptorSet set = stream_.allocate_set(p.set_layout, nb);
  std::vector<VkWriteDescriptorSet> writes(nb);
  for (uint32_t i = 0; i < nb; ++i) {
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos_[i];
  }
  vkUpdateDescriptorSets(dev_.ctx().device, nb, writes.data(), 0, nullptr);
  VkCommandBuffer cmd = stream_.begin_command();
  vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
  if (pc_bytes > 0) vkCmdPushConstants(cmd, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, pc_bytes, pc);
  vkCmdDispatch(cmd, static_cast<uint32_t>(gx), static_cast<uint32_t>(gy), 1);
  stream_.end_command();
}

bool exceeds_binding(const VulkanDevice& dev, const hal::Tensor& t) {
  const Caps& caps = dev.caps();
  // As bind(): from the offset rounded down to the alignment, whole 32-bit words.
  return (t.offset % caps.storage_align + t.nbytes() + 3) / 4 * 4 > caps.max_storage_range;
}

bool use_addresses(const VulkanDevice& dev, std::initializer_list<const hal::Tensor*> ts) {
  for (const hal::Tensor* t : ts)
    if (t->present() && exceeds_binding(dev, *t)) return true;
  return dev.caps().buffer_address && dev.settings().force_bda != 0;
}

std::string check_addressable(const VulkanDevice& dev, const hal::Tensor& t, uint64_t unit) {
  const Caps& caps = dev.caps();
  if ((t.dtype == hal::DType::bf16 || t.dtype == hal::DType::f16) && !caps.storage16)
    return caps.name + " lacks 16-bit storage (storageBuffer16BitAccess) for " + hal::dtype_name(t.dtype) + " tensors";
  if (!caps.buffer_address)
    return "tensor " + t.str() + " is larger than this device's maxStorageBufferRange (" +
           std::to_string(caps.max_storage_range >> 20) +
           " MiB) and buffer device addresses are off (no bufferDeviceAddress + shaderInt64, or MSA_VK_BDA=0)";
  if (unit > 0 && t.nbytes() / unit >= (uint64_t{1} << 32))
    return "tensor " + t.str() + " has 2^32 or more units of " + std::to_string(unit) + " bytes";
  return "";
}

std::string check_bindable(const VulkanDevice& dev, std::initializer_list<const hal::Tensor*> ts) {
  const Caps& caps = dev.caps();
  for (const hal::Tensor* t : ts) {
    if (t == nullptr || !t->present()) continue;
    if ((t->dtype == hal::DType::bf16 || t->dtype == hal::DType::f16) && !caps.storage16)
      return caps.name + " lacks 16-bit storage (storageBuffer16BitAccess) for " + hal::dtype_name(t->dtype) +
             " tensors";
    // The range bind() asks for (whole words): NVIDIA's limit is 2^32 - 1, not a multiple
    // of 4, so a tensor within it by up to 3 bytes would pass here and fail there.
    if (exceeds_binding(dev, *t))
      return "tensor " + t->str() + " is larger than this device's maxStorageBufferRange (" +
             std::to_string(caps.max_storage_range >> 20) + " MiB)";
    if (t->nbytes() / hal::dtype_size(t->dtype) >= (uint64_t{1} << 32))
      return "tensor " + t->str() + " has 2^32 or more elements";
  }
  return "";
}

}  // namespace msa::vulkan
