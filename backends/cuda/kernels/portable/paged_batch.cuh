// The one conversion of an op's paged batch (ops/paged_batch.h, checked by ops::) into the
// kernels' Batch (seq.cuh): device pointers, sizes, the page count for page-id checks and
// the stream's error flag tagged with the calling op.
#pragma once
#include <cstdint>

#include "backends/cuda/kernels/portable/seq.cuh"
#include "backends/cuda/stream.h"
#include "hal/op_id.h"
#include "ops/paged_batch.h"

namespace msa::MSA_GPU_NS {

// T packed query tokens; Bs tokens per KV block; P cache pages.
inline Batch to_batch(const Stream& st, const ops::PagedBatch& pb, int64_t T, int64_t Bs, int64_t P, hal::OpId op) {
  Batch bt;
  bt.cu_q = pb.cu_q.data<int32_t>();
  bt.kv_len = pb.kv_len.data<int32_t>();
  bt.block_table = pb.block_table.data<int32_t>();
  bt.B = static_cast<int>(pb.kv_len.dim(0));
  bt.T = static_cast<int>(T);
  bt.max_blocks = static_cast<int>(pb.block_table.dim(1));
  bt.Bs = static_cast<int>(Bs);
  bt.P = P;
  bt.flag = st.error_flag();
  bt.op = static_cast<int>(op);
  return bt;
}

}  // namespace msa::MSA_GPU_NS
