#include "backends/cpu/backend.h"

#include <string>

#include "backends/cpu/kernels.h"
#include "backends/cpu_ref/backend.h"
#include "hal/error.h"
#include "hal/host_device.h"

namespace msa::cpu {

hal::KernelTable make_kernel_table() {
  using hal::OpId;
  // Start from the reference so every op exists, then put the SIMD kernels on top.
  hal::KernelTable t = cpu_ref::make_kernel_table();
  t.set(OpId::indexer_score, &indexer_score);
  t.set(OpId::block_topk, &block_topk);
  t.set(OpId::sparse_block_attention, &sparse_block_attention);
  t.set(OpId::dense_attention, &dense_attention);
  t.set(OpId::patch_attention_3d, &patch_attention_3d);
  t.set(OpId::kv_append, &kv_append);
  t.set(OpId::matmul, &matmul);
  t.set(OpId::rms_norm, &rms_norm);
  t.set(OpId::rope, &rope);
  t.set(OpId::swiglu, &swiglu);
  t.set(OpId::add, &add);
  t.set(OpId::sparse_block_attention_backward, &sparse_block_attention_backward);
  t.set(OpId::dense_attention_backward, &dense_attention_backward);
  t.set(OpId::patch_attention_3d_backward, &patch_attention_3d_backward);
  t.set(OpId::indexer_kl, &indexer_kl);
  return t;
}

hal::BackendStatus probe() {
  hal::BackendStatus s;
  s.name = "cpu";
  s.compiled = true;
  s.devices = {"cpu"};
  s.descriptions = {"Highway " + simd_target() + " + oneTBB, " + std::to_string(thread_count()) +
                    " threads, f32 accumulation"};
  return s;
}

std::unique_ptr<hal::Device> open_device(int index) {
  if (index != 0) throw Error("device 'cpu:" + std::to_string(index) + "': cpu has only device 0");
  return std::make_unique<hal::HostDevice>("cpu", "cpu", make_kernel_table(), thread_count());
}

}  // namespace msa::cpu
