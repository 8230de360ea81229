// The softmax-attention backward core shared by dense_attention_backward,
// sparse_block_attention_backward and patch_attention_3d_backward (docs/training.md):
// for one query row with the forward's lse and out, over the K/V rows it attended,
//   p_s = exp(scale q.k_s - lse), delta = dot(dout, out), dv_s += p_s dout,
//   ds_s = p_s (dot(dout, v_s) - delta), dq = scale sum_s ds_s k_s, dk_s += scale ds_s q.
// Everything is double and summed in a fixed order; a row whose lse is -inf adds nothing.
#pragma once
#include <cstdint>
#include <vector>

#include "backends/cpu_ref/attention_common.h"
#include "hal/tensor.h"

namespace msa::cpu_ref {

// The gradients of one call in double: dq with q's elements, dk / dv with the K / V
// source's elements (the row offsets of KvRows index them). Stored as f32 at the end.
struct AttentionGrads {
  std::vector<double> dq, dk, dv;

  AttentionGrads(int64_t q_elems, int64_t kv_elems)
      : dq(static_cast<size_t>(q_elems), 0.0),
        dk(static_cast<size_t>(kv_elems), 0.0),
        dv(static_cast<size_t>(kv_elems), 0.0) {}
  // Writes every element of the three f32 outputs.
  void store(const hal::Tensor& dq_out, const hal::Tensor& dk_out, const hal::Tensor& dv_out) const;
};

// The forward's tensors a backward call reads per query row ([T][H][D], lse [T][H]).
struct BackwardRows {
  const hal::Tensor& dout;
  const hal::Tensor& q;
  const hal::Tensor& out;
  const hal::Tensor& lse;
};

// Adds the contributions of query heads h0 .. h0+nh-1 of token t, which attended the
// rows of `kv` with pos <= limit. `scratch` is reused.
void backward_heads(const BackwardRows& rows, int64_t t, int64_t h0, int64_t nh, const KvRows& kv, int64_t limit,
                    double scale, AttentionGrads& grads, std::vector<double>& scratch);

}  // namespace msa::cpu_ref
