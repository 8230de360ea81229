// The paged batch of an attention-family call: which cache pages each sequence owns, how
// many tokens it has cached, and where its query tokens lie in the packed rows. The ops'
// argument structs hold its three tensors as fields of their own (block_table, kv_len,
// cu_q, in the contract's order); batch_of(a) is the batch of any of them, set_batch fills
// them from one. ops::detail::check_paged_batch checks it once per call, and a backend
// converts it once (CUDA: backends/cuda/kernels/portable/paged_batch.cuh).
#pragma once
#include "hal/tensor.h"

namespace msa::ops {

struct PagedBatch {
  hal::Tensor block_table;  // [B][max_blocks] i32: page ids of sequence b's KV blocks
  hal::Tensor kv_len;       // [B] i32: cached tokens of sequence b (this step's included)
  hal::Tensor cu_q;         // [B+1] i32: sequence b's query tokens are rows cu_q[b] .. cu_q[b+1]
};

// The batch of an op's arguments (any args struct with the three fields).
template <class Args>
PagedBatch batch_of(const Args& a) {
  return {a.block_table, a.kv_len, a.cu_q};
}

template <class Args>
void set_batch(Args& a, const PagedBatch& b) {
  a.block_table = b.block_table;
  a.kv_len = b.kv_len;
  a.cu_q = b.cu_q;
}

}  // namespace msa::ops
