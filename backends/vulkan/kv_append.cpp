// kv_append: one dispatch copies K and V rows into their cache slots
// (shaders/kv_append.kv.comp); a second converts the indexer keys
// (shaders/kv_append.ki.comp; NVFP4 keys: per group of 16 dims, codes and e4m3 scales).
// Ops on the stream run in order, so the two never race.
// K/V caches larger than one binding (or the tuning knob force_bda=1) are written through their
// buffer device addresses (kv_append_kv_*_bda).
#include <algorithm>

#include "backends/vulkan/kernel_util.h"
#include "backends/vulkan/kernels.h"
#include "backends/vulkan/launch.h"
#include "backends/vulkan/push_constants.h"

namespace msa::vulkan {

void kv_append(hal::Stream& s, const ops::KvAppendArgs& a) {
  const char* name = "kv_append";
  const auto& dev = static_cast<const VulkanDevice&>(device_of(a.k, "k"));
  {
    const bool by_address = use_addresses(dev, {&a.k_cache, &a.v_cache});
    const uint64_t es = hal::dtype_size(a.k.dtype);
    KvAppendKvBdaPC bpc{};
    KvAppendKvPC& pc = bpc.p;
    Launch l(s, std::string(es == 2 ? "kv_append_kv_b16" : "kv_append_kv_b32") + (by_address ? "_bda" : ""),
             hal::OpId::kv_append);
    pc.off_k = l.bind(a.k, "k");
    pc.off_v = l.bind(a.v, "v");
    pc.off_bt = l.bind(a.block_table, "block_table");
    pc.off_kvlen = l.bind(a.kv_len, "kv_len");
    pc.off_cuq = l.bind(a.cu_q, "cu_q");
    if (by_address) {
      bpc.kc_addr = l.bind_address(a.k_cache, "k_cache", es);
      bpc.vc_addr = l.bind_address(a.v_cache, "v_cache", es);
    } else {
      pc.off_kc = l.bind(a.k_cache, "k_cache");
      pc.off_vc = l.bind(a.v_cache, "v_cache");
    }
    pc.T = u32(a.k.dim(0), name, "k");
    pc.Hkv = u32(a.k.dim(1), name, "k");
    pc.D = u32(a.k.dim(2), name, "k");
    pc.P = u32(a.k_cache.dim(0), name, "k_cache");
    pc.Bs = u32(a.k_cache.dim(2), name, "k_cache");
    pc.max_blocks = u32(a.block_table.dim(1), name, "block_table");
    pc.B = u32(a.kv_len.dim(0), name, "kv_len");
    const uint64_t groups = std::max<uint64_t>(pc.T, pc.B > 0 ? 1 : 0);  // workgroup 0 validates
    if (by_address)
      l.run(bpc, groups);
    else
      l.run(pc, groups);
  }
  if (!a.ki.present() || !a.ki_cache.present()) return;
  const bool fp8 = a.ki_cache.dtype == hal::DType::fp8_e4m3;
  KvAppendKiPC pc{};
  Launch l(s,
           "kv_append_ki_" + tag(a.ki.dtype) + "_" + tag(a.ki_cache.dtype) + (fp8 && dev.caps().float64 ? "_f64" : ""),
           hal::OpId::kv_append);
  pc.off_ki = l.bind(a.ki, "ki");
  pc.off_bt = l.bind(a.block_table, "block_table");
  pc.off_kvlen = l.bind(a.kv_len, "kv_len");
  pc.off_cuq = l.bind(a.cu_q, "cu_q");
  pc.off_kic = l.bind(a.ki_cache, "ki_cache");
  pc.off_kis = l.bind(a.ki_scale, "ki_scale");
  pc.T = u32(a.ki.dim(0), name, "ki");
  pc.Di = u32(a.ki.dim(1), name, "ki");
  pc.P = u32(a.ki_cache.dim(0), name, "ki_cache");
  pc.Bs = u32(a.ki_cache.dim(1), name, "ki_cache");
  pc.max_blocks = u32(a.block_table.dim(1), name, "block_table");
  pc.B = u32(a.kv_len.dim(0), name, "kv_len");
  pc.has_scale = a.ki_scale.present() ? 1 : 0;  // (NVFP4: the required group scales)
  l.run(pc, pc.T);
}

std::string supports_kv_append(const ops::KvAppendArgs& a) {
  const VulkanDevice& dev = device_of(a.k, "k");
  const size_t es = hal::dtype_size(a.k.dtype);
  if (es != 2 && es != 4) return std::string("cache dtype ") + hal::dtype_name(a.k.dtype) + " has no Vulkan kernel";
  if (a.ki.present() && a.ki_cache.present()) {
    const hal::DType k = a.ki_cache.dtype;
    if (k != hal::DType::f32 && k != hal::DType::bf16 && k != hal::DType::fp8_e4m3 && k != hal::DType::fp4_e2m1x2)
      return std::string("ki_cache dtype ") + hal::dtype_name(k) + " has no Vulkan kernel";
    if (!hal::is_activation_dtype(a.ki.dtype))
      return std::string("ki dtype ") + hal::dtype_name(a.ki.dtype) + " has no Vulkan kernel";
  }
  if (use_addresses(dev, {&a.k_cache, &a.v_cache})) {
    // Element indices into the caches are 64-bit there: any size the device can address.
    for (const hal::Tensor* c : {&a.k_cache, &a.v_cache})
      if (std::string why = check_addressable(dev, *c, 0); !why.empty()) return why;
    return check_bindable(dev, {&a.k, &a.v, &a.ki, &a.block_table, &a.kv_len, &a.cu_q, &a.ki_cache, &a.ki_scale});
  }
  return check_bindable(
      dev, {&a.k, &a.v, &a.ki, &a.block_table, &a.kv_len, &a.cu_q, &a.k_cache, &a.v_cache, &a.ki_cache, &a.ki_scale});
}

}  // namespace msa::vulkan
