// The kernels of sparse_block_attention_backward and dense_attention_backward on CUDA and
// the one function that picks between them (plain C++: tested without a GPU in
// tests/cuda_choose). entry.cu launches what it picks.
#pragma once
#include <cstdint>

#include "backends/cuda/device_props.h"
#include "backends/cuda/tuning.h"
#include "hal/dtype.h"
#include "ops/args.h"

namespace msa::cuda {

enum class BackwardKernel {
  portable,  // FMA tiles (portable/attention_backward.cuh, also HIP's)
  mma,       // mma.sync tiles (attention_backward/mma.cu), bf16 / f16
};
const char* kernel_name(BackwardKernel k);

struct BackwardShape {
  hal::DType dtype = hal::DType::f32;
  int64_t T = 0, Hq = 0, D = 0;    // q [T][Hq][D]
  int64_t P = 0, Hkv = 0, Bs = 0;  // k_cache [P][Hkv][Bs][D]
  int64_t B = 0, MB = 0;           // sequences, block_table columns
  bool sparse = false;             // block_idx [NQ][Hs][k] given
  int64_t Hs = 0, k = 0;
  // q, dout, out, k_cache, v_cache on 16 bytes; dq, dk_cache, dv_cache on 8.
  bool aligned = true;
};
BackwardShape backward_shape(const ops::SparseAttentionBackwardArgs& a);
BackwardShape backward_shape(const ops::DenseAttentionBackwardArgs& a);

// The tensor-core kernels' work geometry (its sizes bound the int prefixes and tickets).
struct BackwardItems {
  int64_t tpi = 1;    // tokens per dk/dv item
  int chunks = 1;     // key chunks per slab
  int64_t slabs = 0;  // P x Hkv
  bool fits = false;  // every prefix, ticket and grid size fits an int
};
BackwardItems backward_items(const BackwardShape& s, const Tuning& t);

BackwardKernel choose_attention_backward(const BackwardShape& s, const DeviceProps& pr, const Tuning& t);

}  // namespace msa::cuda
