// The paged batch of an attention-family call: which cache pages each sequence owns, how
// many tokens it has cached, and where its query tokens lie in the packed rows. The ops'
// argument structs derive from it (a.block_table, a.kv_len and a.cu_q are its fields;
// a.batch() is the whole), ops::detail::check_paged_batch checks it once per call, and a
// backend converts it once (CUDA: backends/cuda/kernels/portable/paged_batch.cuh).
#pragma once
#include "hal/tensor.h"

namespace msa::ops {

struct PagedBatch {
  hal::Tensor block_table;  // [B][max_blocks] i32: page ids of sequence b's KV blocks
  hal::Tensor kv_len;       // [B] i32: cached tokens of sequence b (this step's included)
  hal::Tensor cu_q;         // [B+1] i32: sequence b's query tokens are rows cu_q[b] .. cu_q[b+1]

  PagedBatch& batch() { return *this; }
  const PagedBatch& batch() const { return *this; }
};

}  // namespace msa::ops
