// The sizes the portable training kernels cover (kernels/portable/*_backward.cu,
// indexer_kl.cu), shared by the CUDA and HIP kernel tables: each returns "" when the call
// is covered, else why not. Host code; the kernels take their limits from here.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>

#include "backends/cuda/vendor.h"
#include "ops/args.h"

namespace msa::MSA_GPU_NS::training_limits {

inline constexpr int64_t kMaxHeadDim = 128;  // a head-dim row spread over one wave
inline constexpr int64_t kMaxGroup = 16;     // query heads per KV head, as the forward kernels
// Raw entries (query block x selection row x k, or sequences x max_blocks) of the
// inverse index: ids below 2^32 in its sort keys, positions in int.
inline constexpr int64_t kMaxEntries = int64_t{1} << 30;

inline std::string head_dim(const char* name, int64_t d) {
  if (d > kMaxHeadDim)
    return std::string(name) + " = " + std::to_string(d) + " > " + std::to_string(kMaxHeadDim) +
           " is not supported by the " MSA_VENDOR_NAME " training kernels";
  return "";
}
inline std::string group(int64_t Hq, int64_t Hkv) {
  if (Hkv > 0 && Hq / Hkv > kMaxGroup)
    return "GQA group G = Hq/Hkv > " + std::to_string(kMaxGroup) +
           " is not supported by the " MSA_VENDOR_NAME " training kernels";
  return "";
}
inline std::string entries(int64_t n) {
  if (n > kMaxEntries)
    return "the inverse index would hold " + std::to_string(n) + " > " + std::to_string(kMaxEntries) +
           " entries (query blocks x selection rows x k, or sequences x max_blocks) on " MSA_VENDOR_NAME;
  return "";
}
inline std::string first_of(std::initializer_list<std::string> reasons) {
  for (const std::string& r : reasons)
    if (!r.empty()) return r;
  return "";
}

inline std::string sparse_backward(const ops::SparseAttentionBackwardArgs& a) {
  return first_of({head_dim("head dim D", a.q.dim(2)), group(a.q.dim(1), a.k_cache.dim(1)),
                   entries(a.block_idx.dim(0) * a.block_idx.dim(1) * a.block_idx.dim(2))});
}
inline std::string dense_backward(const ops::DenseAttentionBackwardArgs& a) {
  return first_of({head_dim("head dim D", a.q.dim(2)), group(a.q.dim(1), a.k_cache.dim(1)),
                   entries(a.kv_len.dim(0) * a.block_table.dim(1))});
}
inline std::string patch_backward(const ops::PatchAttention3dBackwardArgs& a) {
  return head_dim("head dim D", a.q.dim(2));
}
inline std::string indexer_kl(const ops::IndexerKlArgs& a) {
  const int64_t n = a.stage == ops::KlStage::sparse ? a.block_idx.dim(0) * a.block_idx.dim(1) * a.block_idx.dim(2)
                                                    : a.kv_len.dim(0) * a.block_table.dim(1);
  return first_of({head_dim("head dim D", a.q.dim(2)), head_dim("indexer head dim Di", a.qi.dim(2)), entries(n)});
}

}  // namespace msa::MSA_GPU_NS::training_limits
