// The attention backward's chooser (choose.h): the tensor-core tier for bf16 / f16 with D
// a multiple of 16 up to 128 and groups of at most 16 heads, aligned data, its shared
// memory on the device and its index sizes in ints; else the portable tiles.
#include "backends/cuda/kernels/attention_backward/choose.h"

#include <climits>

#include "backends/cuda/kernels/attention_backward/mma_layout.h"
#include "backends/cuda/kernels/common/aligned.h"
#include "backends/cuda/kernels/portable/dq_tiling.h"

namespace msa::cuda {
namespace {

template <typename Args>
BackwardShape shape_of(const Args& a) {
  BackwardShape s;
  s.dtype = a.q.dtype;
  s.T = a.q.dim(0);
  s.Hq = a.q.dim(1);
  s.D = a.q.dim(2);
  s.P = a.k_cache.dim(0);
  s.Hkv = a.k_cache.dim(1);
  s.Bs = a.k_cache.dim(2);
  s.B = a.kv_len.dim(0);
  s.MB = a.block_table.dim(1);
  s.aligned = aligned_to(a.q, 16) && aligned_to(a.dout, 16) && aligned_to(a.out, 16) && aligned_to(a.k_cache, 16) &&
              aligned_to(a.v_cache, 16) && aligned_to(a.dq, 8) && aligned_to(a.dk_cache, 8) &&
              aligned_to(a.dv_cache, 8);
  return s;
}

}  // namespace

const char* kernel_name(BackwardKernel k) { return k == BackwardKernel::mma ? "mma" : "portable"; }

BackwardShape backward_shape(const ops::SparseAttentionBackwardArgs& a) {
  BackwardShape s = shape_of(a);
  s.sparse = true;
  s.Hs = a.block_idx.dim(1);
  s.k = a.block_idx.dim(2);
  return s;
}
BackwardShape backward_shape(const ops::DenseAttentionBackwardArgs& a) { return shape_of(a); }

BackwardItems backward_items(const BackwardShape& s, const Tuning& t) {
  BackwardItems it;
  const int64_t G = s.Hkv > 0 ? s.Hq / s.Hkv : 1;
  const int64_t Hb = s.sparse ? s.Hs : 1;  // buckets per page (a bucket serves every KV head when 1)
  // Tokens of the sorted entries (each token is in at most Hs * k entries, or one per
  // causal block when dense) and of the slabs.
  const int64_t tok_bound = s.sparse ? s.T * s.Hs * s.k : s.T * s.MB;
  const int64_t slab_tok_bound = tok_bound * (Hb == 1 ? s.Hkv : 1);
  const int KW = bwd::chunk_keys(static_cast<int>(s.Bs));
  it.tpi = bwd::tokens_per_item(bwd::forced_item_tokens(t.bwd_item_tokens), G, slab_tok_bound);
  it.chunks = static_cast<int>((s.Bs + KW - 1) / KW);
  it.slabs = s.P * s.Hkv;
  const int64_t items_bound = (it.slabs + slab_tok_bound / it.tpi + 1) * it.chunks;
  const DqTiling tl(static_cast<int>(G), 16);
  const int64_t dq_units = (s.T + tl.tile_tokens - 1) / tl.tile_tokens * s.Hkv * tl.head_chunks;
  it.fits = tok_bound < INT_MAX && slab_tok_bound < INT_MAX && it.slabs < INT_MAX && items_bound < INT_MAX &&
            dq_units / bwd::kDqWarps < INT_MAX && s.T < INT_MAX;
  return it;
}

BackwardKernel choose_attention_backward(const BackwardShape& s, const DeviceProps& pr, const Tuning& t) {
  if (t.training_mma == 0 || !t.native() || pr.cc_major < 8) return BackwardKernel::portable;
  if (s.dtype != hal::DType::bf16 && s.dtype != hal::DType::f16) return BackwardKernel::portable;
  if (s.Hkv < 1 || s.D <= 0 || s.D > 128 || s.D % 16 != 0) return BackwardKernel::portable;
  const int64_t G = s.Hq / s.Hkv;
  if (G < 1 || G > 16 || !s.aligned) return BackwardKernel::portable;
  const int smem = bwd::backward_smem_bytes(static_cast<int>(s.D), static_cast<int>(s.Bs));
  if (static_cast<size_t>(smem) > pr.smem_optin) return BackwardKernel::portable;
  return backward_items(s, t).fits ? BackwardKernel::mma : BackwardKernel::portable;
}

}  // namespace msa::cuda
