// The CUDA-only launchers of the forward attention ops, on parameters bound once by the
// op's entry (portable/attention_entry.cuh). Each launches the kernel its name says:
// the entry's chooser (choose.h) has already decided that it applies.
#pragma once
#include <cstdint>

#include "backends/cuda/kernels/attention/choose.h"
#include "backends/cuda/kernels/portable/attention_entry.cuh"

namespace msa::cuda {

inline bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// The chooser's view of a bound call.
AttnCall attn_call(const Stream& st, const SparseParams& p, hal::DType dt);
AttnCall attn_call(const Stream& st, const DenseParams& p, hal::DType dt);
AttnCall attn_call(const Stream& st,
                   const ops::PatchAttention3dArgs& a);  // before binding: the choice sets the chunk size

// attention/decode_split.cu
void launch_decode_split_sparse(Stream& st, const SparseParams& p, hal::DType dt);
void launch_decode_split_dense(Stream& st, const DenseParams& p, hal::DType dt);
// sparse_block_attention/decode_cluster.cu
void launch_decode_cluster(Stream& st, const SparseParams& p, hal::DType dt);
// sparse_block_attention/kv_outer.cu (token-level selection, Qb = 1)
void launch_kv_outer_sparse(Stream& st, const SparseParams& p, hal::DType dt);
// The same or launch_flash_sparse, from the selection's union size per flash block
// (choose_by_union; a host read-back of one statistic). Inside a graph capture: kv_outer.
void launch_sparse_by_union(Stream& st, const SparseParams& p, hal::DType dt);
// attention/flash_prefill.cu (patch: p.chunks of attn_geom::kFaRows tokens)
void launch_flash_sparse(Stream& st, const SparseParams& p, hal::DType dt);
void launch_flash_dense(Stream& st, const DenseParams& p, hal::DType dt);
void launch_flash_patch(Stream& st, const PatchParams& p, hal::DType dt);
// dense_attention/flash_wgmma.cu
void launch_flash_wgmma(Stream& st, const DenseParams& p, hal::DType dt);
// attention/wmma.cu (bf16/f16)
void launch_wmma_sparse(Stream& st, SparseParams& p, hal::DType dt);
void launch_wmma_dense(Stream& st, DenseParams& p, hal::DType dt);
void launch_wmma_patch(Stream& st, const PatchParams& p, hal::DType dt);

}  // namespace msa::cuda
