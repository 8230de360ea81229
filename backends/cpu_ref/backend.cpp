#include "backends/cpu_ref/backend.h"

#include "backends/cpu_ref/kernels.h"
#include "hal/error.h"
#include "hal/host_device.h"

namespace msa::cpu_ref {

hal::KernelTable make_kernel_table() {
  using hal::OpId;
  hal::KernelTable t;
  t.set(OpId::indexer_score, &indexer_score);
  t.set(OpId::block_topk, &block_topk);
  t.set(OpId::sparse_block_attention, &sparse_block_attention);
  t.set(OpId::dense_attention, &dense_attention);
  t.set(OpId::patch_attention_3d, &patch_attention_3d);
  t.set(OpId::kv_append, &kv_append);
  t.set(OpId::matmul, &matmul);
  t.set(OpId::rms_norm, &rms_norm);
  t.set(OpId::layer_norm, &layer_norm);
  t.set(OpId::rope, &rope);
  t.set(OpId::rope_3d, &rope_3d);
  t.set(OpId::swiglu, &swiglu);
  t.set(OpId::gelu, &gelu);
  t.set(OpId::add, &add);
  t.set(OpId::embedding, &embedding);
  t.set(OpId::scatter_visual, &scatter_visual);
  t.set(OpId::argmax, &argmax);
  t.set(OpId::sparse_block_attention_backward, &sparse_block_attention_backward);
  t.set(OpId::dense_attention_backward, &dense_attention_backward);
  t.set(OpId::patch_attention_3d_backward, &patch_attention_3d_backward);
  t.set(OpId::indexer_kl, &indexer_kl);
  return t;
}

hal::BackendStatus probe() {
  hal::BackendStatus s;
  s.name = "cpu-ref";
  s.compiled = true;
  s.devices = {"cpu-ref"};
  s.descriptions = {"scalar reference, 1 thread, f64 accumulation"};
  return s;
}

std::unique_ptr<hal::Device> open_device(int index) {
  if (index != 0) throw Error("device 'cpu-ref:" + std::to_string(index) + "': cpu-ref has only device 0");
  return std::make_unique<hal::HostDevice>("cpu-ref", "cpu-ref", make_kernel_table(), 1);
}

}  // namespace msa::cpu_ref
