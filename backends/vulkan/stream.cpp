#include "backends/vulkan/stream.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backends/vulkan/device.h"
#include "backends/vulkan/device_errors.h"
#include "backends/vulkan/event.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"
#include "hal/error.h"
#include "hal/op_id.h"

namespace msa::vulkan {
namespace {

constexpr int kMaxCommandsPerBatch = 256;  // then submit and keep recording into a new one
constexpr size_t kMaxInFlight = 4;         // then wait for the oldest
constexpr uint32_t kSetsPerPool = 128;
constexpr uint32_t kMaxBindings = 16;
// Device copies of at least this many bytes, 16-byte aligned, run as a shader
// (shaders/stream_copy.comp) instead of vkCmdCopyBuffer.
constexpr uint64_t kShaderCopyMin = uint64_t{1} << 20;
constexpr uint32_t kCopyUnitsPerGroup = 256 * 4;  // WGS * PER of stream_copy.comp

// Every compute or transfer write before it is visible to every compute or transfer
// access after it.
void full_barrier(VkCommandBuffer cmd) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                     VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vkCmdPipelineBarrier(cmd, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

Allocation* as_alloc(const hal::Tensor& t) { return static_cast<Allocation*>(t.buffer->handle()); }

void check_range(const hal::Tensor& t, const char* what) {
  MSA_CHECK_ARG(t.present(), "vulkan stream", what, "tensor is absent");
  MSA_CHECK_ARG(t.offset + t.nbytes() <= t.buffer->bytes(), "vulkan stream", what,
                "view " + t.str() + " at byte offset " + std::to_string(t.offset) + " runs past its buffer of " +
                    std::to_string(t.buffer->bytes()) + " bytes");
}

}  // namespace

struct VulkanStream::Batch {
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> pools;
  size_t pool_index = 0;             // pools[pool_index] is the one being filled
  std::vector<Allocation*> garbage;  // freed when the batch completes
  int commands = 0;
};

VulkanStream::VulkanStream(VulkanDevice& dev) : dev_(dev) {
  VkCommandPoolCreateInfo ci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  ci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  ci.queueFamilyIndex = dev.caps().queue_family;
  check(vkCreateCommandPool(dev.ctx().device, &ci, nullptr, &pool_), "vkCreateCommandPool");
}

VulkanStream::~VulkanStream() {
  const VkDevice d = dev_.ctx().device;
  try {
    flush();
  } catch (...) {
  }
  vkDeviceWaitIdle(d);
  auto destroy = [&](Batch& b) {
    for (Allocation* a : b.garbage) destroy_allocation(dev_.ctx(), a);
    for (VkDescriptorPool p : b.pools) vkDestroyDescriptorPool(d, p, nullptr);
    vkDestroyFence(d, b.fence, nullptr);
  };
  if (open_) destroy(*open_);
  for (auto& b : in_flight_) destroy(*b);
  for (auto& b : free_) destroy(*b);
  vkDestroyCommandPool(d, pool_, nullptr);  // frees the command buffers
}

VulkanStream::Batch& VulkanStream::open_batch() {
  if (open_) return *open_;
  const VkDevice d = dev_.ctx().device;
  if (!free_.empty()) {
    open_ = std::move(free_.back());
    free_.pop_back();
  } else {
    auto b = std::make_unique<Batch>();
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    check(vkAllocateCommandBuffers(d, &ai, &b->cmd), "vkAllocateCommandBuffers");
    VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    check(vkCreateFence(d, &fi, nullptr, &b->fence), "vkCreateFence");
    open_ = std::move(b);
  }
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(vkBeginCommandBuffer(open_->cmd, &bi), "vkBeginCommandBuffer");
  return *open_;
}

VkCommandBuffer VulkanStream::begin_command() {
  Batch& b = open_batch();
  // The barrier's first scope covers all earlier submissions on this queue too.
  full_barrier(b.cmd);
  return b.cmd;
}

void VulkanStream::end_command() {
  if (++open_->commands >= kMaxCommandsPerBatch) flush();
}

void VulkanStream::flush() {
  if (!open_) return;
  Batch& b = *open_;
  // Make every write of the batch visible to the host (downloads, error flags).
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(b.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  check(vkEndCommandBuffer(b.cmd), "vkEndCommandBuffer");
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &b.cmd;
  check(vkQueueSubmit(dev_.ctx().queue, 1, &si, b.fence), "vkQueueSubmit");
  in_flight_.push_back(std::move(open_));
  if (in_flight_.size() > kMaxInFlight) {
    Batch& old = *in_flight_.front();
    check(vkWaitForFences(dev_.ctx().device, 1, &old.fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    recycle(old);
    free_.push_back(std::move(in_flight_.front()));
    in_flight_.pop_front();
  }
}

void VulkanStream::recycle(Batch& b) {
  const VkDevice d = dev_.ctx().device;
  for (Allocation* a : b.garbage) destroy_allocation(dev_.ctx(), a);
  b.garbage.clear();
  for (VkDescriptorPool p : b.pools) vkResetDescriptorPool(d, p, 0);
  b.pool_index = 0;
  b.commands = 0;
  vkResetFences(d, 1, &b.fence);
  vkResetCommandBuffer(b.cmd, 0);
}

void VulkanStream::wait_all() {
  while (!in_flight_.empty()) {
    Batch& b = *in_flight_.front();
    const VkResult r = vkWaitForFences(dev_.ctx().device, 1, &b.fence, VK_TRUE, UINT64_MAX);
    if (r == VK_ERROR_DEVICE_LOST) throw Error("vulkan: " + dev_.caps().name + ": device lost");
    check(r, "vkWaitForFences");
    recycle(b);
    free_.push_back(std::move(in_flight_.front()));
    in_flight_.pop_front();
  }
}

VkDescriptorSet VulkanStream::allocate_set(VkDescriptorSetLayout layout, uint32_t bindings) {
  if (bindings > kMaxBindings) throw Error("vulkan: too many bindings in one shader");
  Batch& b = open_batch();
  const VkDevice d = dev_.ctx().device;
  for (;;) {
    if (b.pool_index == b.pools.size()) {
      VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * kMaxBindings};
      VkDescriptorPoolCreateInfo ci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
      ci.maxSets = kSetsPerPool;
      ci.poolSizeCount = 1;
      ci.pPoolSizes = &size;
      VkDescriptorPool pool = VK_NULL_HANDLE;
      check(vkCreateDescriptorPool(d, &ci, nullptr, &pool), "vkCreateDescriptorPool");
      b.pools.push_back(pool);
    }
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = b.pools[b.pool_index];
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    const VkResult r = vkAllocateDescriptorSets(d, &ai, &set);
    if (r == VK_SUCCESS) return set;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL) check(r, "vkAllocateDescriptorSets");
    ++b.pool_index;  // this pool is full: move to the next (created above if needed)
  }
}

Allocation* VulkanStream::temp_upload(const void* data, size_t bytes) {
  Allocation* a = create_allocation(dev_.ctx(), bytes, MemoryKind::host_staging);
  if (bytes > 0) std::memcpy(a->mapped, data, bytes);
  open_batch().garbage.push_back(a);
  return a;
}

void VulkanStream::defer_free(Allocation* a) {
  if (open_ && open_->commands > 0) {
    open_->garbage.push_back(a);
  } else if (!in_flight_.empty()) {
    in_flight_.back()->garbage.push_back(a);
  } else {
    destroy_allocation(dev_.ctx(), a);
  }
}

void VulkanStream::upload(const hal::Tensor& dst, const void* src) {
  check_range(dst, "dst");
  const size_t n = dst.nbytes();
  if (n == 0) return;
  Allocation* staging = temp_upload(src, n);
  VkCommandBuffer cmd = begin_command();
  VkBufferCopy region{0, dst.offset, n};
  vkCmdCopyBuffer(cmd, staging->buffer, as_alloc(dst)->buffer, 1, &region);
  end_command();
}

void VulkanStream::download(void* dst, const hal::Tensor& src) {
  check_range(src, "src");
  const size_t n = src.nbytes();
  if (n == 0) return;
  Allocation* staging = create_allocation(dev_.ctx(), n, MemoryKind::host_staging);
  try {
    VkCommandBuffer cmd = begin_command();
    VkBufferCopy region{src.offset, 0, n};
    vkCmdCopyBuffer(cmd, as_alloc(src)->buffer, staging->buffer, 1, &region);
    end_command();
    flush();
    wait_all();
    std::memcpy(dst, staging->mapped, n);
  } catch (...) {
    destroy_allocation(dev_.ctx(), staging);
    throw;
  }
  destroy_allocation(dev_.ctx(), staging);
}

void VulkanStream::copy(const hal::Tensor& dst, const hal::Tensor& src) {
  check_range(dst, "dst");
  check_range(src, "src");
  if (!hal::check_copy("vulkan stream", dst, src)) return;
  const uint64_t n = dst.nbytes();
  if (n >= kShaderCopyMin && n % 16 == 0 && dst.offset % 16 == 0 && src.offset % 16 == 0) {
    shader_copy(as_alloc(dst), dst.offset, as_alloc(src), src.offset, n);
    return;
  }
  VkCommandBuffer cmd = begin_command();
  VkBufferCopy region{src.offset, dst.offset, n};
  vkCmdCopyBuffer(cmd, as_alloc(src)->buffer, as_alloc(dst)->buffer, 1, &region);
  end_command();
}

// One dispatch of stream_copy.comp per chunk that fits a storage-buffer binding on both sides;
// offsets and n are multiples of 16. Each side is bound from its offset rounded down to
// minStorageBufferOffsetAlignment, the rest passed as a 16-byte skew.
void VulkanStream::shader_copy(Allocation* dst, uint64_t dst_off, Allocation* src, uint64_t src_off, uint64_t n) {
  const Caps& caps = dev_.caps();
  const uint64_t align = std::max<uint64_t>(caps.storage_align, 16);
  // Largest chunk: the binding holds skew (< align) + chunk; whole 16-byte units; the
  // unit count fits 32 bits.
  uint64_t max_chunk = caps.max_storage_range > align ? (caps.max_storage_range - align) / 16 * 16 : 0;
  max_chunk = std::min<uint64_t>(max_chunk, uint64_t{1} << 34);
  if (max_chunk < 16) throw Error("vulkan: copy: maxStorageBufferRange too small");
  for (uint64_t done = 0; done < n;) {
    const uint64_t bytes = std::min(n - done, max_chunk);
    const uint64_t so = src_off + done, dof = dst_off + done;
    const uint64_t sb = so / align * align, db = dof / align * align;
    CopyPC pc{};
    pc.off_src = static_cast<uint32_t>((so - sb) / 16);
    pc.off_dst = static_cast<uint32_t>((dof - db) / 16);
    pc.n = static_cast<uint32_t>(bytes / 16);
    Launch l(*this, "stream_copy_u4", "vulkan: copy");
    l.bind_raw(src, so - sb + bytes, sb);
    l.bind_raw(dst, dof - db + bytes, db);
    l.run(pc, (uint64_t{pc.n} + kCopyUnitsPerGroup - 1) / kCopyUnitsPerGroup);
    ++shader_copy_dispatches_;
    done += bytes;
  }
}

void VulkanStream::fill_bytes(const hal::Tensor& dst, uint8_t byte) {
  check_range(dst, "dst");
  const size_t n = dst.nbytes();
  if (n == 0) return;
  if (dst.offset % 4 == 0 && n % 4 == 0) {
    const uint32_t word = 0x01010101u * byte;
    VkCommandBuffer cmd = begin_command();
    vkCmdFillBuffer(cmd, as_alloc(dst)->buffer, dst.offset, n, word);
    end_command();
    return;
  }
  // vkCmdFillBuffer needs 4-byte alignment: copy from a filled staging buffer instead.
  std::vector<uint8_t> bytes(n, byte);
  upload(dst, bytes.data());
}

void VulkanStream::record(hal::Event& event) {
  auto* e = dynamic_cast<VulkanEvent*>(&event);
  if (e == nullptr) throw Error("vulkan: record: event was not created by a Vulkan device");
  VkCommandBuffer cmd = begin_command();
  vkCmdResetQueryPool(cmd, e->pool(), 0, 1);
  vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, e->pool(), 0);
  end_command();
  e->mark_recorded();
}

void VulkanStream::check_errors() {
  auto* words = static_cast<uint32_t*>(dev_.error_flags()->mapped);
  std::string msg;
  for (int op = 0; op < hal::kOpCount; ++op) {
    if (words[op] == 0) continue;
    msg += (msg.empty() ? "" : " | ") + std::string(hal::op_name(static_cast<hal::OpId>(op))) + ": " +
           describe_device_errors(words[op]);
    words[op] = 0;
  }
  if (!msg.empty()) throw Error(dev_.name() + ": device-side check failed: " + msg);
}

void VulkanStream::synchronize() {
  flush();
  wait_all();
  check_errors();
}

}  // namespace msa::vulkan
