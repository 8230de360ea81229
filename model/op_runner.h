// model::OpRunner: the model's only door to the device. Each method calls one ops::
// function (or one stream transfer) on the device's stream, timed by the profiler under
// the op's name. Outputs come last; in-place ops (rope, rope_3d, scatter_visual) say so.
#pragma once
#include "dist/communicator.h"
#include "hal/device.h"
#include "hal/export.h"
#include "hal/host_tensor.h"
#include "model/profiler.h"
#include "ops/args.h"

namespace msa::model {

using hal::Tensor;

class MSA_API OpRunner {
 public:
  // `comm` (optional): this rank's communicator when the model runs head-parallel.
  OpRunner(hal::Device& device, Profiler& profiler, dist::Communicator* comm = nullptr)
      : device_(device), prof_(profiler), comm_(comm) {}
  hal::Device& device() const { return device_; }
  Profiler& profiler() const { return prof_; }

  void matmul(const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& bias = {});
  void rms_norm(const Tensor& x, const Tensor& w, float eps, const Tensor& y);
  void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps, const Tensor& y);
  void rope(const Tensor& x, const Tensor& pos, int rotary_dim, float theta);  // in place
  void rope_3d(const Tensor& x, const Tensor& pos, float theta);               // in place
  void add(const Tensor& a, const Tensor& b, const Tensor& y);
  void gelu(const Tensor& x, const Tensor& y);
  void swiglu(const Tensor& gate, const Tensor& up, const Tensor& y);
  void embedding(const Tensor& table, const Tensor& ids, const Tensor& y);
  void scatter_visual(const Tensor& tokens, const Tensor& vis, int32_t placeholder,
                      const Tensor& x);  // in place
  void argmax(const Tensor& x, const Tensor& idx);
  void kv_append(const ops::KvAppendArgs& a);
  void dense_attention(const ops::DenseAttentionArgs& a);
  // indexer_score then block_topk (fused where the backend can).
  void indexer_topk(const ops::IndexerScoreArgs& idx, const ops::BlockTopkArgs& topk);
  void sparse_block_attention(const ops::SparseAttentionArgs& a);
  void patch_attention_3d(const ops::PatchAttention3dArgs& a);
  // Head-parallel ranks: x = the sum of every rank's x (a no-op on a single device).
  void all_reduce(const Tensor& x);
  dist::Communicator* comm() const { return comm_; }
  // Host -> device (synchronous w.r.t. src) and device -> device copies.
  void upload(const Tensor& dst, const void* src);
  void copy(const Tensor& dst, const Tensor& src);
  // Device -> host (waits for the stream).
  hal::HostTensor download(const Tensor& src);

 private:
  hal::Device& device_;
  Profiler& prof_;
  dist::Communicator* comm_ = nullptr;
};

}  // namespace msa::model
