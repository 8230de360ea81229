// The batch view (seq.cuh) of an indexer_score call, bound once for every indexer kernel
// (the portable one and CUDA's tensor-core ones).
#pragma once
#include "backends/cuda/kernels/portable/seq.cuh"
#include "backends/cuda/stream.h"
#include "hal/op_id.h"
#include "ops/args.h"

namespace msa::MSA_GPU_NS {

inline Batch indexer_batch(const Stream& st, const ops::IndexerScoreArgs& a) {
  Batch bt;
  bt.cu_q = a.cu_q.data<int32_t>();
  bt.kv_len = a.kv_len.data<int32_t>();
  bt.block_table = a.block_table.data<int32_t>();
  bt.B = static_cast<int>(a.kv_len.dim(0));
  bt.T = static_cast<int>(a.qi.dim(0));
  bt.max_blocks = static_cast<int>(a.block_table.dim(1));
  bt.Bs = static_cast<int>(a.ki_cache.dim(1));
  bt.P = a.ki_cache.dim(0);
  bt.flag = st.error_flag();
  bt.op = static_cast<int>(hal::OpId::indexer_score);
  return bt;
}

}  // namespace msa::MSA_GPU_NS
