// indexer_kl's kernels on CUDA and the one function that picks between them (plain C++:
// tested without a GPU in tests/cuda_choose). entry.cu launches what it picks.
#pragma once
#include <cstdint>

#include "backends/cuda/device_props.h"
#include "backends/cuda/tuning.h"
#include "ops/args.h"

namespace msa::cuda {

enum class KlKernel {
  portable,  // shared-memory FMA tiles (portable/indexer_kl.cu, also HIP's)
  mma,       // mma.sync rows and dki kernels (indexer_kl/mma.cu), bf16
};
const char* kernel_name(KlKernel k);

struct KlShape {
  bool bf16 = true;                // q, k_cache, qi and ki_cache all bf16
  int64_t T = 0, Hq = 0, D = 0;    // q [T][Hq][D]
  int64_t P = 0, Hkv = 0, Bs = 0;  // k_cache [P][Hkv][Bs][D]
  int64_t Hs = 0, Di = 0;          // qi [T][Hs][Di]
  int64_t MB = 0;                  // block_table columns
  bool shared = false;             // SelectionMode::shared
  bool sparse = false;             // KlStage::sparse: block_idx [NQ][bidx_Hs][k]
  int64_t bidx_Hs = 0, k = 0;
  // q, k_cache, qi, ki_cache on 16 bytes; dqi, dki_cache on 8.
  bool aligned = true;
};
KlShape kl_shape(const ops::IndexerKlArgs& a);

// The tensor-core kernels' work geometry (its sizes bound the int prefixes and tickets).
struct KlItems {
  int64_t tpi = 1;    // tokens per dki item
  int chunks = 1;     // key chunks per page
  int64_t lists = 0;  // (page, selection head) lists: P x Hs
  bool fits = false;  // every prefix, ticket and grid size fits an int
};
KlItems kl_items(const KlShape& s, const Tuning& t);

KlKernel choose_indexer_kl(const KlShape& s, const DeviceProps& pr, const Tuning& t);

}  // namespace msa::cuda
